import Foundation
import Observation

/// Drives a `LoginFlow` against a server, for SwiftUI: each user action and each auth event goes through the flow,
/// and the flow's effects are carried out here. Observe `flow.screen`.
@MainActor
@Observable
public final class LoginFlowModel {
    /// The flow: its screen, the selected company and any notice.
    public private(set) var flow: LoginFlow
    /// The client it drives.
    @ObservationIgnored public let client: GatehouseClient
    /// The factor enrolled from the set-up screen (show its QR code), until a code verifies it.
    public private(set) var enrollment: TOTPEnrollment?
    @ObservationIgnored private var listener: Task<Void, Never>?
    /// The credential of a company login refused for want of a second factor, replayed once the factor is verified.
    /// Memory only, and dropped as soon as it is used or the login ends another way.
    @ObservationIgnored private var pending: (companyID: String, username: String, password: String)?

    /// A model over `client`, remembering the company chosen last time.
    public init(client: GatehouseClient, selectedCompanyID: String? = nil) {
        self.client = client
        flow = LoginFlow(selectedCompanyID: selectedCompanyID)
    }

    /// Restores the session and follows the client's auth events from then on.
    public func start() async {
        let events = client.auth.events
        listener = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .signedOut(let reason):
                    self.pending = nil
                    await self.send(.signedOut(reason))
                case .companyAccessRevoked(let id): await self.send(.accessRevoked(companyID: id))
                case .companyChanged(nil):
                    if case .home = self.flow.screen { await self.send(.companySessionEnded) }
                default: break
                }
            }
        }
        await perform(flow.start)
    }

    /// Stops following the client's events.
    public func stop() {
        listener?.cancel()
        listener = nil
    }

    /// Signs in to the account with a password; on to the second factor when the account has one.
    public func signIn(email: String, password: String) async throws(GatehouseError) {
        try await client.auth.signIn(email: email, password: password)
        await signedIn()
    }

    /// Tells the flow the account signed in another way (a code, a link, Apple); on to the second factor when the
    /// account has one.
    public func signedIn() async { await send(await signedInEvent()) }

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

    /// Logs in to the selected company with its credential.
    public func logIn(username: String, password: String) async {
        guard let id = flow.selectedCompanyID else { return }
        await logIn(to: id, username: username, password: password)
    }

    private func logIn(to id: String, username: String, password: String) async {
        pending = (id, username, password)
        do throws(GatehouseError) {
            try await client.companies.login(to: id, username: username, password: password)
            pending = nil
            await send(.loggedIn(companyID: id))
        } catch {
            if error.errorCode != .insufficientAal { pending = nil }
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
        await logIn(to: id, username: username, password: password)
    }

    /// Back to the company list, to pick another.
    public func switchCompany() async {
        try? await client.companies.logOutOfCompany()
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

    private func perform(_ effect: LoginFlow.Effect) async {
        switch effect {
        case .restoreSession:
            do throws(GatehouseError) {
                let restored = try await client.auth.restoreSession() != nil
                let event = restored ? await signedInEvent() : .signedIn
                await send(event == .signedIn ? .restored(signedIn: restored) : event)
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
                try await client.companies.login(to: id)
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
            guard let credential = pending, credential.companyID == id else { return }
            await logIn(to: id, username: credential.username, password: credential.password)
        }
    }
}
