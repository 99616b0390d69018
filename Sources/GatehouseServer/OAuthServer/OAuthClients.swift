import Foundation

/// The provider's registered clients: the operator's (admin API, CLI, console) and, when allowed, those registered by
/// anyone (RFC 7591). Secrets are shown once and kept as digests.
struct OAuthClients: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let settings: OAuthServerSettings
    /// Counts dynamic registrations per address; nil where nobody registers dynamically (the command line).
    var throttling: AccountThrottling? = nil

    /// How many clients one address may register dynamically (RFC 7591 has no authentication to stop a flood).
    static let registrationsPerIP = RateLimit(limit: 10, per: 3600)

    static let notFound = APIError(.notFound, code: .oauthClientNotFound, message: "OAuth client not found")
    static let disabled = APIError(.notFound, code: .oauthServerDisabled, message: "OAuth 2.1 server is disabled")
    static let registrationDisabled = APIError(
        .forbidden, code: .oauthDynamicClientRegistrationDisabled, message: "Dynamic client registration is not enabled"
    )

    /// Throws `oauth_server_disabled` while `--oauth-server` is off: the API's endpoints answer nothing else then.
    func requireEnabled() throws {
        guard settings.enabled else { throw Self.disabled }
    }

    /// The client with this id (any spelling of its UUID), or nil.
    func find(_ id: String) async throws -> OAuthClient? {
        guard let id = Secrets.identifier(id) else { return nil }
        return try await OAuthClientRepository(db: store.database).find(id)
    }

    /// Checks a request's client credentials (`OAuthClientCredentials.check`).
    func authenticate(_ credentials: OAuthClientCredentials) async throws -> Result<OAuthClient, OAuthError> {
        let client = try await find(credentials.clientID)
        if let refusal = OAuthClientCredentials.check(credentials, against: client) { return .failure(refusal) }
        return .success(client!)
    }

    // MARK: Registering

    /// A client just registered, and its secret (a confidential client's), shown only now.
    typealias Registered = (client: OAuthClient, secret: String?)

    /// Registers a client for the operator (`registration_type` manual); answers it and, for a confidential client,
    /// its secret, shown only here. A refusal is 400 validation_failed with GoTrue's words.
    func register(_ metadata: OAuthClientMetadata, by caller: AdminCaller) async throws -> Registered {
        let checked: OAuthClientMetadata.Checked
        do throws(OAuthClientRefusal) {
            checked = try metadata.checked(dynamic: false)
        } catch {
            throw APIError.validation(error.message)
        }
        return try await insert(checked, registration: "manual") {
            caller.event(.oauthClientCreated, accountID: nil, detail: $0)
        }
    }

    /// Registers a client for anyone who asks (RFC 7591), when `--oauth-allow-dynamic-registration` is on, at most
    /// `registrationsPerIP` an hour from one address. A refusal of the metadata is the RFC's (`OAuthClientRefusal`).
    func registerDynamically(_ metadata: OAuthClientMetadata, client: ClientInfo) async throws
        -> Result<Registered, OAuthClientRefusal>
    {
        try requireEnabled()
        guard settings.allowDynamicRegistration else { throw Self.registrationDisabled }
        try await throttling?.limit("oauth_client_register", Self.registrationsPerIP, client: client)
        let checked: OAuthClientMetadata.Checked
        do throws(OAuthClientRefusal) {
            checked = try metadata.checked(dynamic: true)
        } catch {
            return .failure(error)
        }
        return .success(
            try await insert(checked, registration: "dynamic") {
                client.event(
                    .oauthClientCreated, accountID: nil, detail: $0.merging(["registration": "dynamic"]) { $1 })
            })
    }

    /// Stores a checked client with a fresh id and, when confidential, a fresh secret; audits it in the same
    /// transaction.
    private func insert(
        _ checked: OAuthClientMetadata.Checked, registration: String,
        event: @escaping @Sendable ([String: String]) -> AuditEvent
    ) async throws -> Registered {
        let now = clock.now.epochMilliseconds
        let secret = checked.type == .confidential ? Secrets.token() : nil
        let client = OAuthClient(
            id: Secrets.identifier(), name: checked.name, type: checked.type, secretHash: secret.map(Secrets.digest),
            authMethod: checked.authMethod, registrationType: registration, clientURI: checked.clientURI,
            logoURI: checked.logoURI, redirectURIs: checked.redirectURIs, grantTypes: checked.grantTypes,
            responseTypes: checked.responseTypes, scope: checked.scope, createdAt: now, updatedAt: now)
        try await store.transaction { [trail] db in
            try await OAuthClientRepository(db: db).insert(client)
            try await trail.within(db).record(event(["client_id": client.id]))
        }
        return (client, secret)
    }

    // MARK: Reading

    /// Every client, newest first.
    func list() async throws -> [OAuthClient] {
        try await OAuthClientRepository(db: store.database).list()
    }

    /// One page of the clients, newest first, and how many there are.
    func page(_ page: AdminPage) async throws -> (clients: [OAuthClient], total: Int) {
        let repository = OAuthClientRepository(db: store.database)
        return (try await repository.page(offset: page.offset, limit: page.size), try await repository.count())
    }

    /// The client with this id; 404 oauth_client_not_found for an unknown one or an id that is no UUID.
    func client(_ id: String) async throws -> OAuthClient {
        guard let client = try await find(id) else { throw Self.notFound }
        return client
    }

    // MARK: Changing

    /// Changes what `change` names (GoTrue's PUT: each field optional, at least one); the type stays.
    func update(_ id: String, _ change: OAuthClientChange, by caller: AdminCaller) async throws -> OAuthClient {
        guard let id = Secrets.identifier(id) else { throw Self.notFound }
        let now = clock.now.epochMilliseconds
        return try await store.transaction { [trail] db in
            let repository = OAuthClientRepository(db: db)
            guard var client = try await repository.find(id) else { throw Self.notFound }
            do throws(OAuthClientRefusal) {
                try change.apply(to: &client)
            } catch {
                throw APIError.validation(error.message)
            }
            client.updatedAt = now
            try await repository.update(client)
            try await trail.within(db).record(
                caller.event(.oauthClientUpdated, accountID: nil, detail: ["client_id": id]))
            return client
        }
    }

    /// Removes the client, its authorizations and consents, and ends every session it holds (on every instance:
    /// the ended sessions are announced with the commit).
    func remove(_ id: String, by caller: AdminCaller) async throws {
        guard let id = Secrets.identifier(id) else { throw Self.notFound }
        let now = clock.now
        try await store.transaction { [trail] db in
            let repository = OAuthClientRepository(db: db)
            let ended = try await SessionChanges(db: db).end(.oauthClient(id, accountID: nil), now: now)
            guard try await repository.delete(id) else { throw Self.notFound }
            try await trail.within(db).record(
                caller.event(
                    .oauthClientDeleted, accountID: nil,
                    detail: ["client_id": id, "sessions_ended": String(ended.count)]))
        }
    }

    /// A new secret for a confidential client, shown once; the old one stops working at once.
    func regenerateSecret(_ id: String, by caller: AdminCaller) async throws -> (OAuthClient, secret: String) {
        guard let id = Secrets.identifier(id) else { throw Self.notFound }
        let secret = Secrets.token()
        let now = clock.now.epochMilliseconds
        let client = try await store.transaction { [trail] db in
            let repository = OAuthClientRepository(db: db)
            guard var client = try await repository.find(id) else { throw Self.notFound }
            guard client.type == .confidential else {
                throw APIError.validation("Cannot regenerate secret for public client")
            }
            client.secretHash = Secrets.digest(secret)
            client.updatedAt = now
            try await repository.update(client)
            try await trail.within(db).record(
                caller.event(.oauthClientSecretRegenerated, accountID: nil, detail: ["client_id": id]))
            return client
        }
        return (client, secret)
    }
}

