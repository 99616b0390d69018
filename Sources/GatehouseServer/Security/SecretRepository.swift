import SQLKit

/// The SQL of server secrets, and of every sealed column when the key-encryption key changes.
struct SecretRepository {
    let db: any SQLDatabase

    /// A column whose values are sealed, each bound to a context of its prefix and the row's key.
    enum SealedColumn: CaseIterable {
        case serverSecrets, signingKeys, mailQueue
        /// TOTP secrets (`FactorService.secretContext`).
        case factorSecrets
        /// Apple's refresh tokens kept with their identity, and those queued for revocation (`AppleRevocations`).
        case identityTokens, appleRevocations
        /// Custom providers' client secrets (`CustomProviders.context`).
        case customProviders
        /// The redirect flow's nonce and verifier (`OAuthFlow.context`).
        case oauthStates

        var table: String {
            switch self {
            case .serverSecrets: "server_secrets"
            case .signingKeys: "signing_keys"
            case .mailQueue: "mail_queue"
            case .factorSecrets: "mfa_factors"
            case .identityTokens: "identities"
            case .appleRevocations: "apple_revocations"
            case .customProviders: "custom_providers"
            case .oauthStates: "oauth_states"
            }
        }

        var keyColumn: String {
            switch self {
            case .serverSecrets: "name"
            case .signingKeys: "kid"
            case .customProviders: "identifier"
            case .mailQueue, .factorSecrets, .identityTokens, .appleRevocations, .oauthStates: "id"
            }
        }

        var valueColumn: String {
            switch self {
            case .serverSecrets: "value"
            case .signingKeys: "private_key"
            case .mailQueue: "message"
            case .factorSecrets: "secret"
            case .identityTokens: "provider_token"
            case .appleRevocations: "sealed_token"
            case .customProviders: "sealed_secret"
            case .oauthStates: "sealed"
            }
        }

        var contextPrefix: String {
            switch self {
            case .serverSecrets: "server_secret:"
            case .signingKeys: "signing_key:"
            case .mailQueue: "mail:"
            case .factorSecrets: "mfa_factor:"
            case .identityTokens, .appleRevocations: "identity-token:"
            case .customProviders: "custom-provider:"
            case .oauthStates: "oauth-state:"
            }
        }
    }

    /// Stores `value` as the secret `name` unless one is stored already (the first of racing instances wins).
    func insertUnlessPresent(_ name: String, value: String) async throws {
        try await db.insert(into: "server_secrets").columns("name", "value")
            .values(SQLBind(name), SQLBind(value)).ignoringConflicts(with: "name").run()
    }

    /// The stored value of the secret `name`.
    func value(_ name: String) async throws -> String? {
        try await db.select().column("value").from("server_secrets").where("name", .equal, name)
            .first(decodingColumn: "value", as: String.self)
    }

    /// Replaces the secret's value when it is still `stored`.
    func replace(_ name: String, stored: String, with value: String) async throws {
        try await db.update("server_secrets").set("value", to: value)
            .where("name", .equal, name).where("value", .equal, stored).run()
    }

    /// Every row's key and value in `column`.
    func values(of column: SealedColumn) async throws -> [(key: String, value: String)] {
        try await db.select().columns(column.keyColumn, column.valueColumn).from(column.table)
            .where(SQLIdentifier(column.valueColumn), .isNot, SQLLiteral.null).all().map {
                (
                    try $0.decode(column: column.keyColumn, as: String.self),
                    try $0.decode(column: column.valueColumn, as: String.self)
                )
            }
    }

    /// Stores `value` in `column` for the row `key`.
    func reseal(_ column: SealedColumn, key: String, with value: String) async throws {
        try await db.update(column.table).set(column.valueColumn, to: value).where(column.keyColumn, .equal, key).run()
    }
}
