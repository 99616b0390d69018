import Foundation
import GatehouseServer
import Testing

@Suite("Settings")
struct SettingsTests {
    /// docs/configuration.md as committed.
    static func committedReference() throws -> String {
        try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../docs/configuration.md"),
            encoding: .utf8)
    }

    @Test("docs/configuration.md is what the list of settings prints, line for line")
    func configurationReference() throws {
        let committed = try Self.committedReference().split(separator: "\n", omittingEmptySubsequences: false)
        let expected = Setting.markdownReference.split(separator: "\n", omittingEmptySubsequences: false)
        let firstDifference =
            zip(committed, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(committed.count, expected.count)
        // A Bool, so that a failure prints the message and the first difference, not both files whole.
        let upToDate = committed == expected
        #expect(
            upToDate,
            """
            docs/configuration.md is not what Settings.swift declares (first difference at line \(firstDifference + 1): \
            "\(firstDifference < expected.count ? expected[firstDifference] : "<end of file>")" expected). \
            Regenerate it: \(Setting.referenceCommand)
            """)
    }

    @Test("each documented default value is the default", arguments: Setting.allCases)
    func documentedDefault(setting: Setting) throws {
        guard case .value(let value, _) = setting.defaultValue else { return }
        let config = try GatehouseConfiguration.resolve(flags: [setting: value], environment: [:])
        #expect(config == GatehouseConfiguration())
    }

    @Test("flags and variables are named after one another")
    func names() {
        #expect(Setting.dataDir.flag == "--data-dir")
        #expect(Setting.dataDir.environmentName == "GATEHOUSE_DATA_DIR")
        #expect(Setting(rawValue: "redirect-urls") == .redirectURLs)
        #expect(Setting(rawValue: "no-such-setting") == nil)
        #expect(Set(Setting.allCases.map(\.rawValue)).count == Setting.allCases.count)
    }

    @Test("a command line gives settings as --name value or --name=value; the last repeat wins")
    func flags() throws {
        let flags = try Setting.flags(
            in: ["--port", "9000", "--log-format=json", "--host", "a", "--host", "b", "--public-url="])
        #expect(flags == [.port: "9000", .logFormat: "json", .host: "b", .publicURL: ""])
        #expect(try Setting.flags(in: []) == [:])
        #expect(try Setting.flags(in: ["--port", "1", "--"]) == [.port: "1"])
    }

    @Test(
        "anything else on a command line is a usage error worded like swift-argument-parser's",
        arguments: [
            (["--no-such-flag"], "Unknown option '--no-such-flag'"),
            (["--no-such-flag=1"], "Unknown option '--no-such-flag'"),
            (["-p", "1"], "Unknown option '-p'"),
            (["--port"], "Missing value for '--port <value>'"),
            (["--port", "--host", "x"], "Missing value for '--port <value>'"),
            (["stray"], "Unexpected argument 'stray'"),
            (["--", "--port"], "Unexpected argument '--port'"),
        ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: ConfigurationError.self) { try Setting.flags(in: arguments) }
        do {
            _ = try Setting.flags(in: arguments)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("settings after the command's name go last, with their values, so no parser takes one for an argument")
    func settingsLast() {
        #expect(
            Setting.settingsLast(["companies", "show", "--data-dir", "/srv/gh", "c1", "--locale", "de"])
                == ["companies", "show", "c1", "--locale", "de", "--data-dir=/srv/gh"])
        #expect(
            Setting.settingsLast(["users", "show", "--port=0", "a@b.c"]) == ["users", "show", "a@b.c", "--port=0"])
        #expect(Setting.settingsLast(["serve", "--port", "--host", "h"]) == ["serve", "--port", "--host=h"])
        #expect(
            Setting.settingsLast(["x", "--port", "1", "--", "--host", "h"]) == ["x", "--port=1", "--", "--host", "h"])
        // Before the command's name a setting is no setting: the root command refuses it as before.
        #expect(Setting.settingsLast(["--port", "1", "serve"]) == ["--port", "1", "serve"])
    }
}
