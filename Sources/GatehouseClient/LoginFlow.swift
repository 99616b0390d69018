import Foundation

/// The seeds' login path as a pure state machine: launch → restore the session → (the app lock, when it is on) →
/// (single sign-on, when the address's company requires it) →
/// (a second factor, when the account has one) → the company list → the selected company → its login (by password,
/// by passkey, or making the credential the first time) → home; with signing out, switching, a lockout and its
/// countdown, a removal from the company, the session ending while in use, a company that requires a second factor
/// the session has not verified, and the app lock closing over whatever shows when the app comes back.
///
/// A locked session is never a sign-out: the app lock and a Keychain still locked at launch each show `locked`.
///
/// It does no I/O: each `handle` takes what happened and answers what to do next, which `LoginFlowModel` (or an
/// app's own driver) carries out against the server and reports back.
public struct LoginFlow: Sendable, Equatable {
    /// What the app shows.
    public enum Screen: Sendable, Equatable {
        /// Restoring the session kept from the last launch.
        case launching
        /// The account sign-in (with why the last session ended, when it did not end on request).
        case signIn(notice: Notice?)
        /// The company of `email` requires single sign-on: sign in through its identity provider `providerID`
        /// (`LoginFlowModel.signInWithSSO(redirectTo:using:)`), or go back to the sign-in for another address.
        /// `error` is why the last try failed.
        case singleSignOn(email: String, providerID: String, error: GatehouseError?)
        /// Loading the account's companies.
        case loadingCompanies
        /// No company yet: create one or join with a share link.
        case welcome
        /// The company list.
        case companies([CompanySummary])
        /// The selected company's login, its username known when the credential exists.
        case companyLogin(CompanySummary, error: GatehouseError?)
        /// The first visit to a company: make the credential.
        case createCredential(CompanySummary, error: GatehouseError?)
        /// Too many wrong passwords: the login opens again at `until`.
        case lockedOut(CompanySummary, until: Date)
        /// Inside the company.
        case home(CompanySummary)
        /// The second factor: a code of the authenticator app, or a recovery code. `company` is the one whose login
        /// asked for it (nil right after the account sign-in); `error` is why the last code was refused.
        case secondFactor(company: CompanySummary?, error: GatehouseError?)
        /// The company requires a second factor and the account has none: set one up first (then log in again).
        case secondFactorSetupRequired(CompanySummary)
        /// The session is kept but locked; the screen under it comes back once it opens.
        case locked(Lock)
    }

    /// What keeps a kept session locked.
    public enum Lock: Sendable, Equatable {
        /// The app lock: unlock with biometrics (or the device passcode, when the app allows it).
        case app
        /// The Keychain, until the device is first unlocked (a prewarmed launch): restore again once it is.
        case device
    }

    /// Why the app is back at an earlier screen.
    public enum Notice: Sendable, Equatable {
        /// The session ended on the server (signed out elsewhere, expired, revoked).
        case sessionExpired
        /// The account was removed from this company, whose local data is gone.
        case removedFromCompany(name: String)
        /// The server could not be reached; what is shown may be old.
        case offline
    }

