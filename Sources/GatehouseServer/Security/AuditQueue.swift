import Logging
import NIOConcurrencyHelpers

/// Audit events waiting for the store, written together: whatever arrives while one batch is being written goes in
/// the next, in one transaction (one turn at SQLite's write lock). A caller still waits until its event is written.
///
/// Written one transaction each, the events of a burst queued for the write lock behind each other: two refreshes of
/// one token at once (an app after a wake-up) answer the second from the grace window with an audit row of its own,
/// and under load those rows made a racing pair take 50 ms.
final class AuditQueue: Sendable {
    /// The most events in one transaction.
    static let batchLimit = 256

    private struct State {
        var pending: [(event: AuditEvent, waiter: CheckedContinuation<Void, Never>)] = []
        var writing = false
    }

    private let store: Store
    private let clock: any GatehouseClock
    private let state = NIOLockedValueBox(State())

    init(store: Store, clock: any GatehouseClock) {
        self.store = store
        self.clock = clock
    }

    /// Records `event` with whatever else is waiting; a failure is logged, never thrown (the trail must not turn a
    /// request into an error).
    func record(_ event: AuditEvent) async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let startsWriter = state.withLockedValue { state in
                state.pending.append((event, waiter))
                defer { state.writing = true }
                return !state.writing
            }
            if startsWriter { Task { await self.writeAll() } }
        }
    }

    private func write(_ events: [AuditEvent]) async throws {
        try await store.transaction { [clock] db in
            let audits = AuditRepository(db: db, clock: clock)
            for event in events { try await audits.record(event) }
        }
    }

    /// Writes batches until nothing waits. Only one runs at a time (`writing`).
    private func writeAll() async {
        while true {
            let batch = state.withLockedValue { state in
                let batch = Array(state.pending.prefix(Self.batchLimit))
                state.pending.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            if batch.isEmpty { return }
            do {
                try await write(batch.map(\.event))
            } catch {
                // One event the store refuses must not lose the others: each is tried on its own.
                for entry in batch {
                    do {
                        try await write([entry.event])
                    } catch {
                        store.logger.warning(
                            "audit event not recorded",
                            metadata: ["action": "\(entry.event.action)", "error": "\(error)"])
                    }
                }
            }
            for entry in batch { entry.waiter.resume() }
        }
    }
}
