import Foundation
import GatehouseClientTesting
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The seeds' login path (`LoginFlowModel`) driven against the server through its router: the app lock, a Keychain
/// locked at launch, a company passkey, and the whole path from the first credential to a removal.
@Suite("Login flow against the server")
struct ClientLoginFlowTests {
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
            let device = ScriptedBiometrics(outcomes: [.cancelled(.user)])
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
        try await AccountHarness.with { h in
            let (owner, _, cid) = try await sharedCompany(h)
            let member = try AppDevice(h)
            let email = try await member.signUp(h, "member")
            let link = try #require(try await owner.client.companies.createShare(permission: .readWrite).url)
            _ = try await member.client.companies.acceptShare(link)

            // Launch: the session restores, the list loads, the new company needs its credential.
            let relaunched = try member.relaunched()
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

extension ClientLoginFlowTests {
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

    func load() throws -> AuthSession? {
        if isLocked { throw GatehouseError.sessionLocked }
        return try inner.load()
    }

    func save(_ session: AuthSession) throws {
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

/// A continuous clock the test moves, for the app lock's `now`.
final class ManualClock: Sendable {
    private let current = Locked(ContinuousClock.now)
    var now: ContinuousClock.Instant { current.withLock { $0 } }
    func advance(by duration: Duration) { current.withLock { $0 = $0 + duration } }
}

extension LoginFlow.Screen {
    var isHome: Bool {
        if case .home = self { true } else { false }
    }
}
