import Foundation
import GatehouseAPI
import SQLKit

/// What `/oauth/authorize` was asked, as a request to keep: every check that can be made before a user is known.
struct AuthorizeRequest: Sendable, Equatable {
    let client: OAuthClient
    let redirectURI: String
    let scope: [String]
    let state: String?
    let nonce: String?
    let codeChallenge: String
    let acr: String?
    let maxAge: Int64?
    let prompt: String?

    /// The level a client asks for by `acr_values`: `aal2` (also as a URN ending in it) or nothing.
    static func acr(_ values: String?) -> String? {
        let values = (values ?? "").split(separator: " ").map { $0.lowercased() }
        return values.contains { $0 == "aal2" || $0.hasSuffix(":aal2") } ? "aal2" : nil
    }

    /// The request's parameters checked in the order GoTrue checks them. The client and the redirect URI come first
    /// and are answered in JSON (`APIError`): nothing may be redirected to a URI that is not the client's. What
    /// follows is a `OAuthError` sent back to that URI.
    static func parse(_ query: [String: String], find: (String) async throws -> OAuthClient?) async throws
        -> Result<Self, RedirectedError>
    {
        guard let clientID = query["client_id"], !clientID.isEmpty else {
            throw APIError.validation("client_id is required")
        }
        guard let redirectURI = query["redirect_uri"], !redirectURI.isEmpty else {
            throw APIError.validation("redirect_uri is required")
        }
        guard let client = try await find(clientID) else {
            throw APIError(.badRequest, code: .oauthClientNotFound, message: "invalid client_id")
        }
        // Exact, character for character (OAuth 2.1 §2.3.1): no prefix, no normalising.
        guard client.redirectURIs.contains(redirectURI) else { throw APIError.validation("invalid redirect_uri") }
        let state = query["state"]
        func refuse(_ error: OAuthError) -> Result<Self, RedirectedError> {
            .failure(RedirectedError(redirectURI: redirectURI, error: error, state: state))
        }
        guard client.grantTypes.contains(OAuthGrantType.authorizationCode.rawValue) else {
            return refuse(.unauthorizedClient("The client may not use the authorization code grant"))
        }
        guard (query["response_type"] ?? "code") == "code" else {
            return refuse(OAuthError("unsupported_response_type", "only response_type=code is supported"))
        }
        if let mode = query["response_mode"], mode != "query" {
            return refuse(.invalidRequest("only response_mode=query is supported"))
        }
        let scope: [String]
        switch OAuthScopes.parse(query["scope"]) {
        case .failure(let unknown): return refuse(.invalidScope("unsupported scope: \(unknown)"))
        case .success(let parsed): scope = parsed
        }
        if let refused = OAuthScopes.notAllowed(scope, client: client).first {
            return refuse(.invalidScope("the client may not ask for the scope \(refused)"))
        }
        guard let challenge = query["code_challenge"], let method = query["code_challenge_method"] else {
            return refuse(.invalidRequest("PKCE is required: code_challenge and code_challenge_method (S256)"))
        }
        // S256 only: `plain` would send the verifier itself through the browser.
        guard method.lowercased() == "s256" else {
            return refuse(.invalidRequest("code_challenge_method must be S256"))
        }
        guard (43...128).contains(challenge.count), challenge.allSatisfy(PKCE.challengeCharacters.contains) else {
            return refuse(.invalidRequest("code_challenge must be 43 to 128 base64url characters"))
        }
        let prompt = query["prompt"]
        if let prompt, !prompt.split(separator: " ").allSatisfy({ Self.prompts.contains(String($0)) }) {
            return refuse(.invalidRequest("prompt must be none, login, consent or select_account"))
        }
        var maxAge: Int64?
        if let text = query["max_age"] {
            guard let value = Int64(text), value >= 0 else {
                return refuse(.invalidRequest("max_age must be a number of seconds"))
            }
            maxAge = value
        }
        guard (state?.utf8.count ?? 0) <= 2048, (query["nonce"]?.utf8.count ?? 0) <= 512 else {
            return refuse(.invalidRequest("state or nonce is too long"))
        }
        return .success(
            Self(
                client: client, redirectURI: redirectURI, scope: scope, state: state, nonce: query["nonce"],
                codeChallenge: challenge, acr: acr(query["acr_values"]), maxAge: maxAge, prompt: prompt))
    }

