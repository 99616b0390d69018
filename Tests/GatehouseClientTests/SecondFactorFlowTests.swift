import Foundation
import Testing

@testable import GatehouseClient

/// The login flow's second-factor step as a pure state machine (no I/O), and the assurance level read from the access
/// token. `ClientMFATests` runs `client.auth.mfa` against the server.
@Suite("GatehouseClient second factor, the flow")
struct SecondFactorFlowTests {
    let acme = CompanySummary(id: "acme", name: "Acme", hasCredential: true, requiresMFA: true)
    let openCo = CompanySummary(
        id: "open", name: "Open Co", hasCredential: false, requiresCredential: false, requiresMFA: true)
    let fresh = CompanySummary(id: "fresh", name: "Fresh Co", hasCredential: false, requiresMFA: true)
    static let insufficient = GatehouseError.server(
        status: 403, code: "insufficient_aal", message: "This company requires a second factor")

    @Test("Assurance from the access token's aal and amr claims, and the factors the account has")
    func assuranceFromToken() {
        let aal1 = Self.token(["aal": "aal1", "amr": [["method": "password", "timestamp": 1]]])
        let aal2 = Self.token([
            "aal": "aal2", "amr": [["method": "totp", "timestamp": 2], ["method": "password", "timestamp": 1]],
        ])
        let verified = Factor(id: "f1", type: .totp, status: .verified)
        let unverified = Factor(id: "f2", type: .totp, status: .unverified)
        let level = AssuranceLevel(accessToken: aal1, factors: [verified])
        #expect(level == AssuranceLevel(current: .aal1, next: .aal2, methods: ["password"]))
        #expect(level.needsSecondFactor)
        #expect(AssuranceLevel(accessToken: aal1, factors: [unverified]).next == .aal1)
        #expect(!AssuranceLevel(accessToken: aal1, factors: []).needsSecondFactor)
        let raised = AssuranceLevel(accessToken: aal2, factors: [verified])
        #expect(raised == AssuranceLevel(current: .aal2, next: .aal2, methods: ["totp", "password"]))
        #expect(!raised.needsSecondFactor)
        // A token without the claims (or not a JWT) reads as aal1 with no methods.
        #expect(AssuranceLevel(accessToken: "opaque", factors: []) == AssuranceLevel(current: .aal1, next: .aal1))
        #expect(Factor.Kind(rawValue: "webauthn") != .totp)
    }

    @Test("Signed in with a verified factor at aal1: the second-factor step, a wrong code, then the company list")
    func afterSignIn() {
        var flow = LoginFlow()
        _ = flow.handle(.restored(signedIn: false))
        let event = LoginFlow.signedIn(at: AssuranceLevel(current: .aal1, next: .aal2))
        #expect(event == .secondFactorRequired(companyID: nil, enrolled: true))
        #expect(flow.handle(event) == nil)
        #expect(flow.screen == .secondFactor(company: nil, error: nil))
        let wrong = GatehouseError.server(status: 422, code: "mfa_verification_failed", message: "Invalid TOTP code")
        #expect(flow.handle(.secondFactorFailed(wrong)) == nil)
        #expect(flow.screen == .secondFactor(company: nil, error: wrong))
        #expect(flow.handle(.secondFactorVerified) == .loadCompanies)
        #expect(flow.screen == .loadingCompanies)
        _ = flow.handle(.companiesLoaded([acme]))
        #expect(flow.screen == .companies([acme]))
        // Already aal2, or no factor at all: straight on, as before.
        #expect(LoginFlow.signedIn(at: AssuranceLevel(current: .aal2, next: .aal2)) == .signedIn)
        #expect(LoginFlow.signedIn(at: AssuranceLevel(current: .aal1, next: .aal1)) == .signedIn)
        // A verification the flow was not waiting for changes nothing.
        #expect(flow.handle(.secondFactorVerified) == nil)
        #expect(flow.screen == .companies([acme]))
    }

    @Test("The session ends during the second-factor step: back to the sign-in, with the reason")
    func endsDuringStep() {
        var flow = LoginFlow()
        _ = flow.handle(.secondFactorRequired(companyID: nil, enrolled: true))
        #expect(flow.handle(.secondFactorFailed(.sessionExpired)) == nil)
        #expect(flow.screen == .signIn(notice: .sessionExpired))
        _ = flow.handle(.secondFactorRequired(companyID: nil, enrolled: true))
        _ = flow.handle(.signedOut(.requested))
        #expect(flow.screen == .signIn(notice: nil))
        // Told there is no factor to verify, the flow goes on to the companies.
        #expect(flow.handle(.secondFactorRequired(companyID: nil, enrolled: false)) == .loadCompanies)
    }

