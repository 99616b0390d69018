import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse backup --to FILE`: a consistent copy of the SQLite store, taken while the server runs.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite store to a file while the server runs (PostgreSQL: use pg_dump).",
        discussion: """
            The copy holds every write committed before the command started. To restore it, stop the server, put \
            the copy in place of the store (with the same gatehouse.key or GATEHOUSE_ENCRYPTION_KEYS), and start it.
            """)
    @Option(help: ArgumentHelp("The file to write; made 0600.", valueName: "file")) var to: String
    @Flag(help: "Replace the file if it exists.") var force = false
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let report = try await StoreBackup.write(
            configuration.storeLocation, to: to, replacing: force,
            logger: makeLogger(level: configuration.logLevel, format: configuration.logFormat))
        print("backed up \(configuration.storeLocation) to \(report.path) (\(Self.size(report.bytes)))")
    }

    /// `12.3 MiB, 12897484 bytes`: readable, and exact.
    static func size(_ bytes: Int64) -> String {
        let mebibytes = Double(bytes) / 1_048_576
        return String(format: "%.1f MiB, %lld bytes", mebibytes, bytes)
    }
}
