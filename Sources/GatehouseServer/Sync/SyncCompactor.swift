import Foundation
import Logging
import ServiceLifecycle

/// Compacts the change log five minutes after start (the store is migrated by then) and then every hour:
/// tombstones and mutation results older than the retention.
struct SyncCompactor: Service {
    let sync: SyncService
    let retention: TimeInterval
    let logger: Logger

    func run() async throws {
        var wait = Duration.seconds(300)
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
            wait = .seconds(3600)
            do {
                let dropped = try await sync.compact(retention: retention)
                if dropped > 0 { logger.info("sync log compacted", metadata: ["tombstones": "\(dropped)"]) }
            } catch {
                logger.warning("sync log compaction failed", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }
}
