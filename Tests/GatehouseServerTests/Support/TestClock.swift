import Foundation
import GatehouseServer
import Logging
import Synchronization

/// A clock tests move by hand.
final class TestClock: GatehouseClock {
    private let current = Mutex(Date())
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// Every log line the server writes, kept so tests can check that no secret reaches a log.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    var logger: Logger {
        var logger = Logger(label: "gatehouse-test") { label in
            JSONLogHandler(label: label) { [self] data in
                self.lines.withLock { $0.append(String(decoding: data, as: UTF8.self)) }
            }
        }
        logger.logLevel = .trace
        return logger
    }

    var all: [String] { lines.withLock { $0 } }
}
