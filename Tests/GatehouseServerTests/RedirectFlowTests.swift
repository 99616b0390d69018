import Crypto
import Foundation
import Testing

@testable import GatehouseServer

/// GoTrue's browser redirect flow through an upstream OpenID provider (the fake one of `FakeProviders`): `/authorize`
/// sends the browser to the provider, the provider's answer comes back to `/callback`, and the app gets `?code=`
/// (PKCE) or the session in the fragment. The trip is five minutes, single use, and bound to the browser's cookie.
@Suite("The redirect flow: /authorize, the provider, /callback, the app")
struct RedirectFlowTests {
    static let app = "myapp://login-callback"

    /// A browser: the cookie `/authorize` set, sent back as a browser would.
    struct Browser {
        var cookie: String?
        var headers: [(String, String)] { cookie.map { [("Cookie", $0)] } ?? [] }
    }

    /// A harness with the fake provider registered as `custom:acme`, manual linking on, and the app's callback
    /// allowed.
    static func with(_ body: (AccountHarness, FakeProviders) async throws -> Void) async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({
            fake.configure(&$0)
            $0.auth.redirectAllowList = [app]
        }) { h in
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let created = try await admin.send(
                .post, "/auth/v1/admin/custom-providers",
                [
                    "provider_type": "oidc", "identifier": "custom:acme", "name": "Acme", "client_id": "acme-client",
                    "client_secret": FakeProviders.acmeSecret, "issuer": fake.baseURL,
                ])
            #expect(created.status == 201, "\(created.json)")
            let settings = try await h.client.get("/auth/v1/settings").json
            let external = settings["external"] as? [String: Any]
            #expect(external?["github"] as? Bool == false && external?["google"] as? Bool == true)
            let listed = settings["custom_providers"] as? [[String: Any]]
            #expect(
                listed?.first?["identifier"] as? String == "custom:acme" && listed?.first?["name"] as? String == "Acme")
            try await body(h, fake)
        }
    }

    /// `GET /auth/v1/authorize`: the provider's URL the browser is sent to, and the browser with its cookie.
    static func authorize(_ h: AccountHarness, _ query: String, browser: Browser = Browser()) async throws
        -> (location: String, browser: Browser)
    {
        let reply = try await h.client.get("/auth/v1/authorize?" + query, extra: browser.headers)
        #expect(reply.status == 302, "\(reply.body)")
        let setCookie = try #require(reply.headers["set-cookie"])
        let pair = try #require(setCookie.split(separator: ";").first).trimmingCharacters(in: .whitespaces)
        let location = try #require(reply.headers["location"])
        return (location, Browser(cookie: pair))
    }

    /// The provider's answer, back at `/auth/v1/callback`: where the browser is sent next.
    static func callback(_ h: AccountHarness, _ query: String, browser: Browser) async throws -> URLComponents {
        let reply = try await h.client.get("/auth/v1/callback?" + query, extra: browser.headers)
        #expect(reply.status == 302)
        let location = try #require(reply.headers["location"])
        return try #require(URLComponents(string: location))
    }

    static func item(_ name: String, in url: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == name }?.value
    }

    /// `name` in a redirect's query or fragment.
    static func value(_ name: String, _ target: URLComponents) -> String? {
        var fragment = URLComponents()
        fragment.percentEncodedQuery = target.percentEncodedFragment
        return (target.queryItems ?? []).first { $0.name == name }?.value
            ?? (fragment.queryItems ?? []).first { $0.name == name }?.value
    }

    static func state(_ location: String) throws -> String {
        let state = try #require(item("state", in: location))
        return try #require(state.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
    }

    static let verifier = String(repeating: "v", count: 50)
    static var challenge: String { PKCE.s256(verifier) }
    static var appQuery: String {
        "provider=custom%3Aacme&redirect_to=myapp%3A%2F%2Flogin-callback"
    }

    @Test("PKCE: the provider's URL, the browser's cookie, ?code= to the app, and the code's exchange for a session")
    func pkce() async throws {
        try await Self.with { h, fake in
            let email = AccountHarness.newEmail("acme")
            let (location, browser) = try await Self.authorize(
                h, Self.appQuery + "&code_challenge=\(Self.challenge)&code_challenge_method=s256&prompt=login")
            #expect(location.hasPrefix(fake.baseURL + "/authorize?"))
            #expect(Self.item("client_id", in: location) == "acme-client")
            #expect(Self.item("redirect_uri", in: location)?.hasSuffix("/auth/v1/callback") == true)
            #expect(Self.item("response_type", in: location) == "code")
            #expect(Self.item("scope", in: location) == "openid email profile")
            #expect(Self.item("code_challenge_method", in: location) == "S256")
            #expect(Self.item("prompt", in: location) == "login", "the app's extra parameter goes on to the provider")
            #expect(Self.item("nonce", in: location)?.count == 64)
            #expect(browser.cookie?.hasPrefix(OAuthFlow.browserCookie + "=") == true)

            let code = fake.approve(location, .init(sub: "acme-1", email: email))
            let landed = try await Self.callback(
                h, "code=\(code)&state=\(try Self.state(location))", browser: browser)
            #expect(landed.scheme == "myapp")
            let authCode = try #require(Self.value("code", landed))
            #expect(Self.value("access_token", landed) == nil, "PKCE sends no session through the browser")

            let exchanged = try await h.client.post(
                "/auth/v1/token?grant_type=pkce", ["auth_code": authCode, "code_verifier": Self.verifier])
            #expect(exchanged.status == 200, "\(exchanged.json)")
            let session = try SignedIn(exchanged)
            let user = try await h.client.user(session.access).json
            #expect(user["email"] as? String == email)
            #expect((user["user_metadata"] as? [String: Any])?["full_name"] as? String == "Ada")
            let providers = (user["identities"] as? [[String: Any]] ?? []).compactMap { $0["provider"] as? String }
            #expect(providers.contains("custom:acme"))
            // The code is good once.
            let again = try await h.client.post(
                "/auth/v1/token?grant_type=pkce", ["auth_code": authCode, "code_verifier": Self.verifier])
            #expect(again.status == 404)
        }
    }

    @Test("sign-ins starting together share one fetch of the provider's discovery document")
    func discoveryShared() async throws {
        try await Self.with { h, fake in
            let before = fake.state.withLockedValue { $0.discoveryFetches }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await h.client.get("/auth/v1/authorize?" + Self.appQuery).status }
                }
                for try await status in group { #expect(status == 302) }
            }
            #expect(fake.state.withLockedValue { $0.discoveryFetches } - before == 1)
        }
    }

    @Test("implicit: the session and the provider's token in the fragment; the same person signs in to one account")
    func implicit() async throws {
        try await Self.with { h, fake in
            let email = AccountHarness.newEmail("acme")
            var accounts: Set<String> = []
            for _ in 0..<2 {
                let (location, browser) = try await Self.authorize(h, Self.appQuery)
                let code = fake.approve(location, .init(sub: "acme-2", email: email))
                let landed = try await Self.callback(
                    h, "code=\(code)&state=\(try Self.state(location))", browser: browser)
                #expect(Self.value("token_type", landed) == "bearer")
                #expect(Self.value("provider_token", landed) == "upstream-access")
                let access = try #require(Self.value("access_token", landed))
                let user = try await h.client.user(access).json
                #expect(user["email"] as? String == email)
                accounts.insert(try #require(user["id"] as? String))
            }
            #expect(accounts.count == 1)
        }
    }

    @Test("refused with a stable code and nothing signed in: a state used twice, from another browser, expired")
    func stateRefusals() async throws {
        try await Self.with { h, fake in
            let email = AccountHarness.newEmail("acme")
            let (location, browser) = try await Self.authorize(h, Self.appQuery)
            let state = try Self.state(location)
            let code = fake.approve(location, .init(sub: "acme-3", email: email))

            // Another browser (no cookie, or another one's) cannot finish it, and does not spend it.
            for other in [Browser(), Browser(cookie: "\(OAuthFlow.browserCookie)=someone-else")] {
                let refused = try await Self.callback(h, "code=\(code)&state=\(state)", browser: other)
                #expect(Self.value("error_code", refused) == "bad_oauth_state")
                #expect(Self.value("access_token", refused) == nil)
                #expect(Self.value("error_description", refused)?.contains("another browser") == true)
            }
            let finished = try await Self.callback(h, "code=\(code)&state=\(state)", browser: browser)
            #expect(Self.value("access_token", finished) != nil)
            let replayed = try await Self.callback(h, "code=\(code)&state=\(state)", browser: browser)
            #expect(Self.value("error_code", replayed) == "bad_oauth_state")
            #expect(replayed.scheme == "myapp", "a known trip's refusal goes back to its app")

            let unknown = try await Self.callback(h, "code=x&state=made-up", browser: browser)
            #expect(Self.value("error_code", unknown) == "bad_oauth_state")
            let noState = try await Self.callback(h, "code=x", browser: browser)
            #expect(Self.value("error_code", noState) == "bad_oauth_callback")

            // Five minutes, by the server's clock.
            let (late, lateBrowser) = try await Self.authorize(h, Self.appQuery)
            h.clock.advance(by: 301)
            let expired = try await Self.callback(
                h, "code=\(fake.approve(late, .init(sub: "acme-3", email: email)))&state=\(try Self.state(late))",
                browser: lateBrowser)
            #expect(Self.value("error_code", expired) == "flow_state_expired")
            #expect(Self.value("access_token", expired) == nil)
        }
    }

    @Test(
        "refused: the provider's refusal, a wrong issuer, audience or nonce, an unverified address meeting an account")
    func providerRefusals() async throws {
        try await Self.with { h, fake in
            let email = AccountHarness.newEmail("acme")
            _ = try await h.confirmedAccount(email)
            func trip(_ approval: FakeProviders.Approval?, error: String? = nil) async throws -> URLComponents {
                let (location, browser) = try await Self.authorize(h, Self.appQuery)
                let state = try Self.state(location)
                if let error { return try await Self.callback(h, "error=\(error)&state=\(state)", browser: browser) }
                let code = fake.approve(location, try #require(approval))
                return try await Self.callback(h, "code=\(code)&state=\(state)", browser: browser)
            }
            let declined = try await trip(nil, error: "access_denied")
            #expect(Self.value("error", declined) == "access_denied")
            #expect(Self.value("error_code", declined) == "oauth_provider_error")
            for approval in [
                FakeProviders.Approval(sub: "acme-4", email: email, issuer: "https://evil.example"),
                FakeProviders.Approval(sub: "acme-4", email: email, audience: "someone-else"),
            ] {
                let refused = try await trip(approval)
                #expect(Self.value("error_code", refused) == "oauth_provider_error")
                #expect(Self.value("access_token", refused) == nil)
            }
            // A nonce the request did not carry: the provider echoed another one.
            let (location, browser) = try await Self.authorize(h, Self.appQuery)
            let code = fake.approve(location, .init(sub: "acme-4", email: email))
            fake.state.withLockedValue { $0.codes[code]?.nonce = "not-ours" }
            let wrongNonce = try await Self.callback(
                h, "code=\(code)&state=\(try Self.state(location))", browser: browser)
            #expect(Self.value("error_description", wrongNonce)?.contains("Nonces mismatch") == true)

            let unverified = try await trip(.init(sub: "acme-5", email: email, verified: false))
            #expect(Self.value("error_code", unverified) == "provider_email_needs_verification")
            #expect(Self.value("access_token", unverified) == nil)
        }
    }

    @Test("/authorize refuses what it cannot start, in the API's shape")
    func authorizeRefusals() async throws {
        try await Self.with { h, _ in
            for (query, status, code) in [
                ("provider=google", 400, "provider_disabled"), ("provider=nope", 400, "validation_failed"),
                ("provider=custom%3Anope", 400, "validation_failed"), ("", 400, "validation_failed"),
                (
                    "provider=custom%3Aacme&code_challenge=\(Self.challenge)&code_challenge_method=plain", 400,
                    "validation_failed"
                ),
                ("provider=custom%3Aacme&code_challenge=short&code_challenge_method=S256", 400, "validation_failed"),
            ] {
                let reply = try await h.client.get("/auth/v1/authorize?" + query)
                #expect(reply.status == status, "\(query)")
                #expect(reply.json["error_code"] as? String == code, "\(query): \(reply.body)")
            }
            // A redirect outside the allow-list is replaced by the site URL, as GoTrue does.
            let reply = try await h.client.get(
                "/auth/v1/authorize?provider=custom%3Aacme&redirect_to=https%3A%2F%2Fevil.example")
            #expect(reply.status == 302)
        }
    }

    @Test("linking: the URL handed to the app binds the first browser that opens it, and links to the caller")
    func linking() async throws {
        try await Self.with { h, fake in
            let email = AccountHarness.newEmail("linker")
            let account = try await h.confirmedAccount(email)
            let path = "/auth/v1/user/identities/authorize?" + Self.appQuery + "&skip_http_redirect=true"
            #expect(try await h.client.get(path).status == 401)
            let handed = try await h.client.get(path, bearer: account.access)
            #expect(handed.status == 200, "\(handed.body)")
            let url = try #require(handed.json["url"] as? String)
            #expect(url.contains("/auth/v1/authorize/continue?flow="))
            let range = try #require(url.range(of: "/auth/v1/authorize/continue"))
            let continuePath = String(url[range.lowerBound...])

            let opened = try await h.client.get(continuePath)
            #expect(opened.status == 302)
            let location = try #require(opened.headers["location"])
            let cookie = try #require(opened.headers["set-cookie"]?.split(separator: ";").first).description
            #expect(try await h.client.get(continuePath).status == 400, "a second opening is refused")

            // The provider's account has another address: linking does not need it to match.
            let code = fake.approve(location, .init(sub: "acme-link", email: AccountHarness.newEmail("other")))
            let landed = try await Self.callback(
                h, "code=\(code)&state=\(try Self.state(location))", browser: Browser(cookie: cookie))
            let access = try #require(Self.value("access_token", landed))
            let user = try await h.client.user(access).json
            #expect(user["id"] as? String == account.userID)
            let identities = user["identities"] as? [[String: Any]] ?? []
            #expect(identities.contains { $0["provider"] as? String == "custom:acme" })
        }
    }

    @Test("the account page lists the ways to sign in, links a provider through the browser, and unlinks it")
    func accountPage() async throws {
        try await Self.with { h, fake in
            let account = try await h.confirmedAccount(AccountHarness.newEmail("page"))
            func field(_ name: String, in html: String) throws -> String {
                let pattern = try Regex("name=\"\(name)\" value=\"([^\"]+)\"")
                let match = try #require(html.firstMatch(of: pattern))
                return try #require(match.output[1].substring).description
            }
            let before = try await h.page("/account", session: account.access).body
            #expect(before.contains("Ways to sign in") && before.contains("Email and password"))
            #expect(before.contains("Link Acme") && !before.contains("Remove Email"))
            let token = try field("csrf_token", in: before)

            let crossSite = try await h.form(
                "/account/identities/link", ["provider": "custom:acme", "csrf_token": token], session: account.access,
                site: "cross-site")
            #expect(crossSite.status == 403)
            let staleToken = try await h.form(
                "/account/identities/link", ["provider": "custom:acme", "csrf_token": "stale"],
                session: account.access)
            #expect(staleToken.status != 303)

            let sent = try await h.form(
                "/account/identities/link", ["provider": "custom:acme", "csrf_token": token], session: account.access)
            #expect(sent.status == 303)
            let location = try #require(sent.headers["location"])
            #expect(location.hasPrefix(fake.baseURL + "/authorize?"))
            let cookie = try #require(sent.headers["set-cookie"]?.split(separator: ";").first).description
            #expect(cookie.hasPrefix(OAuthFlow.browserCookie))
            let code = fake.approve(location, .init(sub: "acme-page", email: AccountHarness.newEmail("elsewhere")))
            // Back through a page of ours, whose navigation carries the SameSite=Strict session cookies.
            let back = try await h.client.get(
                "/auth/v1/callback?code=\(code)&state=\(try Self.state(location))", extra: [("Cookie", cookie)])
            #expect(back.status == 200)
            #expect(back.body.contains("http-equiv=\"refresh\"") && back.body.contains("notice=identity_linked"))

            let after = try await h.page("/account?notice=identity_linked", session: account.access).body
            #expect(after.contains("The account is linked") && after.contains("Remove Acme"))
            #expect(!after.contains("Link Acme"))
            let unlinked = try await h.form(
                "/account/identities/unlink",
                ["identity_id": try field("identity_id", in: after), "csrf_token": try field("csrf_token", in: after)],
                session: account.access)
            #expect(unlinked.headers["location"] == "/account?notice=identity_unlinked")
            let last = try await h.page("/account", session: account.access).body
            #expect(!last.contains("Remove Acme") && last.contains("Link Acme"))
        }
    }

    @Test("linking is refused while manual linking is off")
    func linkingOff() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0, manualLinking: false) }) { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail("linker"))
            let reply = try await h.client.get(
                "/auth/v1/user/identities/authorize?provider=custom%3Aacme&skip_http_redirect=true",
                bearer: account.access)
            #expect(reply.status == 404)
            #expect(reply.json["error_code"] as? String == "manual_linking_disabled")
        }
    }
}
