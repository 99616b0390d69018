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
    @ObservationIgnored private var listener: Task<Void, Never>?

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
                case .signedOut(let reason): await self.send(.signedOut(reason))
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

    /// Signs in to the account with a password.
    public func signIn(email: String, password: String) async throws(GatehouseError) {
        try await client.auth.signIn(email: email, password: password)
        await send(.signedIn)
    }

    /// Tells the flow the account signed in another way (a code, a link, Apple).
    public func signedIn() async { await send(.signedIn) }

    /// Picks a company from the list.
    public func select(_ companyID: String) async { await send(.selected(companyID: companyID)) }

    /// Logs in to the selected company with its credential.
    public func logIn(username: String, password: String) async {
        guard let id = flow.selectedCompanyID else { return }
        do throws(GatehouseError) {
            try await client.companies.login(to: id, username: username, password: password)
            await send(.loggedIn(companyID: id))
        } catch {
            await send(.loginFailed(error))
        }
    }

    /// Makes the credential of the selected company (its first visit), then logs in with it.
    public func createCredential(username: String, password: String) async {
        guard let id = flow.selectedCompanyID else { return }
        do throws(GatehouseError) {
            _ = try await client.companies.createCredential(in: id, username: username, password: password)
            try await client.companies.login(to: id, username: username, password: password)
            await send(.loggedIn(companyID: id))
        } catch {
            await send(.loginFailed(error))
        }
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
        try await client.auth.signOut()
    }

    private func send(_ event: LoginFlow.Event) async {
        if let effect = flow.handle(event) { await perform(effect) }
    }

    private func perform(_ effect: LoginFlow.Effect) async {
        switch effect {
        case .restoreSession:
            do throws(GatehouseError) {
                await send(.restored(signedIn: try await client.auth.restoreSession() != nil))
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
        }
    }
}
