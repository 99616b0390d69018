import ArgumentParser
import GatehouseServer

/// `gatehouse settings`: every setting, from the one list `--help` and docs/configuration.md are made from.
struct Settings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every setting with its variable, default and meaning; needs no store or server.",
        discussion: "With --markdown it prints docs/configuration.md: \(Setting.referenceCommand)")

    @Flag(help: "Print the configuration reference as Markdown (docs/configuration.md).") var markdown = false

    func run() {
        if markdown {
            print(Setting.markdownReference, terminator: "")
        } else {
            for setting in Setting.allCases { print(setting.plainLine) }
        }
    }
}
