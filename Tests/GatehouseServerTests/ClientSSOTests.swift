import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's single sign-on against the real server (its router in process) and a SAML identity provider nobody here
/// wrote (pysaml2, `SAMLPeer`): the SDK asks for the provider's page, the provider answers, the answer is posted to
/// the server's ACS as the browser would, and the `?code=` URL the server sends the browser back with goes to the
/// SDK's `handleOpenURL(_:)`. The company (`SSOCompanyTests.with`) holds its owner's domain verified, with the
/// provider registered for it.
@Suite("GatehouseClient single sign-on (SSO) against the server")
struct ClientSSOTests {
    static let redirect = URL(string: SAMLFlowTests.app)!
    static let password = "correct horse battery"

    /// The browser sheet as these tests run it: it opens the provider's page the SDK hands it, has the provider sign
    /// `nameID` in, posts the provider's answer to the server's ACS, and answers the app's URL the server redirects
    /// to, as `ASWebAuthenticationSession` would.
    struct IdPBrowser: WebAuthenticator, @unchecked Sendable {
        let h: AccountHarness
        let idp: SAMLPeer
        let nameID: String

        func authenticate(url: URL, callbackScheme: String) async throws -> URL {
            #expect(url.absoluteString.hasPrefix(idp.baseURL + "/sso/redirect?"), "\(url)")
            try await idp.next(["name_id": nameID, "attributes": ["email": [nameID]]])
            let (status, landed) = try await SAMLFlowTests.post(h, try await idp.answer(url.absoluteString))
            #expect(status == 303)
            #expect(landed.scheme == callbackScheme)
            return try #require(landed.url)
        }
    }

    /// The owner's device, signed in to the company with the credential `h.company` made.
    static func ownerDevice(_ h: AccountHarness, _ setup: SSOCompanyTests.Setup) async throws -> AppDevice {
        let owner = try AppDevice(h)
        try await owner.client.auth.signIn(email: setup.owner.email, password: Self.password)
        try await owner.client.companies.signIn(to: setup.companyID, username: "boss", password: "company secret 1")
        return owner
    }

    @Test(
        "The owner requires SSO; a password refused ssoRequired(providerID:); signInWithSSO(domain:)'s page, the IdP, handleOpenURL: signed in as the SSO user"
    )
    func signInByDomain() async throws {
        try await SSOCompanyTests.with { h, idp, setup in
            let owner = try await Self.ownerDevice(h, setup)
            let before = try await owner.client.companies.companySSO()
            #expect(!before.isRequired)
            #expect(
                before.providers == [
                    CompanySSO.Provider(id: setup.providerID, type: "saml", isDisabled: false, domains: [setup.domain])
                ])
            let bob = "bob@\(setup.domain)"
            _ = try await h.confirmedAccount(bob, password: Self.password)
            let required = try await owner.client.companies.setCompanySSORequired(true)
            #expect(required.isRequired && required.providers == before.providers)
            #expect(try await owner.client.companies.companySSO().isRequired)
            #expect(!(try await owner.client.auth.user().isSSOUser))

            // The address's password sign-in is refused, naming the provider to sign in with instead.
            let device = try AppDevice(h)
            await #expect(throws: GatehouseError.ssoRequired(providerID: setup.providerID)) {
                try await device.client.auth.signIn(email: bob, password: Self.password)
            }
            #expect(await device.client.auth.currentSession == nil)

            // An unknown domain: the server's code, no page.
            do throws(GatehouseError) {
                _ = try await device.client.auth.signInWithSSO(
                    domain: "nobody-\(setup.domain)", redirectTo: Self.redirect)
                Issue.record("a domain without a provider answered a page")
            } catch {
                #expect(error.code == .ssoProviderNotFound)
            }

            // The provider's page; the browser comes back with ?code=, which the kept verifier exchanges.
            let page = try await device.client.auth.signInWithSSO(domain: setup.domain, redirectTo: Self.redirect)
            let callback = try await IdPBrowser(h: h, idp: idp, nameID: bob)
                .authenticate(url: page, callbackScheme: "myapp")
            #expect(callback.absoluteString.hasPrefix(SAMLFlowTests.app + "?code="), "\(callback)")
            let session = try await device.client.auth.handleOpenURL(callback)
            #expect(session.email == bob)
            #expect(await device.client.auth.currentSession == session)
            let user = try await device.client.auth.user()
            #expect(user.isSSOUser)
            #expect(user.email == bob)
            #expect(user.identities.map(\.provider) == [IdentityProvider(rawValue: "sso:\(setup.providerID)")])

            // The SSO account joined the company, whose login takes its SSO session without a credential.
            #expect(try await device.client.companies.list().map(\.id).contains(setup.companyID))
            let company = try await device.client.companies.signIn(to: setup.companyID)
            #expect(company.companyID == setup.companyID)

            // The code is spent: the same URL again signs nothing in.
            do throws(GatehouseError) {
                _ = try await device.client.auth.handleOpenURL(callback)
                Issue.record("a spent code signed in again")
            } catch {
                #expect(error.code == .flowStateNotFound)
            }
        }
    }

    @Test(
        "The login flow: a password refused sso_required moves it to the SSO step, whose provider page signs in, on to the company"
    )
    func loginFlow() async throws {
        try await SSOCompanyTests.with { h, idp, setup in
            let owner = try await Self.ownerDevice(h, setup)
            let carol = "carol@\(setup.domain)"
            _ = try await h.confirmedAccount(carol, password: Self.password)
            _ = try await owner.client.companies.setCompanySSORequired(true)

            let device = try AppDevice(h)
            let model = await LoginFlowModel(client: device.client)
            await model.start()
            #expect(await model.flow.screen == .signIn(notice: nil))
            try await model.signIn(email: carol, password: Self.password)
            #expect(
                await model.flow.screen
                    == .singleSignOn(email: carol, providerID: setup.providerID, error: nil))

            await model.signInWithSSO(redirectTo: Self.redirect, using: IdPBrowser(h: h, idp: idp, nameID: carol))
            #expect(await device.client.auth.currentSession?.email == carol)
            #expect(try await device.client.auth.user().isSSOUser)
            guard case .companies(let list) = await model.flow.screen else {
                Issue.record("expected the company list, got \(await model.flow.screen)")
                return
            }
            #expect(list.map(\.id) == [setup.companyID])
            await model.stop()
        }
    }
}
