import Foundation
import GatehouseClientAPI

// The ways into one account besides its email and password: Apple and Google identities, signed in with by id token,
// linked to the signed-in account and unlinked from it, as GoTrue (and supabase-swift) name them.

/// A provider an identity comes from. Open, as the server's list is: a newer server's providers arrive as they are.
public struct IdentityProvider: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The provider's name as the server spells it.
    public let rawValue: String
    /// A provider by the name the server spells it with.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The provider's name as the server spells it.
    public var description: String { rawValue }

    /// The account's email address (and password or mailed codes).
    public static let email = Self(rawValue: "email")
    /// Sign in with Apple.
    public static let apple = Self(rawValue: "apple")
    /// Google.
    public static let google = Self(rawValue: "google")
}

/// One way into the account: its email, or an Apple or Google ID linked to it.
public struct UserIdentity: Sendable, Equatable, Identifiable {
    /// The identity's own id: what `unlinkIdentity(_:)` takes.
    public let id: String
    /// Who vouches for it.
    public let provider: IdentityProvider
    /// The provider's id of the person (Apple's or Google's `sub`; the account id for `email`).
    public let providerUserID: String
    /// The address the provider gave, when it gave one.
    public let email: String?
    /// When it was linked.
    public let createdAt: Date
    /// When it last signed in, if the server knows.
    public let lastSignInAt: Date?

    /// An identity as the server would list it (for previews and tests).
    public init(
        id: String, provider: IdentityProvider, providerUserID: String, email: String? = nil, createdAt: Date = Date(),
        lastSignInAt: Date? = nil
    ) {
        self.id = id
        self.provider = provider
        self.providerUserID = providerUserID
        self.email = email
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
    }

    init(_ wire: Components.Schemas.Identity) {
        self.init(
            id: wire.identityId, provider: IdentityProvider(rawValue: wire.provider), providerUserID: wire.id,
            email: wire.email.flatMap { $0.isEmpty ? nil : $0 }, createdAt: wire.createdAt,
            lastSignInAt: wire.lastSignInAt)
    }
}

/// The ways to sign in the server offers (its `/auth/v1/settings`), so that a sign-in screen shows only those.
public struct SignInProviders: Sendable, Equatable {
    /// Email with a password or a mailed code.
    public var email: Bool
    /// Sign in with Apple.
    public var apple: Bool
    /// Google, by id token.
    public var google: Bool
    /// The server's own OAuth and OpenID Connect providers, signed in with through their pages
    /// (`Auth.signInWithOAuth(provider:redirectTo:scopes:queryParams:using:)`), in the order the server lists them.
    public var custom: [CustomSignInProvider]

    /// What a sign-in screen assumes before the server said: email only.
    public init(email: Bool = true, apple: Bool = false, google: Bool = false, custom: [CustomSignInProvider] = []) {
        self.email = email
        self.apple = apple
        self.google = google
        self.custom = custom
    }

    /// The settings as the server answers them: GoTrue's `external` object, and beside it `custom_providers`, which
    /// a server that has none (or an older one) leaves out.
    init(settings json: Data) throws(GatehouseError) {
        struct Settings: Decodable {
            struct External: Decodable {
                let email: Bool?
                let apple: Bool?
                let google: Bool?
            }
            struct Custom: Decodable {
                let identifier: String
                let name: String?
            }
            let external: External
            let custom: [Custom]?

            enum CodingKeys: String, CodingKey {
                case external
                case custom = "custom_providers"
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                external = try container.decode(External.self, forKey: .external)
                // An extension of GoTrue's answer: unreadable, it is as if absent.
                custom = try? container.decodeIfPresent([Custom].self, forKey: .custom)
            }
        }
        guard let settings = try? JSONDecoder().decode(Settings.self, from: json) else {
            throw .server(status: 200, code: "unexpected_answer", message: "The server's settings cannot be read")
        }
        self.init(
            email: settings.external.email ?? true, apple: settings.external.apple ?? false,
            google: settings.external.google ?? false,
            custom: (settings.custom ?? []).map {
                CustomSignInProvider(
                    provider: IdentityProvider(rawValue: $0.identifier), name: $0.name.flatMap { $0.isEmpty ? nil : $0 }
                )
            })
    }
}

