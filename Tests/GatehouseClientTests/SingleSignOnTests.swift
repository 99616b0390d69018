import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// Single sign-on through a company's identity provider, against a scripted server: the request the SDK sends, the
/// page it answers, the verifier it keeps for `handleOpenURL(_:)`, the `sso_required` refusal and the login flow's
/// step, and the company's setting.
@Suite("GatehouseClient single sign-on (SSO)")
struct SingleSignOnTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let server = URL(string: "https://auth.example.com")!
    static let redirect = URL(string: "com.example.app://sso-callback")!
    static let idpPage = "https://idp.example.com/sso/redirect?SAMLRequest=abc%2B&RelayState=r1"
    /// Where the browser comes back to the app, with the code.
    static let callback = URL(string: "com.example.app://sso-callback?code=k1")!
    let transport = ScriptedTransport { Issue.record("no reply scripted for \($0)") }

    func client() -> GatehouseClient {
        GatehouseClient(
            url: Self.server, sessionStore: MemorySessionStore(), transport: transport,
            clock: ManualSessionClock(Self.t0))
    }

    /// The server's answer to `POST /auth/v1/sso` with `skip_http_redirect`.
    static let page = ScriptedTransport.Reply.json(200, #"{"url":"\#(idpPage)"}"#)

    @Test("By domain: the body GoTrue reads (PKCE S256, skip_http_redirect), the IdP's page answered as it came")
    func byDomain() async throws {
        let client = client()
        transport.answer("signInWithSSO", Self.page)
        transport.answer("token", WebSignInTests.session("sso-1"))
        let page = try await client.auth.signInWithSSO(domain: "acme.example", redirectTo: Self.redirect)
        #expect(page.absoluteString == Self.idpPage)

        let request = try #require(transport.requests("signInWithSSO").first)
        #expect(request.path == "/auth/v1/sso")
        #expect(request.bearer == nil)
        let body = try WebSignInTests.body(request)
        #expect(body["domain"] as? String == "acme.example")
        #expect(body["provider_id"] == nil)
        #expect(body["redirect_to"] as? String == "com.example.app://sso-callback")
        #expect(body["skip_http_redirect"] as? Bool == true)
        #expect(body["code_challenge_method"] as? String == "s256")
        let challenge = try #require(body["code_challenge"] as? String)
        #expect(
            Set(body.keys) == [
                "domain", "redirect_to", "skip_http_redirect", "code_challenge", "code_challenge_method",
            ])

        // The browser comes back with the code; the verifier kept for it is the one the challenge was made from.
        let session = try await client.auth.handleOpenURL(Self.callback)
        let exchange = try #require(transport.requests("token").last)
        #expect(exchange.path == "/auth/v1/token?grant_type=pkce")
        let sent = try WebSignInTests.body(exchange)
        #expect(sent["auth_code"] as? String == "k1")
        #expect(PKCEVerifier(try #require(sent["code_verifier"] as? String)).challenge == challenge)
        #expect(session.accessToken == "sso-1")
        #expect(await client.auth.currentSession == session)

        // Spent: the same link again is not this client's.
        await #expect(throws: GatehouseError.self) {
            try await client.auth.handleOpenURL(Self.callback)
        }
        #expect(transport.requests("token").count == 1)
    }

    @Test("By provider id, without a redirect: neither the domain nor redirect_to is sent; each start a new verifier")
    func byProvider() async throws {
        let client = client()
        transport.answer("signInWithSSO", Self.page, Self.page)
        transport.answer("token", WebSignInTests.session("sso-2"))
        _ = try await client.auth.signInWithSSO(providerID: "3f1c-provider")
        _ = try await client.auth.signInWithSSO(providerID: "3f1c-provider", redirectTo: nil)
        let bodies = try transport.requests("signInWithSSO").map(WebSignInTests.body)
        #expect(bodies.count == 2)
        #expect(bodies[0]["provider_id"] as? String == "3f1c-provider")
        #expect(bodies[0]["domain"] == nil && bodies[0]["redirect_to"] == nil)
        #expect(bodies[0]["skip_http_redirect"] as? Bool == true)
        let challenges = bodies.map { $0["code_challenge"] as? String }
        #expect(challenges[0] != challenges[1])

        // The verifier kept is the last start's.
        try await client.auth.handleOpenURL(try #require(URL(string: "https://app.example.com/welcome?code=k2")))
        let exchange = try #require(transport.requests("token").last)
        let verifier = try #require(try WebSignInTests.body(exchange)["code_verifier"] as? String)
        #expect(PKCEVerifier(verifier).challenge == challenges[1])
    }

    @Test(
        "The server's refusals keep their codes, and keep no verifier",
        arguments: [
            (404, "sso_provider_not_found", GatehouseError.Code.ssoProviderNotFound),
            (404, "sso_provider_disabled", .ssoProviderDisabled),
            (400, "validation_failed", "validation_failed"),
        ])
    func refusals(status: Int, code: String, expected: GatehouseError.Code) async throws {
        let client = client()
        transport.answer("signInWithSSO", ScriptedTransport.refusal(status, code))
        do throws(GatehouseError) {
            _ = try await client.auth.signInWithSSO(domain: "nobody.example", redirectTo: Self.redirect)
            Issue.record("a refused start answered a page")
        } catch {
            #expect(error == .server(status: status, code: code, message: "refused"))
            #expect(error.code == expected)
            #expect(error.errorDescription?.isEmpty == false)
        }
        do throws(GatehouseError) {
            try await client.auth.handleOpenURL(Self.callback)
            Issue.record("a code was exchanged without a verifier")
        } catch {
            #expect(error.code == .flowStateNotFound)
        }
        #expect(transport.requests("token").isEmpty)
    }

    @Test("An answer without a page is unexpected_answer; nothing is kept")
    func noPage() async throws {
        let client = client()
        transport.answer("signInWithSSO", .json(200, #"{"link":"x"}"#))
        do throws(GatehouseError) {
            _ = try await client.auth.signInWithSSO(domain: "acme.example", redirectTo: Self.redirect)
            Issue.record("an answer without a URL was a page")
        } catch {
            #expect(error.code == "unexpected_answer")
        }
    }

    @Test("sso_required decodes to ssoRequired(providerID:) with the provider the server names; without one, as is")
    func ssoRequiredDecoding() async throws {
        let named = Data(#"{"code":"sso_required","message":"Use SSO","provider_id":"prov-9"}"#.utf8)
        let error = ErrorBody.error(status: 403, body: named, retryAfter: nil)
        #expect(error == .ssoRequired(providerID: "prov-9"))
        #expect(error.code == .ssoRequired)
        #expect(error.errorDescription == "Your company signs you in with single sign-on.")
        #expect(error.recoverySuggestion?.isEmpty == false)
        let unnamed = Data(#"{"code":"sso_required","message":"Use SSO"}"#.utf8)
        #expect(
            ErrorBody.error(status: 403, body: unnamed, retryAfter: nil)
                == .server(status: 403, code: "sso_required", message: "Use SSO"))

        // Through a password sign-in and a mailed code alike.
        let client = client()
        let refusal = ScriptedTransport.Reply.json(403, String(decoding: named, as: UTF8.self))
        transport.answer("token", refusal)
        transport.answer("sendOTP", refusal)
        await #expect(throws: GatehouseError.ssoRequired(providerID: "prov-9")) {
            try await client.auth.signIn(email: "bob@acme.example", password: "correct horse battery")
        }
        await #expect(throws: GatehouseError.ssoRequired(providerID: "prov-9")) {
            try await client.auth.sendCode(email: "bob@acme.example")
        }
        #expect(await client.auth.currentSession == nil)
    }

    @Test("The user says whether single sign-on made it")
    func isSSOUser() async throws {
        let client = client()
        transport.answer("token", WebSignInTests.session("a1"))
        try await client.auth.signIn(email: "ada@example.com", password: "pw")
        let user = """
            {"id":"user-1","aud":"authenticated","role":"authenticated","email":"ada@acme.example","phone":"",\
            "app_metadata":{},"user_metadata":{},"identities":[],"created_at":"2026-01-01T00:00:00.000Z",\
            "updated_at":"2026-01-01T00:00:00.000Z","is_anonymous":false,"is_sso_user":SSO}
            """
        transport.answer(
            "getUser", .json(200, user.replacingOccurrences(of: "SSO", with: "true")),
            .json(200, user.replacingOccurrences(of: ",\"is_sso_user\":SSO", with: "")))
        #expect(try await client.auth.user().isSSOUser)
        #expect(!(try await client.auth.user().isSSOUser))
    }

    @Test("The company's setting: read, then required (the owner's company session, its body)")
    func companySetting() async throws {
        let client = client()
        transport.answer("token", WebSignInTests.session("a1"))
        try await client.auth.signIn(email: "owner@acme.example", password: "pw")
        await #expect(throws: GatehouseError.notSignedIn) { try await client.companies.companySSO() }
        transport.answer(
            "companyLogin",
            ScriptedTransport.session(access: "company-1", refresh: "company-r1", expiresAt: Self.t0 + 3600))
        try await client.companies.signIn(to: "acme", username: "boss", password: "pw")
        let providers = #"[{"id":"p1","type":"saml","disabled":false,"domains":["acme.example"]}]"#
        transport.answer("getCompanySSO", .json(200, #"{"required":false,"providers":\#(providers)}"#))
        transport.answer("setCompanySSO", .json(200, #"{"required":true,"providers":\#(providers)}"#))
        let provider = CompanySSO.Provider(id: "p1", type: "saml", domains: ["acme.example"])
        #expect(try await client.companies.companySSO() == CompanySSO(isRequired: false, providers: [provider]))
        #expect(
            try await client.companies.setCompanySSORequired(true)
                == CompanySSO(isRequired: true, providers: [provider]))
        let read = try #require(transport.requests("getCompanySSO").first)
        #expect(read.path == "/v1/companies/acme/sso" && read.bearer == "company-1")
        let set = try #require(transport.requests("setCompanySSO").first)
        #expect(set.path == "/v1/companies/acme/sso" && set.bearer == "company-1")
        #expect(try WebSignInTests.body(set)["required"] as? Bool == true)
    }

    @Test("The login flow: a password refused sso_required moves to the SSO step, whose page signs in")
    @MainActor
    func loginFlowModel() async throws {
        let client = client()
        transport.answer(
            "token", .json(403, #"{"code":"sso_required","message":"Use SSO","provider_id":"prov-9"}"#),
            WebSignInTests.session("sso-1"))
        transport.answer("getUser", .unreachable)
        transport.answer("listCompanies", .json(200, #"{"companies":[]}"#))
        transport.answer("signInWithSSO", ScriptedTransport.refusal(404, "sso_provider_disabled"), Self.page)
        let model = LoginFlowModel(client: client)
        try await model.signIn(email: "bob@acme.example", password: "correct horse battery")
        #expect(model.flow.screen == .singleSignOn(email: "bob@acme.example", providerID: "prov-9", error: nil))

        // A refusal and a closed page stay on the step: the refusal shown, the closed page not.
        let browser = WebSignInTests.FakeBrowser(returning: "com.example.app://sso-callback?code=k1")
        await model.signInWithSSO(redirectTo: Self.redirect, using: browser)
        let disabled = GatehouseError.server(status: 404, code: "sso_provider_disabled", message: "refused")
        #expect(model.flow.screen == .singleSignOn(email: "bob@acme.example", providerID: "prov-9", error: disabled))
        #expect(browser.pages.isEmpty)

        // The provider's page, opened by the browser, comes back with the code that signs in.
        await model.signInWithSSO(redirectTo: Self.redirect, using: browser)
        #expect(browser.pages.map(\.absoluteString) == [Self.idpPage])
        #expect(browser.schemes == ["com.example.app"])
        let started = try transport.requests("signInWithSSO").map(WebSignInTests.body)
        #expect(started.map { $0["provider_id"] as? String } == ["prov-9", "prov-9"])
        #expect(await client.auth.currentSession?.accessToken == "sso-1")
        #expect(model.flow.screen == .welcome)
    }

    @Test("The login flow's SSO step: a closed page shows nothing, back leads to the sign-in")
    @MainActor
    func loginFlowModelCancelled() async throws {
        let client = client()
        transport.answer("token", .json(403, #"{"code":"sso_required","message":"m","provider_id":"prov-9"}"#))
        transport.answer("signInWithSSO", Self.page)
        let model = LoginFlowModel(client: client)
        try await model.signIn(email: "bob@acme.example", password: "pw")
        let closed = WebSignInTests.FakeBrowser { _ in throw PasskeyAuthenticatorError.cancelled }
        await model.signInWithSSO(redirectTo: Self.redirect, using: closed)
        #expect(model.flow.screen == .singleSignOn(email: "bob@acme.example", providerID: "prov-9", error: nil))
        await model.backToSignIn()
        #expect(model.flow.screen == .signIn(notice: nil))
        // Off the step, signing in by SSO asks the server nothing.
        await model.signInWithSSO(redirectTo: Self.redirect, using: closed)
        #expect(transport.requests("signInWithSSO").count == 1)
    }
}