/// Why a client's metadata was refused, in RFC 7591's terms (§3.2.2): `invalid_redirect_uri` or
/// `invalid_client_metadata`. The admin API answers the same words as GoTrue's validation_failed.
struct OAuthClientRefusal: Error, Sendable, Equatable {
    enum Kind: String, Sendable {
        case redirectURI = "invalid_redirect_uri"
        case metadata = "invalid_client_metadata"
    }

    let kind: Kind
    let message: String

    static func metadata(_ message: String) -> Self { Self(kind: .metadata, message: message) }
    static func redirectURI(_ message: String) -> Self { Self(kind: .redirectURI, message: message) }
}

/// A client's registration as asked (the admin API's create, RFC 7591's metadata, the command line, the console):
/// every field optional until checked.
struct OAuthClientMetadata: Sendable {
    var name: String?
    var clientURI: String?
    var logoURI: String?
    var redirectURIs: [String]?
    var grantTypes: [String]?
    var responseTypes: [String]?
    var scope: String?
    var clientType: String?
    var authMethod: String?

    /// The most redirect URIs one client registers.
    static let redirectURILimit = 10
    static let authMethods = ["none", "client_secret_basic", "client_secret_post"]
    static let defaultGrantTypes = [OAuthGrantType.authorizationCode.rawValue, OAuthGrantType.refreshToken.rawValue]

    /// The registration as stored: defaults filled in, every rule kept.
    struct Checked: Sendable {
        let name: String
        let type: OAuthClient.Kind
        let authMethod: String
        let clientURI: String?
        let logoURI: String?
        let redirectURIs: [String]
        let grantTypes: [String]
        let responseTypes: [String]
        let scope: String
    }