    /// What happened, told to the flow.
    public enum Event: Sendable, Equatable {
        /// The session restore finished: signed in or not.
        case restored(signedIn: Bool)
        /// The account signed in.
        case signedIn
        /// The account sign-in of `email` was refused `GatehouseError.ssoRequired(providerID:)`: on to single sign-on.
        case singleSignOnRequired(email: String, providerID: String)
        /// Single sign-on failed (a closed page, `authenticator(.cancelled)`, shows nothing).
        case singleSignOnFailed(GatehouseError)
        /// The user left the single sign-on step for the sign-in (another address).
        case backToSignIn
        /// The company list arrived.
        case companiesLoaded([CompanySummary])
        /// Loading the list failed.
        case companiesFailed(GatehouseError)
        /// The user picked a company.
        case selected(companyID: String)
        /// The company login (or credential, then login) succeeded.
        case loggedIn(companyID: String)
        /// The company login or the credential was refused.
        case loginFailed(GatehouseError)
        /// The clock moved (for the lockout countdown).
        case tick(Date)
        /// The user asked for the company list (switching).
        case switchCompany
        /// The account session ended.
        case signedOut(SignOutReason)
        /// The account lost access to a company.
        case accessRevoked(companyID: String)
        /// The company session ended (timeout) while the account is still a member.
        case companySessionEnded
        /// The account session is aal1 where aal2 is needed: after the account sign-in (`companyID` nil), or when
        /// that company's login answered `insufficient_aal`. `enrolled`: the account has a verified factor.
        case secondFactorRequired(companyID: String?, enrolled: Bool)
        /// A TOTP or recovery code was accepted: the account session is aal2.
        case secondFactorVerified
        /// The code was refused (wrong, used, expired, or the server backing off).
        case secondFactorFailed(GatehouseError)
        /// The kept session cannot be read until the device is unlocked (`GatehouseError.sessionLocked`).
        case sessionLocked
        /// Read the kept session again (the device was unlocked, or the app came to the foreground).
        case retryRestore
        /// The app lock closed (the app came back after its grace time, or the user locked it).
        case appLocked
        /// The app lock opened.
        case appUnlocked
    }

    /// What the driver should do next.
    public enum Effect: Sendable, Equatable {
        /// Restore the kept session.
        case restoreSession
        /// Load the company list.
        case loadCompanies
        /// Log in to this company without a credential (it does not require one).
        case loginWithoutCredential(companyID: String)
        /// Its login was refused for want of a second factor: find out whether the account has a verified one
        /// (`AssuranceLevel`), and tell the flow `secondFactorRequired(companyID:enrolled:)`.
        case checkSecondFactor(companyID: String)
        /// The second factor is verified: log in to this company again with the credential just refused for it
        /// (kept by the driver, in memory only); without one, the login screen asks for it again.
        case retryLogin(companyID: String)
        /// A session was kept and the app lock is on: lock it and have the user unlock (`AppLockModel`), then tell
        /// the flow `appUnlocked`.
        case unlockApp
    }

    /// The screen.
    public private(set) var screen: Screen = .launching
    /// The company the user last chose, kept across launches by the app (the seeds' `selectedCompanyID`).
    public private(set) var selectedCompanyID: String?
    /// Shown over the current screen until the next event.
    public private(set) var notice: Notice?
    /// The company list as last loaded.
    public private(set) var companies: [CompanySummary] = []
    /// A kept session opens only through the app lock.
    public let appLockEnabled: Bool
    /// The app supplied a passkey authenticator: company logins offer "Use passkey".
    public let passkeysEnabled: Bool
    /// Companies whose passkey login found no passkey here: their login offers the password only.
    public private(set) var companiesWithoutPasskey: Set<String> = []
    /// The screen under the app lock.
    private var underLock: Screen?
    /// What the restore answered, carried out once the app lock opens.
    private var afterUnlock: Event?

    /// A flow at launch, remembering the company chosen last time; `appLockEnabled` when a kept session must be
    /// unlocked first, `passkeysEnabled` when the app can log in to companies by passkey.
    public init(selectedCompanyID: String? = nil, appLockEnabled: Bool = false, passkeysEnabled: Bool = false) {
        self.selectedCompanyID = selectedCompanyID
        self.appLockEnabled = appLockEnabled
        self.passkeysEnabled = passkeysEnabled
    }

    /// The company login on screen offers "Use passkey" (falling back to the password when there is none here).
    public var offersPasskey: Bool {
        guard passkeysEnabled, case .companyLogin(let company, _) = screen else { return false }
        return company.hasCredential && !companiesWithoutPasskey.contains(company.id)
    }

    /// What the driver does first.
    public var start: Effect { .restoreSession }

    /// Seconds left of a lockout at `now`, rounded up; nil when not locked out.
    public func lockoutRemaining(at now: Date) -> Int? {
        guard case .lockedOut(_, let until) = screen else { return nil }
        return max(0, Int(until.timeIntervalSince(now).rounded(.up)))
    }

