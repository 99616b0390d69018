extension Setting {
    /// The command that writes docs/configuration.md, as its header and the test that holds the file to this say.
    public static let referenceCommand = "swift run gatehouse settings --markdown > docs/configuration.md"

    /// One row of the reference table: flag, variable, default and meaning, in Markdown.
    public var markdownRow: String {
        "| `\(flag)` | `\(environmentName)` | \(defaultValue.markdown) | \(meaning) |"
    }

    /// docs/configuration.md, whole: every setting of `allCases`, in its order, with the rules all of them share.
    public static var markdownReference: String {
        let header = """
            <!-- Generated from Sources/GatehouseServer/App/Settings.swift by
                 \(referenceCommand)
                 Edit the settings there, not this file: a test fails while the two differ. -->

            # Configuration reference

            Every setting is a flag of `gatehouse serve` (and of the other commands that open the store) and a
            `GATEHOUSE_*` environment variable; a flag wins over its variable, which wins over the default. Empty
            values count as unset. `gatehouse serve --help` lists them too. Each is declared once, in
            `Sources/GatehouseServer/App/Settings.swift`, and this page is generated from that list
            (`gatehouse settings --markdown` prints it).

            | flag | variable | default | meaning |
            | --- | --- | --- | --- |
            """
        let footer = """
            An unknown flag or an invalid value prints one line naming the setting and exits with status 2.

            What the server does with its store at start and shutdown, its mail templates, several instances and
            backups: [operators.md](operators.md). The security defaults these settings adjust:
            [operators.md, "Security defaults"](operators.md#security-defaults).
            """
        return ([header] + allCases.map(\.markdownRow) + ["", footer]).joined(separator: "\n") + "\n"
    }

    /// `--help`'s line for the setting: the Markdown reference's row without backticks.
    public var plainLine: String {
        let meaning = meaning.replacingOccurrences(of: "`", with: "")
        let defaultValue = defaultValue.markdown.replacingOccurrences(of: "`", with: "")
        return "\(flag) <value>: \(meaning) (\(environmentName), default \(defaultValue))"
    }
}
