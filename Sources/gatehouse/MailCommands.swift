import ArgumentParser
import GatehouseServer

/// `gatehouse mail preview`: the mails as the templates write them.
struct Mail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the mails Gatehouse sends, as their templates write them.", subcommands: [Preview.self])

    /// `gatehouse mail preview NAME`: one mail with sample values; needs no store or server.
    struct Preview: AsyncParsableCommand {
        enum Format: String, ExpressibleByArgument, CaseIterable { case text, html, both }

        static let configuration = CommandConfiguration(
            abstract: "Print a mail's subject, text and HTML, written with sample values.")
        @Argument(help: "The mail: \(Mailer.names.joined(separator: ", ")).") var name: String
        @Option(name: .customLong("locale"), help: "The recipient's locale: de, de-AT, ...")
        var locale = "en"
        @Option(name: .customLong("format"), help: "text, html or both.") var format = Format.both
        @Option(
            name: .customLong("templates-dir"),
            help: "Folder of templates (mail/LOCALE/NAME.{subject,text,html}.mustache) replacing the built-in ones.")
        var templatesDir: String?

        func run() async throws {
            let message = try Mailer.preview(
                name: name, locale: locale, templates: try Templates.load(overrides: templatesDir))
            print("Subject: \(message.subject)")
            if format != .html { print("\n--- text ---\n\(message.text)", terminator: "") }
            if format != .text { print("\n--- html ---\n\(message.html)", terminator: "") }
        }
    }
}
