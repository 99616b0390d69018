import ArgumentParser
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
            let set = try await withOperator(options, missing: "no company \(id)") { op -> CompanyTier? in
                guard let tier = CompanyTier(rawValue: tier), try await op.setTier(id, tier) else { return nil }
                return tier
            }
            print("company \(id) is now \(set.rawValue)")
        }
    }
}

/// `gatehouse users list | show | sign-out | disable`.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect accounts, sign them out everywhere, or disable them.",
        subcommands: [List.self, Show.self, SignOut.self, Disable.self])

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
}
