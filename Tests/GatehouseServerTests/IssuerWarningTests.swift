import Foundation
import GatehouseServer
import Testing

/// On PostgreSQL several instances may share the database; an issuer made up from one instance's own host and port
/// would make the others refuse its tokens, so the start says so.
@Suite("Start-up warning about the token issuer")
struct IssuerWarningTests {
    /// The warnings the server logged while starting with `configure` applied.
    static func startWarnings(_ configure: (inout GatehouseConfiguration) -> Void) async throws -> [String] {
        var configuration = try await TestStore.configuration()
        configure(&configuration)
        let log = CapturedLog()
        let server = try await LiveServer.start(configuration, logger: log.logger)
        try await server.stop()
        return log.entries.compactMap { $0["level"] == "warning" ? $0["message"] : nil }
    }

    /// PostgreSQL: this run's cluster, or on the SQLite leg one nobody listens on (the warning needs no connection).
    static func onPostgres(_ configuration: inout GatehouseConfiguration) {
        if configuration.databaseURL == nil {
            configuration.databaseURL = "postgres://gatehouse@127.0.0.1:1/gatehouse"
        }
    }

    @Test("on PostgreSQL without --public-url, the start warns that other instances will refuse this one's tokens")
    func warnsWithoutPublicURL() async throws {
        let warnings = try await Self.startWarnings { configuration in
            Self.onPostgres(&configuration)
            configuration.publicURL = nil
        }
        let warning = try #require(warnings.first { $0.contains("--public-url") })
        #expect(warning.contains("bad_jwt"))
        #expect(warning.contains("other instances"))
        #expect(warning.contains("http://127.0.0.1:0/auth/v1"))  // the issuer this instance made up
    }

    @Test("with --public-url, or on SQLite, there is nothing to warn about")
    func quietOtherwise() async throws {
        let withURL = try await Self.startWarnings { configuration in
            Self.onPostgres(&configuration)
            configuration.publicURL = "https://auth.example.com"
        }
        #expect(!withURL.contains { $0.contains("--public-url") })
        let onSQLite = try await Self.startWarnings { configuration in
            configuration.databaseURL = nil
            configuration.databaseSearchPath = nil
            configuration.publicURL = nil
        }
        #expect(!onSQLite.contains { $0.contains("--public-url") })
    }
}
