import ArgumentParser
import Foundation
import GatehouseServer

/// A target the operator named that does not exist: exit 1 with one line.
struct NotFound: Error, CustomStringConvertible {
    let description: String
}

/// Opens the configured store, migrated, runs `body` with an operator, closes the store and returns what `body` did.
func withOperator<T>(_ options: ServerOptions, _ body: (Operator) async throws -> T) async throws -> T {
    try await withStore(try options.resolve()) { store, _ in try await body(Operator(store: store)) }
}

/// As `withOperator(_:_:)`, for a command that names a target: `body` returns nil when there is no such target, and
/// the command fails with `missing`.
func withOperator<T>(
    _ options: ServerOptions, missing: String, _ body: (Operator) async throws -> T?
) async throws -> T {
    guard let found = try await withOperator(options, body) else { throw NotFound(description: missing) }
    return found
}

/// `gatehouse companies list | show | set-tier`.
struct Companies: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect companies and set their tier.", subcommands: [List.self, Show.self, SetTier.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every company.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            for line in try await withOperator(options, { try await $0.companies() }) { print(line) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one company and its members.")
        @Argument(help: "The company id.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            print(try await withOperator(options, missing: "no company \(id)") { try await $0.company(id) })
        }
    }

    struct SetTier: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-tier",
            abstract: "Set a company's tier as an override, or hand it back to its App Store subscription.",
            discussion: """
                A tier set here holds whatever App Store notifications say later; `app-store` ends the override, and \
                the company's subscriptions decide again (Free when none is active).
                """)
        @Argument(help: "The company id.") var id: String
        @Argument(help: "free, business, enterprise, or app-store.") var tier: String
        @Option(help: "Why, for the audit trail.") var reason: String?
        @OptionGroup var options: ServerOptions
        func validate() throws {
            guard CompanyTier(rawValue: tier) != nil || tier == "app-store" else {
                throw ValidationError("tier must be free, business, enterprise or app-store")
            }
        }
        func run() async throws {
            let set = try await withOperator(options, missing: "no company \(id)") { op -> String? in
                guard let tier = CompanyTier(rawValue: tier) else {
                    return try await op.releaseTier(id).map { "\($0.rawValue) (from its App Store subscription)" }
                }
                return try await op.setTier(id, tier, reason: reason) ? tier.rawValue : nil
            }
            print("company \(id) is now \(set)")
        }
    }
}

/// `gatehouse users list | show | sign-out | disable | enable | import | factors`.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Inspect accounts, sign them out everywhere, disable and enable them, import them, or reset their second "
            + "factors.",
        subcommands: [List.self, Show.self, SignOut.self, Disable.self, Enable.self, Import.self, Factors.self])

    /// `gatehouse users factors list | reset`: the support case "lost phone and recovery codes".
    struct Factors: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List or remove an account's second factors (a lost phone and lost recovery codes).",
            subcommands: [List.self, Reset.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List an account's factors: id, type, status, created, name.")
            @Argument(help: "Account id or email.") var account: String
            @OptionGroup var options: ServerOptions
            func run() async throws {
                let lines = try await withOperator(options, missing: "no account \(account)") {
                    try await $0.factors(account)
                }
                if lines.isEmpty { print("account \(account) has no second factor") }
                for line in lines { print(line) }
            }
        }

        struct Reset: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove every factor of an account; its sessions fall back to aal1 (audited).")
            @Argument(help: "Account id or email.") var account: String
            @OptionGroup var options: ServerOptions
            func run() async throws {
                let removed = try await withOperator(options, missing: "no account \(account)") {
                    try await $0.resetFactors(account)
                }
                print(
                    "account \(account): \(removed) factor\(removed == 1 ? "" : "s") removed; it signs in with its password again"
                )
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every account.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            for line in try await withOperator(options, { try await $0.users() }) { print(line) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one account by id or email.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            print(try await withOperator(options, missing: "no account \(account)") { try await $0.user(account) })
        }
    }

    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-out", abstract: "End every session of an account without disabling it.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let ended = try await withOperator(options, missing: "no account \(account)") {
                try await $0.signOutUser(account)
            }
            print("account \(account) signed out everywhere; \(ended) session\(ended == 1 ? "" : "s") ended")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an account and end its sessions.")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options, missing: "no account \(account)") { op -> Void? in
                try await op.disableUser(account) ? () : nil
            }
            print("account \(account) disabled; its sessions ended")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enable a disabled or banned account; it signs in again (a disable lasts until this).")
        @Argument(help: "Account id or email.") var account: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            try await withOperator(options, missing: "no account \(account)") { op -> Void? in
                try await op.enableUser(account) ? () : nil
            }
            print("account \(account) enabled")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import users from a Supabase or Firebase export, keeping ids and password hashes.",
            discussion: """
                Supabase: auth.users (and --identities auth.identities) as COPY ... TO STDOUT WITH CSV HEADER or as \
                JSON rows. Firebase: firebase auth:export --format=json, with the project's password hash \
                parameters. Every row is checked first; if any is refused nothing is written, and each refusal is \
                listed by line. Running the same import again changes nothing. Imported hashes (bcrypt, argon2, \
                Firebase scrypt) verify at sign-in and are rehashed to yescrypt then.
                """)
        @Argument(help: "The export file.") var file: String
        @Option(help: "supabase or firebase.") var from: String
        @Option(help: "Supabase: the auth.identities export, to link Sign in with Apple.") var identities: String?
        @Option(help: "Firebase: the project's base64 signer key.") var hashKey: String?
        @Option(help: "Firebase: the project's base64 salt separator.") var saltSeparator: String?
        @Option(help: "Firebase: scrypt rounds.") var rounds: Int = 8
        @Option(help: "Firebase: scrypt memory cost (log2 N).") var memCost: Int = 14
        @Flag(help: "Check and report; write nothing.") var dryRun = false
        @OptionGroup var options: ServerOptions

        func validate() throws {
            guard ["supabase", "firebase"].contains(from) else {
                throw ValidationError("--from is supabase or firebase")
            }
            guard (hashKey == nil) == (saltSeparator == nil) else {
                throw ValidationError("--hash-key and --salt-separator go together")
            }
        }

        func run() async throws {
            let configuration = try options.resolve()
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            let read: ImportRead
            if from == "supabase" {
                let linked = try identities.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
                read = ImportFormats.supabase(users: data, identities: linked)
            } else {
                var parameters: FirebaseHashParameters?
                if let hashKey, let saltSeparator {
                    parameters = FirebaseHashParameters(
                        signerKey: hashKey, saltSeparator: saltSeparator, rounds: rounds, memoryCost: memCost)
                    guard parameters != nil else {
                        throw ValidationError("--hash-key and --salt-separator must be base64")
                    }
                }
                read = ImportFormats.firebase(data, parameters: parameters)
            }
            let report = try await withStore(configuration) { store, _ in
                try await UserImporter(store: store).run(read, source: from, dryRun: dryRun)
            }
            for note in report.notes { FileHandle.standardError.write(Data("note: \(note)\n".utf8)) }
            for problem in report.problems { FileHandle.standardError.write(Data("refused: \(problem)\n".utf8)) }
            guard report.problems.isEmpty else {
                print("nothing imported: \(report.problems.count) row\(report.problems.count == 1 ? "" : "s") refused")
                throw ExitCode(1)
            }
            let verb = dryRun ? "would import" : "imported"
            print("\(verb) \(report.imported) user\(report.imported == 1 ? "" : "s"); \(report.unchanged) already here")
        }
    }
}