    /// Checks the metadata and fills in GoTrue's defaults: the type from the authentication method when only that is
    /// given (`none` is public), else confidential; the method from the type. A dynamic registration may not take
    /// `client_credentials` nor the company scope, which the operator grants on purpose.
    func checked(dynamic: Bool) throws(OAuthClientRefusal) -> Checked {
        guard let redirectURIs, !redirectURIs.isEmpty else { throw .redirectURI("redirect_uris is required") }
        try OAuthClientRules.check(redirectURIs: redirectURIs)
        let type: OAuthClient.Kind
        if let clientType {
            guard let given = OAuthClient.Kind(rawValue: clientType) else {
                throw .metadata("client_type must be 'public' or 'confidential'")
            }
            type = given
        } else {
            type = authMethod.map { $0 == "none" ? .public : .confidential } ?? .confidential
        }
        let method = authMethod ?? (type == .public ? "none" : "client_secret_basic")
        guard Self.authMethods.contains(method) else {
            throw .metadata("token_endpoint_auth_method must be one of: [none client_secret_basic client_secret_post]")
        }
        let expected: OAuthClient.Kind = method == "none" ? .public : .confidential
        guard expected == type else {
            throw .metadata(
                "client_type '\(type.rawValue)' is inconsistent with token_endpoint_auth_method '\(method)' "
                    + "(expected client_type '\(expected.rawValue)')")
        }
        let grants = try OAuthClientRules.grantTypes(grantTypes ?? Self.defaultGrantTypes, type: type, dynamic: dynamic)
        let responses = try OAuthClientRules.responseTypes(responseTypes)
        let scopes = try OAuthClientRules.scope(scope, dynamic: dynamic)
        let name = try OAuthClientRules.name(name)
        return Checked(
            name: name, type: type, authMethod: method,
            clientURI: try OAuthClientRules.link(clientURI, field: "client_uri"),
            logoURI: try OAuthClientRules.link(logoURI, field: "logo_uri"), redirectURIs: redirectURIs,
            grantTypes: grants, responseTypes: responses, scope: scopes)
    }
}

/// What a PUT changes: each field optional, at least one; the type cannot change.
struct OAuthClientChange: Sendable {
    var name: String?
    var clientURI: String?
    var logoURI: String?
    var redirectURIs: [String]?
    var grantTypes: [String]?
    var responseTypes: [String]?
    var scope: String?
    var authMethod: String?
    var clientType: String?

    /// Whether the request names anything to change.
    var isEmpty: Bool {
        name == nil && clientURI == nil && logoURI == nil && redirectURIs == nil && grantTypes == nil
            && responseTypes == nil && scope == nil && authMethod == nil
    }

    /// Applies the change to `client` after checking each field by the rules of registration (an empty
    /// `client_uri` or `logo_uri` removes it).
    func apply(to client: inout OAuthClient) throws(OAuthClientRefusal) {
        if let clientType, clientType != client.type.rawValue { throw .metadata("client_type cannot be changed") }
        guard !isEmpty else { throw .metadata("No fields provided for update") }
        if let redirectURIs {
            guard !redirectURIs.isEmpty else { throw .redirectURI("redirect_uris cannot be empty") }
            try OAuthClientRules.check(redirectURIs: redirectURIs)
            client.redirectURIs = redirectURIs
        }
        if let grantTypes {
            guard !grantTypes.isEmpty else { throw .metadata("grant_types cannot be empty") }
            client.grantTypes = try OAuthClientRules.grantTypes(grantTypes, type: client.type, dynamic: false)
        }
        if let responseTypes { client.responseTypes = try OAuthClientRules.responseTypes(responseTypes) }
        if let scope { client.scope = try OAuthClientRules.scope(scope, dynamic: false) }
        if let name { client.name = try OAuthClientRules.name(name) }
        if let clientURI { client.clientURI = try OAuthClientRules.link(clientURI, field: "client_uri") }
        if let logoURI { client.logoURI = try OAuthClientRules.link(logoURI, field: "logo_uri") }
        if let authMethod {
            let valid = client.type == .public ? ["none"] : ["client_secret_basic", "client_secret_post"]
            guard valid.contains(authMethod) else {
                throw .metadata(
                    "token_endpoint_auth_method '\(authMethod)' is not valid for client_type "
                        + "'\(client.type.rawValue)'; valid methods: [\(valid.joined(separator: " "))]")
            }
            client.authMethod = authMethod
        }
    }
}

