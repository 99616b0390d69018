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
            var command = try parseAsRoot()
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

/// Settings shared by every command that opens the store or serves. Every flag is named explicitly: derived names
/// would split acronyms (`--redirect-ur-ls`), and the README's table is the contract.
struct ServerOptions: ParsableArguments {
    @Option(name: .customLong("host"), help: "Address to listen on (GATEHOUSE_HOST, default 127.0.0.1).")
    var host: String?
    @Option(name: .customLong("port"), help: "Port to listen on, 0 for any free port (GATEHOUSE_PORT, default 8080).")
    var port: String?
    @Option(
        name: .customLong("data-dir"),
        help: "Folder for the SQLite store, key file and mail outbox (GATEHOUSE_DATA_DIR, default ./gatehouse-data).")
    var dataDir: String?
    @Option(
        name: .customLong("database-url"),
        help: "postgres://user:pass@host:port/db to use PostgreSQL, or sqlite:///path (GATEHOUSE_DATABASE_URL).")
    var databaseURL: String?
    @Option(
        name: .customLong("public-url"),
        help: "URL users reach this server at, used in mailed links (GATEHOUSE_PUBLIC_URL).")
    var publicURL: String?
    @Option(
        name: .customLong("log-level"),
        help: "trace, debug, info, notice, warning, error or critical (GATEHOUSE_LOG_LEVEL, default info).")
    var logLevel: String?
    @Option(name: .customLong("log-format"), help: "text or json (GATEHOUSE_LOG_FORMAT, default text).")
    var logFormat: String?
    @Option(
        name: .customLong("max-body-size"),
        help: "Largest request body in bytes (GATEHOUSE_MAX_BODY_SIZE, default 1048576).")
    var maxBodySize: String?
    @Option(
        name: .customLong("smtp-url"),
        help:
            "smtp://user:pass@host:587 (TLS required except to loopback), smtps://…, smtp+insecure://…; unset writes mail to <data-dir>/outbox (GATEHOUSE_SMTP_URL)."
    )
    var smtpURL: String?
    @Option(
        name: .customLong("mail-from"),
        help: "Sender address of every mail (GATEHOUSE_MAIL_FROM, default no-reply@gatehouse.local).")
    var mailFrom: String?
    @Option(
        name: .customLong("site-url"),
        help: "Where magic links land when no allowed redirect is given (GATEHOUSE_SITE_URL, default the public URL).")
    var siteURL: String?
    @Option(
        name: .customLong("redirect-urls"),
        help:
            "Comma-separated redirect URLs magic links may go to; a * is a wildcard inside the path (GATEHOUSE_REDIRECT_URLS)."
    )
    var redirectURLs: String?
    @Option(
        name: .customLong("access-token-ttl"),
        help: "Access token lifetime in seconds (GATEHOUSE_ACCESS_TOKEN_TTL, default 900).")
    var accessTokenTTL: String?
    @Option(
        name: .customLong("session-idle-timeout"),
        help: "Seconds a session may go unrefreshed (GATEHOUSE_SESSION_IDLE_TIMEOUT, default 1209600 = 14 days).")
    var sessionIdleTimeout: String?
    @Option(
        name: .customLong("session-lifetime"),
        help: "Seconds a session lasts at most (GATEHOUSE_SESSION_LIFETIME, default 7776000 = 90 days).")
    var sessionLifetime: String?
    @Option(
        name: .customLong("apple-audiences"),
        help: "Comma-separated bundle ids for Sign in with Apple (GATEHOUSE_APPLE_AUDIENCES; unset disables it).")
    var appleAudiences: String?
    @Option(name: .customLong("apple-jwks-url"), help: "Apple's key set URL (GATEHOUSE_APPLE_JWKS_URL).")
    var appleJWKSURL: String?
    @Option(
        name: .customLong("trusted-proxies"),
        help: "Comma-separated proxy addresses or CIDRs whose X-Forwarded-For is believed (GATEHOUSE_TRUSTED_PROXIES).")
    var trustedProxies: String?
    @Option(
        name: .customLong("code-failures-per-day"),
        help:
            "Wrong mailed codes allowed per address a day, across its codes (GATEHOUSE_CODE_FAILURES_PER_DAY, default 100)."
    )
    var codeFailuresPerDay: String?
    @Option(
        name: .customLong("metrics-token"),
        help: "Bearer token /metrics requires; unset refuses /metrics (GATEHOUSE_METRICS_TOKEN).")
    var metricsToken: String?
    @Option(
        name: .customLong("encryption-keys"),
        help:
            "Base64 key-encryption keys, newest first; prefer the variable (GATEHOUSE_ENCRYPTION_KEYS; default <data-dir>/gatehouse.key)."
    )
    var encryptionKeys: String?
    @Option(
        name: .customLong("sync-retention"),
        help:
            "Seconds the change log keeps tombstones; older tokens get the digest exchange (GATEHOUSE_SYNC_RETENTION, default 2592000)."
    )
    var syncRetention: String?
    @Option(
        name: .customLong("templates-dir"),
        help:
            "Folder of page and mail templates (pages/NAME.mustache, mail/LOCALE/NAME.{subject,text,html}.mustache) replacing the built-in ones (GATEHOUSE_TEMPLATES_DIR)."
    )
    var templatesDir: String?
    @Option(
        name: .customLong("app-url"),
        help:
            "The app's link base (myapp:// or https://…); share pages open <app-url>share/<token> (GATEHOUSE_APP_URL).")
    var appURL: String?
    @Option(name: .customLong("app-store-url"), help: "Where share pages say to get the app (GATEHOUSE_APP_STORE_URL).")
    var appStoreURL: String?

    /// Flags over `GATEHOUSE_*` variables over defaults.
    func resolve() throws -> GatehouseConfiguration {
        let flags: [ConfigurationKey: String?] = [
            .host: host, .port: port, .dataDir: dataDir, .databaseURL: databaseURL, .publicURL: publicURL,
            .logLevel: logLevel, .logFormat: logFormat, .maxBodySize: maxBodySize, .smtpURL: smtpURL,
            .mailFrom: mailFrom, .siteURL: siteURL, .redirectURLs: redirectURLs, .accessTokenTTL: accessTokenTTL,
            .sessionIdleTimeout: sessionIdleTimeout, .sessionLifetime: sessionLifetime,
            .appleAudiences: appleAudiences, .appleJWKSURL: appleJWKSURL, .trustedProxies: trustedProxies,
            .metricsToken: metricsToken, .encryptionKeys: encryptionKeys, .codeFailuresPerDay: codeFailuresPerDay,
            .syncRetention: syncRetention, .templatesDir: templatesDir, .appURL: appURL,
            .appStoreURL: appStoreURL,
        ]
        return try GatehouseConfiguration.resolve(
            flags: flags.compactMapValues { $0 }, environment: ProcessInfo.processInfo.environment)
    }
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
