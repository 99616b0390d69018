import Foundation
import Observation

/// Drives a `LoginFlow` against a server, for SwiftUI: each user action and each auth event goes through the flow,
/// and the flow's effects are carried out here. Observe `flow.screen`; with an app lock, forward the scene phase to
/// `scenePhaseChanged(_:)` and show `appLock.lock` on the `locked(.app)` screen.
@MainActor
@Observable
public final class LoginFlowModel {
    /// The flow: its screen, the selected company and any notice.
    public private(set) var flow: LoginFlow
    /// The client it drives.
    @ObservationIgnored public let client: GatehouseClient
    /// The app lock a kept session opens through, when the app has one on.
    @ObservationIgnored public let appLock: AppLockModel?
    /// What logs in to a company by passkey, when the app supplied one.
    @ObservationIgnored public let passkeyAuthenticator: (any PasskeyAuthenticator)?
    /// The factor enrolled from the set-up screen (show its QR code), until a code verifies it.
    public private(set) var enrollment: TOTPEnrollment?
    /// The ways to sign in the server offers, for the sign-in screen's buttons (Sign in with Apple, Google, and a
    /// button for each of the server's own providers in `custom`): email only until the server said, which `start()`
    /// asks.
    public private(set) var signInProviders = SignInProviders()
    @ObservationIgnored private var listeners: [Task<Void, Never>] = []
    /// The company login refused for want of a second factor, replayed once the factor is verified: its credential
    /// (memory only) or its passkey. Dropped as soon as it is used or the login ends another way.
    @ObservationIgnored private var pending: PendingLogin?
    /// Whether the client was told the app is locked (`auth.lock()`).
    @ObservationIgnored private var clientLocked = false
    /// The lock's sync under way: one at a time, so that a caller returns once what the lock's change started is
    /// done, whoever noticed the change first.
    @ObservationIgnored private var lockSync: Task<Void, Never>?

    private enum PendingLogin {
        case password(companyID: String, username: String, password: String)
        case passkey(companyID: String)
    }

    /// A model over `client`, remembering the company chosen last time. With `appLock` (when it is on), a kept
    /// session opens only once the lock does; with `passkeyAuthenticator`, company logins offer a passkey.
    public init(
        client: GatehouseClient, selectedCompanyID: String? = nil, appLock: AppLockModel? = nil,
        passkeyAuthenticator: (any PasskeyAuthenticator)? = nil
    ) {
        self.client = client
        self.appLock = appLock
        self.passkeyAuthenticator = passkeyAuthenticator
        flow = LoginFlow(
            selectedCompanyID: selectedCompanyID, appLockEnabled: appLock?.lock.configuration.isEnabled ?? false,
            passkeysEnabled: passkeyAuthenticator != nil)
    }

    /// Restores the session and follows the client's auth events (and the app lock's) from then on.
    public func start() async {
        let events = client.auth.events
        listeners.append(
            Task { [weak self] in
                for await event in events {
                    guard let self else { return }
                    switch event {
                    case .signedOut(let reason):
                        self.pending = nil
                        self.appLock?.signedOut()
                        await self.send(.signedOut(reason))
                        await self.syncLock()
                    case .companyAccessRevoked(let id): await self.send(.accessRevoked(companyID: id))
                    case .companyChanged(nil):
                        // A new company login ends the old session first: only a session still gone counts.
                        guard case .home = self.flow.screen, await self.client.companies.currentCompanyID == nil
                        else { break }
                        await self.send(.companySessionEnded)
                    default: break
                    }
                }
            })
        if let notifications = appLock?.notifications {
            // What the notification says may be stale by the time it is read: the lock as it stands decides.
            listeners.append(
                Task { [weak self] in
                    for await _ in notifications {
                        guard let self else { return }
                        await self.syncLock()
                    }
                })
        }
        listeners.append(Task { [weak self] in await self?.loadSignInProviders() })
        await perform(flow.start)
    }

    /// Asks the server again which ways to sign in it offers (offline, the last answer stays).
    public func loadSignInProviders() async {
        guard let offered = try? await client.auth.signInProviders() else { return }
        signInProviders = offered
    }

    /// Stops following the client's events.
    public func stop() {
        for listener in listeners { listener.cancel() }
        listeners = []
    }

    /// Tells the app lock (and the flow) the scene phase: the lock closes over the screen when the app comes back
    /// after its grace time, and a session the Keychain kept locked is read again when the app is active.
    public func scenePhaseChanged(_ phase: AppLock.ScenePhase) async {
        if let appLock {
            appLock.scenePhaseChanged(phase)
            await syncLock()
            await appLock.settled()
            await syncLock()
        }
        if phase == .active, flow.screen == .locked(.device) { await send(.retryRestore) }
    }

