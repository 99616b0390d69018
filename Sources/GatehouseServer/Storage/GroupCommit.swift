import NIOConcurrencyHelpers

/// Group commit: items waiting for the store are written together, whatever arrives while one batch is being
/// written going in the next, so a burst takes one turn at the write lock per batch instead of one per item. Each
/// caller waits for its own item's outcome. `RotationQueue` and `AuditQueue` write through one.
final class GroupCommit<Item: Sendable, Outcome: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Outcome, Never>

    private struct State {
        var pending: [(item: Item, waiter: Waiter)] = []
        var writing = false
    }

    private let limit: Int
    /// Writes one batch and answers an outcome per item, in order.
    private let write: @Sendable ([Item]) async -> [Outcome]
    private let state = NIOLockedValueBox(State())

    init(limit: Int, write: @escaping @Sendable ([Item]) async -> [Outcome]) {
        self.limit = limit
        self.write = write
    }

    /// Writes `item` with whatever else is waiting, and answers its outcome.
    func submit(_ item: Item) async -> Outcome {
        await withCheckedContinuation { (waiter: Waiter) in
            let startsWriter = state.withLockedValue { state in
                state.pending.append((item, waiter))
                defer { state.writing = true }
                return !state.writing
            }
            if startsWriter { Task { await self.writeAll() } }
        }
    }

    /// Writes batches until nothing waits. Only one runs at a time (`writing`).
    private func writeAll() async {
        while true {
            let batch = state.withLockedValue { state in
                let batch = Array(state.pending.prefix(limit))
                state.pending.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            if batch.isEmpty { return }
            let outcomes = await write(batch.map(\.item))
            for (entry, outcome) in zip(batch, outcomes) { entry.waiter.resume(returning: outcome) }
        }
    }
}
