import ArgumentParser
import Foundation
import GatehouseServer

/// Settings shared by every command that opens the store or serves: the flags of `Setting.allCases`, parsed from the
/// arguments no other option takes, so that each setting is declared once (in `Settings.swift`).
struct ServerOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: Self.help)
    var settings: [String] = []

    /// Usage errors (an unknown flag, a flag without a value) are found while parsing, before anything runs.
    func validate() throws {
        do {
            _ = try Setting.flags(in: settings)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// Flags over `GATEHOUSE_*` variables over defaults.
    func resolve() throws -> GatehouseConfiguration {
        try GatehouseConfiguration.resolve(
            flags: try Setting.flags(in: settings), environment: ProcessInfo.processInfo.environment)
    }

    /// Every setting with its variable and default, as `--help` lists them.
    static let help = ArgumentHelp(
        "Settings: --name value or --name=value. Each is also a GATEHOUSE_* variable; a flag wins over its variable.",
        discussion: Setting.allCases.map(\.plainLine).joined(separator: "\n"),
        valueName: "setting")
}