    /// What to tell the flow about the account session's `assurance` once signed in or restored: the second-factor
    /// step when it is aal1 and the account has a verified factor, else `signedIn`.
    public static func signedIn(at assurance: AssuranceLevel) -> Event {
        assurance.needsSecondFactor ? .secondFactorRequired(companyID: nil, enrolled: true) : .signedIn
    }

    /// What to tell the flow when `companyID`'s login answered `insufficient_aal` and the account session is at
    /// `assurance`.
    public static func companyNeedsSecondFactor(_ companyID: String, at assurance: AssuranceLevel) -> Event {
        .secondFactorRequired(companyID: companyID, enrolled: assurance.next == .aal2)
    }

    /// Takes an event; answers what the driver should do next, if anything.
    public mutating func handle(_ event: Event) -> Effect? {
        switch event {
        case .appLocked:
            switch screen {
            case .locked, .signIn, .singleSignOn: break
            default:
                underLock = screen
                screen = .locked(.app)
            }
            return nil
        case .appUnlocked:
            guard screen == .locked(.app) else { return nil }
            screen = underLock ?? .launching
            underLock = nil
            guard let event = afterUnlock else { return nil }
            afterUnlock = nil
            return proceed(event)
        case .restored(signedIn: true), .secondFactorRequired(companyID: nil, _):
            // At launch, a kept session opens through the app lock first.
            guard appLockEnabled, screen == .launching else { break }
            screen = .locked(.app)
            underLock = .launching
            afterUnlock = event
            return .unlockApp
        case .signedOut:
            underLock = nil
            afterUnlock = nil
        default:
            break
        }
        // Under the app lock, what happens changes the screen beneath it (a sign-out ends it).
        guard screen == .locked(.app), let hidden = underLock else { return proceed(event) }
        screen = hidden
        let effect = proceed(event)
        if case .signIn = screen {
            underLock = nil
        } else {
            underLock = screen
            screen = .locked(.app)
        }
        return effect
    }

    private mutating func proceed(_ event: Event) -> Effect? {
        let carried = notice
        notice = nil
        switch event {
        case .restored(let signedIn):
            guard signedIn else {
                screen = .signIn(notice: nil)
                return nil
            }
            screen = .loadingCompanies
            return .loadCompanies
        case .signedIn:
            screen = .loadingCompanies
            return .loadCompanies
        case .singleSignOnRequired(let email, let providerID):
            screen = .singleSignOn(email: email, providerID: providerID, error: nil)
            return nil
        case .singleSignOnFailed(let error):
            guard case .singleSignOn(let email, let providerID, _) = screen else { return nil }
            let shown = error == .authenticator(.cancelled) ? nil : error
            screen = .singleSignOn(email: email, providerID: providerID, error: shown)
            return nil
        case .backToSignIn:
            guard case .singleSignOn = screen else { return nil }
            screen = .signIn(notice: nil)
            return nil
        case .companiesLoaded(let list):
            companies = list
            notice = carried == .offline ? nil : carried
            if let chosen = selectedCompanyID, let company = list.first(where: { $0.id == chosen }) {
                return enter(company)
            }
            selectedCompanyID = nil
            screen = list.isEmpty ? .welcome : .companies(list)
            return nil
        case .companiesFailed(let error):
            if error == .sessionExpired { return handle(.signedOut(.sessionEnded)) }
            notice = .offline
            screen = companies.isEmpty ? .welcome : .companies(companies)
            return nil
        case .selected(let id):
            guard let company = companies.first(where: { $0.id == id }) else { return nil }
            selectedCompanyID = id
            return enter(company)
        case .loggedIn(let id):
            guard let index = companies.firstIndex(where: { $0.id == id }) else { return .loadCompanies }
            if companies[index].requiresCredential { companies[index] = companies[index].withCredential }
            screen = .home(companies[index])
            return nil
        case .loginFailed(let error):
            guard let company = current else { return nil }
            if error.code == .insufficientAal { return .checkSecondFactor(companyID: company.id) }
            if error.code == .webauthnCredentialNotFound || error == .authenticator(.noCredential) {
                // No passkey for this company here: on to the password.
                companiesWithoutPasskey.insert(company.id)
                screen = .companyLogin(company, error: nil)
                return nil
            }
            switch error {
            case .authenticator(.cancelled): screen = .companyLogin(company, error: nil)
            case .lockedOut(let until): screen = .lockedOut(company, until: until)
            case .sessionExpired: return handle(.signedOut(.sessionEnded))
            case .companyAccessRevoked: return handle(.accessRevoked(companyID: company.id))
            default:
                screen =
                    company.hasCredential
                    ? .companyLogin(company, error: error) : .createCredential(company, error: error)
            }
            return nil
        case .tick(let now):
            if case .lockedOut(let company, let until) = screen, now >= until {
                screen = .companyLogin(company, error: nil)
            }
            notice = carried
            return nil
        case .switchCompany:
            screen = .companies(companies)
            return nil
        case .signedOut(let reason):
            companies = []
            screen = .signIn(notice: reason == .sessionEnded ? .sessionExpired : nil)
            return nil
        case .accessRevoked(let id):
            let name = companies.first { $0.id == id }?.name ?? ""
            companies.removeAll { $0.id == id }
            if selectedCompanyID == id { selectedCompanyID = nil }
            if current?.id == id || screen == .loadingCompanies {
                screen = companies.isEmpty ? .welcome : .companies(companies)
            }
            notice = .removedFromCompany(name: name)
            return .loadCompanies
        case .companySessionEnded:
            guard case .home(let company) = screen else { return nil }
            screen = .companyLogin(company, error: .sessionExpired)
            return nil
        case .secondFactorRequired(let id, let enrolled):
            return secondFactorRequired(companyID: id, enrolled: enrolled)
        case .secondFactorVerified:
            return secondFactorVerified()
        case .secondFactorFailed(let error):
            guard case .secondFactor(let company, _) = screen else { return nil }
            if error == .sessionExpired { return handle(.signedOut(.sessionEnded)) }
            screen = .secondFactor(company: company, error: error)
            return nil
        case .sessionLocked:
            screen = .locked(.device)
            return nil
        case .retryRestore:
            guard screen == .locked(.device) else { return nil }
            screen = .launching
            return .restoreSession
        case .appLocked, .appUnlocked:
            return nil
        }
    }

