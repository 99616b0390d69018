import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse`: the server and its operator commands.
@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Identity, tenancy and sync server.",
        version: GatehouseVersion.current,
        subcommands: [
            Serve.self, Migrate.self, Backup.self, Keys.self, Companies.self, Users.self, Mail.self, Settings.self,
            AppStore.self, Providers.self, Operators.self, Webhooks.self, OAuthClientsCommand.self,
        ]
    )

    /// Parses and runs; usage and configuration errors print one line and exit 2, run-time failures exit 1.
    static func main() async {
        do {
            // The settings go last, so the parser never takes one for (or drops one before) a positional argument.
            var command = try parseAsRoot(Setting.settingsLast(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .success {
                exit(withError: error)
            }
            let message: String
            let status: Int32
            switch error {
            case let error as ConfigurationError:
                (message, status) = ("invalid configuration: \(error)", 2)
            case let error as MigrationError:
                (message, status) = ("\(error)", 1)
            case is ExitCode, is CleanExit:
                exit(withError: error)
            default:
                let parsed = Self.message(for: error)
                // Errors from parsing (unknown flag, missing value) are usage errors.
                (message, status) = (parsed, Self.isUsageError(error) ? 2 : 1)
            }
            let line = message.split(separator: "\n").first.map(String.init) ?? message
            FileHandle.standardError.write(Data("gatehouse: \(line)\n".utf8))
            Foundation.exit(status)
        }
    }

    private static func isUsageError(_ error: any Error) -> Bool {
        exitCode(for: error) == .validationFailure
    }
}
