import ArgumentParser
import GatehouseServer

/// Opens the configured store, migrated, runs `body` with it and the migration report, and closes the store whether
/// `body` returns or throws.
func withStore<T>(
    _ configuration: GatehouseConfiguration, _ body: (Store, MigrationReport) async throws -> T
) async throws -> T {
    let store = try Store(
        location: configuration.storeLocation,
        logger: makeLogger(level: configuration.logLevel, format: configuration.logFormat))
    do {
        let result = try await body(store, try await store.migrate())
        await store.close()
        return result
    } catch {
        await store.close()
        throw error
    }
}

/// `gatehouse serve`: migrate the store and answer HTTP until SIGINT or SIGTERM.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let services = try GatehouseServices(try options.resolve())
        let app = buildApplication(services, router: try buildRouter(services)) { _ in
            Task { await services.releaseStartupCodePages() }
        }
        try await app.runService()
    }
}

/// `gatehouse migrate`: apply pending migrations and exit.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending schema migrations and exit.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let (report, location) = try await withStore(try options.resolve()) { store, report in
            (report, store.location)
        }
        if report.applied.isEmpty {
            print("schema already at version \(report.version) (\(location))")
        } else {
            let versions = report.applied.map(String.init).joined(separator: ", ")
            print("applied migrations \(versions); schema at version \(report.version) (\(location))")
        }
    }
}
