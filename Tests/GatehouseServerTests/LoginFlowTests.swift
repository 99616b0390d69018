import Foundation
import GatehouseClientTesting
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

    @Test(
        "Driven: a Keychain locked at launch waits on the locked screen; Face ID opens onto the company; a passkey logs in; the background closes the lock after its grace time"
    )
    func drivenAppLockAndPasskey() async throws {
        try await AccountHarness.with(
            { configuration in
                configuration.passkeys.enabled = true
                configuration.passkeys.relyingPartyID = "localhost"
                configuration.passkeys.origins = [ClientPasskeyTests.origin]
            }
        ) { h in
            let sessions = LockableSessionStore(MemorySessionStore())
            let first = try Self.client(h, sessions)
            _ = try await ClientPasskeyTests.signedUp(h, first)
            let company = try await first.companies.create(name: "Acme Ltd")
            _ = try await first.companies.createCredential(
                in: company.id, username: "ada", password: "acme ledger 1815")
            try await first.companies.signIn(to: company.id, username: "ada", password: "acme ledger 1815")
            let phone = SoftwareAuthenticator(origin: ClientPasskeyTests.origin)
            _ = try await first.companies.registerPasskey(for: company.id, using: phone)

            // Launched again before the device's first unlock: the Keychain cannot be read yet.
            sessions.isLocked = true
            let device = FakeDevice(outcomes: [.cancelled(.user)])
            let clock = ManualClock()
            let appLock = await AppLockModel(
                configuration: AppLock.Configuration(gracePeriod: .seconds(60)), evaluator: device,
                now: { clock.now })
            let client = try Self.client(h, sessions)
            let model = await LoginFlowModel(
                client: client, selectedCompanyID: company.id, appLock: appLock, passkeyAuthenticator: phone)
            await model.start()
            #expect(await model.flow.screen == .locked(.device))
            await model.scenePhaseChanged(.active)
            #expect(await model.flow.screen == .locked(.device))

            // The device unlocked: the session is read, and the app lock asks at once; the user cancels.
            sessions.isLocked = false
            await model.scenePhaseChanged(.active)
            #expect(await model.flow.screen == .locked(.app))
            #expect(device.asked == [.biometrics])
            #expect(await client.auth.isLocked)
            await model.unlock()
            #expect(!(await client.auth.isLocked))
            guard case .companyLogin(let acme, nil) = await model.flow.screen else {
                Issue.record("expected Acme's login, got \(await model.flow.screen)")
                return
            }
            #expect(await model.flow.offersPasskey)
            await model.signInWithPasskey()
            let shown = await model.flow.screen
            #expect(shown == .home(acme), "\(shown)")
            #expect(await client.companies.currentCompanyID == company.id)

            // The notification centre, then half a minute away: still home. Two minutes away: locked until
            // Face ID, which fails once and then recognises the owner.
            await model.scenePhaseChanged(.inactive)
            await model.scenePhaseChanged(.active)
            await model.scenePhaseChanged(.background)
            clock.advance(by: .seconds(30))
            await model.scenePhaseChanged(.active)
            #expect(await model.flow.screen == .home(acme))
            device.answer(.failed)
            await model.scenePhaseChanged(.background)
            clock.advance(by: .seconds(120))
            await model.scenePhaseChanged(.active)
            #expect(await model.flow.screen == .locked(.app))
            #expect(await appLock.lock.error == .notRecognized)
            await model.unlock()
            #expect(await model.flow.screen == .home(acme))
            #expect(device.asked == [.biometrics, .biometrics, .biometrics, .biometrics])
            await model.stop()
        }
    }

    @Test("testFullLoginFlow: driven end to end: first credential, home, switching, removal by the owner, relaunch")
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
            await model.signIn(username: "mel", password: "not it at all")
            #expect(await model.flow.screen == .companyLogin(company.withCredential, error: .invalidCredentials))
            await model.signIn(username: "mel", password: "purple tractor 9")
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

extension LoginFlowTests {
    /// A client of the harness's server through its router, over `sessions`.
    static func client(_ h: AccountHarness, _ sessions: any SessionStore) throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: h.server.baseURL)), sessionStore: sessions, refreshMargin: 60,
            middlewares: [], transport: h.sdkTransport)
    }
}

/// A session store as the Keychain is before the device's first unlock: while `isLocked`, every call throws
/// `sessionLocked` (its companions too).
final class LockableSessionStore: SessionStore, Sendable {
    private let inner: any SessionStore
    private let locked: Locked<Bool>

    init(_ inner: any SessionStore, locked: Locked<Bool> = Locked(false)) {
        self.inner = inner
        self.locked = locked
    }

    var isLocked: Bool {
        get { locked.withLock { $0 } }
        set { locked.withLock { $0 = newValue } }
    }

    func load() throws -> Session? {
        if isLocked { throw GatehouseError.sessionLocked }
        return try inner.load()
    }

    func save(_ session: Session) throws {
        if isLocked { throw GatehouseError.sessionLocked }
        try inner.save(session)
    }

    func remove() throws {
        if isLocked { throw GatehouseError.sessionLocked }
        try inner.remove()
    }

    func companion(named name: String) -> any SessionStore {
        LockableSessionStore(inner.companion(named: name), locked: locked)
    }
}

extension LoginFlow.Screen {
    var isHome: Bool {
        if case .home = self { true } else { false }
    }
}
