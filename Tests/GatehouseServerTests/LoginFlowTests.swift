import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The seeds' login path as a pure state machine (no I/O), then driven against a live server.
@Suite("Login flow")
struct LoginFlowTests {
    let acme = CompanySummary(id: "acme", name: "Acme", hasCredential: true)
    let fresh = CompanySummary(id: "fresh", name: "Fresh Co", role: .member, hasCredential: false)
    let openCo = CompanySummary(id: "open", name: "Open Co", hasCredential: false, requiresCredential: false)

    @Test("Launch signed out → sign in → list → pick → login → home; switching returns to the list")
    func happyPath() {
        var flow = LoginFlow()
        #expect(flow.start == .restoreSession)
        #expect(flow.handle(.restored(signedIn: false)) == nil)
        #expect(flow.screen == .signIn(notice: nil))
        #expect(flow.handle(.signedIn) == .loadCompanies)
        #expect(flow.screen == .loadingCompanies)
        #expect(flow.handle(.companiesLoaded([acme, fresh])) == nil)
        #expect(flow.screen == .companies([acme, fresh]))
        #expect(flow.handle(.selected(companyID: "acme")) == nil)
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(flow.handle(.loginFailed(.invalidCredentials)) == nil)
        #expect(flow.screen == .companyLogin(acme, error: .invalidCredentials))
        #expect(flow.handle(.loggedIn(companyID: "acme")) == nil)
        #expect(flow.screen == .home(acme))
        #expect(flow.handle(.switchCompany) == nil)
        #expect(flow.screen == .companies([acme, fresh]))
        _ = flow.handle(.selected(companyID: "fresh"))
        #expect(flow.screen == .createCredential(fresh, error: nil))
        #expect(flow.selectedCompanyID == "fresh")
    }

    @Test("A returning user goes straight to the last company's login; none at all shows the welcome screen")
    func returningAndFirstLaunch() {
        var flow = LoginFlow(selectedCompanyID: "acme")
        #expect(flow.handle(.restored(signedIn: true)) == .loadCompanies)
        _ = flow.handle(.companiesLoaded([fresh, acme]))
        #expect(flow.screen == .companyLogin(acme, error: nil))

        var gone = LoginFlow(selectedCompanyID: "deleted")
        _ = gone.handle(.restored(signedIn: true))
        _ = gone.handle(.companiesLoaded([]))
        #expect(gone.screen == .welcome)
        #expect(gone.selectedCompanyID == nil)

        var passwordless = LoginFlow()
        _ = passwordless.handle(.restored(signedIn: true))
        _ = passwordless.handle(.companiesLoaded([openCo]))
        #expect(passwordless.handle(.selected(companyID: "open")) == .loginWithoutCredential(companyID: "open"))
    }

    @Test("A lockout counts down and reopens the login when it ends")
    func lockout() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        var flow = LoginFlow(selectedCompanyID: "acme")
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.companiesLoaded([acme]))
        _ = flow.handle(.loginFailed(.lockedOut(until: now.addingTimeInterval(30))))
        #expect(flow.screen == .lockedOut(acme, until: now.addingTimeInterval(30)))
        #expect(flow.lockoutRemaining(at: now.addingTimeInterval(0.5)) == 30)
        _ = flow.handle(.tick(now.addingTimeInterval(29)))
        #expect(flow.lockoutRemaining(at: now.addingTimeInterval(29)) == 1)
        _ = flow.handle(.tick(now.addingTimeInterval(30)))
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(flow.lockoutRemaining(at: now) == nil)
    }

    @Test("Removal from the company, the company session timing out, and the account session ending in use")
    func endings() {
        var flow = LoginFlow(selectedCompanyID: "acme")
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.companiesLoaded([acme, fresh]))
        _ = flow.handle(.loggedIn(companyID: "acme"))
        #expect(flow.handle(.companySessionEnded) == nil)
        #expect(flow.screen == .companyLogin(acme, error: .sessionExpired))
        _ = flow.handle(.loggedIn(companyID: "acme"))
        #expect(flow.handle(.accessRevoked(companyID: "acme")) == .loadCompanies)
        #expect(flow.screen == .companies([fresh]))
        #expect(flow.notice == .removedFromCompany(name: "Acme"))
        #expect(flow.selectedCompanyID == nil)
        _ = flow.handle(.companiesLoaded([fresh]))
        #expect(flow.notice == .removedFromCompany(name: "Acme"))
        _ = flow.handle(.selected(companyID: "fresh"))
        #expect(flow.notice == nil)
        #expect(flow.handle(.signedOut(.sessionEnded)) == nil)
        #expect(flow.screen == .signIn(notice: .sessionExpired))
        #expect(flow.companies.isEmpty)
        _ = flow.handle(.signedIn)
        #expect(flow.handle(.companiesFailed(.network("offline"))) == nil)
        #expect(flow.notice == .offline)
        #expect(flow.handle(.companiesFailed(.sessionExpired)) == nil)
        #expect(flow.screen == .signIn(notice: .sessionExpired))
    }

    @Test("Driven end to end: first credential, home, switching, removal by the owner, relaunch into the company")
    func endToEnd() async throws {
        try await AccountHarness.with(live: true) { h in
            let (owner, _, cid) = try await sharedCompany(h)
            let member = try AppDevice(h.server.baseURL)
            let email = try await member.signUp(h, "member")
            let link = try #require(try await owner.client.companies.createShare(permission: .readWrite).url)
            _ = try await member.client.companies.acceptShare(link)

            // Launch: the session restores, the list loads, the new company needs its credential.
            let relaunched = try member.relaunched(h.server.baseURL)
            let model = await LoginFlowModel(client: relaunched.client)
            await model.start()
            #expect(await model.flow.screen == .companies(model.flow.companies))
            await model.select(cid)
            guard case .createCredential(let company, nil) = await model.flow.screen else {
                Issue.record("expected the credential screen, got \(await model.flow.screen)")
                return
            }
            #expect(company.name == "Acme Ltd")
            await model.createCredential(username: "mel", password: "purple tractor 9")
            #expect(await model.flow.screen.isHome)
            #expect(await relaunched.client.companies.currentCompanyID == cid)
            await model.switchCompany()
            #expect(await model.flow.screen == .companies(model.flow.companies))
            await model.select(cid)
            await model.logIn(username: "mel", password: "not it at all")
            #expect(await model.flow.screen == .companyLogin(company.withCredential, error: .invalidCredentials))
            await model.logIn(username: "mel", password: "purple tractor 9")
            #expect(await model.flow.screen.isHome)

            // The owner removes the member: the model hears it from the store's check or the next call.
            try await owner.client.companies.removeMember(try await relaunched.userID)
            let store = try await relaunched.store(cid)
            #expect(
                try await LiveServer.eventually { await model.flow.notice == .removedFromCompany(name: "Acme Ltd") })
            #expect(!(await model.flow.screen.isHome))

            // Signed out elsewhere: the next refresh ends it here too.
            _ = try await h.client.logout(
                try SignedIn(try await h.client.password(email, "correct horse battery")).access, scope: "global")
            _ = try? await relaunched.client.auth.refreshSession()
            #expect(try await LiveServer.eventually { await model.flow.screen == .signIn(notice: .sessionExpired) })
            await model.stop()
            await store.close()
        }
    }
}

extension LoginFlow.Screen {
    var isHome: Bool {
        if case .home = self { true } else { false }
    }
}
