import Foundation
import GatehouseServer
import Logging
import SQLKit

/// Which store this run of the suite uses: `GATEHOUSE_TEST_STORE=postgres` with `GATEHOUSE_TEST_DATABASE_URL`
/// selects PostgreSQL (scripts/test starts a throwaway cluster); anything else uses SQLite files.
enum TestStore {
    static let environment = ProcessInfo.processInfo.environment
    static let postgresURL: String? = {
        guard environment["GATEHOUSE_TEST_STORE"] == "postgres" else { return nil }
        guard let url = environment["GATEHOUSE_TEST_DATABASE_URL"], !url.isEmpty else {
            fatalError("GATEHOUSE_TEST_STORE=postgres needs GATEHOUSE_TEST_DATABASE_URL")
        }
        return url
    }()
    static var kind: String { postgresURL == nil ? "sqlite" : "postgres" }

    static let quietLogger: Logger = {
        var logger = Logger(label: "gatehouse-tests")
        logger.logLevel = .critical
        return logger
    }()

    /// A fresh, empty store location: a new SQLite file, or a new PostgreSQL schema.
    static func freshLocation() async throws -> StoreLocation {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        guard let postgresURL else {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-tests/\(name)")
            return .sqlite(path: folder.appendingPathComponent("gatehouse.sqlite").path)
        }
        try await asAdmin("CREATE SCHEMA \(ident: String(name))")
        return .postgres(url: postgresURL, searchPath: String(name))
    }

    /// Runs one statement on the test cluster's default database (to make a schema or a database), on a pool of its
    /// own that is closed afterwards, also when the statement fails.
    static func asAdmin(_ statement: SQLQueryString) async throws {
        guard let postgresURL else { return }
        let admin = try Store(
            location: .postgres(url: postgresURL, searchPath: nil), connectionsPerLoop: 1, logger: quietLogger)
        do {
            try await admin.database.raw(statement).run()
            await admin.close()
        } catch {
            await admin.close()
            throw error
        }
    }

    /// A configuration whose store is fresh, listening on any free loopback port.
    static func configuration() async throws -> GatehouseConfiguration {
        var configuration = GatehouseConfiguration()
        configuration.port = 0
        // Many servers run at once in the suite; a small pool each keeps PostgreSQL within its connection limit.
        configuration.storeConnectionsPerLoop = 2
        let location = try await freshLocation()
        switch location {
        case .sqlite(let path):
            configuration.dataDirectory = (path as NSString).deletingLastPathComponent
        case .postgres(let url, let searchPath):
            configuration.databaseURL = url
            configuration.databaseSearchPath = searchPath
            configuration.dataDirectory =
                FileManager.default.temporaryDirectory
                .appendingPathComponent("gatehouse-tests/\(searchPath ?? "pg")").path
        }
        return configuration
    }
}