/// The rules of a client's fields, pure: GoTrue's checks and words, and RFC 7591's kinds of refusal.
enum OAuthClientRules {
    /// Schemes a browser would run rather than follow: never a redirect URI.
    static let forbiddenSchemes: Set<String> = ["javascript", "data", "file", "vbscript", "about", "blob"]
    /// The only hosts a plain-http redirect URI may name (a native app's loopback listener, RFC 8252 §7.3).
    static let loopbackHosts: Set<String> = ["localhost", "127.0.0.1", "::1"]

    /// Each redirect URI, at most `redirectURILimit`, kept exactly as given (matched character for character).
    static func check(redirectURIs: [String]) throws(OAuthClientRefusal) {
        guard redirectURIs.count <= OAuthClientMetadata.redirectURILimit else {
            throw .redirectURI("redirect_uris cannot exceed \(OAuthClientMetadata.redirectURILimit) items")
        }
        for uri in redirectURIs {
            if let reason = refusal(redirectURI: uri) {
                throw .redirectURI("invalid redirect_uri '\(uri.prefix(200))': \(reason)")
            }
        }
    }

    /// Why `uri` cannot be a redirect URI, or nil: https; http only to a loopback host; a custom app scheme
    /// (`com.example.app:/callback`); never a fragment nor a scheme a browser would run.
    static func refusal(redirectURI uri: String) -> String? {
        guard !uri.isEmpty else { return "redirect URI cannot be empty" }
        guard !uri.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } == true }),
            let components = URLComponents(string: uri)
        else { return "invalid URL format" }
        guard let scheme = components.scheme?.lowercased(), !scheme.isEmpty else { return "must have scheme and host" }
        if forbiddenSchemes.contains(scheme) { return "scheme '\(scheme)' is not allowed for security reasons" }
        let host = (components.host ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if scheme == "http" || scheme == "https" {
            guard !host.isEmpty else { return "must have scheme and host" }
            if scheme == "http", !loopbackHosts.contains(host) { return "HTTP scheme only allowed for localhost" }
        } else if host.isEmpty, components.path.isEmpty {
            return "must have scheme and host"
        }
        if uri.contains("#") { return "fragment not allowed in redirect URI" }
        return nil
    }

    /// The grant types, each once: those the provider knows; `client_credentials` only for a confidential client
    /// the operator registers.
    static func grantTypes(_ given: [String], type: OAuthClient.Kind, dynamic: Bool) throws(OAuthClientRefusal)
        -> [String]
    {
        var seen: [String] = []
        for grant in given where !seen.contains(grant) {
            guard let known = OAuthGrantType(rawValue: grant) else {
                throw .metadata(
                    "grant_types must only contain "
                        + OAuthGrantType.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", "))
            }
            if known == .clientCredentials {
                if dynamic { throw .metadata("grant_type 'client_credentials' cannot be registered dynamically") }
                if type == .public {
                    throw .metadata("grant_type 'client_credentials' is only allowed for confidential clients")
                }
            }
            seen.append(grant)
        }
        return seen
    }

    /// Only the code flow: `["code"]` (also when none is named).
    static func responseTypes(_ given: [String]?) throws(OAuthClientRefusal) -> [String] {
        guard let given, !given.isEmpty else { return ["code"] }
        guard Set(given) == ["code"] else { throw .metadata("response_types must only contain 'code'") }
        return ["code"]
    }

    /// The scopes the client may ask for, space-separated, each known and once, in the order given; the
    /// registration default when none. The company scope is the operator's to grant.
    static func scope(_ given: String?, dynamic: Bool) throws(OAuthClientRefusal) -> String {
        let items = OAuthScopes.list(given?.trimmingCharacters(in: .whitespaces))
        guard !items.isEmpty else { return OAuthScopes.text(OAuthScopes.registrationDefault) }
        var seen: [String] = []
        for item in items where !seen.contains(item) {
            guard OAuthScopes.supported.contains(item) else { throw .metadata("unsupported scope: \(item.prefix(64))") }
            if dynamic, item == OAuthScopes.company {
                throw .metadata("scope '\(item)' cannot be registered dynamically")
            }
            seen.append(item)
        }
        return OAuthScopes.text(seen)
    }

    /// The name people see on the consent page: at most 1,024 characters; may be empty (as in GoTrue).
    static func name(_ given: String?) throws(OAuthClientRefusal) -> String {
        let name = (given ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard name.count <= 1024 else { throw .metadata("client_name cannot exceed 1024 characters") }
        return name
    }

    /// A link to the client's site or logo: an absolute http(s) URL of at most 2,048 characters; empty is none.
    static func link(_ given: String?, field: String) throws(OAuthClientRefusal) -> String? {
        guard let given, !given.isEmpty else { return nil }
        guard given.count <= 2048, let components = URLComponents(string: given),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            components.host?.isEmpty == false
        else { throw .metadata("\(field) must be a valid URL") }
        return given
    }
}