    @Test("A company login refused for want of a second factor: check, the step, then the login again")
    func companyRequiresIt() {
        var flow = LoginFlow(selectedCompanyID: "acme")
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.companiesLoaded([acme, openCo, fresh]))
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(flow.handle(.loginFailed(Self.insufficient)) == .checkSecondFactor(companyID: "acme"))
        let event = LoginFlow.companyNeedsSecondFactor("acme", at: AssuranceLevel(current: .aal1, next: .aal2))
        #expect(event == .secondFactorRequired(companyID: "acme", enrolled: true))
        #expect(flow.handle(event) == nil)
        #expect(flow.screen == .secondFactor(company: acme, error: nil))
        #expect(flow.handle(.secondFactorVerified) == .retryLogin(companyID: "acme"))
        #expect(flow.screen == .companyLogin(acme, error: nil))
        #expect(flow.handle(.loggedIn(companyID: "acme")) == nil)
        #expect(flow.screen == .home(acme))

        // A company without a credential is logged in to again without one.
        _ = flow.handle(.switchCompany)
        #expect(flow.handle(.selected(companyID: "open")) == .loginWithoutCredential(companyID: "open"))
        #expect(flow.handle(.loginFailed(Self.insufficient)) == .checkSecondFactor(companyID: "open"))
        _ = flow.handle(.secondFactorRequired(companyID: "open", enrolled: true))
        #expect(flow.handle(.secondFactorVerified) == .loginWithoutCredential(companyID: "open"))
        #expect(flow.handle(.loggedIn(companyID: "open")) == nil)
        #expect(flow.screen == .home(openCo))

        // The retried login can still be refused for its password.
        _ = flow.handle(.switchCompany)
        _ = flow.handle(.selected(companyID: "acme"))
        _ = flow.handle(.secondFactorRequired(companyID: "acme", enrolled: true))
        _ = flow.handle(.secondFactorVerified)
        _ = flow.handle(.loginFailed(.invalidCredentials))
        #expect(flow.screen == .companyLogin(acme, error: .invalidCredentials))
    }

    @Test("A company requires a second factor the account has not set up: say so, then set up, verify, log in")
    func setupRequired() {
        var flow = LoginFlow()
        _ = flow.handle(.restored(signedIn: true))
        _ = flow.handle(.companiesLoaded([acme, fresh]))
        _ = flow.handle(.selected(companyID: "fresh"))
        #expect(flow.screen == .createCredential(fresh, error: nil))
        #expect(flow.handle(.loginFailed(Self.insufficient)) == .checkSecondFactor(companyID: "fresh"))
        let event = LoginFlow.companyNeedsSecondFactor("fresh", at: AssuranceLevel(current: .aal1, next: .aal1))
        #expect(event == .secondFactorRequired(companyID: "fresh", enrolled: false))
        #expect(flow.handle(event) == nil)
        #expect(flow.screen == .secondFactorSetupRequired(fresh))
        // Back to the list, or on: a factor enrolled now is verified at the step.
        #expect(flow.handle(.switchCompany) == nil)
        #expect(flow.screen == .companies([acme, fresh]))
        _ = flow.handle(.selected(companyID: "fresh"))
        _ = flow.handle(.loginFailed(Self.insufficient))
        _ = flow.handle(.secondFactorRequired(companyID: "fresh", enrolled: false))
        _ = flow.handle(.secondFactorRequired(companyID: "fresh", enrolled: true))
        #expect(flow.screen == .secondFactor(company: fresh, error: nil))
        #expect(flow.handle(.secondFactorVerified) == .retryLogin(companyID: "fresh"))
        #expect(flow.handle(.loggedIn(companyID: "fresh")) == nil)
        #expect(flow.screen == .home(fresh.withCredential))
        // An unknown company asking is ignored.
        #expect(flow.handle(.secondFactorRequired(companyID: "gone", enrolled: true)) == nil)
        #expect(flow.screen == .home(fresh.withCredential))
    }

    /// An unsigned JWT with `claims`, for reading the assurance level without a server.
    static func token(_ claims: [String: Any]) -> String {
        let payload = (try? JSONSerialization.data(withJSONObject: claims)) ?? Data()
        return "eyJhbGciOiJub25lIn0." + base64URL(payload) + ".c2ln"
    }
}
