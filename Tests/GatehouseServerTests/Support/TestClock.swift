import Foundation
import GatehouseServer
import Logging
import NIOConcurrencyHelpers

/// A clock tests move by hand.
final class TestClock: GatehouseClock {
    private let current = NIOLockedValueBox(Date())
    var now: Date { current.withLockedValue { $0 } }
    func advance(by seconds: TimeInterval) { current.withLockedValue { $0 = $0.addingTimeInterval(seconds) } }
}

/// Every log line the server writes, kept so tests can check that no secret reaches a log.
final class CapturedLog: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])

    var logger: Logger {
        var logger = Logger(label: "gatehouse-test") { label in
            JSONLogHandler(label: label) { [self] data in
                self.lines.withLockedValue { $0.append(String(decoding: data, as: UTF8.self)) }
            }
        }
        logger.logLevel = .trace
        return logger
    }

    var all: [String] { lines.withLockedValue { $0 } }
}