    /// From the `locked(.app)` screen: unlocks with biometrics (or the passcode when they cannot and the app allows
    /// it); the screen under the lock comes back.
    public func unlock() async {
        await appLock?.unlock()
        await syncLock()
    }

    /// From the `locked(.app)` screen, when `appLock.lock.offersPasscode`: unlocks with the device passcode.
    public func unlockWithPasscode() async {
        await appLock?.unlockWithPasscode()
        await syncLock()
    }

    /// From the `locked(.device)` screen: reads the kept session again (the device was unlocked).
    public func retryRestore() async { await send(.retryRestore) }

    /// Signs in to the account with a password; on to the second factor when the account has one. An address whose
    /// company requires single sign-on throws nothing: the flow moves to its `singleSignOn` step instead.
    public func signIn(email: String, password: String) async throws(GatehouseError) {
        do throws(GatehouseError) {
            try await client.auth.signIn(email: email, password: password)
        } catch .ssoRequired(let providerID) {
            await send(.singleSignOnRequired(email: email, providerID: providerID))
            return
        }
        await signedIn()
    }

    /// From the `singleSignOn` step: signs in through the company's identity provider, whose page `authenticator`
    /// shows, returning to the app at `redirectTo` (the code it brings back is exchanged as `handleOpenURL(_:)`
    /// does); on to the second factor when the account has one. A failure stays on the step, with its error (a
    /// closed page with none).
    public func signInWithSSO(redirectTo: URL, using authenticator: some WebAuthenticator) async {
        guard case .singleSignOn(_, let providerID, _) = flow.screen else { return }
        do throws(GatehouseError) {
            try await client.auth.signInWithSSO(providerID: providerID, redirectTo: redirectTo, using: authenticator)
        } catch {
            await send(.singleSignOnFailed(error))
            return
        }
        await signedIn()
    }

    /// From the `singleSignOn` step: back to the sign-in, for another address.
    public func backToSignIn() async { await send(.backToSignIn) }

    /// Signs in to the account through a provider's sign-in page (one of `signInProviders.custom`, say), which
    /// `authenticator` shows, returning to the app at `redirectTo`; on to the second factor when the account has one.
    /// A closed page throws `authenticator(.cancelled)`: the sign-in screen stays, with nothing to show.
    public func signInWithOAuth(
        provider: IdentityProvider, redirectTo: URL, using authenticator: some WebAuthenticator
    ) async throws(GatehouseError) {
        try await client.auth.signInWithOAuth(provider: provider, redirectTo: redirectTo, using: authenticator)
        await signedIn()
    }

    /// Tells the flow the account signed in another way (a code, a link, Apple, a passkey); on to the second factor
    /// when the account has one. Signing in proves the user: the app lock opens without asking.
    public func signedIn() async {
        appLock?.signedIn()
        await syncLock()
        await send(await signedInEvent())
    }

    /// Verifies a code of the authenticator app (the account's verified TOTP factor, or the one just enrolled).
    public func verifySecondFactor(code: String) async {
        do throws(GatehouseError) {
            let factorID: String
            if let enrollment {
                factorID = enrollment.id
            } else {
                let factors = try await client.auth.mfa.listFactors()
                guard let verified = factors.first(where: { $0.type == .totp && $0.status == .verified }) else {
                    throw .server(status: 404, code: "mfa_factor_not_found", message: "No verified factor")
                }
                factorID = verified.id
            }
            try await client.auth.mfa.challengeAndVerify(factorID: factorID, code: code)
            enrollment = nil
            await send(.secondFactorVerified)
        } catch {
            await send(.secondFactorFailed(error))
        }
    }

    /// Uses a recovery code in place of the authenticator app's.
    public func verifyRecoveryCode(_ code: String) async {
        do throws(GatehouseError) {
            try await client.auth.mfa.verifyRecoveryCode(code)
            await send(.secondFactorVerified)
        } catch {
            await send(.secondFactorFailed(error))
        }
    }

    /// From the screen saying the company requires a second factor: enrolls a TOTP factor (its QR code is in
    /// `enrollment`) and moves on to the code that verifies it.
    public func enrollSecondFactor(friendlyName: String? = nil, issuer: String? = nil) async throws(GatehouseError) {
        guard case .secondFactorSetupRequired(let company) = flow.screen else { return }
        enrollment = try await client.auth.mfa.enroll(friendlyName: friendlyName, issuer: issuer)
        await send(.secondFactorRequired(companyID: company.id, enrolled: true))
    }

    /// Picks a company from the list.
    public func select(_ companyID: String) async { await send(.selected(companyID: companyID)) }

    /// Signs in to the selected company with its credential.
    public func signIn(username: String, password: String) async {
        guard let id = flow.selectedCompanyID else { return }
        await signIn(to: id, username: username, password: password)
    }

