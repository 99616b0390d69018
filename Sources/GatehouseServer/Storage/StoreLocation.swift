import Foundation
import PostgresKit

/// Which database holds Gatehouse's data.
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    /// `searchPath` puts every table in one schema; tests use it to keep databases apart.
    case postgres(url: String, searchPath: String? = nil)

    /// Short store name for logs and readiness: `sqlite` or `postgres`.
    public var kind: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres: "postgres"
        }
    }

    /// A description safe for logs: the file path, or host, port and database without credentials.
    public var description: String {
        switch self {
        case .sqlite(let path):
            return "sqlite at \(path)"
        case .postgres(let url, _):
            guard let parsed = URL(string: url) else { return "postgres" }
            let database = parsed.path.isEmpty ? "" : parsed.path
            return "postgres at \(parsed.host ?? "localhost"):\(parsed.port ?? 5432)\(database)"
        }
    }
}

/// Validation of PostgreSQL URLs, as the store reads them for `StoreLocation.postgres`.
enum SQLPostgresURL {
    static func validate(_ url: String) throws -> SQLPostgresConfiguration {
        try SQLPostgresConfiguration(url: url)
    }
}
