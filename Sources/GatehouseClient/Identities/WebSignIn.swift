import Foundation
import GatehouseClientAPI

// Signing in, and linking an identity, through a provider's own sign-in page in a browser: GoTrue's redirect flow
// with PKCE, as supabase-swift's `signInWithOAuth` and `linkIdentity` run it. The page opens at the server's
// `/auth/v1/authorize`, goes on to the provider and back to the server, which sends the browser to the app's
// `redirectTo` with a single-use code (or an error); the code and the verifier only this client knows buy the session.

/// Shows a provider's sign-in page in a browser and hands back where it ended: the system's browser sheet on Apple
/// platforms (`PlatformWebAuthenticator`, an `ASWebAuthenticationSession`), or a stand-in in tests, previews and on
/// Linux. The SDK builds the page's URL and reads the code the redirect back to the app carries.
public protocol WebAuthenticator: Sendable {
    /// Opens `url` and answers the URL the browser was sent to once it reached `callbackScheme` (the scheme of the
    /// app's `redirectTo`). Throws `PasskeyAuthenticatorError.cancelled` when the user closed the page, or anything
    /// else as a failure.
    func authenticate(url: URL, callbackScheme: String) async throws -> URL
}

extension Auth {
    /// Signs in through `provider`'s sign-in page, which `authenticator` shows: a server's own OAuth or OpenID Connect
    /// provider (`custom:<slug>`, listed in `signInProviders().custom`) or any other it signs in with by the browser.
    /// `redirectTo` is where the page returns to, in the app's own URL scheme, and must be one of the server's
    /// allowed redirect URLs; `scopes` (space-separated) and `queryParams` go on to the provider. The session is kept
    /// as any sign-in's (told as `signedIn`). A closed page throws `authenticator(.cancelled)`; a refusal the server
    /// sends back to the app (`provider_disabled`, a denied consent) is `server` with its code.
    @discardableResult
    public func signInWithOAuth(
        provider: IdentityProvider, redirectTo: URL, scopes: String? = nil, queryParams: [URLQueryItem] = [],
        using authenticator: some WebAuthenticator
    ) async throws(GatehouseError) -> AuthSession {
        let scheme = try OAuthRedirect.callbackScheme(of: redirectTo)
        let verifier = PKCEVerifier()
        let page = try OAuthRedirect.authorizeURL(
            server: serverURL,
            OAuthRedirect.Request(
                provider: provider, redirectTo: redirectTo, scopes: scopes, queryParams: queryParams,
                challenge: verifier.challenge))
        let code = try await Self.browse(page, callbackScheme: scheme, using: authenticator)
        return try await exchange(code, verifier: verifier.value)
    }

    /// The sign-in page of `provider`, for an app that opens it itself (as supabase-swift's `getOAuthSignInURL`):
    /// this client keeps the page's PKCE verifier, and `handleOpenURL(_:)` signs in with the URL the app is opened
    /// with at `redirectTo`. Asking again replaces the verifier, as asking for a magic link does.
    public func oauthSignInURL(
        provider: IdentityProvider, redirectTo: URL, scopes: String? = nil, queryParams: [URLQueryItem] = []
    ) async throws(GatehouseError) -> URL {
        let verifier = PKCEVerifier()
        let page = try OAuthRedirect.authorizeURL(
            server: serverURL,
            OAuthRedirect.Request(
                provider: provider, redirectTo: redirectTo, scopes: scopes, queryParams: queryParams,
                challenge: verifier.challenge))
        await pkce.keep(verifier, for: .signIn)
        return page
    }

    /// Links `provider`'s identity to the signed-in account through its sign-in page, which `authenticator` shows:
    /// the server answers the page for the session's bearer, and the code the page returns with buys the account's
    /// new session, which replaces this one (told as `refreshed`; the company signed in to stays). The server must
    /// allow manual linking (`manual_linking_disabled`); an identity linked to another account is
    /// `identity_already_exists`. A closed page throws `authenticator(.cancelled)`.
    @discardableResult
    public func linkIdentity(
        provider: IdentityProvider, redirectTo: URL, scopes: String? = nil, queryParams: [URLQueryItem] = [],
        using authenticator: some WebAuthenticator
    ) async throws(GatehouseError) -> AuthSession {
        let scheme = try OAuthRedirect.callbackScheme(of: redirectTo)
        let verifier = PKCEVerifier()
        let page = try await linkPage(
            OAuthRedirect.Request(
                provider: provider, redirectTo: redirectTo, scopes: scopes, queryParams: queryParams,
                challenge: verifier.challenge))
        let code = try await Self.browse(page, callbackScheme: scheme, using: authenticator)
        return try await exchangeLinked(code, verifier: verifier.value)
    }

