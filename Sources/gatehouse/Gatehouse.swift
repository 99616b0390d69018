import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse`: the server and its operator commands.
@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Identity, tenancy and sync server.",
        version: GatehouseVersion.current,
        subcommands: [Serve.self, Migrate.self, Keys.self, Companies.self, Users.self, Mail.self]
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
        discussion: Setting.allCases.map { setting in
            let meaning = setting.meaning.replacingOccurrences(of: "`", with: "")
            let defaultValue = setting.defaultValue.markdown.replacingOccurrences(of: "`", with: "")
            return "\(setting.flag) <value>: \(meaning) (\(setting.environmentName), default \(defaultValue))"
        }.joined(separator: "\n"),
        valueName: "setting")
}

/// `gatehouse serve`: migrate the store and answer HTTP until SIGINT or SIGTERM.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let app = try buildApplication(try options.resolve())
        try await app.runService()
    }
}

/// `gatehouse migrate`: apply pending migrations and exit.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending schema migrations and exit.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = makeLogger(level: configuration.logLevel, format: configuration.logFormat)
        let store = try Store(location: configuration.storeLocation, logger: logger)
        do {
            let report = try await store.migrate()
            await store.close()
            if report.applied.isEmpty {
                print("schema already at version \(report.version) (\(store.location))")
            } else {
                let versions = report.applied.map(String.init).joined(separator: ", ")
                print("applied migrations \(versions); schema at version \(report.version) (\(store.location))")
            }
        } catch {
            await store.close()
            throw error
        }
    }
}

/// `gatehouse keys`: the access-token signing keys.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the keys that sign access tokens and the key that encrypts secrets at rest.",
        subcommands: [Rotate.self, Reencrypt.self])

    /// `gatehouse keys rotate`: sign with a new key from now on; the old one stays published until its tokens expire.
    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start signing with a new key.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let configuration = try options.resolve()
            let logger = makeLogger(level: configuration.logLevel, format: configuration.logFormat)
            let store = try Store(location: configuration.storeLocation, logger: logger)
            do {
                try await store.migrate()
                let rotated = try await SigningKeys.rotate(store, box: try SecretBox.load(configuration))
                try await store.recordAudit(
                    AuditEvent(
                        .signingKeyRotated,
                        detail: ["new": rotated.new, "retired": rotated.retired.joined(separator: ",")]))
                await store.close()
                print(
                    "signing with key \(rotated.new); retired \(rotated.retired.isEmpty ? "none" : rotated.retired.joined(separator: ", "))"
                )
            } catch {
                await store.close()
                throw error
            }
        }
    }
}

extension Keys {
    /// `gatehouse keys reencrypt`: seal every stored secret with the first encryption key (after a new one was put
    /// in front of `GATEHOUSE_ENCRYPTION_KEYS` or gatehouse.key); the old key can be removed afterwards.
    struct Reencrypt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt stored secrets with the newest encryption key.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let configuration = try options.resolve()
            let logger = makeLogger(level: configuration.logLevel, format: configuration.logFormat)
            let box = try SecretBox.load(configuration)
            let store = try Store(location: configuration.storeLocation, logger: logger)
            do {
                try await store.migrate()
                let count = try await ServerSecrets.reencrypt(store, box: box)
                try await store.recordAudit(AuditEvent(.secretsReencrypted, detail: ["count": String(count)]))
                await store.close()
                print("re-encrypted \(count) stored secret\(count == 1 ? "" : "s") with the newest key")
            } catch {
                await store.close()
                throw error
            }
        }
    }
}

/// Opens the configured store, migrated, runs `body` with an operator, and closes the store.
func withOperator(_ options: ServerOptions, _ body: (Operator) async throws -> Void) async throws {
    let configuration = try options.resolve()
    let store = try Store(
        location: configuration.storeLocation,
        logger: makeLogger(level: configuration.logLevel, format: configuration.logFormat))
    do {
        try await store.migrate()
        try await body(Operator(store: store))
        await store.close()
    } catch {
        await store.close()
        throw error
    }
}

/// A target the operator named that does not exist: exit 1 with one line.
struct NotFound: Error, CustomStringConvertible {
    let description: String
}

/// `gatehouse companies list | show | set-tier`.
struct Companies: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect companies and set their tier.", subcommands: [List.self, Show.self, SetTier.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every company.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in for line in try await op.companies() { print(line) } }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one company and its members.")
        @Argument(help: "The company id.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in
                guard let text = try await op.company(id) else { throw NotFound(description: "no company \(id)") }
                print(text)
            }
        }
    }

    struct SetTier: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set-tier", abstract: "Set a company's tier.")
        @Argument(help: "The company id.") var id: String
        @Argument(help: "free, business or enterprise.") var tier: String
        @OptionGroup var options: ServerOptions
        func validate() throws {
            guard CompanyTier(rawValue: tier) != nil else {
                throw ValidationError("tier must be free, business or enterprise")
            }
        }
        func run() async throws {
            try await withOperator(options) { op in
                guard let tier = CompanyTier(rawValue: tier), try await op.setTier(id, tier) else {
                    throw NotFound(description: "no company \(id)")
                }
                print("company \(id) is now \(tier.rawValue)")
            }
        }
    }
}

/// `gatehouse users list | show | disable`.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect accounts, sign them out everywhere, or disable them.",
        subcommands: [List.self, Show.self, SignOut.self, Disable.self])

    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-out", abstract: "End every session of an account without disabling it.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in
                guard let ended = try await op.signOutUser(account) else {
                    throw NotFound(description: "no account \(account)")
                }
                print("account \(account) signed out everywhere; \(ended) session\(ended == 1 ? "" : "s") ended")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every account.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in for line in try await op.users() { print(line) } }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one account by id or email.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in
                guard let text = try await op.user(account) else {
                    throw NotFound(description: "no account \(account)")
                }
                print(text)
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an account and end its sessions.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options) { op in
                guard try await op.disableUser(account) else { throw NotFound(description: "no account \(account)") }
                print("account \(account) disabled; its sessions ended")
            }
        }
    }
}

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