    /// The second-factor step, or for a company when the account has no factor, the screen asking to set one up.
    private mutating func secondFactorRequired(companyID: String?, enrolled: Bool) -> Effect? {
        guard let companyID else {
            guard enrolled else { return handle(.signedIn) }
            screen = .secondFactor(company: nil, error: nil)
            return nil
        }
        guard let company = companies.first(where: { $0.id == companyID }) else { return nil }
        selectedCompanyID = companyID
        screen = enrolled ? .secondFactor(company: company, error: nil) : .secondFactorSetupRequired(company)
        return nil
    }

    /// On to the company list after the account sign-in, or back to the login of the company that asked.
    private mutating func secondFactorVerified() -> Effect? {
        let asked: CompanySummary?
        switch screen {
        case .secondFactor(let company, _): asked = company
        case .secondFactorSetupRequired(let company): asked = company
        default: return nil
        }
        guard let company = asked else {
            screen = .loadingCompanies
            return .loadCompanies
        }
        if !company.requiresCredential {
            screen = .companyLogin(company, error: nil)
            return .loginWithoutCredential(companyID: company.id)
        }
        screen = company.hasCredential ? .companyLogin(company, error: nil) : .createCredential(company, error: nil)
        return .retryLogin(companyID: company.id)
    }

    /// The company on screen, if any.
    private var current: CompanySummary? {
        switch screen {
        case .companyLogin(let company, _), .createCredential(let company, _), .lockedOut(let company, _),
            .home(let company), .secondFactor(let company?, _), .secondFactorSetupRequired(let company):
            return company
        default: return nil
        }
    }

    private mutating func enter(_ company: CompanySummary) -> Effect? {
        if !company.requiresCredential {
            screen = .companyLogin(company, error: nil)
            return .loginWithoutCredential(companyID: company.id)
        }
        screen = company.hasCredential ? .companyLogin(company, error: nil) : .createCredential(company, error: nil)
        return nil
    }
}