/// One of the server's own OAuth or OpenID Connect providers, as a sign-in screen shows it.
public struct CustomSignInProvider: Sendable, Hashable, Identifiable {
    /// The provider to sign in with: `custom:<slug>`.
    public let provider: IdentityProvider
    /// The name the server's operator gave it, for the button ("Continue with Acme").
    public let name: String

    /// A provider and its name; without one, its slug (`acme` for `custom:acme`).
    public init(provider: IdentityProvider, name: String? = nil) {
        self.provider = provider
        self.name = name ?? String(provider.rawValue.split(separator: ":", maxSplits: 1).last ?? "")
    }

    /// The provider's name as the server spells it, for SwiftUI lists.
    public var id: String { provider.rawValue }
}

extension Auth {
    /// Signs in with a Google id token (from Google's own sign-in SDK). `nonce` is the raw value whose SHA-256 the app
    /// gave Google, if it gave one: the token and the request carry one or neither.
    @discardableResult
    public func signInWithGoogle(idToken: String, nonce: String? = nil) async throws(GatehouseError) -> AuthSession {
        let grant = Components.Schemas.IDTokenGrant(
            provider: IdentityProvider.google.rawValue, idToken: idToken, nonce: nonce)
        let client = self.client
        return try await signIn {
            try await client.token(query: .init(grantType: .idToken), body: .json(.IDTokenGrant(grant))).ok.body.json
        }
    }

    /// The ways into the signed-in account, as the server lists them now.
    public func identities() async throws(GatehouseError) -> [UserIdentity] { try await user().identities }

    /// Links an Apple or Google ID to the signed-in account by its id token, so that it signs in to this account
    /// from then on (the server must have manual linking on, else `manual_linking_disabled`; an ID linked to another
    /// account is `identity_already_exists`). The session the server answers replaces this one: the same account,
    /// told as `refreshed`; the company signed in to stays.
    @discardableResult
    public func linkIdentity(
        provider: IdentityProvider, idToken: String, nonce: String?
    ) async throws(GatehouseError) -> AuthSession {
        let grant = Components.Schemas.IDTokenGrant(
            provider: provider.rawValue, idToken: idToken, nonce: nonce, linkIdentity: true)
        let linked = AuthSession(
            try await sessions.authorized {
                try await $0.token(query: .init(grantType: .idToken), body: .json(.IDTokenGrant(grant))).ok.body.json
            })
        try await sessions.replace(linked)
        return linked
    }

    /// Unlinks one of the account's identities (`UserIdentity.id`). The last way into the account cannot go
    /// (`single_identity_not_deletable`); an unlinked Apple ID also loses the app's Apple tokens.
    public func unlinkIdentity(_ identityID: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.unlinkIdentity(path: .init(identityId: identityID)).ok }
    }

    /// The ways to sign in the server offers now.
    public func signInProviders() async throws(GatehouseError) -> SignInProviders {
        let raw = self.raw
        // Read without the generated decoding, which would drop `custom_providers`, GoTrue's answer's extension.
        return try SignInProviders(
            settings: try await call { try await raw.get("/auth/v1/settings", operationID: "getSettings") })
    }
}

extension GatehouseError.Code {
    /// The server does not let accounts link or unlink identities themselves.
    public static let manualLinkingDisabled = Self(rawValue: "manual_linking_disabled")
    /// The Apple or Google ID is linked to another account already.
    public static let identityAlreadyExists = Self(rawValue: "identity_already_exists")
    /// The account has no identity with that id.
    public static let identityNotFound = Self(rawValue: "identity_not_found")
    /// It is the account's last way in: link another first.
    public static let singleIdentityNotDeletable = Self(rawValue: "single_identity_not_deletable")
    /// The server does not sign in with that provider.
    public static let providerDisabled = Self(rawValue: "provider_disabled")
}
