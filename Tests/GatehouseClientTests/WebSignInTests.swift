import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// Signing in and linking through a provider's page in a browser (GoTrue's redirect flow with PKCE), against a
/// scripted server and a browser that answers as the server's redirect would: the page the SDK opens, the code it
/// exchanges, the session it keeps, and the refusals the redirect brings back.
@Suite("GatehouseClient web sign-in")
struct WebSignInTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let server = URL(string: "https://auth.example.com")!
    static let redirect = URL(string: "com.example.app://auth-callback")!
    let transport = ScriptedTransport { Issue.record("no reply scripted for \($0)") }

    func client() -> GatehouseClient {
        GatehouseClient(
            url: Self.server, sessionStore: MemorySessionStore(), transport: transport,
            clock: ManualSessionClock(Self.t0))
    }

    /// A browser that remembers the pages it was shown and ends each where `answer` says (or throws what it throws).
    final class FakeBrowser: WebAuthenticator, @unchecked Sendable {
        private let answer: @Sendable (URL) throws -> URL
        private let lock = NSLock()
        private var shown: [(page: URL, scheme: String)] = []

        init(_ answer: @escaping @Sendable (URL) throws -> URL) { self.answer = answer }

        /// A browser whose page returns to the app with `callback`.
        convenience init(returning callback: String) {
            self.init { _ in try #require(URL(string: callback)) }
        }

        var pages: [URL] { lock.withLock { shown.map(\.page) } }
        var schemes: [String] { lock.withLock { shown.map(\.scheme) } }

        func authenticate(url: URL, callbackScheme: String) async throws -> URL {
            lock.withLock { shown.append((url, callbackScheme)) }
            return try answer(url)
        }
    }

    /// A URL's query parameters by name, decoded.
    static func query(_ url: URL) -> [String: String] {
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    /// The JSON body of a request, as an object.
    static func body(_ request: ScriptedTransport.Request) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any])
    }

    /// The one pkce exchange the server saw: its code and verifier.
    func exchanged() throws -> (code: String?, verifier: String) {
        let request = try #require(transport.requests("token").last)
        #expect(request.path == "/auth/v1/token?grant_type=pkce")
        let body = try Self.body(request)
        return (body["auth_code"] as? String, try #require(body["code_verifier"] as? String))
    }

    static func session(_ access: String, user: String = "user-1") -> ScriptedTransport.Reply {
        guard
            case .json(let status, let json, let headers) =
                ScriptedTransport.session(access: access, refresh: "r-\(access)", expiresAt: t0 + 3600)
        else { return .unreachable }
        return .json(
            status, json.replacingOccurrences(of: #""id":"user-1""#, with: #""id":"\#(user)""#), headers: headers)
    }

    @Test("PKCE's S256 challenge is RFC 7636's: the base64url SHA-256 of the verifier, unpadded")
    func challengeIsRFC7636() {
        #expect(
            PKCEVerifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").challenge
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let made = PKCEVerifier()
        #expect((43...128).contains(made.value.count))
        #expect(made.value != PKCEVerifier().value)
    }

    @Test("Sign-in: the browser opens /authorize with the provider, the redirect and the verifier's challenge")
    func signInOpensAuthorize() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"))
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=c0de-1")
        // Read first, so that the events start from no session and then hear the sign-in.
        #expect(try await client.auth.restoreSession() == nil)
        let events = client.auth.events
        let session = try await client.auth.signInWithOAuth(
            provider: IdentityProvider(rawValue: "custom:acme"), redirectTo: Self.redirect, scopes: "openid email",
            queryParams: [
                URLQueryItem(name: "prompt", value: "select_account"),
                URLQueryItem(name: "login_hint", value: "a+b&c=d"),
                URLQueryItem(name: "provider", value: "google"), URLQueryItem(name: "code_challenge", value: "mine"),
            ],
            using: browser)

        let page = try #require(browser.pages.first)
        #expect(browser.pages.count == 1)
        #expect(browser.schemes == ["com.example.app"])
        #expect(page.scheme == "https" && page.host == "auth.example.com" && page.path == "/auth/v1/authorize")
        let query = Self.query(page)
        #expect(query["provider"] == "custom:acme")
        #expect(query["redirect_to"] == "com.example.app://auth-callback")
        #expect(query["scopes"] == "openid email")
        #expect(query["code_challenge_method"] == "s256")
        #expect(query["skip_http_redirect"] == nil)
        // The app's parameters go on to the provider, encoded; none overrides the SDK's own.
        #expect(query["prompt"] == "select_account")
        #expect(query["login_hint"] == "a+b&c=d")
        #expect(page.query?.contains("login_hint=a%2Bb%26c%3Dd") == true)
        #expect(
            URLComponents(url: page, resolvingAgainstBaseURL: false)?.queryItems?.filter { $0.name == "provider" }
                .count == 1)

        // The code comes back and is exchanged with the verifier whose challenge the page carried.
        let (code, verifier) = try exchanged()
        #expect(code == "c0de-1")
        #expect(query["code_challenge"] == PKCEVerifier(verifier).challenge)
        #expect(session.accessToken == "a1")
        #expect(await client.auth.currentSession == session)
        var heard = events.makeAsyncIterator()
        #expect(await heard.next() == .initialSession(nil))
        #expect(await heard.next() == .signedIn(session))
    }

    @Test("A server under a path prefix keeps it; each sign-in makes a new verifier")
    func pathPrefixAndFreshVerifiers() async throws {
        let client = GatehouseClient(
            url: try #require(URL(string: "https://example.com/gatehouse/")), sessionStore: MemorySessionStore(),
            transport: transport, clock: ManualSessionClock(Self.t0))
        transport.answer("token", Self.session("a1"), Self.session("a2"))
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=c")
        try await client.auth.signInWithOAuth(provider: .google, redirectTo: Self.redirect, using: browser)
        try await client.auth.signInWithOAuth(provider: .google, redirectTo: Self.redirect, using: browser)
        #expect(browser.pages.map(\.path) == ["/gatehouse/auth/v1/authorize", "/gatehouse/auth/v1/authorize"])
        #expect(Self.query(browser.pages[0])["scopes"] == nil)
        let challenges = browser.pages.map { Self.query($0)["code_challenge"] }
        #expect(challenges[0] != challenges[1])
        let verifiers = try transport.requests("token").map { try Self.body($0)["code_verifier"] as? String }
        #expect(challenges == verifiers.map { $0.map { PKCEVerifier($0).challenge } })
    }

    @Test(
        "A refusal the redirect brings back is the server's code, from the query or the fragment; nothing is exchanged",
        arguments: [
            (
                "com.example.app://auth-callback?error=access_denied&error_code=provider_disabled"
                    + "&error_description=Unsupported+provider%3A+acme",
                GatehouseError.server(status: 403, code: "provider_disabled", message: "Unsupported provider: acme")
            ),
            (
                "com.example.app://auth-callback#error=server_error&error_code=identity_already_exists"
                    + "&error_description=Identity+is+already+linked",
                GatehouseError.server(
                    status: 403, code: "identity_already_exists", message: "Identity is already linked")
            ),
            (
                "com.example.app://auth-callback?error=access_denied",
                GatehouseError.server(status: 403, code: "access_denied", message: "")
            ),
            (
                "com.example.app://auth-callback?state=x",
                GatehouseError.server(
                    status: 400, code: "validation_failed", message: "The URL carries no sign-in code")
            ),
        ])
    func refusalsComeBackWithTheirCodes(callback: String, expected: GatehouseError) async throws {
        let client = client()
        await #expect(throws: expected) {
            try await client.auth.signInWithOAuth(
                provider: .google, redirectTo: Self.redirect, using: FakeBrowser(returning: callback))
        }
        #expect(transport.requests.isEmpty)
        #expect(await client.auth.currentSession == nil)
    }

    @Test("A closed page is authenticator(.cancelled); a redirect without a scheme is refused before any page opens")
    func cancelledAndInvalid() async throws {
        let client = client()
        let closed = FakeBrowser { _ in throw PasskeyAuthenticatorError.cancelled }
        await #expect(throws: GatehouseError.authenticator(.cancelled)) {
            try await client.auth.signInWithOAuth(provider: .google, redirectTo: Self.redirect, using: closed)
        }
        #expect(GatehouseError.authenticator(.cancelled).code == .authenticatorCancelled)
        struct Broken: Error {}
        await #expect(throws: GatehouseError.authenticator(.failed(String(describing: Broken())))) {
            try await client.auth.signInWithOAuth(
                provider: .google, redirectTo: Self.redirect, using: FakeBrowser { _ in throw Broken() })
        }
        let noScheme = FakeBrowser(returning: "unused://")
        let relative = try #require(URL(string: "auth-callback"))
        do {
            try await client.auth.signInWithOAuth(provider: .google, redirectTo: relative, using: noScheme)
            Issue.record("a redirect without a scheme was accepted")
        } catch {
            #expect(error.code == "validation_failed")
        }
        #expect(noScheme.pages.isEmpty)
        #expect(transport.requests.isEmpty)
    }

    @Test("The server refusing the code (spent, expired, another verifier's) keeps its code and signs nothing in")
    func exchangeRefused() async throws {
        let client = client()
        transport.answer("token", ScriptedTransport.refusal(404, "flow_state_not_found"))
        do {
            try await client.auth.signInWithOAuth(
                provider: .google, redirectTo: Self.redirect,
                using: FakeBrowser(returning: "com.example.app://auth-callback?code=spent"))
            Issue.record("a refused code signed in")
        } catch {
            #expect(error.code == .flowStateNotFound)
        }
        #expect(await client.auth.currentSession == nil)
    }

    @Test("Linking: the page comes from the bearer call with skip_http_redirect; its code's session replaces this one")
    func linkThroughThePage() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"), Self.session("a2"))
        transport.answer(
            OAuthRedirect.linkOperationID,
            .json(200, #"{"url":"https://accounts.acme.example/authorize?client_id=gh&state=s1"}"#))
        try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=link-code")
        let linked = try await client.auth.linkIdentity(
            provider: IdentityProvider(rawValue: "custom:acme"), redirectTo: Self.redirect, scopes: "read:user",
            using: browser)

        let call = try #require(transport.requests(OAuthRedirect.linkOperationID).first)
        #expect(call.bearer == "a1")
        let asked = try #require(URL(string: "https://auth.example.com" + call.path))
        #expect(asked.path == "/auth/v1/user/identities/authorize")
        let query = Self.query(asked)
        #expect(query["provider"] == "custom:acme")
        #expect(query["redirect_to"] == "com.example.app://auth-callback")
        #expect(query["skip_http_redirect"] == "true")
        #expect(query["scopes"] == "read:user")
        #expect(query["code_challenge_method"] == "s256")
        // The browser shows the page the server answered, and the code is exchanged with the challenge's verifier.
        #expect(
            browser.pages == [
                try #require(URL(string: "https://accounts.acme.example/authorize?client_id=gh&state=s1"))
            ])
        let (code, verifier) = try exchanged()
        #expect(code == "link-code")
        #expect(query["code_challenge"] == PKCEVerifier(verifier).challenge)
        #expect(transport.requests("token").last?.bearer == nil)
        #expect(linked.accessToken == "a2")
        #expect(await client.auth.currentSession == linked)
    }

    @Test("Linking told as a refresh of the same account; refused before the page when the server does not link")
    func linkEventsAndRefusal() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"), Self.session("a2"))
        transport.answer(
            OAuthRedirect.linkOperationID, ScriptedTransport.refusal(404, "manual_linking_disabled"),
            .json(200, #"{"url":"https://accounts.acme.example/authorize"}"#))
        let signedIn = try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let events = client.auth.events
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=link-code")
        do {
            try await client.auth.linkIdentity(provider: .google, redirectTo: Self.redirect, using: browser)
            Issue.record("linking went on after the server refused it")
        } catch {
            #expect(error.code == .manualLinkingDisabled)
        }
        #expect(browser.pages.isEmpty)
        let linked = try await client.auth.linkIdentity(provider: .google, redirectTo: Self.redirect, using: browser)
        var heard = events.makeAsyncIterator()
        #expect(await heard.next() == .initialSession(signedIn))
        #expect(await heard.next() == .refreshed(linked))
    }

    @Test("Linking without a session asks for no page: notSignedIn")
    func linkSignedOut() async throws {
        let client = client()
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=x")
        await #expect(throws: GatehouseError.notSignedIn) {
            try await client.auth.linkIdentity(provider: .google, redirectTo: Self.redirect, using: browser)
        }
        #expect(browser.pages.isEmpty && transport.requests.isEmpty)
    }

    @Test("oauthSignInURL keeps the verifier; handleOpenURL signs in with it once, and a second time finds none")
    func signInURLThenOpenURL() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"))
        let page = try await client.auth.oauthSignInURL(
            provider: IdentityProvider(rawValue: "custom:acme"), redirectTo: Self.redirect)
        #expect(page.path == "/auth/v1/authorize")
        #expect(transport.requests.isEmpty)
        let opened = try #require(URL(string: "com.example.app://auth-callback?code=from-the-browser"))
        let session = try await client.auth.handleOpenURL(opened)
        let (code, verifier) = try exchanged()
        #expect(code == "from-the-browser")
        #expect(Self.query(page)["code_challenge"] == PKCEVerifier(verifier).challenge)
        #expect(await client.auth.currentSession == session)
        do {
            try await client.auth.handleOpenURL(opened)
            Issue.record("a spent link signed in again")
        } catch {
            #expect(error.code == .flowStateNotFound)
        }
    }

    @Test("linkIdentityURL keeps the verifier for handleOpenURL, whose session replaces the account's as a refresh")
    func linkURLThenOpenURL() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"), Self.session("a2"))
        transport.answer(OAuthRedirect.linkOperationID, .json(200, #"{"url":"https://accounts.acme.example/a"}"#))
        let signedIn = try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let page = try await client.auth.linkIdentityURL(provider: .google, redirectTo: Self.redirect)
        #expect(page.absoluteString == "https://accounts.acme.example/a")
        let events = client.auth.events
        let linked = try await client.auth.handleOpenURL(
            try #require(URL(string: "com.example.app://auth-callback?code=linked")))
        let asked = try #require(transport.requests(OAuthRedirect.linkOperationID).first)
        let challenge = Self.query(try #require(URL(string: "https://x" + asked.path)))["code_challenge"]
        #expect(challenge == PKCEVerifier(try exchanged().verifier).challenge)
        var heard = events.makeAsyncIterator()
        #expect(await heard.next() == .initialSession(signedIn))
        #expect(await heard.next() == .refreshed(linked))
    }

    @Test("A linked code that answers another account's session (signed out and in meanwhile) is kept as a sign-in")
    func linkedAnotherAccount() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"), Self.session("b1", user: "user-2"))
        transport.answer(OAuthRedirect.linkOperationID, .json(200, #"{"url":"https://accounts.acme.example/a"}"#))
        let signedIn = try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let events = client.auth.events
        let other = try await client.auth.linkIdentity(
            provider: .google, redirectTo: Self.redirect,
            using: FakeBrowser(returning: "com.example.app://auth-callback?code=c"))
        #expect(other.userID == "user-2")
        var heard = events.makeAsyncIterator()
        #expect(await heard.next() == .initialSession(signedIn))
        #expect(await heard.next() == .signedIn(other))
    }

    @Test("A linking answer without a page is unreadable, and no browser opens")
    func linkAnswerWithoutPage() async throws {
        let client = client()
        transport.answer("token", Self.session("a1"))
        transport.answer(OAuthRedirect.linkOperationID, .json(200, #"{"link":"elsewhere"}"#))
        try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let browser = FakeBrowser(returning: "com.example.app://auth-callback?code=x")
        do {
            try await client.auth.linkIdentity(provider: .google, redirectTo: Self.redirect, using: browser)
            Issue.record("an answer without a page was opened")
        } catch {
            #expect(error.code == "unexpected_answer")
        }
        #expect(browser.pages.isEmpty)
    }

    @Test("The server's own providers come from custom_providers beside external; absent or unreadable, none")
    func customProviders() async throws {
        let client = client()
        let external = #""external":{"email":true,"apple":false,"google":true,"phone":false,"anonymous_users":false}"#
        transport.answer(
            "getSettings",
            .json(
                200,
                """
                {\(external),"disable_signup":false,"custom_providers":[{"identifier":"custom:acme","name":"Acme"},\
                {"identifier":"custom:github-enterprise"},{"identifier":"custom:blank","name":""}]}
                """),
            .json(200, "{\(external)}"),
            .json(200, #"{\#(external),"custom_providers":{"identifier":"custom:acme"}}"#),
            .json(200, #"{"custom_providers":[]}"#))
        let offered = try await client.auth.signInProviders()
        #expect(offered.email && offered.google && !offered.apple)
        #expect(offered.custom.map(\.provider.rawValue) == ["custom:acme", "custom:github-enterprise", "custom:blank"])
        #expect(offered.custom.map(\.name) == ["Acme", "github-enterprise", "blank"])
        #expect(offered.custom.map(\.id) == ["custom:acme", "custom:github-enterprise", "custom:blank"])
        #expect(try await client.auth.signInProviders() == SignInProviders(email: true, apple: false, google: true))
        #expect(try await client.auth.signInProviders() == SignInProviders(email: true, apple: false, google: true))
        do {
            _ = try await client.auth.signInProviders()
            Issue.record("settings without external were read")
        } catch {
            #expect(error.code == "unexpected_answer")
        }
        #expect(transport.requests("getSettings").allSatisfy { $0.path == "/auth/v1/settings" })
    }

    @Test("The login flow offers the server's providers and signs in through a page, on to the company list")
    @MainActor
    func loginFlowModel() async throws {
        let client = client()
        transport.answer(
            "getSettings",
            .json(
                200,
                #"{"external":{"email":true,"apple":false,"google":false},"custom_providers":[{"identifier":"custom:acme","name":"Acme"}]}"#
            ))
        transport.answer("token", Self.session("a1"))
        transport.answer("getUser", .unreachable)
        transport.answer("listCompanies", .json(200, #"{"companies":[]}"#))
        let model = LoginFlowModel(client: client)
        await model.loadSignInProviders()
        #expect(
            model.signInProviders.custom == [
                CustomSignInProvider(provider: .init(rawValue: "custom:acme"), name: "Acme")
            ])
        let acme = try #require(model.signInProviders.custom.first)
        try await model.signInWithOAuth(
            provider: acme.provider, redirectTo: Self.redirect,
            using: FakeBrowser(returning: "com.example.app://auth-callback?code=c"))
        #expect(await client.auth.currentSession?.accessToken == "a1")
        #expect(model.flow.screen == .welcome)

        // A closed page leaves the screen as it was and throws what the view shows nothing for.
        let other = LoginFlowModel(client: self.client())
        let before = other.flow
        await #expect(throws: GatehouseError.authenticator(.cancelled)) {
            try await other.signInWithOAuth(
                provider: acme.provider, redirectTo: Self.redirect,
                using: FakeBrowser { _ in throw PasskeyAuthenticatorError.cancelled })
        }
        #expect(other.flow == before)
    }
}