    static let prompts: Set<String> = ["none", "login", "consent", "select_account"]
}

/// An authorization error sent back to the client's redirect URI (RFC 6749 §4.1.2.1).
struct RedirectedError: Error, Sendable, Equatable {
    let redirectURI: String
    let error: OAuthError
    let state: String?
}

/// A request as the consent screen shows it.
struct OAuthAuthorizationDetails: Sendable {
    let authorization: OAuthAuthorizationRow
    let client: OAuthClient
    let accountID: String
    let email: String
    /// Scopes not yet granted (all of them on a first consent).
    let newScopes: [String]
}

/// What a user opening a request gets: its details to decide on, or, when an earlier consent covers it, where the
/// browser goes now.
enum OAuthAuthorizationView: Sendable {
    case details(OAuthAuthorizationDetails)
    case redirect(String)
}

/// What opening a request needs before it can be shown: the user must sign in again (`prompt=login`, `max_age`),
/// or verify a second factor (`acr_values=aal2`).
enum OAuthAuthorizationNeed: Error, Sendable, Equatable {
    case signIn
    case secondFactor
}

/// An exchange that made a session for a client: the request it came from and the session.
struct OAuthExchange: Sendable {
    let authorization: OAuthAuthorizationRow
    let client: OAuthClient
    let issued: IssuedSession
}

