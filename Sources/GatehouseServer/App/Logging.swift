import Foundation
import Logging

/// Builds the server's logger in the configured format, writing to standard error, without touching the global
/// logging system (tests build many applications in one process).
public func makeLogger(label: String = "gatehouse", level: Logger.Level, format: GatehouseConfiguration.LogFormat)
    -> Logger
{
    var logger = Logger(label: label) { label in
        switch format {
        case .text: StreamLogHandler.standardError(label: label)
        case .json: JSONLogHandler(label: label, write: { line in FileHandle.standardError.write(line) })
        }
    }
    logger.logLevel = level
    return logger
}

/// One JSON object per line: time, level, label, message and metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    let write: @Sendable (Data) -> Void

    public init(label: String, write: @escaping @Sendable (Data) -> Void) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: [String: String] = [
            "time": Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
            "level": event.level.rawValue,
            "label": label,
            "message": "\(event.message)",
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) where object[key] == nil {
            object[key] = "\(value)"
        }
        guard var line = try? JSONEncoder.sortedKeys.encode(object) else { return }
        line.append(0x0A)
        write(line)
    }
}
