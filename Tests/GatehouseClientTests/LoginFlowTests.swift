import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// The seeds' login path as a pure state machine (no I/O). `ClientLoginFlowTests` drives it against the server.
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

    @Test("testBiometricLockingFlow: a kept session opens through the app lock: launch → unlock → company")
    func appLockAtLaunch() {
        var flow = LoginFlow(selectedCompanyID: "acme", appLockEnabled: true)
        #expect(flow.start == .restoreSession)
        #expect(flow.handle(.restored(signedIn: true)) == .unlockApp)
        #expect(flow.screen == .locked(.app))
        #expect(flow.handle(.tick(Date())) == nil)
        #expect(flow.handle(.appLocked) == nil)
        #expect(flow.screen == .locked(.app))
        #expect(flow.handle(.appUnlocked) == .loadCompanies)
        #expect(flow.screen == .loadingCompanies)
        _ = flow.handle(.companiesLoaded([acme, fresh]))
        #expect(flow.screen == .companyLogin(acme, error: nil))

        // An aal1 session of an account with a factor: the second factor comes after the unlock, not before.
        var verified = LoginFlow(appLockEnabled: true)
        #expect(verified.handle(.secondFactorRequired(companyID: nil, enrolled: true)) == .unlockApp)
        #expect(verified.screen == .locked(.app))
        #expect(verified.handle(.appUnlocked) == nil)
        #expect(verified.screen == .secondFactor(company: nil, error: nil))

        // No session: nothing to unlock, and the lock never covers the sign-in; signing in goes straight on.
        var signedOut = LoginFlow(appLockEnabled: true)
        #expect(signedOut.handle(.restored(signedIn: false)) == nil)
        #expect(signedOut.handle(.appLocked) == nil)
        #expect(signedOut.screen == .signIn(notice: nil))
        #expect(signedOut.handle(.signedIn) == .loadCompanies)

        // The lock off: as before.
        var off = LoginFlow()
        #expect(off.handle(.restored(signedIn: true)) == .loadCompanies)
    }

    @Test("The app lock closes over any screen; what happens beneath changes what comes back; a sign-out ends it")
    func appLockInUse() {
        var flow = LoginFlow(selectedCompanyID: "acme", appLockEnabled: true)
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.appUnlocked)
        _ = flow.handle(.companiesLoaded([acme, fresh]))
        _ = flow.handle(.loggedIn(companyID: "acme"))
        #expect(flow.screen == .home(acme))
        #expect(flow.handle(.appLocked) == nil)
        #expect(flow.screen == .locked(.app))
        #expect(flow.handle(.appUnlocked) == nil)
        #expect(flow.screen == .home(acme))

        // Removed from Acme while locked: the list loads beneath, and shows once unlocked.
        _ = flow.handle(.appLocked)
        #expect(flow.handle(.accessRevoked(companyID: "acme")) == .loadCompanies)
        #expect(flow.screen == .locked(.app))
        #expect(flow.notice == .removedFromCompany(name: "Acme"))
        _ = flow.handle(.companiesLoaded([fresh]))
        #expect(flow.screen == .locked(.app))
        #expect(flow.handle(.appUnlocked) == nil)
        #expect(flow.screen == .companies([fresh]))

        // The session ends while locked: the sign-in, with nothing over it.
        _ = flow.handle(.appLocked)
        #expect(flow.handle(.signedOut(.sessionEnded)) == nil)
        #expect(flow.screen == .signIn(notice: .sessionExpired))
        #expect(flow.handle(.appUnlocked) == nil)
        #expect(flow.screen == .signIn(notice: .sessionExpired))
    }

    @Test("A Keychain still locked at launch shows the locked screen, never the sign-in, and restores once it opens")
    func keychainLockedAtLaunch() {
        var flow = LoginFlow(appLockEnabled: true)
        #expect(flow.handle(.sessionLocked) == nil)
        #expect(flow.screen == .locked(.device))
        #expect(flow.handle(.appLocked) == nil)
        #expect(flow.handle(.appUnlocked) == nil)
        #expect(flow.screen == .locked(.device))
        #expect(flow.handle(.retryRestore) == .restoreSession)
        #expect(flow.screen == .launching)
        #expect(flow.handle(.restored(signedIn: true)) == .unlockApp)
        #expect(flow.handle(.retryRestore) == nil)
        #expect(flow.screen == .locked(.app))
    }

    @Test("A company passkey is offered when the app has an authenticator; none here falls back to the password")
    func passkeyLogin() {
        var flow = LoginFlow(selectedCompanyID: "acme", passkeysEnabled: true)
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.companiesLoaded([acme, fresh]))
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(flow.offersPasskey)
        // The user closed the passkey sheet: nothing to show, still offered.
        #expect(flow.handle(.loginFailed(.authenticator(.cancelled))) == nil)
        #expect(flow.screen == .companyLogin(acme, error: nil) && flow.offersPasskey)
        // The server knows no passkey of the member's for Acme: the password, and no more offers.
        let notFound = GatehouseError.server(status: 400, code: "webauthn_credential_not_found", message: "")
        #expect(flow.handle(.loginFailed(notFound)) == nil)
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(!flow.offersPasskey && flow.companiesWithoutPasskey == ["acme"])
        #expect(flow.handle(.loggedIn(companyID: "acme")) == nil)
        #expect(flow.screen == .home(acme))
        // A first visit has no credential and so no passkey.
        _ = flow.handle(.switchCompany)
        _ = flow.handle(.selected(companyID: "fresh"))
        #expect(flow.screen == .createCredential(fresh, error: nil) && !flow.offersPasskey)

        // The device holds none at all: the same fallback.
        var empty = LoginFlow(selectedCompanyID: "acme", passkeysEnabled: true)
        _ = empty.handle(.restored(signedIn: true))
        _ = empty.handle(.companiesLoaded([acme]))
        _ = empty.handle(.loginFailed(.authenticator(.noCredential)))
        #expect(empty.screen == .companyLogin(acme, error: nil) && !empty.offersPasskey)

        // No authenticator, no offer.
        var plain = LoginFlow(selectedCompanyID: "acme")
        _ = plain.handle(.restored(signedIn: true))
        _ = plain.handle(.companiesLoaded([acme]))
        #expect(plain.screen == .companyLogin(acme, error: nil) && !plain.offersPasskey)
    }

    @Test("SSO: a password refused sso_required moves to the single sign-on step; its failures, back, and signing in")
    func singleSignOnStep() {
        var flow = LoginFlow(appLockEnabled: true)
        _ = flow.handle(.restored(signedIn: false))
        #expect(flow.screen == .signIn(notice: nil))
        #expect(flow.handle(.singleSignOnRequired(email: "bob@acme.example", providerID: "p1")) == nil)
        let step = LoginFlow.Screen.singleSignOn(email: "bob@acme.example", providerID: "p1", error: nil)
        #expect(flow.screen == step)
        // No session yet: the app lock has nothing to cover.
        #expect(flow.handle(.appLocked) == nil)
        #expect(flow.screen == step)
        // A closed page shows nothing; a refusal shows its error until the next try.
        #expect(flow.handle(.singleSignOnFailed(.authenticator(.cancelled))) == nil)
        #expect(flow.screen == step)
        let disabled = GatehouseError.server(status: 404, code: "sso_provider_disabled", message: "")
        _ = flow.handle(.singleSignOnFailed(disabled))
        #expect(flow.screen == .singleSignOn(email: "bob@acme.example", providerID: "p1", error: disabled))
        // Back to the sign-in for another address; a failure off the step changes nothing.
        #expect(flow.handle(.backToSignIn) == nil)
        #expect(flow.screen == .signIn(notice: nil))
        _ = flow.handle(.singleSignOnFailed(disabled))
        _ = flow.handle(.backToSignIn)
        #expect(flow.screen == .signIn(notice: nil))
        // Signed in through the provider: on to the companies, as any sign-in.
        _ = flow.handle(.singleSignOnRequired(email: "bob@acme.example", providerID: "p1"))
        #expect(flow.handle(.signedIn) == .loadCompanies)
        #expect(flow.screen == .loadingCompanies)
        #expect(flow.handle(.backToSignIn) == nil)
        #expect(flow.screen == .loadingCompanies)
        // With a second factor, that step first.
        var mfa = LoginFlow()
        _ = mfa.handle(.restored(signedIn: false))
        _ = mfa.handle(.singleSignOnRequired(email: "bob@acme.example", providerID: "p1"))
        #expect(mfa.handle(.secondFactorRequired(companyID: nil, enrolled: true)) == nil)
        #expect(mfa.screen == .secondFactor(company: nil, error: nil))
    }
}
