import Foundation
import GatehouseAPI
import NIOCore

/// A custom provider's fields as stored: everything GoTrue's admin API takes but the client secret, which is sealed
/// apart (`CustomProviderRepository`).
struct CustomProviderSettings: Codable, Sendable, Equatable {
    var id: String
    var providerType: String
    var identifier: String
    var name: String
    var clientID: String
    var acceptableClientIDs: [String] = []
    var scopes: [String] = []
    var pkceEnabled = true
    var attributeMapping: [String: JSONValue] = [:]
    var authorizationParams: [String: JSONValue] = [:]
    var enabled = true
    var emailOptional = false
    var issuer: String?
    var discoveryURL: String?
    var skipNonceCheck = false
    var authorizationURL: String?
    var tokenURL: String?
    var userinfoURL: String?
    var jwksURI: String?

    /// Where the OpenID configuration is: `discovery_url`, or the issuer's well-known path.
    var discovery: String? {
        discoveryURL
            ?? issuer.map { ($0.hasSuffix("/") ? String($0.dropLast()) : $0) + "/.well-known/openid-configuration" }
    }
}

struct CustomProviderRecord: Sendable {
    var settings: CustomProviderSettings
    var sealedSecret: String
    var createdAt: Date
    var updatedAt: Date
}

/// GoTrue's custom OAuth 2.0 and OpenID Connect providers (`/auth/v1/admin/custom-providers`), registered by the
/// operator, their client secrets sealed (SecretBox, bound to the identifier) and never answered. An OIDC provider
/// signs in by the id_token grant (`"provider": "custom:<slug>"`): its keys come from its discovery document.
struct CustomProviders: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let box: SecretBox

    static let notFound = APIError(.notFound, code: .providerNotFound, message: "Custom OAuth provider not found")
    /// Parameters the sign-in sets itself, which `authorization_params` may not replace.
    static let reservedParameters: Set<String> = [
        "client_id", "redirect_uri", "response_type", "state", "code_challenge", "code_challenge_method", "nonce",
        "scope",
    ]

    static func context(_ identifier: String) -> String { "custom-provider:\(identifier)" }

    func list(type: String?) async throws -> [Schemas.CustomProvider] {
        if let type, !["oidc", "oauth2"].contains(type) {
            throw APIError.validation("type must be either 'oauth2' or 'oidc'")
        }
        return try await CustomProviderRepository(db: store.database).all()
            .filter { type == nil || $0.settings.providerType == type }.map(Self.wire)
    }

    /// The enabled providers, as `/auth/v1/settings` lists them for a login screen.
    func signInProviders() async throws -> [Schemas.SignInProvider] {
        try await CustomProviderRepository(db: store.database).all().filter(\.settings.enabled)
            .map { Schemas.SignInProvider(identifier: $0.settings.identifier, name: $0.settings.name) }
    }

    func get(_ identifier: String) async throws -> Schemas.CustomProvider {
        try Self.checkIdentifier(identifier)
        guard let record = try await CustomProviderRepository(db: store.database).find(identifier) else {
            throw Self.notFound
        }
        return Self.wire(record)
    }

    func create(_ body: Schemas.CustomProviderRequest, by admin: AdminCaller) async throws -> Schemas.CustomProvider {
        guard let type = body.providerType?.rawValue else {
            throw APIError.validation("provider_type must be either 'oauth2' or 'oidc'")
        }
        let identifier = body.identifier ?? ""
        try Self.checkIdentifier(identifier)
        for (field, value) in [("name", body.name), ("client_id", body.clientId), ("client_secret", body.clientSecret)]
        where (value ?? "").trimmingCharacters(in: .whitespaces).isEmpty {
            throw APIError.validation("\(field) is required")
        }
        var settings = CustomProviderSettings(
            id: Secrets.identifier(), providerType: type, identifier: identifier, name: body.name ?? "",
            clientID: body.clientId ?? "")
        try Self.apply(body, to: &settings)
        let now = clock.now
        let record = CustomProviderRecord(
            settings: settings, sealedSecret: try box.seal(body.clientSecret ?? "", context: Self.context(identifier)),
            createdAt: now, updatedAt: now)
        try await store.transaction { db in
            guard try await CustomProviderRepository(db: db).insert(record) else {
                throw APIError(
                    .badRequest, code: .conflict, message: "A custom OAuth provider with this identifier already exists"
                )
            }
            try await trail.within(db).record(
                admin.event(.customProviderCreated, accountID: nil, detail: ["provider": identifier, "type": type]))
        }
        return Self.wire(record)
    }

    func update(_ identifier: String, _ body: Schemas.CustomProviderRequest, by admin: AdminCaller) async throws
        -> Schemas.CustomProvider
    {
        try Self.checkIdentifier(identifier)
        let now = clock.now
        return try await store.transaction { db in
            let repository = CustomProviderRepository(db: db)
            guard var record = try await repository.find(identifier) else { throw Self.notFound }
            if let type = body.providerType?.rawValue, type != record.settings.providerType {
                throw APIError.validation("provider_type cannot change; delete the provider and register it again")
            }
            if let name = body.name { record.settings.name = name }
            if let clientID = body.clientId { record.settings.clientID = clientID }
            try Self.apply(body, to: &record.settings)
            if let secret = body.clientSecret, !secret.isEmpty {
                record.sealedSecret = try box.seal(secret, context: Self.context(identifier))
            }
            guard !record.settings.name.isEmpty, !record.settings.clientID.isEmpty else {
                throw APIError.validation("name and client_id cannot be empty")
            }
            record.updatedAt = now
            try await repository.update(record)
            try await trail.within(db).record(
                admin.event(.customProviderUpdated, accountID: nil, detail: ["provider": identifier]))
            return Self.wire(record)
        }
    }

    func delete(_ identifier: String, by admin: AdminCaller) async throws {
        try Self.checkIdentifier(identifier)
        try await store.transaction { db in
            guard try await CustomProviderRepository(db: db).delete(identifier) else { throw Self.notFound }
            try await trail.within(db).record(
                admin.event(.customProviderDeleted, accountID: nil, detail: ["provider": identifier]))
        }
    }

    /// `custom:` and a slug of lower-case letters, digits, `-` and `_`, as GoTrue names them.
    static func checkIdentifier(_ identifier: String) throws {
        guard identifier.hasPrefix("custom:") else {
            throw APIError.validation(
                "identifier must start with 'custom:' prefix, e.g. 'custom:\(identifier.prefix(40))'")
        }
        let slug = identifier.dropFirst("custom:".count)
        guard (1...64).contains(slug.count),
            slug.unicodeScalars.allSatisfy({
                CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789-_").contains($0)
            })
        else {
            throw APIError.validation("identifier must be 'custom:' and 1 to 64 of a-z, 0-9, '-' and '_'")
        }
    }

    /// The optional fields of `body` onto `settings`, each URL checked, then the type's required URLs.
    static func apply(_ body: Schemas.CustomProviderRequest, to settings: inout CustomProviderSettings) throws {
        if let ids = body.acceptableClientIds { settings.acceptableClientIDs = ids }
        if let scopes = body.scopes { settings.scopes = scopes }
        if let pkce = body.pkceEnabled { settings.pkceEnabled = pkce }
        if let mapping = body.attributeMapping { settings.attributeMapping = mapping }
        if let parameters = body.authorizationParams {
            if let reserved = parameters.keys.sorted().first(where: reservedParameters.contains) {
                throw APIError.validation("authorization_params cannot set '\(reserved)': the sign-in sets it")
            }
            settings.authorizationParams = parameters
        }
        if let enabled = body.enabled { settings.enabled = enabled }
        if let optional = body.emailOptional { settings.emailOptional = optional }
        if let skip = body.skipNonceCheck { settings.skipNonceCheck = skip }
        for (field, value, path) in [
            ("issuer", body.issuer, \CustomProviderSettings.issuer),
            ("discovery_url", body.discoveryUrl, \.discoveryURL),
            ("authorization_url", body.authorizationUrl, \.authorizationURL), ("token_url", body.tokenUrl, \.tokenURL),
            ("userinfo_url", body.userinfoUrl, \.userinfoURL), ("jwks_uri", body.jwksUri, \.jwksURI),
        ] {
            guard let value else { continue }
            if value.isEmpty {
                settings[keyPath: path] = nil
                continue
            }
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw APIError.validation("\(field) must be an http:// or https:// URL")
            }
            settings[keyPath: path] = value
        }
        if settings.providerType == "oidc", settings.issuer == nil {
            throw APIError.validation("issuer is required for OIDC providers")
        }
        if settings.providerType == "oauth2" {
            for (field, value) in [
                ("authorization_url", settings.authorizationURL), ("token_url", settings.tokenURL),
                ("userinfo_url", settings.userinfoURL),
            ] where value == nil {
                throw APIError.validation("\(field) is required for OAuth2 providers")
            }
        }
    }

    static func wire(_ record: CustomProviderRecord) -> Schemas.CustomProvider {
        let s = record.settings
        return Schemas.CustomProvider(
            id: s.id, providerType: s.providerType, identifier: s.identifier, name: s.name, clientId: s.clientID,
            acceptableClientIds: s.acceptableClientIDs, scopes: s.scopes, pkceEnabled: s.pkceEnabled,
            attributeMapping: s.attributeMapping, authorizationParams: s.authorizationParams, enabled: s.enabled,
            emailOptional: s.emailOptional, issuer: s.issuer, discoveryUrl: s.discoveryURL,
            skipNonceCheck: s.skipNonceCheck, authorizationUrl: s.authorizationURL, tokenUrl: s.tokenURL,
            userinfoUrl: s.userinfoURL, jwksUri: s.jwksURI, createdAt: record.createdAt, updatedAt: record.updatedAt)
    }
}

