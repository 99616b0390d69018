import Foundation
import GatehouseAPI
import SQLKit

/// The token endpoint's answer (RFC 6749 §5.1, GoTrue's keys): an access token, a refresh token when the client is
/// registered for refreshing, the granted scopes, and an id token under `openid`.
struct OAuthTokenAnswer: Encodable, Sendable, Equatable {
    let accessToken: String
    let tokenType = "bearer"
    let expiresIn: Int
    let refreshToken: String?
    let scope: String?
    let idToken: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case scope
        case idToken = "id_token"
    }
}

/// The device authorization answer (RFC 8628 §3.2).
struct OAuthDeviceAnswer: Encodable, Sendable, Equatable {
    let deviceCode: String
    let userCode: String
    let verificationURI: String
    let verificationURIComplete: String
    let expiresIn: Int
    let interval: Int64

    enum CodingKeys: String, CodingKey {
        case deviceCode = "device_code"
        case userCode = "user_code"
        case verificationURI = "verification_uri"
        case verificationURIComplete = "verification_uri_complete"
        case expiresIn = "expires_in"
        case interval
    }
}

/// What `/oauth/userinfo` refused: the bearer token is missing, not an OAuth client's, or its session ended.
struct OAuthInvalidToken: Error, Sendable, Equatable {
    let description: String
}

/// What RP-initiated logout does once its request is checked: where the browser goes afterwards, if anywhere.
enum OAuthLogoutAnswer: Sendable, Equatable {
    case redirect(String)
    case signedOut
}

/// The provider's token side: the token endpoint's four grants, userinfo, revocation (RFC 7009), introspection
/// (RFC 7662), device authorization (RFC 8628) and RP-initiated logout. A client's user tokens are ordinary sessions
/// (`SessionService`) tagged with the client and its scopes; a client credentials token has no session at all.
///
/// Decisions the RFCs leave to the server:
/// - client credentials: the token names the client (`sub` = `client_id`), its audience is the issuer, and it carries
///   no scope: every scope this server knows is about a user, so asking for one is `invalid_scope`. The account API
///   refuses such a token (it has no session and is not for `authenticated`).
/// - introspection answers `active` only for the asking client's own tokens (another's are `{"active": false}`), and
///   only to a confidential client.
/// - revocation takes a refresh token or an access token of the asking client's session and ends that session; any
///   other token is answered 200 and left alone (RFC 7009 §2.2).
struct OAuthTokens: Sendable {
    let oauth: OAuthAuthorizations
    let clients: OAuthClients
    let sessions: SessionService
    let users: UserReader
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail

    var issuer: String { sessions.issuer }
    var keys: SigningKeys { sessions.keys }

    static let deviceGrant = OAuthGrantType.deviceCode.rawValue

    // MARK: Client authentication

    /// The client a request authenticates as (RFC 6749 §2.3): refused `invalid_client` (401) when it names none or
    /// its credentials fail. `confidential` asks for a client that proved a secret.
    func client(authorization: String?, form: [String: String], confidential: Bool = false) async throws -> Result<
        OAuthClient, OAuthError
    > {
        let credentials: OAuthClientCredentials
        switch OAuthClientCredentials.read(authorization: authorization, form: form) {
        case .failure(let refusal): return .failure(refusal)
        case .success(nil): return .failure(.invalidClient("Client authentication required"))
        case .success(let read?): credentials = read
        }
        let result = try await clients.authenticate(credentials)
        if confidential, case .success(let client) = result, client.type != .confidential {
            return .failure(.invalidClient("This endpoint is for confidential clients"))
        }
        return result
    }

    // MARK: The token endpoint