/// The provider's authorizations: `/oauth/authorize` keeps a request; the user claims it, sees it and decides
/// (GoTrue's `/oauth/authorizations/{id}` and its consent, or Gatehouse's own page); an approved request gives a code
/// (or lets a device's poll through), which is exchanged once for a session of the client. Consents are remembered
/// per user and client; revoking one ends the client's sessions.
struct OAuthAuthorizations: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let clients: OAuthClients
    let users: UserReader
    let publicURL: String
    /// Typed device codes count against the address, as mailed codes do.
    let throttling: AccountThrottling

    /// How long a request waits for its user, and a device code for its approval.
    static let requestLifetime: TimeInterval = 10 * 60
    /// How long an approved code may wait for its exchange (OAuth 2.1 §4.1.2: short).
    static let codeLifetime: TimeInterval = 60
    /// A device's polling interval, seconds, and what a `slow_down` adds (RFC 8628 §3.5).
    static let deviceInterval: Int64 = 5
    static let slowDownStep: Int64 = 5
    /// The longest a `slow_down` stretches the interval: a device that kept polling fast can still collect its tokens
    /// within the code's life.
    static let slowestInterval: Int64 = 60

    static let disabled = APIError(.notFound, code: .oauthServerDisabled, message: "OAuth 2.1 server is disabled")
    static let notFound = APIError(
        .notFound, code: .oauthAuthorizationNotFound, message: "authorization not found")

    /// Refuses everything while the provider is off.
    func checkEnabled() throws {
        guard settings.oauthServer.enabled else { throw Self.disabled }
    }

    // MARK: The authorization endpoint

    /// `GET /oauth/authorize`: keeps the request and answers where the browser goes: the consent page (the app's,
    /// `--oauth-authorization-path`, or Gatehouse's own) with `authorization_id`, or the client with an error.
    /// Each address starts at most this many requests a minute: every one is a row kept for ten minutes.
    static let authorizeRule = RateLimit(limit: 60, per: 60)

    func authorize(_ query: [String: String], from client: ClientInfo) async throws -> String {
        try checkEnabled()
        try await throttling.limit("oauth-authorize", Self.authorizeRule, client: client)
        let request: AuthorizeRequest
        switch try await AuthorizeRequest.parse(query, find: clients.find) {
        case .failure(let refusal):
            return clientRedirect(
                refusal.redirectURI,
                [
                    ("error", refusal.error.error), ("error_description", refusal.error.description),
                    ("state", refusal.state),
                ])
        case .success(let parsed): request = parsed
        }
        let now = clock.now
        let row = OAuthAuthorizationRow(
            id: Secrets.token(), kind: .code, clientID: request.client.id, accountID: nil,
            redirectURI: request.redirectURI, scope: OAuthScopes.text(request.scope), state: request.state,
            nonce: request.nonce, codeChallenge: request.codeChallenge, acr: request.acr, maxAge: request.maxAge,
            prompt: request.prompt, status: .pending, userCode: nil, createdAt: now.epochMilliseconds,
            expiresAt: now.addingTimeInterval(Self.requestLifetime).epochMilliseconds)
        try await OAuthAuthorizationRepository(db: store.database).insert(row)
        return consentPage(row.id)
    }

    /// The consent page for a request: the app's own when configured (a path joined to the site URL), else
    /// Gatehouse's `/account/authorize`.
    func consentPage(_ id: String) -> String {
        let query = "?authorization_id=" + id
        guard let path = settings.oauthServer.authorizationPath else { return publicURL + "/account/authorize" + query }
        let site = settings.siteURL ?? publicURL
        return (site.hasSuffix("/") ? String(site.dropLast()) : site) + path + query
    }

    /// The client's redirect URI with `params` added to its query (RFC 6749 §3.1.2: its own query is kept), and the
    /// issuer (RFC 9207), which lets a client that talks to several providers tell who answered.
    func clientRedirect(_ redirectURI: String, _ params: [(String, String?)]) -> String {
        Self.location(redirectURI, params + [("iss", sessions.issuer)])
    }

    static func location(_ refusal: RedirectedError) -> String {
        location(
            refusal.redirectURI,
            [
                ("error", refusal.error.error), ("error_description", refusal.error.description),
                ("state", refusal.state),
            ])
    }

    static func location(_ base: String, _ params: [(String, String?)]) -> String {
        var components = URLComponents(string: base) ?? URLComponents()
        var items = components.queryItems ?? []
        for (name, value) in params { if let value { items.append(URLQueryItem(name: name, value: value)) } }
        components.queryItems = items
        // `+` is a space in a form-encoded query; URLComponents leaves it bare.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? base
    }

    // MARK: Opening and deciding

    /// Claims request `id` for the caller and answers what to show: its details, or (an earlier consent covers
    /// every scope, and neither `prompt=consent` nor the company scope asks again) the code's redirect at once.
    /// Throws `OAuthAuthorizationNeed` when the caller must first sign in again or verify a second factor.
    func open(_ id: String, by caller: Caller) async throws -> OAuthAuthorizationView {
        try checkEnabled()
        let (row, client) = try await pending(id, by: caller)
        let prompts = Set((row.prompt ?? "").split(separator: " ").map(String.init))
        do {
            try Self.check(row, identity: caller.identity, now: clock.now)
        } catch let need as OAuthAuthorizationNeed where prompts.contains("none") {
            // `prompt=none` shows nothing: the client hears what would have been asked (OpenID Connect Core §3.1.2.6).
            let error = need == .signIn ? "login_required" : "interaction_required"
            try await refuseSilently(row, accountID: caller.accountID)
            return .redirect(
                clientRedirect(
                    row.redirectURI ?? "",
                    [("error", error), ("error_description", "The user must sign in or verify"), ("state", row.state)]))
        }
        let repository = OAuthAuthorizationRepository(db: store.database)
        guard try await repository.claim(id, accountID: caller.accountID) else { throw Self.notFound }
        let requested = OAuthScopes.list(row.scope)
        let granted = try await repository.consent(accountID: caller.accountID, clientID: client.id) ?? []
        if row.kind == .code, OAuthScopes.covers(granted: granted, requested: requested), !prompts.contains("consent"),
            !prompts.contains("select_account"), !requested.contains(OAuthScopes.company)
        {
            return .redirect(try await decide(id, approve: true, by: caller))
        }
        if prompts.contains("none") {
            try await refuseSilently(row, accountID: caller.accountID)
            return .redirect(
                clientRedirect(
                    row.redirectURI ?? "",
                    [
                        ("error", "consent_required"), ("error_description", "The user has not granted this client"),
                        ("state", row.state),
                    ]))
        }
        let email = try await users.user(id: caller.accountID)?.email ?? caller.identity.email
        return .details(
            OAuthAuthorizationDetails(
                authorization: row, client: client, accountID: caller.accountID, email: email,
                newScopes: requested.filter { !granted.contains($0) }))
    }

    /// For a browser with no session: where a `prompt=none` request goes instead of a sign-in page (the client hears
    /// `login_required`, OpenID Connect Core §3.1.2.6); nil for any other request.
    func loginRequired(_ id: String) async throws -> String? {
        try checkEnabled()
        guard let row = try await OAuthAuthorizationRepository(db: store.database).find(id: id),
            row.status == .pending, row.expiresAt > clock.now.epochMilliseconds,
            (row.prompt ?? "").split(separator: " ").contains("none"), let redirectURI = row.redirectURI
        else { return nil }
        return clientRedirect(
            redirectURI,
            [("error", "login_required"), ("error_description", "The user is not signed in"), ("state", row.state)])
    }

    /// Ends a `prompt=none` request that cannot be answered without a page.
    private func refuseSilently(_ row: OAuthAuthorizationRow, accountID: String) async throws {
        var refused = row
        refused.accountID = accountID
        refused.status = .denied
        _ = try await OAuthAuthorizationRepository(db: store.database).decide(refused, codeHash: nil)
    }

    /// The pending request `id` the caller may see: nobody's yet, or its own, and not expired.
    private func pending(_ id: String, by caller: Caller) async throws -> (OAuthAuthorizationRow, OAuthClient) {
        guard caller.identity.oauthClientID == nil else { throw APIError.accountSessionRequired }
        let repository = OAuthAuthorizationRepository(db: store.database)
        guard let row = try await repository.find(id: id), row.status == .pending,
            row.expiresAt > clock.now.epochMilliseconds, row.accountID == nil || row.accountID == caller.accountID,
            let client = try await clients.find(row.clientID)
        else { throw Self.notFound }
        return (row, client)
    }

    /// The rule, pure: whether the caller's session is fresh and strong enough for the request. `prompt=login` wants
    /// a sign-in after the request was made; `max_age` one at most that old; `acr_values=aal2` a verified second
    /// factor (or a passkey).
    /// `amr`, when given, is how the account session behind a company login signed in (the login's own is not a
    /// sign-in).
    static func check(
        _ row: OAuthAuthorizationRow, identity: Identity, now: Date, amr given: [AuthenticationMethod]? = nil
    ) throws {
        let amr = given ?? identity.claims.amr
        let authTime = amr.map(\.timestamp).max() ?? identity.claims.iat
        if (row.prompt ?? "").split(separator: " ").contains("login"), authTime * 1000 < row.createdAt - 1000 {
            throw OAuthAuthorizationNeed.signIn
        }
        // Measured from when the request was made, so the minutes spent reading the consent page do not count.
        if let maxAge = row.maxAge, authTime < row.createdAt / 1000 - maxAge { throw OAuthAuthorizationNeed.signIn }
        if row.acr == "aal2", identity.aal != .aal2, !amr.contains(where: { $0.method == "passkey" }) {
            throw OAuthAuthorizationNeed.secondFactor
        }
    }

    /// Approves or denies request `id`, answering where the browser goes: the client's redirect URI with the code (or
    /// `error=access_denied`); for a device request, nil (the device's poll hears it). Under the company scope the
    /// approving session must be logged in to the chosen company (a company session: its login was passed).
    func decide(_ id: String, approve: Bool, by caller: Caller) async throws -> String {
        try checkEnabled()
        let (found, client) = try await pending(id, by: caller)
        let now = clock.now
        // A company login's session (the company scope) answers for its account session's sign-in.
        var amr = caller.identity.claims.amr
        if let parent = caller.identity.parentSessionID, let live = try await sessions.liveSession(parent, now: now) {
            amr = live.amr
        }
        try Self.check(found, identity: caller.identity, now: now, amr: amr)
        var row = found
        let scope = OAuthScopes.list(row.scope)
        row.accountID = caller.accountID
        row.status = approve ? .approved : .denied
        if approve, scope.contains(OAuthScopes.company) {
            guard let companyID = caller.identity.companyID else {
                throw APIError(
                    .forbidden, code: .companyContextRequired,
                    message: "The company scope needs a session logged in to the chosen company")
            }
            row.companyID = companyID
            row.username = caller.identity.claims.username
        }
        row.authTime = amr.map(\.timestamp).max() ?? caller.identity.claims.iat
        row.aal = caller.identity.aal.rawValue
        row.amr = String(decoding: try JSONEncoder().encode(amr), as: UTF8.self)
        let code = approve && row.kind == .code ? Secrets.token() : nil
        if approve { row.expiresAt = now.addingTimeInterval(Self.codeLifetime).epochMilliseconds }
        let event = caller.client.event(
            approve ? .oauthConsentGranted : .oauthConsentDenied, accountID: caller.accountID,
            detail: ["client_id": client.id, "scope": row.scope])
        try await store.transaction { [row] db in
            let repository = OAuthAuthorizationRepository(db: db)
            guard try await repository.decide(row, codeHash: code.map(Secrets.digest)) else { throw Self.notFound }
            if approve {
                let granted = try await repository.consent(accountID: caller.accountID, clientID: client.id) ?? []
                try await repository.saveConsent(
                    accountID: caller.accountID, clientID: client.id, scope: OAuthScopes.merged(granted, scope),
                    at: now.epochMilliseconds)
            }
            try await trail.within(db).record(event)
        }
        guard row.kind == .code, let redirectURI = row.redirectURI else { return "" }
        if let code { return clientRedirect(redirectURI, [("code", code), ("state", row.state)]) }
        return clientRedirect(
            redirectURI,
            [("error", "access_denied"), ("error_description", "User denied the request"), ("state", row.state)])
    }

    // MARK: Exchanging

    /// Exchanges an approved request's code for a session of `client`, once. The redirect URI must be the request's
    /// and the verifier its challenge's; a code presented again ends the session its first exchange made (RFC 9700
    /// §4.2.1) and is refused.
    func exchange(code: String, client: OAuthClient, redirectURI: String?, verifier: String?, from info: ClientInfo)
        async throws -> Result<OAuthExchange, OAuthError>
    {
        guard !code.isEmpty else { return .failure(.invalidRequest("code is required")) }
        guard let verifier, !verifier.isEmpty else { return .failure(.invalidRequest("code_verifier is required")) }
        let repository = OAuthAuthorizationRepository(db: store.database)
        guard let row = try await repository.find(codeHash: Secrets.digest(code)), row.kind == .code else {
            return .failure(.invalidGrant("Invalid authorization code"))
        }
        if row.status == .exchanged {
            try await endReplayedSession(row, client: client, info: info)
            return .failure(.invalidGrant("Authorization code was already used"))
        }
        guard row.status == .approved, row.expiresAt > clock.now.epochMilliseconds else {
            return .failure(.invalidGrant("Authorization code has expired"))
        }
        guard row.clientID == client.id else {
            return .failure(.invalidGrant("Authorization code was not issued for this client"))
        }
        guard redirectURI == row.redirectURI else { return .failure(.invalidGrant("Invalid redirect_uri")) }
        guard let challenge = row.codeChallenge, PKCE.verifies(verifier, challenge: challenge) else {
            return .failure(.invalidGrant("PKCE verification failed"))
        }
        return try await issue(row, client: client, grant: "authorization_code", from: info)
    }

    /// Starts the client's session for an approved request and marks the request exchanged, in one transaction: of
    /// two exchanges at once, one wins and the other is refused.
    private func issue(_ row: OAuthAuthorizationRow, client: OAuthClient, grant: String, from info: ClientInfo)
        async throws -> Result<OAuthExchange, OAuthError>
    {
        guard let accountID = row.accountID else { return .failure(.invalidGrant("Authorization has no user")) }
        let amr =
            (row.amr.flatMap { try? JSONDecoder().decode([AuthenticationMethod].self, from: Data($0.utf8)) }) ?? []
        // Under the company scope the session keeps the company's own timeouts (`SessionService.start` caps them by
        // the server's), as the member's company login does.
        var company: CompanyScope?
        if let companyID = row.companyID {
            guard let record = try await CompanyDirectory(db: store.database).company(companyID) else {
                return .failure(.invalidGrant("The company no longer exists"))
            }
            company = CompanyScope(
                companyID: companyID, username: row.username, idleTimeout: record.policy.sessionIdleTimeout,
                lifetime: record.policy.sessionLifetime)
        }
        let aal = AssuranceLevel(rawValue: row.aal ?? "") ?? .aal1
        let event = info.event(
            .oauthTokenIssued, accountID: accountID, detail: ["client_id": client.id, "grant": grant])
        do {
            let issued = try await store.transaction { [company] db in
                try await trail.within(db).record(event)
                let issued = try await sessions.start(
                    accountID: accountID, method: "oauth", ip: info.ip, userAgent: info.userAgent, db: db,
                    company: company, parentAssurance: (aal, nil), oauth: (client.id, row.scope),
                    amr: amr.isEmpty ? nil : amr)
                guard try await OAuthAuthorizationRepository(db: db).markExchanged(row.id, sessionID: issued.sessionID)
                else { throw Self.notFound }
                return issued
            }
            return .success(OAuthExchange(authorization: row, client: client, issued: issued))
        } catch let error as APIError where error.code == ErrorCode.oauthAuthorizationNotFound.rawValue {
            // Another exchange of the same code won the race: as for any replay, the session it made ends.
            if let winner = try await OAuthAuthorizationRepository(db: store.database).find(id: row.id),
                winner.status == .exchanged
            {
                try await endReplayedSession(winner, client: client, info: info)
            }
            return .failure(.invalidGrant("Authorization code was already used"))
        }
    }

    /// A replayed code: whoever holds it is not the client that exchanged it, or the client was tricked; the
    /// session it made ends (RFC 9700 §4.2.1).
    private func endReplayedSession(_ row: OAuthAuthorizationRow, client: OAuthClient, info: ClientInfo) async throws {
        guard let sessionID = row.sessionID, let accountID = row.accountID else { return }
        let event = info.event(
            .oauthCodeReused, accountID: accountID, detail: ["client_id": client.id, "session": sessionID])
        try await store.transaction { db in
            try await sessions.revoke(accountID: accountID, current: sessionID, scope: .local, db: db)
            try await trail.within(db).record(event)
        }
    }

    // MARK: Devices (RFC 8628)

    /// A device's request: its device code (kept as a digest) and the code its user types on the device page.
    struct DeviceStart: Sendable {
        let deviceCode: String
        let userCode: String
        let expiresIn: Int
        let interval: Int64
    }

    /// Starts a device's request for `scope` (already checked against the client).
    func startDevice(client: OAuthClient, scope: [String]) async throws -> DeviceStart {
        try checkEnabled()
        let now = clock.now
        let deviceCode = Secrets.token()
        let userCode = DeviceUserCode.make()
        let row = OAuthAuthorizationRow(
            id: Secrets.token(), kind: .device, clientID: client.id, accountID: nil, redirectURI: nil,
            scope: OAuthScopes.text(scope), state: nil, nonce: nil, codeChallenge: nil, acr: nil, maxAge: nil,
            prompt: nil, status: .pending, userCode: userCode, pollInterval: Self.deviceInterval,
            polledAt: nil, createdAt: now.epochMilliseconds,
            expiresAt: now.addingTimeInterval(Self.requestLifetime).epochMilliseconds)
        try await OAuthAuthorizationRepository(db: store.database).insert(
            row, deviceCodeHash: Secrets.digest(deviceCode))
        return DeviceStart(
            deviceCode: deviceCode, userCode: DeviceUserCode.display(userCode),
            expiresIn: Int(Self.requestLifetime), interval: Self.deviceInterval)
    }

    /// Where a user types a device's code.
    var verificationURI: String { publicURL + "/account/device" }

    /// Counts one typed device code against the address (a guess at someone else's device).
    func limitDeviceCodes(_ client: ClientInfo) async throws {
        try await throttling.limit("device-code", settings.limits.verificationsPerIP, client: client)
    }

    /// The pending device request a typed code names, or nil.
    func deviceRequest(userCode: String) async throws -> String? {
        try checkEnabled()
        guard let code = DeviceUserCode.normalize(userCode),
            let row = try await OAuthAuthorizationRepository(db: store.database).find(userCode: code),
            row.kind == .device, row.status == .pending, row.expiresAt > clock.now.epochMilliseconds
        else { return nil }
        return row.id
    }

    /// A device's poll (`grant_type=urn:ietf:params:oauth:grant-type:device_code`): `authorization_pending` until
    /// its user decides, `slow_down` (and five seconds more between polls) when it polls sooner than its interval,
    /// `access_denied`, `expired_token`, or the session once approved.
    func pollDevice(deviceCode: String, client: OAuthClient, from info: ClientInfo) async throws
        -> Result<OAuthExchange, OAuthError>
    {
        guard !deviceCode.isEmpty else { return .failure(.invalidRequest("device_code is required")) }
        let repository = OAuthAuthorizationRepository(db: store.database)
        guard let row = try await repository.find(deviceCodeHash: Secrets.digest(deviceCode)), row.kind == .device,
            row.clientID == client.id
        else { return .failure(.invalidGrant("Invalid device code")) }
        let now = clock.now.epochMilliseconds
        let interval = row.pollInterval ?? Self.deviceInterval
        switch DevicePoll.verdict(
            status: row.status, expiresAt: row.expiresAt, polledAt: row.polledAt, interval: interval, now: now)
        {
        case .slowDown:
            let slower = min(interval + Self.slowDownStep, Self.slowestInterval)
            try await repository.polled(row.id, at: now, interval: slower)
            return .failure(OAuthError("slow_down", "Polling too fast: wait \(slower) s"))
        case .pending:
            try await repository.polled(row.id, at: now, interval: interval)
            return .failure(OAuthError("authorization_pending", "The user has not decided yet"))
        case .denied: return .failure(.accessDenied("The user denied the request"))
        case .expired: return .failure(OAuthError("expired_token", "The device code has expired"))
        case .used: return .failure(.invalidGrant("The device code was already used"))
        case .approved: return try await issue(row, client: client, grant: "device_code", from: info)
        }
    }

    // MARK: Grants

    /// A client a user granted, as `/user/oauth/grants` lists it.
    struct Grant: Sendable {
        let client: OAuthClient
        let scopes: [String]
        let grantedAt: Date
    }

    /// The caller's grants, newest first (clients removed since are left out).
    func grants(of accountID: String) async throws -> [Grant] {
        try checkEnabled()
        let repository = OAuthAuthorizationRepository(db: store.database)
        let consents = try await repository.consents(accountID: accountID)
        let found = try await OAuthClientRepository(db: store.database).find(ids: consents.map(\.clientID))
        return consents.compactMap { consent in
            found[consent.clientID].map {
                Grant(client: $0, scopes: consent.scope, grantedAt: Date(epochMilliseconds: consent.grantedAt))
            }
        }
    }

    /// Revokes the caller's grant to `clientID`: the consent goes and every session of that client for the account
    /// ends (its refresh tokens with it).
    func revokeGrant(clientID raw: String, by caller: Caller) async throws {
        try checkEnabled()
        guard let clientID = Secrets.identifier(raw) else { throw APIError.validation("invalid client_id format") }
        let event = caller.client.event(
            .oauthGrantRevoked, accountID: caller.accountID, detail: ["client_id": clientID])
        try await store.transaction { db in
            let repository = OAuthAuthorizationRepository(db: db)
            guard try await repository.deleteConsent(accountID: caller.accountID, clientID: clientID) else {
                throw APIError(
                    .notFound, code: .oauthConsentNotFound, message: "No active grant found for this client")
            }
            try await repository.denyApproved(clientID: clientID, accountID: caller.accountID)
            try await SessionChanges(db: db).end(.oauthClient(clientID, accountID: caller.accountID), now: clock.now)
            try await trail.within(db).record(event)
        }
    }
}