/// Custom providers' published documents: the discovery document (endpoints and `jwks_uri`), fetched once an hour,
/// and a `JWKSCache` per key set. The id_token grant takes its verifier here; the redirect flow its `UpstreamProvider`.
actor CustomProviderKeys {
    /// What the redirect flow and the id_token grant read from a provider's discovery document.
    struct Discovery: Sendable {
        var jwksURI: String
        var authorization: String?
        var token: String?
        var userinfo: String?
        var authMethods: [String]
    }

    private var discovered: [String: (document: Discovery, at: Date)] = [:]
    /// Fetches under way, by URL: sign-ins starting together share one (as `JWKSCache` shares its keys' fetch).
    private var fetching: [String: Task<Discovery, any Error>] = [:]
    private var caches: [String: JWKSCache] = [:]

    /// The verifier of a custom OIDC provider, or the refusal that names it.
    func verifier(_ identifier: String, store: Store) async throws -> IDTokenVerifier {
        let settings = try await Self.enabled(identifier, store: store).settings
        guard settings.providerType == "oidc" else {
            throw APIError(
                .badRequest, code: .providerDisabled,
                message: "Provider \(identifier.debugDescription) is an OAuth 2.0 provider: it has no id tokens")
        }
        let jwksURI: String
        if let given = settings.jwksURI { jwksURI = given } else { jwksURI = try await discovery(settings).jwksURI }
        return try await verifier(settings, jwksURI: jwksURI)
    }

    /// The provider's side of the redirect flow, its secret opened, or the refusal that names it.
    func upstream(_ identifier: String, store: Store, box: SecretBox) async throws -> UpstreamProvider {
        let record = try await Self.enabled(identifier, store: store)
        return try await upstream(
            record.settings, secret: try box.open(record.sealedSecret, context: CustomProviders.context(identifier)))
    }

    /// The side of the redirect flow of a registration held elsewhere (a company's OIDC provider, `sso:<id>`).
    func upstream(_ settings: CustomProviderSettings, secret: String) async throws -> UpstreamProvider {
        let identifier = settings.identifier
        if settings.providerType == "oauth2" {
            guard let authorization = settings.authorizationURL, let token = settings.tokenURL else {
                throw IDTokenProviders.notEnabled(identifier)
            }
            return UpstreamProvider(
                settings: settings, clientSecret: secret,
                endpoints: UpstreamEndpoints(
                    authorization: authorization, token: token, userinfo: settings.userinfoURL, secretInBody: true),
                verifier: nil)
        }
        let document = try await discovery(settings)
        guard let authorization = settings.authorizationURL ?? document.authorization,
            let token = settings.tokenURL ?? document.token
        else {
            throw APIError(
                .badRequest, code: .providerDisabled,
                message: "Provider \(identifier.debugDescription) names no authorization or token endpoint")
        }
        // OAuth's default is HTTP Basic; a provider that lists only client_secret_post gets the secret in the body.
        let methods = document.authMethods
        let inBody =
            !methods.isEmpty && !methods.contains("client_secret_basic") && methods.contains("client_secret_post")
        return UpstreamProvider(
            settings: settings, clientSecret: secret,
            endpoints: UpstreamEndpoints(
                authorization: authorization, token: token, userinfo: settings.userinfoURL ?? document.userinfo,
                secretInBody: inBody),
            verifier: try await verifier(settings, jwksURI: document.jwksURI))
    }

    private static func enabled(_ identifier: String, store: Store) async throws -> CustomProviderRecord {
        guard let record = try await CustomProviderRepository(db: store.database).find(identifier) else {
            throw IDTokenProviders.notAllowed(identifier)
        }
        guard record.settings.enabled else { throw IDTokenProviders.notEnabled(identifier) }
        return record
    }

    private func verifier(_ settings: CustomProviderSettings, jwksURI: String) async throws -> IDTokenVerifier {
        guard let issuer = settings.issuer else { throw IDTokenProviders.notEnabled(settings.identifier) }
        let keys = caches[jwksURI] ?? JWKSCache(url: jwksURI)
        caches[jwksURI] = keys
        return IDTokenVerifier(
            provider: settings.identifier, issuers: [issuer],
            audiences: [settings.clientID] + settings.acceptableClientIDs, keys: keys, acceptsRawNonce: false,
            skipsNonce: settings.skipNonceCheck)
    }

    /// The provider's discovery document (its `jwks_uri` replaced by the registration's own when given); the last
    /// one fetched while the provider cannot be reached.
    private func discovery(_ settings: CustomProviderSettings) async throws -> Discovery {
        guard let url = settings.discovery else {
            if let jwksURI = settings.jwksURI {
                return Discovery(jwksURI: jwksURI, authorization: nil, token: nil, userinfo: nil, authMethods: [])
            }
            throw APIError.idToken(.keysUnavailable, provider: settings.identifier)
        }
        if let known = discovered[url], Date().timeIntervalSince(known.at) < JWKSCache.maximumAge {
            return Self.overriding(known.document, settings)
        }
        let task =
            fetching[url]
            ?? Task {
                let body = try await JWKSCache.get(url)
                guard let object = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                    let jwksURI = object["jwks_uri"] as? String
                else { throw IDTokenError.keysUnavailable }
                return Discovery(
                    jwksURI: jwksURI, authorization: object["authorization_endpoint"] as? String,
                    token: object["token_endpoint"] as? String, userinfo: object["userinfo_endpoint"] as? String,
                    authMethods: object["token_endpoint_auth_methods_supported"] as? [String] ?? [])
            }
        fetching[url] = task
        do {
            let document = try await task.value
            fetching[url] = nil
            discovered[url] = (document, Date())
            return Self.overriding(document, settings)
        } catch {
            fetching[url] = nil
            if let known = discovered[url] { return Self.overriding(known.document, settings) }
            throw APIError.idToken(.keysUnavailable, provider: settings.identifier)
        }
    }

    private static func overriding(_ document: Discovery, _ settings: CustomProviderSettings) -> Discovery {
        var document = document
        if let jwksURI = settings.jwksURI { document.jwksURI = jwksURI }
        return document
    }
}
