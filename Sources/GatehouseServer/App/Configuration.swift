import Foundation
import Logging

/// Everything `gatehouse serve` needs to start, resolved from flags, `GATEHOUSE_*` variables and defaults.
public struct GatehouseConfiguration: Sendable, Equatable {
    /// How log lines are written.
    public enum LogFormat: String, Sendable, CaseIterable { case text, json }

    public var host = "127.0.0.1"
    public var port = 8080
    public var dataDirectory = "./gatehouse-data"
    /// `postgres://…` selects PostgreSQL; `sqlite:///path` names another SQLite file; nil uses the data directory.
    public var databaseURL: String?
    /// The PostgreSQL schema to keep every table in; unset uses the server's default search path.
    public var databaseSearchPath: String?
    /// The URL users reach this server at; used in links the server mails out.
    public var publicURL: String?
    public var logLevel: Logger.Level = .info
    public var logFormat: LogFormat = .text
    /// Largest request body accepted, in bytes.
    public var maxBodySize = 1 << 20
    /// How many connections each event loop may open to the store.
    public var storeConnectionsPerLoop = 4

    public init() {}

    /// Where the store lives, derived from `databaseURL` and `dataDirectory`.
    public var storeLocation: StoreLocation {
        guard let databaseURL else {
            return .sqlite(path: (dataDirectory as NSString).appendingPathComponent("gatehouse.sqlite"))
        }
        if databaseURL.hasPrefix("sqlite://") {
            return .sqlite(path: String(databaseURL.dropFirst("sqlite://".count)))
        }
        return .postgres(url: databaseURL, searchPath: databaseSearchPath)
    }

    /// The public URL, or one derived from host and port.
    public var effectivePublicURL: String {
        publicURL ?? "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// One configuration setting, with its flag name and environment variable.
public enum ConfigurationKey: String, CaseIterable, Sendable {
    case host
    case port
    case dataDir = "data-dir"
    case databaseURL = "database-url"
    case publicURL = "public-url"
    case logLevel = "log-level"
    case logFormat = "log-format"
    case maxBodySize = "max-body-size"

    /// `GATEHOUSE_DATA_DIR` for `data-dir`, and so on.
    public var environmentName: String {
        "GATEHOUSE_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

/// A setting that cannot be used; the message names the setting and never echoes a secret.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension GatehouseConfiguration {
    /// Resolves settings: a flag wins over its environment variable, which wins over the default.
    /// Empty values count as unset.
    public static func resolve(
        flags: [ConfigurationKey: String],
        environment: [String: String]
    ) throws(ConfigurationError) -> GatehouseConfiguration {
        var config = GatehouseConfiguration()
        for key in ConfigurationKey.allCases {
            let fromFlag = flags[key].flatMap { $0.isEmpty ? nil : $0 }
            let fromEnvironment = environment[key.environmentName].flatMap { $0.isEmpty ? nil : $0 }
            guard let value = fromFlag ?? fromEnvironment else { continue }
            let source = fromFlag != nil ? "--\(key.rawValue)" : key.environmentName
            try config.apply(key, value, source: source)
        }
        return config
    }

    private mutating func apply(_ key: ConfigurationKey, _ value: String, source: String) throws(ConfigurationError) {
        switch key {
        case .host:
            host = value
        case .port:
            guard let port = Int(value), (0...65535).contains(port) else {
                throw ConfigurationError("\(source) must be a port number from 0 to 65535, got '\(value)'")
            }
            self.port = port
        case .dataDir:
            dataDirectory = value
        case .databaseURL:
            guard let scheme = value.split(separator: ":", maxSplits: 1).first.map({ $0.lowercased() }),
                ["postgres", "postgresql", "sqlite"].contains(scheme), value.contains("://")
            else {
                throw ConfigurationError("\(source) must start with postgres:// or sqlite://")
            }
            if scheme != "sqlite" {
                guard (try? SQLPostgresURL.validate(value)) != nil else {
                    throw ConfigurationError("\(source) is not a usable PostgreSQL URL")
                }
            }
            databaseURL = value
        case .publicURL:
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError("\(source) must be an http:// or https:// URL, got '\(value)'")
            }
            publicURL = value.hasSuffix("/") ? String(value.dropLast()) : value
        case .logLevel:
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigurationError("\(source) must be one of \(names), got '\(value)'")
            }
            logLevel = level
        case .logFormat:
            guard let format = LogFormat(rawValue: value.lowercased()) else {
                throw ConfigurationError("\(source) must be text or json, got '\(value)'")
            }
            logFormat = format
        case .maxBodySize:
            guard let size = Int(value), size >= 1024 else {
                throw ConfigurationError("\(source) must be a byte count of at least 1024, got '\(value)'")
            }
            maxBodySize = size
        }
    }
}
