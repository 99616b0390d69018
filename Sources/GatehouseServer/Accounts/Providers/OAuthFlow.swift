import Foundation
import GatehouseAPI

/// GoTrue's browser redirect flow through an upstream provider (`custom:<slug>`): `GET /auth/v1/authorize` sends the
/// browser to the provider, the provider sends it back to `/auth/v1/callback`, and the callback sends it on to the
/// app with `?code=` (the app's PKCE, exchanged by `grant_type=pkce`) or the session in the fragment (implicit).
/// Linking (`GET /auth/v1/user/identities/authorize`) and the account page take the same trip.
///
/// GoTrue's state lives 300 s. Ours is also single use, and bound to the browser that started it: a cookie
/// (`gh_oauth_browser`, HttpOnly, SameSite=Lax, on /auth/v1) whose digest the trip keeps; a callback from any other
/// browser is refused, so a victim cannot be made to finish an attacker's sign-in. When the URL is handed to an app
/// (`skip_http_redirect`), it points at `/auth/v1/authorize/continue`, which binds the first browser that opens it.
struct OAuthFlow: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let box: SecretBox
    let keys: CustomProviderKeys
    let external: ExternalSignIn
    let sessions: SessionService
    let users: UserReader
    let trail: AuditTrail
    let throttling: AccountThrottling
    let mail: AccountMail
    /// Companies' OIDC providers (`sso:<id>`); nil where single sign-on is not wired (tests of the flow alone).
    var companyProviders: (any CompanyIdentityProviders)? = nil

    static let lifetime: TimeInterval = 300
    static let browserCookie = "gh_oauth_browser"

    static func context(id: String) -> String { "oauth-state:\(id)" }

    /// What the app asked for in `/authorize`'s query.
    struct Request: Sendable {
        var provider: String
        var redirectTo: String?
        var scopes: [String] = []
        var codeChallenge: String?
        var codeChallengeMethod: String?
        /// Parameters passed on to the provider (GoTrue's `queryParams`), the flow's own excepted.
        var parameters: [(String, String)] = []
        var skipHTTPRedirect = false
    }

    /// Where the browser goes next: the provider, or (handed to an app) the continue URL.
    enum Departure: Sendable {
        /// 302 to `location`, the browser's cookie set.
        case redirect(location: String, cookie: String)
        /// 200 `{"url"}`.
        case url(String)
    }

    /// Where the trip ends: the app (`redirect_to`) or the account page that started a link.
    enum Return: String, Sendable { case app, account }

    /// Where the browser goes when the trip is over.
    enum Landing: Sendable {
        /// To the app (or the site URL), the outcome in the query or the fragment.
        case app(LinkRedirect)
        /// Back to the account page that started a link, with one of the notices it knows.
        case accountPage(notice: String)
    }

    /// The nonce and PKCE verifier sent upstream, sealed in the trip's row, and (for the continue URL) the scopes
    /// and parameters the app asked for.
    private struct Sealed: Codable {
        let nonce: String?
        let verifier: String?
        var scopes: [String] = []
        var parameters: [[String]] = []
    }

    /// Starts a trip: the provider checked, the app's PKCE challenge and redirect checked, the row written.
    /// `linking` is the account an identity is linked to; `browser` the cookie the browser already carries.
    func start(
        _ request: Request, linking: String? = nil, returnsTo: Return = .app, browser: String?, client: ClientInfo,
        secureCookie: Bool
    ) async throws -> Departure {
        try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
        if linking != nil, !settings.manualLinking { throw ExternalSignIn.manualLinkingDisabled }
        if linking != nil, request.provider.hasPrefix("sso:") {
            throw APIError.validation("A company's single sign-on identity is never linked to another account")
        }
        let upstream = try await self.upstream(request.provider)
        let challenge = try PKCE.challenge(request.codeChallenge, method: request.codeChallengeMethod)
        let target =
            returnsTo == .account ? accountPage : mail.redirectTarget(request.redirectTo)
        let now = clock.now
        let id = Secrets.identifier()
        let state = Secrets.token()
        let nonce = upstream.isOIDC ? Secrets.token() : nil
        let verifier = upstream.settings.pkceEnabled ? Secrets.token() : nil
        let browser = browser ?? Secrets.token()
        let continueToken = request.skipHTTPRedirect ? Secrets.token() : nil
        let sealed = try box.seal(
            String(
                decoding: try JSONEncoder().encode(
                    Sealed(
                        nonce: nonce, verifier: verifier, scopes: request.scopes,
                        parameters: request.parameters.map { [$0.0, $0.1] })), as: UTF8.self),
            context: Self.context(id: id))
        try await OAuthStateRepository(db: store.database).insert(
            OAuthStateRecord(
                id: id, stateHash: Secrets.digest(state), provider: request.provider, redirectTo: target,
                codeChallenge: challenge, linkAccountID: linking, returnsTo: returnsTo.rawValue,
                browserHash: continueToken == nil ? Secrets.digest(browser) : nil,
                continueHash: continueToken.map(Secrets.digest), sealed: sealed,
                createdAt: now.epochMilliseconds, expiresAt: now.addingTimeInterval(Self.lifetime).epochMilliseconds))
        if let continueToken {
            var components = URLComponents(string: mail.publicURL + "/auth/v1/authorize/continue")
            components?.queryItems = [URLQueryItem(name: "flow", value: continueToken)]
            return .url(components?.string ?? mail.publicURL)
        }
        let location = upstream.authorizationURL(
            state: state, redirectURI: callbackURL, nonce: nonce.map(IDTokenRules.hexSHA256),
            challenge: verifier.map(PKCE.s256), scopes: request.scopes, parameters: request.parameters)
        return .redirect(location: location, cookie: Self.cookie(browser, secure: secureCookie))
    }

    /// `/auth/v1/authorize/continue`: binds the trip to the first browser that opens its URL, and sends it on to the
    /// provider. A second opening, or an expired trip, is refused.
    func resume(flow token: String, browser: String?, secureCookie: Bool) async throws -> Departure {
        let browser = browser ?? Secrets.token()
        guard
            let record = try await OAuthStateRepository(db: store.database).bindBrowser(
                continueHash: Secrets.digest(token), browserHash: Secrets.digest(browser),
                now: clock.now.epochMilliseconds)
        else {
            throw APIError(
                .badRequest, code: .badOAuthState,
                message: "This sign-in link was opened already or has expired: start again from the app")
        }
        // The provider's URL is made again from the sealed row: the state and nonce are not kept in the clear.
        let upstream = try await self.upstream(record.provider)
        let opened = try open(record)
        let state = Secrets.token()
        try await OAuthStateRepository(db: store.database).replaceState(id: record.id, stateHash: Secrets.digest(state))
        let location = upstream.authorizationURL(
            state: state, redirectURI: callbackURL, nonce: opened.nonce.map(IDTokenRules.hexSHA256),
            challenge: opened.verifier.map(PKCE.s256), scopes: opened.scopes,
            parameters: opened.parameters.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil })
        return .redirect(location: location, cookie: Self.cookie(browser, secure: secureCookie))
    }

    /// `/auth/v1/callback`: the provider's answer, checked, exchanged and signed in; every outcome is a redirect (to
    /// the app, the account page, or the site URL when the trip is unknown), failures carrying `error`,
    /// `error_code` and `error_description`.
    func callback(query: [String: String], browser: String?, client: ClientInfo) async -> Landing {
        guard let state = query["state"], !state.isEmpty else {
            return failure(
                to: mail.siteURL, inQuery: true, error: "invalid_request", code: .badOAuthCallback,
                "The provider's answer carries no state")
        }
        let repository = OAuthStateRepository(db: store.database)
        let now = clock.now.epochMilliseconds
        let record: OAuthStateRecord
        do {
            let stateHash = Secrets.digest(state)
            if let browser,
                let used = try await repository.use(
                    stateHash: stateHash, browserHash: Secrets.digest(browser), now: now)
            {
                record = used
            } else {
                let known = try await repository.find(stateHash: stateHash)
                let reason =
                    known == nil
                    ? "unknown" : known?.usedAt != nil ? "used" : "another_browser"
                await trail.record(
                    client.event(
                        .signInFailed, accountID: nil,
                        detail: ["method": known?.provider ?? "oauth", "reason": "bad_oauth_state", "why": reason]))
                let description =
                    switch reason {
                    case "used": "This sign-in was finished already: start again"
                    case "another_browser": "This sign-in was started in another browser: start again in this one"
                    default: "The sign-in is unknown or has ended: start again"
                    }
                return failure(
                    to: known?.redirectTo ?? mail.siteURL, inQuery: known.map { $0.codeChallenge != nil } ?? true,
                    error: "invalid_request", code: .badOAuthState, description)
            }
        } catch {
            return failure(
                to: mail.siteURL, inQuery: true, error: "server_error", code: .unexpectedFailure,
                "The sign-in could not be read: try again")
        }
        let pkce = record.codeChallenge != nil
        let target = record.redirectTo
        guard record.expiresAt > now else {
            return failure(
                to: target, inQuery: pkce, error: "invalid_request", code: .flowStateExpired,
                "The sign-in took longer than \(Int(Self.lifetime / 60)) minutes: start again")
        }
        if let error = query["error"] {
            let said = query["error_description"].map { ": " + String($0.prefix(200)) } ?? ""
            await trail.record(
                client.event(
                    .signInFailed, accountID: record.linkAccountID,
                    detail: [
                        "method": record.provider, "reason": "provider_error", "error": UpstreamProvider.clean(error),
                    ]))
            return failure(
                to: target, inQuery: pkce, error: UpstreamProvider.clean(error), code: .oauthProviderError,
                "The provider answered \(UpstreamProvider.clean(error))\(said)")
        }
        guard let code = query["code"], !code.isEmpty else {
            return failure(
                to: target, inQuery: pkce, error: "invalid_request", code: .badOAuthCallback,
                "The provider's answer carries no code")
        }
        do {
            return try await finish(record, code: code, client: client)
        } catch let failure as UpstreamFailure {
            await trail.record(
                client.event(
                    .signInFailed, accountID: record.linkAccountID,
                    detail: ["method": record.provider, "reason": "provider_error", "error": failure.description]))
            return self.failure(
                to: target, inQuery: pkce, error: "server_error", code: .oauthProviderError, failure.description)
        } catch let error as APIError {
            return failure(
                to: target, inQuery: pkce, error: LinkPage.oauthError(error), codeString: error.code, error.message)
        } catch {
            return failure(
                to: target, inQuery: pkce, error: "server_error", code: .unexpectedFailure,
                "The sign-in could not be finished: try again")
        }
    }

    /// The code exchanged, the user found, and the trip's end: the account page, `?code=`, or the session.
    private func finish(_ record: OAuthStateRecord, code: String, client: ClientInfo) async throws -> Landing {
        let opened = try open(record)
        let upstream = try await self.upstream(record.provider)
        let tokens = try await upstream.exchange(code: code, redirectURI: callbackURL, verifier: opened.verifier)
        let identity = try await upstream.identity(tokens, nonce: opened.nonce)
        if record.linkAccountID != nil, !settings.manualLinking { throw ExternalSignIn.manualLinkingDisabled }
        let startsSession = record.codeChallenge == nil && record.returnsTo == Return.app.rawValue
        let (account, issued) =
            if record.provider.hasPrefix("sso:"), let companyProviders {
                // A company's identity is never linked by address, and its account joins the company.
                try await companyProviders.signIn(
                    identity, provider: record.provider, startsSession: startsSession, client: client)
            } else {
                try await external.signIn(
                    identity, ExternalSignIn.Arrival(linkTo: record.linkAccountID, startsSession: startsSession),
                    client: client)
            }
        if record.returnsTo == Return.account.rawValue {
            return .accountPage(notice: "identity_linked")
        }
        if let challenge = record.codeChallenge {
            let grant = ProviderGrant(
                accountID: account.id, provider: record.provider, linked: record.linkAccountID != nil)
            let authCode = try await FlowStates(db: store.database, clock: clock).create(
                for: grant, challenge: challenge)
            return .app(LinkPage.redirect(record.redirectTo, query: [("code", authCode)]))
        }
        guard let issued else { throw APIError.sessionNotFound }
        let session = try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
        var fragment = LinkPage.sessionFragment(session) + [("provider_token", tokens.accessToken)]
        if let refresh = tokens.refreshToken { fragment.append(("provider_refresh_token", refresh)) }
        return .app(LinkPage.redirect(record.redirectTo, fragment: fragment))
    }

    /// The authorization endpoints of `providers`, for a page whose forms send the browser there; a provider that
    /// cannot be read now is left out (its button is then refused by the page's policy, never sent elsewhere).
    func authorizationEndpoints(_ providers: [String]) async -> [String] {
        var endpoints: [String] = []
        for provider in providers {
            if let upstream = try? await upstream(provider) { endpoints.append(upstream.endpoints.authorization) }
        }
        return endpoints
    }

    /// The enabled custom provider `name` names, or the refusal that names it: a provider GoTrue knows that signs in
    /// here by id token only (Apple, Google) or is not configured is 400 `provider_disabled`; any other name 400
    /// `validation_failed`.
    private func upstream(_ name: String) async throws -> UpstreamProvider {
        if name.hasPrefix("custom:"), name.count <= 72 {
            return try await keys.upstream(name, store: store, box: box)
        }
        if name.hasPrefix("sso:"), let companyProviders { return try await companyProviders.upstream(name) }
        if IDTokenProviders.known.contains(name) {
            throw APIError(
                .badRequest, code: .providerDisabled,
                message:
                    "Provider \(name.debugDescription) has no browser sign-in here: register it as a custom provider, "
                    + "or sign in with its id token")
        }
        throw APIError(
            .badRequest, code: .validationFailed,
            message: "Unsupported provider: provider \(String(name.prefix(72)).debugDescription) could not be found")
    }

    private func open(_ record: OAuthStateRecord) throws -> Sealed {
        let json = try box.open(record.sealed, context: Self.context(id: record.id))
        return try JSONDecoder().decode(Sealed.self, from: Data(json.utf8))
    }

    /// Where a link started on the account page comes back.
    var accountPage: String { mail.publicURL + "/account" }

    /// Where providers send the browser back: registered with each provider as the redirect URI.
    var callbackURL: String { mail.publicURL + "/auth/v1/callback" }

    static func cookie(_ browser: String, secure: Bool) -> String {
        "\(browserCookie)=\(browser); Path=/auth/v1; Max-Age=\(Int(lifetime)); HttpOnly; SameSite=Lax"
            + (secure ? "; Secure" : "")
    }

    private func failure(
        to target: String, inQuery: Bool, error: String, code: ErrorCode, _ description: String
    ) -> Landing {
        failure(to: target, inQuery: inQuery, error: error, codeString: code.rawValue, description)
    }

    private func failure(
        to target: String, inQuery: Bool, error: String, codeString: String, _ description: String
    ) -> Landing {
        if target == accountPage {
            // The account page says it in its own words: a notice it knows, never text from the query.
            let notice =
                codeString == ErrorCode.identityAlreadyExists.rawValue ? "identity_taken" : "identity_not_linked"
            return .accountPage(notice: notice)
        }
        let items = [("error", error), ("error_code", codeString), ("error_description", description)]
        return .app(inQuery ? LinkPage.redirect(target, query: items) : LinkPage.redirect(target, fragment: items))
    }
}
