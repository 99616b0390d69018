import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse oauth-clients add | list | remove | regenerate-secret`: the applications that sign in with these
/// accounts when Gatehouse is an OAuth 2.1 / OpenID Connect provider (`--oauth-server on`).
struct OAuthClientsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "oauth-clients",
        abstract: "Register, list or remove OAuth clients, or give one a new secret.",
        discussion: """
            A confidential client (the default) authenticates with a secret, printed once by add and by \
            regenerate-secret; a public client (--public: a browser app, a phone, a command-line tool) uses PKCE \
            alone. Redirect URIs are matched exactly. docs/oauth-server.md describes the provider.
            """,
        subcommands: [Add.self, List.self, Remove.self, RegenerateSecret.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a client; prints its id and, for a confidential client, its secret, once.")
        @Argument(help: "The name people see when they are asked to let it in.") var name: String
        @Option(name: .customLong("redirect-uri"), help: "Where the browser returns (repeat for more, at most 10).")
        var redirectURIs: [String] = []
        @Flag(name: .customLong("public"), help: "A public client: no secret, PKCE alone.") var isPublic = false
        @Option(
            name: .customLong("grant-types"),
            help: "Grant types separated by commas (default authorization_code,refresh_token).")
        var grantTypes: String?
        @Option(help: "The scopes it may ask for, space-separated (default: all but company).") var scope: String?
        @OptionGroup var options: ServerOptions
        func validate() throws {
            guard !redirectURIs.isEmpty else { throw ValidationError("give at least one --redirect-uri") }
        }
        func run() async throws {
            let configuration = try options.resolve()
            let grants = grantTypes.map {
                $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            let added = try await withOperator(options) {
                try await $0.addOAuthClient(
                    name: name, redirectURIs: redirectURIs, isPublic: isPublic, grantTypes: grants, scope: scope,
                    configuration: configuration)
            }
            print("oauth client \(added.id)")
            if let secret = added.secret {
                print(secret)
                FileHandle.standardError.write(Data("the secret is shown once: keep it secret\n".utf8))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every client: id, type, name, redirect URIs, grant types, created.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            for line in try await withOperator(options, { try await $0.oauthClientLines(configuration: configuration) })
            {
                print(line)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a client: its grants go, and every session it holds ends.")
        @Argument(help: "The client's id.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            guard
                try await withOperator(options, { try await $0.removeOAuthClient(id, configuration: configuration) })
            else { throw NotFound(description: "no oauth client \(id)") }
            print("oauth client \(id) removed")
        }
    }

    struct RegenerateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "regenerate-secret",
            abstract: "Give a confidential client a new secret, printed once; the old one stops working at once.")
        @Argument(help: "The client's id.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            let secret = try await withOperator(options, missing: "no oauth client \(id)") {
                try await $0.regenerateOAuthClientSecret(id, configuration: configuration)
            }
            print(secret)
            FileHandle.standardError.write(Data("the secret is shown once: keep it secret\n".utf8))
        }
    }
}