    /// Signs in to the selected company with the member's passkey for it (when `flow.offersPasskey`); without one
    /// here, the login falls back to the password.
    public func signInWithPasskey() async {
        guard let id = flow.selectedCompanyID, let authenticator = passkeyAuthenticator else { return }
        pending = .passkey(companyID: id)
        do throws(GatehouseError) {
            try await client.companies.signInWithPasskey(to: id, using: authenticator)
            pending = nil
            await send(.loggedIn(companyID: id))
        } catch {
            if error.code != .insufficientAal { pending = nil }
            await send(.loginFailed(error))
        }
    }

    private func signIn(to id: String, username: String, password: String) async {
        pending = .password(companyID: id, username: username, password: password)
        do throws(GatehouseError) {
            try await client.companies.signIn(to: id, username: username, password: password)
            pending = nil
            await send(.loggedIn(companyID: id))
        } catch {
            if error.code != .insufficientAal { pending = nil }
            await send(.loginFailed(error))
        }
    }

    /// Makes the credential of the selected company (its first visit), then logs in with it.
    public func createCredential(username: String, password: String) async {
        guard let id = flow.selectedCompanyID else { return }
        do throws(GatehouseError) {
            _ = try await client.companies.createCredential(in: id, username: username, password: password)
        } catch {
            await send(.loginFailed(error))
            return
        }
        await signIn(to: id, username: username, password: password)
    }

    /// Back to the company list, to pick another.
    public func switchCompany() async {
        try? await client.companies.signOut()
        await send(.switchCompany)
    }

    /// Reloads the company list (after creating or joining one).
    public func reloadCompanies() async { await perform(.loadCompanies) }

    /// Moves the lockout countdown on.
    public func tick(_ now: Date = Date()) async { await send(.tick(now)) }

    /// Signs out of the account.
    public func signOut() async throws(GatehouseError) {
        pending = nil
        enrollment = nil
        try await client.auth.signOut()
    }

    /// The flow's event for the account session just signed in or restored, from its assurance level (offline,
    /// `signedIn`: a company that requires a second factor asks for it when its login is tried).
    private func signedInEvent() async -> LoginFlow.Event {
        do throws(GatehouseError) {
            return LoginFlow.signedIn(at: try await client.auth.mfa.assuranceLevel())
        } catch {
            return .signedIn
        }
    }

    private func send(_ event: LoginFlow.Event) async {
        if let effect = flow.handle(event) { await perform(effect) }
    }

    /// Brings the flow and the client in line with the app lock as it stands: the lock screen over the flow's
    /// screen, and the client told, so that nothing refreshes or warns by itself while it is up.
    private func syncLock() async {
        while let running = lockSync { await running.value }
        let sync = Task {
            await applyLock()
            lockSync = nil
        }
        lockSync = sync
        await sync.value
    }

    private func applyLock() async {
        guard let appLock else { return }
        let locked = appLock.lock.isLocked
        var effect: LoginFlow.Effect?
        if locked, flow.screen != .locked(.app) {
            effect = flow.handle(.appLocked)
        } else if !locked, flow.screen == .locked(.app) {
            effect = flow.handle(.appUnlocked)
        }
        if locked != clientLocked {
            clientLocked = locked
            if locked { await client.auth.lock() } else { await client.auth.unlock() }
        }
        if let effect { await perform(effect) }
    }

    private func perform(_ effect: LoginFlow.Effect) async {
        switch effect {
        case .restoreSession:
            do throws(GatehouseError) {
                let restored = try await client.auth.restoreSession() != nil
                let event = restored ? await signedInEvent() : .signedIn
                await send(event == .signedIn ? .restored(signedIn: restored) : event)
            } catch .sessionLocked {
                // Kept, but unreadable until the device is unlocked: never the sign-in screen.
                await send(.sessionLocked)
            } catch {
                await send(.restored(signedIn: false))
            }
        case .loadCompanies:
            do throws(GatehouseError) {
                await send(.companiesLoaded(try await client.companies.list()))
            } catch {
                await send(.companiesFailed(error))
            }
        case .loginWithoutCredential(let id):
            do throws(GatehouseError) {
                try await client.companies.signIn(to: id)
                await send(.loggedIn(companyID: id))
            } catch {
                await send(.loginFailed(error))
            }
        case .checkSecondFactor(let id):
            do throws(GatehouseError) {
                await send(LoginFlow.companyNeedsSecondFactor(id, at: try await client.auth.mfa.assuranceLevel()))
            } catch {
                pending = nil
                await send(.loginFailed(error))
            }
        case .retryLogin(let id):
            switch pending {
            case .password(id, let username, let password): await signIn(to: id, username: username, password: password)
            case .passkey(id): await signInWithPasskey()
            default: return
            }
        case .unlockApp:
            await appLock?.sessionRestored()
            if appLock == nil { await send(.appUnlocked) }
            await syncLock()
        }
    }
}