    /// The page that links `provider`'s identity to the signed-in account, for an app that opens it itself (as
    /// supabase-swift's `getLinkIdentityURL`): this client keeps the verifier, and `handleOpenURL(_:)` takes the
    /// linked session from the URL the app is opened with at `redirectTo`.
    public func linkIdentityURL(
        provider: IdentityProvider, redirectTo: URL, scopes: String? = nil, queryParams: [URLQueryItem] = []
    ) async throws(GatehouseError) -> URL {
        let verifier = PKCEVerifier()
        let page = try await linkPage(
            OAuthRedirect.Request(
                provider: provider, redirectTo: redirectTo, scopes: scopes, queryParams: queryParams,
                challenge: verifier.challenge))
        await pkce.keep(verifier, for: .link)
        return page
    }

    /// Shows `page` through `authenticator` and reads the code the redirect back to the app carries.
    private static func browse(
        _ page: URL, callbackScheme: String, using authenticator: some WebAuthenticator
    ) async throws(GatehouseError) -> String {
        let callback = try await askAuthenticator {
            try await authenticator.authenticate(url: page, callbackScheme: callbackScheme)
        }
        return try OAuthRedirect.code(in: callback)
    }

    /// Asks the server, with the session's bearer, for the provider's page that links its identity to this account
    /// (`skip_http_redirect`: the page's URL comes back as JSON instead of a redirect).
    private func linkPage(_ request: OAuthRedirect.Request) async throws(GatehouseError) -> URL {
        let (raw, path) = (self.raw, OAuthRedirect.linkPath(request))
        let answer = try await sessions.authorized { _ in
            try await raw.get(path, operationID: OAuthRedirect.linkOperationID)
        }
        return try OAuthRedirect.linkPage(in: answer)
    }

    /// Signs in with the code a redirect brought back and the verifier its request's challenge was made from.
    func exchange(_ code: String, verifier: String) async throws(GatehouseError) -> AuthSession {
        let client = self.client
        return try await signIn {
            try await client.token(
                query: .init(grantType: .pkce), body: .json(.PKCEGrant(.init(authCode: code, codeVerifier: verifier)))
            ).ok.body.json
        }
    }

    /// Takes the session a linking's code buys: the signed-in account's, with the new identity, which replaces this
    /// session as a refresh would. Another account's (the app signed out and in meanwhile) is kept as a sign-in.
    func exchangeLinked(_ code: String, verifier: String) async throws(GatehouseError) -> AuthSession {
        let client = self.client
        let linked = AuthSession(
            try await call {
                try await client.token(
                    query: .init(grantType: .pkce),
                    body: .json(.PKCEGrant(.init(authCode: code, codeVerifier: verifier)))
                ).ok.body.json
            })
        if await sessions.current?.userID == linked.userID {
            try await sessions.replace(linked)
        } else {
            try await adopt(linked)
        }
        return linked
    }
}

/// GoTrue's redirect flow as plain rules, with no I/O: the URLs the SDK opens or asks for, and what a redirect back
/// to the app carries.
enum OAuthRedirect {
    /// What a sign-in or a linking asks of the server.
    struct Request: Sendable {
        let provider: IdentityProvider
        let redirectTo: URL
        let scopes: String?
        let queryParams: [URLQueryItem]
        /// The S256 challenge of this client's verifier.
        let challenge: String
    }

    /// The page that signs in, opened in the browser.
    static let authorizePath = "/auth/v1/authorize"
    /// The bearer call that answers the page that links.
    static let linkIdentityPath = "/auth/v1/user/identities/authorize"
    /// The linking call's name where a transport sees it (as the contract's operation ids name the others).
    static let linkOperationID = "linkIdentityAuthorize"
    /// The parameters the SDK sets: the app's own of these names are left out, so that none overrides them.
    static let reserved: Set<String> = [
        "provider", "redirect_to", "scopes", "code_challenge", "code_challenge_method", "skip_http_redirect",
    ]

    /// The sign-in page on `server`: `/auth/v1/authorize?provider=…&redirect_to=…&code_challenge=…`.
    static func authorizeURL(server: URL, _ request: Request) throws(GatehouseError) -> URL {
        guard var components = URLComponents(url: server, resolvingAgainstBaseURL: false) else {
            throw invalid("The server URL cannot have a page")
        }
        let base =
            components.percentEncodedPath.hasSuffix("/")
            ? String(components.percentEncodedPath.dropLast()) : components.percentEncodedPath
        components.percentEncodedPath = base + authorizePath
        components.percentEncodedQuery = query(request, skipHTTPRedirect: false)
        components.fragment = nil
        guard let url = components.url else { throw invalid("The sign-in page's URL cannot be made") }
        return url
    }

