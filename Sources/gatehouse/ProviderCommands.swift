import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse providers list | show | add | update | remove`: GoTrue's custom OAuth 2.0 and OIDC providers, as the
/// admin API's `/auth/v1/admin/custom-providers` manages them, with its rules and messages.
struct Providers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, change and remove custom OAuth 2.0 and OpenID Connect providers (custom:<slug>).",
        discussion: """
            The same providers, rules and messages as the admin API's /auth/v1/admin/custom-providers; each change \
            is audited as the operator's. A client secret is read from a file or standard input, never from the \
            command line, and is never shown.
            """,
        subcommands: [List.self, Show.self, Add.self, Update.self, Remove.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every custom provider: identifier, type, enabled or disabled, name.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let box = try SecretBox.load(try options.resolve())
            let lines = try await refusedAsLine {
                try await withOperator(options) { try await $0.customProviders(box: box) }
            }
            if lines.isEmpty { print("no custom provider") }
            for line in lines { print(line) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a custom provider as the admin API answers it (JSON; never its secret).")
        @Argument(help: "The provider's identifier, custom:<slug>.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let box = try SecretBox.load(try options.resolve())
            print(
                try await refusedAsLine {
                    try await withOperator(options, missing: "no provider \(id)") {
                        try await $0.customProvider(id, box: box)
                    }
                })
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a custom provider.",
            discussion: """
                An oidc provider needs --issuer (its keys come from the issuer's discovery document, or \
                --discovery-url, or --jwks-uri); an oauth2 one needs --authorization-url, --token-url and \
                --userinfo-url. The client secret comes from --client-secret-file or --client-secret-stdin.
                """)
        @Option(help: "The provider's identifier: custom: and 1 to 64 of a-z, 0-9, '-' and '_'.") var identifier: String
        @OptionGroup var fields: ProviderFields
        @OptionGroup var options: ServerOptions

        func run() async throws {
            var body = try fields.body()
            body["identifier"] = identifier
            let json = try JSONSerialization.data(withJSONObject: body)
            let box = try SecretBox.load(try options.resolve())
            let line = try await refusedAsLine {
                try await withOperator(options) { try await $0.addCustomProvider(json, box: box) }
            }
            print("added \(line)")
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a custom provider: only the options given change.",
            discussion: """
                Given --scope or --acceptable-client-id options replace the whole list; an empty URL (--jwks-uri '') \
                removes it. The type cannot change: remove the provider and add it again.
                """)
        @Argument(help: "The provider's identifier, custom:<slug>.") var id: String
        @OptionGroup var fields: ProviderFields
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let json = try JSONSerialization.data(withJSONObject: try fields.body())
            let box = try SecretBox.load(try options.resolve())
            let line = try await refusedAsLine {
                try await withOperator(options, missing: "no provider \(id)") {
                    try await $0.updateCustomProvider(id, json, box: box)
                }
            }
            print("updated \(line)")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a custom provider; its users' identities stay, but it signs no one in any more.")
        @Argument(help: "The provider's identifier, custom:<slug>.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let box = try SecretBox.load(try options.resolve())
            try await refusedAsLine {
                try await withOperator(options, missing: "no provider \(id)") { op -> Void? in
                    try await op.removeCustomProvider(id, box: box) ? () : nil
                }
            }
            print("removed \(id)")
        }
    }
}

/// A provider's fields as options, each one a field of the admin API's body; all optional, so that `update` changes
/// only what is given (`add`'s required ones are the API's to require).
struct ProviderFields: ParsableArguments {
    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case oidc, oauth2
    }

    enum Availability: String, EnumerableFlag {
        case enabled, disabled

        static func help(for value: Self) -> ArgumentHelp? {
            value == .enabled ? "Offer the provider for sign-in (the default)." : "Keep it registered, but refuse it."
        }
    }

    @Option(help: "oidc or oauth2.") var type: Kind?
    @Option(help: "The name people see.") var name: String?
    @Option(help: "The client id the provider issued.") var clientId: String?
    @Option(help: "A file holding the client secret (a trailing newline is dropped).") var clientSecretFile: String?
    @Flag(help: "Read the client secret from standard input (a trailing newline is dropped).")
    var clientSecretStdin = false
    @Option(help: "A scope to ask for; repeat for each.") var scope: [String] = []
    @Flag(inversion: .prefixedNo, help: "PKCE on the authorization code flow (on by default).") var pkce: Bool?
    @Option(help: "oidc: the issuer, as its tokens name it.") var issuer: String?
    @Option(help: "oidc: the discovery document, when not at the issuer's well-known path.") var discoveryUrl: String?
    @Flag(inversion: .prefixedNo, help: "oidc: accept id tokens without a nonce.") var skipNonceCheck: Bool?
    @Option(help: "oauth2: where people authorize.") var authorizationUrl: String?
    @Option(help: "oauth2: where the code is exchanged.") var tokenUrl: String?
    @Option(help: "oauth2: where the user's profile is read.") var userinfoUrl: String?
    @Option(help: "The provider's keys, when not from its discovery document.") var jwksUri: String?
    @Option(help: "Another client id its tokens may be for (an app's); repeat for each.")
    var acceptableClientId: [String] = []
    @Option(help: "A JSON object: which of the provider's claims fill which user fields.") var attributeMapping: String?
    @Option(help: "A JSON object of extra authorization request parameters.") var authorizationParams: String?
    @Flag(inversion: .prefixedNo, help: "Sign in also when the provider gives no email.") var emailOptional: Bool?
    @Flag var availability: Availability?

    func validate() throws {
        if clientSecretFile != nil, clientSecretStdin {
            throw ValidationError("give --client-secret-file or --client-secret-stdin, not both")
        }
        for (option, value) in [
            ("--attribute-mapping", attributeMapping), ("--authorization-params", authorizationParams),
        ] {
            guard let value else { continue }
            guard (try? Self.object(value)) != nil else { throw ValidationError("\(option) must be a JSON object") }
        }
    }

    /// The admin API's body: the fields given, under its names, the secret read from where it was pointed to.
    func body() throws -> [String: Any] {
        var body: [String: Any] = [:]
        body["provider_type"] = type?.rawValue
        body["name"] = name
        body["client_id"] = clientId
        body["client_secret"] = try clientSecret()
        if !scope.isEmpty { body["scopes"] = scope }
        body["pkce_enabled"] = pkce
        body["issuer"] = issuer
        body["discovery_url"] = discoveryUrl
        body["skip_nonce_check"] = skipNonceCheck
        body["authorization_url"] = authorizationUrl
        body["token_url"] = tokenUrl
        body["userinfo_url"] = userinfoUrl
        body["jwks_uri"] = jwksUri
        if !acceptableClientId.isEmpty { body["acceptable_client_ids"] = acceptableClientId }
        body["attribute_mapping"] = try attributeMapping.map(Self.object)
        body["authorization_params"] = try authorizationParams.map(Self.object)
        body["email_optional"] = emailOptional
        body["enabled"] = availability.map { $0 == .enabled }
        return body
    }

    /// The secret from its file or standard input, less one trailing newline; nil when neither was given.
    private func clientSecret() throws -> String? {
        let data: Data
        if let clientSecretFile {
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: clientSecretFile))
            } catch {
                let reason = FileManager.default.fileExists(atPath: clientSecretFile) ? "not readable" : "no such file"
                throw SecretUnreadable(description: "cannot read the client secret file \(clientSecretFile): \(reason)")
            }
        } else if clientSecretStdin {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            return nil
        }
        var secret = String(decoding: data, as: UTF8.self)
        // "\r\n" is one Character: either line end goes with one removeLast.
        if secret.hasSuffix("\n") || secret.hasSuffix("\r\n") { secret.removeLast() }
        guard !secret.isEmpty else {
            throw SecretUnreadable(
                description: "the client secret is empty (\(clientSecretFile ?? "standard input"))")
        }
        return secret
    }

    private static func object(_ text: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw ValidationError("not a JSON object")
        }
        return object
    }
}

/// A client secret that could not be read: exit 1 with one line that names where it was looked for.
struct SecretUnreadable: Error, CustomStringConvertible {
    let description: String
}

/// A refusal of the admin API's rules, as one line: its code and message, as the API answers them.
struct Refused: Error, CustomStringConvertible {
    let description: String
}

/// Runs `body`, turning the admin API's refusals into `Refused`.
@discardableResult
func refusedAsLine<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as APIError {
        throw Refused(description: "\(error.code): \(error.message)")
    }
}
