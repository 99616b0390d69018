import Foundation
import Testing

@testable import GatehouseClient

/// The browser sheet as these tests run it, against the server's router and the fake OpenID provider of
/// `FakeProviders`: it opens the page the SDK hands it (the server sends it on to the provider and sets its cookie),
/// has the provider approve `approval`, and follows the provider's answer through `/auth/v1/callback` back to the
/// app's URL, which it answers as `ASWebAuthenticationSession` would.
struct ProviderBrowser: WebAuthenticator, @unchecked Sendable {
    let h: AccountHarness
    let fake: FakeProviders
    let approval: FakeProviders.Approval

    func authenticate(url: URL, callbackScheme: String) async throws -> URL {
        let page = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        let opened = try await h.client.get(page.percentEncodedPath + "?" + (page.percentEncodedQuery ?? ""))
        #expect(opened.status == 302, "\(opened.body)")
        let location = try #require(opened.headers["location"])
        let cookie = try #require(opened.headers["set-cookie"]?.split(separator: ";").first).description
        let code = fake.approve(location, approval)
        let landed = try await RedirectFlowTests.callback(
            h, "code=\(code)&state=\(try RedirectFlowTests.state(location))",
            browser: RedirectFlowTests.Browser(cookie: cookie))
        #expect(landed.scheme == callbackScheme)
        return try #require(landed.url)
    }
}

/// The SDK's `signInWithOAuth` and `linkIdentity` through a provider's page, against the real server (its router in
/// process) and a fake upstream provider registered as `custom:acme`: nothing of the server is scripted.
@Suite("GatehouseClient web sign-in against the server")
struct ClientWebSignInTests {
    static let redirect = URL(string: RedirectFlowTests.app)!
    static let acme = IdentityProvider(rawValue: "custom:acme")

    @Test("The provider listed; sign-in through its page: ?code= comes back, the SDK's verifier buys the session")
    func signIn() async throws {
        try await RedirectFlowTests.with { h, fake in
            let device = try AppDevice(h)
            // The login screen's button: the server lists its own providers beside GoTrue's `external`.
            let offered = try await device.client.auth.signInProviders()
            #expect(offered.custom == [CustomSignInProvider(provider: Self.acme, name: "Acme")])
            let email = AccountHarness.newEmail("acme-web")
            let browser = ProviderBrowser(h: h, fake: fake, approval: .init(sub: "acme-web-1", email: email))
            let session = try await device.client.auth.signInWithOAuth(
                provider: Self.acme, redirectTo: Self.redirect, scopes: "openid email",
                queryParams: [URLQueryItem(name: "prompt", value: "login")], using: browser)
            #expect(session.email == email)
            #expect(await device.client.auth.currentSession == session)
            #expect(try await device.client.auth.identities().map(\.provider).contains(Self.acme))

            // The same person again, on another device: the same account.
            let again = try await AppDevice(h).client.auth.signInWithOAuth(
                provider: Self.acme, redirectTo: Self.redirect, using: browser)
            #expect(again.userID == session.userID)
        }
    }

    @Test("Linking through the page: the bearer call's page, the code's session is the same account's, linked")
    func link() async throws {
        try await RedirectFlowTests.with { h, fake in
            let device = try AppDevice(h)
            try await device.signUp(h, "web-linker")
            let before = try #require(await device.client.auth.currentSession)
            let browser = ProviderBrowser(
                h: h, fake: fake, approval: .init(sub: "acme-link-web", email: AccountHarness.newEmail("elsewhere")))
            let linked = try await device.client.auth.linkIdentity(
                provider: Self.acme, redirectTo: Self.redirect, using: browser)
            #expect(linked.userID == before.userID)
            #expect(linked.accessToken != before.accessToken)
            #expect(await device.client.auth.currentSession == linked)
            #expect(Set(try await device.client.auth.identities().map(\.provider)) == [.email, Self.acme])
        }
    }

    @Test("A refusal the redirect brings back keeps the server's code, and signs nothing in")
    func refusal() async throws {
        try await RedirectFlowTests.with { h, fake in
            let email = AccountHarness.newEmail("taken")
            _ = try await h.confirmedAccount(email)
            let device = try AppDevice(h)
            let unverified = ProviderBrowser(
                h: h, fake: fake, approval: .init(sub: "acme-unverified", email: email, verified: false))
            do throws(GatehouseError) {
                try await device.client.auth.signInWithOAuth(
                    provider: Self.acme, redirectTo: Self.redirect, using: unverified)
                Issue.record("an unverified address signed in to the account that has it")
            } catch {
                #expect(error.code == "provider_email_needs_verification")
            }
            #expect(await device.client.auth.currentSession == nil)
        }
    }
}