    /// The path and query of the linking call: its parameters with `skip_http_redirect=true`.
    static func linkPath(_ request: Request) -> String {
        linkIdentityPath + "?" + query(request, skipHTTPRedirect: true)
    }

    /// The page the linking call answers (`{"url": "…"}`).
    static func linkPage(in answer: Data) throws(GatehouseError) -> URL {
        try page(in: answer, missing: "The server answered no page to link with")
    }

    /// The page a `skip_http_redirect` call answers (`{"url": "…"}`); `missing` says what an answer without one
    /// lacked.
    static func page(in answer: Data, missing: String) throws(GatehouseError) -> URL {
        struct Page: Decodable { let url: String }
        guard let text = try? JSONDecoder().decode(Page.self, from: answer).url, let url = URL(string: text),
            url.scheme != nil
        else {
            throw .server(status: 200, code: "unexpected_answer", message: missing)
        }
        return url
    }

    /// The query GoTrue reads, percent-encoded: the provider, the redirect, the scopes when given, the S256
    /// challenge, then the app's parameters for the provider.
    static func query(_ request: Request, skipHTTPRedirect: Bool) -> String {
        var items: [(String, String?)] = [
            ("provider", request.provider.rawValue), ("redirect_to", request.redirectTo.absoluteString),
        ]
        if let scopes = request.scopes, !scopes.isEmpty { items.append(("scopes", scopes)) }
        items += [("code_challenge", request.challenge), ("code_challenge_method", PKCEVerifier.method)]
        if skipHTTPRedirect { items.append(("skip_http_redirect", "true")) }
        items += request.queryParams.filter { !reserved.contains($0.name) }.map { ($0.name, $0.value) }
        return items.map { name, value in
            encoded(name) + (value.map { "=" + encoded($0) } ?? "")
        }.joined(separator: "&")
    }

    /// The scheme the browser comes back to the app with.
    static func callbackScheme(of redirect: URL) throws(GatehouseError) -> String {
        guard let scheme = redirect.scheme, !scheme.isEmpty else {
            throw invalid("redirectTo needs the app's URL scheme")
        }
        return scheme
    }

    /// The PKCE code a redirect back to the app carries in its query. An error it carries instead (in the query, or
    /// in the fragment) is thrown as `server` with its `error_code` (or OAuth's `error`) and `error_description`.
    static func code(in url: URL) throws(GatehouseError) -> String {
        let query = parameters(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery)
        let fragment = parameters(url.fragment)
        let either = { (name: String) in query[name] ?? fragment[name] }
        if let refusal = either("error_code") ?? either("error") {
            throw .server(status: 403, code: refusal, message: either("error_description") ?? "")
        }
        guard let code = query["code"], !code.isEmpty else { throw invalid("The URL carries no sign-in code") }
        return code
    }

    /// The parameters of a query or fragment as a form encodes them (`+` is a space), the first of each name.
    static func parameters(_ text: String?) -> [String: String] {
        var found: [String: String] = [:]
        for pair in (text ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ part: Substring) -> String {
                let spaced = part.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            let name = decoded(parts[0])
            if found[name] == nil { found[name] = parts.count > 1 ? decoded(parts[1]) : "" }
        }
        return found
    }

    /// RFC 3986's unreserved characters: all that a query's name or value keeps as it is.
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` with every character but the unreserved ones percent-encoded (`&`, `=`, `+`, `:` and `/` too).
    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    /// A request the SDK refuses before anything leaves the device.
    private static func invalid(_ message: String) -> GatehouseError {
        .server(status: 400, code: "validation_failed", message: message)
    }
}

extension GatehouseError.Code {
    /// The code a redirect brought back was made for another verifier: start the sign-in again.
    public static let badCodeVerifier = Self(rawValue: "bad_code_verifier")
    /// The sign-in (or link) took too long between its page and its code: start it again.
    public static let flowStateExpired = Self(rawValue: "flow_state_expired")
    /// The code is unknown or spent, or this client did not ask for the link it was opened with.
    public static let flowStateNotFound = Self(rawValue: "flow_state_not_found")
    /// The server knows no provider of that name.
    public static let providerNotFound = Self(rawValue: "provider_not_found")
    /// The provider's page was left without consent (OAuth's `access_denied`).
    public static let accessDenied = Self(rawValue: "access_denied")
}