/// The code a person types for a device (RFC 8628 §6.1): eight letters without vowels (no words, nothing to misread),
/// shown as `BCDF-GHJK`; typed in any case, with or without the dash or spaces.
enum DeviceUserCode {
    static let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")

    static func make() -> String {
        String((0..<8).map { _ in alphabet.randomElement()! })
    }

    static func display(_ code: String) -> String { String(code.prefix(4)) + "-" + String(code.dropFirst(4)) }

    static func normalize(_ typed: String) -> String? {
        let letters = typed.uppercased().filter { $0 != "-" && !$0.isWhitespace }
        guard letters.count == 8, letters.allSatisfy(alphabet.contains) else { return nil }
        return letters
    }
}

/// What a device's poll is answered, pure.
enum DevicePoll: Equatable {
    case pending, slowDown, denied, expired, used, approved

    static func verdict(
        status: OAuthAuthorizationRow.Status, expiresAt: Int64, polledAt: Int64?, interval: Int64, now: Int64
    ) -> DevicePoll {
        switch status {
        case .exchanged: return .used
        case .denied: return .denied
        case .approved, .pending:
            guard expiresAt > now else { return .expired }
            if status == .approved { return .approved }
            if let polledAt, now - polledAt < interval * 1000 { return .slowDown }
            return .pending
        }
    }
}