    /// `POST /oauth/token`: authenticates the client, checks it is registered for the grant, and answers the grant.
    func token(form: [String: String], authorization: String?, from info: ClientInfo) async throws -> Result<
        OAuthTokenAnswer, OAuthError
    > {
        try oauth.checkEnabled()
        let client: OAuthClient
        switch try await self.client(authorization: authorization, form: form) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): client = found
        }
        guard let grant = form["grant_type"], !grant.isEmpty else {
            return .failure(.invalidRequest("grant_type is required"))
        }
        guard let known = OAuthGrantType(rawValue: grant) else {
            return .failure(.unsupportedGrantType("Unsupported grant type: \(grant.prefix(100))"))
        }
        guard client.grantTypes.contains(known.rawValue) else {
            return .failure(.unauthorizedClient("Client is not allowed to use grant type: \(grant)"))
        }
        switch known {
        case .authorizationCode:
            // Every code here was asked for with a challenge (PKCE is required): a code without its verifier is a
            // grant that does not verify, `invalid_grant` as for a wrong one.
            if let code = form["code"], !code.isEmpty, (form["code_verifier"] ?? "").isEmpty {
                return .failure(.invalidGrant("PKCE verification failed: code_verifier is required"))
            }
            let exchanged = try await oauth.exchange(
                code: form["code"] ?? "", client: client, redirectURI: form["redirect_uri"],
                verifier: form["code_verifier"], from: info)
            return try await answer(exchanged, client: client)
        case .deviceCode:
            let polled = try await oauth.pollDevice(deviceCode: form["device_code"] ?? "", client: client, from: info)
            return try await answer(polled, client: client)
        case .refreshToken:
            return try await refresh(form["refresh_token"] ?? "", client: client, from: info)
        case .clientCredentials:
            return try await clientCredentials(client, scope: form["scope"], from: info)
        }
    }

    private func answer(_ exchanged: Result<OAuthExchange, OAuthError>, client: OAuthClient) async throws -> Result<
        OAuthTokenAnswer, OAuthError
    > {
        switch exchanged {
        case .failure(let refusal): return .failure(refusal)
        case .success(let exchange):
            let row = exchange.authorization
            return try await answer(
                exchange.issued, client: client, nonce: row.nonce,
                authTime: row.authTime ?? exchange.issued.amr.map(\.timestamp).max())
        }
    }

    /// The refresh token grant: rotation as for any session, only for the client's own sessions. A replayed token
    /// ends its session (`SessionService.refresh`); every refusal is `invalid_grant`, but a disabled account.
    private func refresh(_ token: String, client: OAuthClient, from info: ClientInfo) async throws -> Result<
        OAuthTokenAnswer, OAuthError
    > {
        guard !token.isEmpty else { return .failure(.invalidRequest("refresh_token is required")) }
        let issued: IssuedSession
        do {
            issued = try await sessions.refresh(token, oauthClient: client.id) { issued in
                info.event(
                    .tokenRefreshed, accountID: issued.accountID,
                    detail: ["session": issued.sessionID, "client_id": client.id])
            }
        } catch SessionService.RefreshFailure.banned {
            return .failure(.accessDenied("User is not permitted to access this resource."))
        } catch SessionService.RefreshFailure.alreadyUsed(let sessionID, let accountID) {
            await trail.record(
                info.event(
                    .refreshTokenReused, accountID: accountID,
                    detail: ["session": sessionID, "outcome": "session revoked", "client_id": client.id]))
            return .failure(.invalidGrant("Refresh token is invalid or expired."))
        } catch is SessionService.RefreshFailure {
            return .failure(.invalidGrant("Refresh token is invalid or expired."))
        }
        return try await answer(issued, client: client, nonce: nil, authTime: issued.amr.map(\.timestamp).max())
    }

    /// Signs the session's access token and, under `openid`, its id token; a company session's token carries the
    /// membership as it is now (a member removed since gets `invalid_grant`).
    private func answer(_ issued: IssuedSession, client: OAuthClient, nonce: String?, authTime: Int64?) async throws
        -> Result<OAuthTokenAnswer, OAuthError>
    {
        // From the session cache, with its token claims sized once (as the account's refresh reads it).
        guard let cached = try await users.cached(id: issued.accountID) else {
            return .failure(.invalidGrant("User not found"))
        }
        let user = cached.user
        var membership: Membership?
        if let companyID = issued.companyID {
            membership = try await CompanyDirectory(db: store.database).membership(
                companyID, accountID: issued.accountID)
            guard membership != nil else { return .failure(.invalidGrant("The user left the company")) }
        }
        let access = try await sessions.accessToken(
            for: issued, user: user, metadata: cached.metadataClaims, membership: membership)
        let scope = OAuthScopes.list(issued.oauthScope)
        var idToken: String?
        if scope.contains(OAuthScopes.openID) {
            var claims = OAuthIDTokenClaims(
                iss: issuer, sub: issued.accountID, aud: client.id, exp: access.expiresAt,
                iat: Int64(clock.now.timeIntervalSince1970), authTime: authTime, nonce: nonce, acr: issued.aal.rawValue,
                amr: issued.amr.map(\.method), sid: issued.sessionID, azp: client.id,
                atHash: OAuthIDTokenClaims.accessTokenHash(access.token))
            claims.add(UserClaims(user: user, scope: scope, membership: membership))
            idToken = try await keys.sign(claims)
        }
        let refreshes = client.grantTypes.contains(OAuthGrantType.refreshToken.rawValue)
        return .success(
            OAuthTokenAnswer(
                accessToken: access.token, expiresIn: access.lifetime,
                refreshToken: refreshes ? issued.refreshToken : nil,
                scope: issued.oauthScope, idToken: idToken))
    }

    /// The client credentials grant (confidential clients only): a token for the client itself, no refresh token.
    private func clientCredentials(_ client: OAuthClient, scope: String?, from info: ClientInfo) async throws
        -> Result<OAuthTokenAnswer, OAuthError>
    {
        guard client.type == .confidential else {
            return .failure(.unauthorizedClient("Only confidential clients may use client_credentials"))
        }
        if let asked = OAuthScopes.list(scope).first {
            return .failure(.invalidScope("scope \(asked.prefix(64)) is about a user: a client's own token has none"))
        }
        let now = Int64(clock.now.timeIntervalSince1970)
        let lifetime = Int(sessions.settings.accessTokenLifetime)
        let claims = ClientTokenClaims(
            iss: issuer, sub: client.id, aud: issuer, exp: now + Int64(lifetime), iat: now, nbf: now,
            jti: Secrets.identifier(), clientID: client.id)
        let token = try await keys.sign(claims)
        await trail.record(
            info.event(
                .oauthTokenIssued, accountID: nil, detail: ["client_id": client.id, "grant": "client_credentials"]))
        return .success(
            OAuthTokenAnswer(accessToken: token, expiresIn: lifetime, refreshToken: nil, scope: nil, idToken: nil))
    }

    // MARK: Device authorization (RFC 8628)

    /// `POST /oauth/device_authorization`: a device code and the code its user types, for a client registered for
    /// the device grant and scopes it may ask for.
    func deviceAuthorization(form: [String: String], authorization: String?) async throws -> Result<
        OAuthDeviceAnswer, OAuthError
    > {
        try oauth.checkEnabled()
        let client: OAuthClient
        switch try await self.client(authorization: authorization, form: form) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): client = found
        }
        guard client.grantTypes.contains(Self.deviceGrant) else {
            return .failure(.unauthorizedClient("Client is not allowed to use grant type: \(Self.deviceGrant)"))
        }
        let scope: [String]
        switch OAuthScopes.parse(form["scope"]) {
        case .failure(let unknown):
            return .failure(.invalidScope("unsupported scope: \(unknown.description.prefix(64))"))
        case .success(let parsed): scope = parsed
        }
        if let refused = OAuthScopes.notAllowed(scope, client: client).first {
            return .failure(.invalidScope("the client may not ask for the scope \(refused)"))
        }
        let start = try await oauth.startDevice(client: client, scope: scope)
        let complete = OAuthAuthorizations.location(oauth.verificationURI, [("user_code", start.userCode)])
        return .success(
            OAuthDeviceAnswer(
                deviceCode: start.deviceCode, userCode: start.userCode, verificationURI: oauth.verificationURI,
                verificationURIComplete: complete, expiresIn: start.expiresIn, interval: start.interval))
    }

    // MARK: Userinfo

    /// `GET|POST /oauth/userinfo`: `sub` and what the session's scopes allow, for an OAuth client's live token.
    func userinfo(bearer token: String?) async throws -> Result<JSONFields, OAuthInvalidToken> {
        try oauth.checkEnabled()
        guard let token, !token.isEmpty else {
            return .failure(OAuthInvalidToken(description: "Bearer token required"))
        }
        let identity: Identity
        do {
            identity = try await sessions.identify(bearer: token)
        } catch {
            return .failure(OAuthInvalidToken(description: "The access token is invalid or its session ended"))
        }
        guard identity.oauthClientID != nil else {
            return .failure(OAuthInvalidToken(description: "Not an OAuth client's access token"))
        }
        guard let user = try await users.user(id: identity.accountID) else {
            return .failure(OAuthInvalidToken(description: "The user no longer exists"))
        }
        let scope = OAuthScopes.list(identity.claims.scope)
        var membership: Membership?
        if let companyID = identity.companyID, scope.contains(OAuthScopes.company) {
            membership = try await CompanyDirectory(db: store.database).membership(
                companyID, accountID: identity.accountID)
        }
        return .success(UserClaims(user: user, scope: scope, membership: membership).userinfo(sub: identity.accountID))
    }

    // MARK: Revocation (RFC 7009)

    /// `POST /oauth/revoke`: a refresh or access token of the client's own session ends that session. Whatever else
    /// it is given (unknown, expired, another client's, a client credentials token, which has no session) is
    /// answered the same, without effect.
    func revoke(form: [String: String], authorization: String?, from info: ClientInfo) async throws -> OAuthError? {
        try oauth.checkEnabled()
        let client: OAuthClient
        switch try await self.client(authorization: authorization, form: form) {
        case .failure(let refusal): return refusal
        case .success(let found): client = found
        }
        guard let token = form["token"], !token.isEmpty else { return .invalidRequest("token is required") }
        guard let (accountID, sessionID) = try await session(of: token, client: client, hint: form["token_type_hint"])
        else { return nil }
        try await store.transaction { [sessions, trail] db in
            try await sessions.revoke(accountID: accountID, current: sessionID, scope: .local, db: db)
            try await trail.within(db).record(
                info.event(
                    .sessionRevoked, accountID: accountID,
                    detail: ["session": sessionID, "client_id": client.id, "by": "oauth_revoke"]))
        }
        return nil
    }

    /// The session a token belongs to when it is the client's: an access token by its signature and claims (also an
    /// expired one), a refresh token by its row (also one rotated since). The hint only says which to try first.
    private func session(of token: String, client: OAuthClient, hint: String?) async throws -> (String, String)? {
        func access() async -> (String, String)? {
            guard let claims = try? await keys.verify(token), claims.iss == issuer, claims.clientID == client.id
            else { return nil }
            return (claims.sub, claims.sessionID)
        }
        func refresh() async throws -> (String, String)? {
            guard token.count < 200, !token.contains("."), let found = try await sessions.refreshTokens.find(token),
                found.session.oauthClientID == client.id
            else { return nil }
            return (found.session.accountID, found.token.sessionID)
        }
        if hint == "access_token", let found = await access() { return found }
        if let found = try await refresh() { return found }
        return await access()
    }

    // MARK: Introspection (RFC 7662)

    /// `POST /oauth/introspect` for a confidential client: what a live token of its own says, else only
    /// `{"active": false}`.
    func introspect(form: [String: String], authorization: String?) async throws -> Result<JSONFields, OAuthError> {
        try oauth.checkEnabled()
        let client: OAuthClient
        switch try await self.client(authorization: authorization, form: form, confidential: true) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): client = found
        }
        guard let token = form["token"], !token.isEmpty else { return .failure(.invalidRequest("token is required")) }
        let inactive: JSONFields = ["active": .bool(false)]
        if token.contains(".") {
            if let identity = try? await sessions.identify(bearer: token) {
                guard identity.oauthClientID == client.id else { return .success(inactive) }
                let claims = identity.claims
                return .success(
                    active(
                        scope: claims.scope, client: client.id, sub: claims.sub, exp: claims.exp, iat: claims.iat,
                        aud: claims.aud, sid: claims.sessionID, tokenType: "Bearer"))
            }
            guard let claims = try? await keys.verify(token, as: ClientTokenClaims.self), claims.iss == issuer,
                claims.clientID == client.id, claims.sub == client.id,
                claims.exp > Int64(clock.now.timeIntervalSince1970)
            else { return .success(inactive) }
            return .success(
                active(
                    scope: claims.scope, client: client.id, sub: claims.sub, exp: claims.exp, iat: claims.iat,
                    aud: claims.aud, sid: nil, tokenType: "Bearer"))
        }
        guard token.count < 200, let found = try await sessions.refreshTokens.find(token),
            found.token.rotatedAt == nil, found.session.oauthClientID == client.id,
            let live = sessions.liveSession(found.session, now: clock.now)
        else { return .success(inactive) }
        return .success(
            active(
                scope: live.oauthScope, client: client.id, sub: live.accountID, exp: live.endsAt / 1000, iat: nil,
                aud: client.id, sid: found.token.sessionID, tokenType: nil))
    }

    private func active(
        scope: String?, client: String, sub: String, exp: Int64, iat: Int64?, aud: String, sid: String?,
        tokenType: String?
    ) -> JSONFields {
        var fields: JSONFields = [
            "active": .bool(true), "client_id": .string(client), "sub": .string(sub), "exp": .int(exp),
            "iss": .string(issuer), "aud": .string(aud),
        ]
        if let scope { fields["scope"] = .string(scope) }
        if let iat { fields["iat"] = .int(iat) }
        if let sid { fields["sid"] = .string(sid) }
        if let tokenType { fields["token_type"] = .string(tokenType) }
        return fields
    }

    // MARK: RP-initiated logout

    /// `GET /oauth/logout` (OpenID Connect RP-Initiated Logout 1.0): ends the session the id token hint names (an
    /// expired hint is fine; its signature is not optional) and answers where the browser goes: the client's
    /// `post_logout_redirect_uri` (one of its redirect URIs, exactly) with `state`, or a signed-out answer.
    func logout(query: [String: String], from info: ClientInfo) async throws -> Result<OAuthLogoutAnswer, OAuthError> {
        try oauth.checkEnabled()
        var hint: OAuthIDTokenClaims?
        if let text = query["id_token_hint"], !text.isEmpty {
            guard let claims = try? await keys.verify(text, as: OAuthIDTokenClaims.self), claims.iss == issuer else {
                return .failure(.invalidRequest("id_token_hint is not an id token of this issuer"))
            }
            hint = claims
        }
        if let named = query["client_id"], let hint, named.lowercased() != hint.aud {
            return .failure(.invalidRequest("client_id differs from the id_token_hint's audience"))
        }
        let clientID = hint?.aud ?? query["client_id"]
        var redirect: String?
        if let uri = query["post_logout_redirect_uri"], !uri.isEmpty {
            // Only with an id token the client was given: without one, anyone's registered URI (dynamic registration)
            // would make this an open redirect.
            guard hint != nil else {
                return .failure(.invalidRequest("post_logout_redirect_uri needs an id_token_hint"))
            }
            guard let clientID, let client = try await clients.find(clientID), client.redirectURIs.contains(uri) else {
                return .failure(.invalidRequest("post_logout_redirect_uri is not one of the client's redirect URIs"))
            }
            redirect = OAuthAuthorizations.location(uri, [("state", query["state"])])
        }
        if let hint, let sessionID = hint.sid,
            let live = try await sessions.liveSession(sessionID, now: clock.now), live.accountID == hint.sub,
            live.oauthClientID == hint.aud
        {
            try await store.transaction { [sessions, trail] db in
                try await sessions.revoke(accountID: hint.sub, current: sessionID, scope: .local, db: db)
                try await trail.within(db).record(
                    info.event(
                        .loggedOut, accountID: hint.sub,
                        detail: ["scope": "local", "session": sessionID, "client_id": hint.aud]))
            }
        }
        return .success(redirect.map(OAuthLogoutAnswer.redirect) ?? .signedOut)
    }
}
