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

    /// The lines as written: one JSON object each.
    var all: [String] { lines.withLockedValue { $0 } }

    /// The lines read back: time, level, label, message and metadata, each a string, as `JSONLogHandler` writes them.
    var entries: [[String: String]] {
        all.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
    }
}
