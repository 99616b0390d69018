import Foundation
import GatehouseClient

/// A `SessionClock` that stands still until the test moves it, for `GatehouseClient(url:sessionStore:transport:…)`:
/// the refresh timer and the expiry warning sleep on it, and wake when `advance(to:)` passes their deadline, so no
/// test waits on real time.
public final class ManualSessionClock: SessionClock, @unchecked Sendable {
    private struct Sleeper {
        let id: UUID
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var current: Date
    private var sleepers: [Sleeper] = []
    private var watchers: [CheckedContinuation<Date, Never>] = []

    /// A clock that reads `start` until it is moved.
    public init(_ start: Date) { current = start }

    /// The clock's time.
    public var now: Date { lock.withLock { current } }

    /// Returns when the clock reaches `deadline` (at once if it has), or throws when the task is cancelled.
    public func sleep(until deadline: Date) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let woken: [CheckedContinuation<Date, Never>] = lock.withLock {
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return []
                    }
                    if deadline <= current {
                        continuation.resume()
                        return []
                    }
                    sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    let waiting = watchers
                    watchers = []
                    return waiting
                }
                let earliest = lock.withLock { sleepers.map(\.deadline).min() } ?? deadline
                for watcher in woken { watcher.resume(returning: earliest) }
            }
        } onCancel: {
            let cancelled = lock.withLock {
                let found = sleepers.first { $0.id == id }
                sleepers.removeAll { $0.id == id }
                return found
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock to `date`, waking every sleeper whose deadline it reaches.
    public func advance(to date: Date) {
        let due = lock.withLock {
            current = max(current, date)
            let due = sleepers.filter { $0.deadline <= current }
            sleepers.removeAll { $0.deadline <= current }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// The earliest deadline anyone sleeps toward, once someone does: the next moment the client acts by itself.
    public func nextWake() async -> Date {
        await withCheckedContinuation { continuation in
            let earliest: Date? = lock.withLock {
                guard let earliest = sleepers.map(\.deadline).min() else {
                    watchers.append(continuation)
                    return nil
                }
                return earliest
            }
            if let earliest { continuation.resume(returning: earliest) }
        }
    }

    /// How many sleep now.
    public var sleeping: Int { lock.withLock { sleepers.count } }
}
