import Logging
import ServiceLifecycle

/// When a queue's worker looks for due rows: on a tick every `interval` (retries falling due, rows another instance
/// queued), and at once when `wake()` says a row was committed here. `run` drains what is due on each, until the
/// service group shuts down. The mail queue and Apple's revocations share it.
struct QueueWakeUps: Sendable {
    private let signal: AsyncStream<Void>.Continuation
    private let signals: AsyncStream<Void>
    let interval: Duration

    init(interval: Duration) {
        self.interval = interval
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Tells the worker that a row was committed.
    func wake() { signal.yield() }

    /// Calls `next` until it answers false, on every wake-up once the store is migrated; a failure is logged as
    /// `unavailable` and waits for the next wake-up.
    func run(store: Store, logger: Logger, unavailable: Logger.Message, _ next: () async throws -> Bool) async {
        await withDiscardingTaskGroup { group in
            group.addTask { [signal, interval] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    signal.yield()
                }
            }
            for await _ in signals.cancelOnGracefulShutdown() {
                guard store.schemaVersion != nil else { continue }
                do {
                    while try await next() {}
                } catch {
                    logger.warning(unavailable, metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            group.cancelAll()
        }
    }
}
