import Foundation
import GatehouseAPI
import HTTPTypes

/// The second-factor pages (`FactorPageRoutes`): setting up an authenticator app (QR code and the secret to type), the
/// recovery codes shown once, removing a factor, and the sign-in step that asks for a code when the account has a
/// verified factor.
struct FactorPages: Sendable {
    let kit: PageKit
    /// The account page, shown again with a notice when a change is refused; it also says whether the session must
    /// still give a code (`AccountPages.factorFields`).
    let accountPages: AccountPages
    let factors: FactorService

    // MARK: Setting one up

    /// Starts enrolling an authenticator app and shows its QR code and secret.
    func startFactor() async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        let language = kit.language(of: caller)
        do {
            let name = kit.text("account_factor_app", language) + " " + String(Secrets.identifier().prefix(4))
            let enrolled = try await factors.enroll(.init(factorType: "totp", friendlyName: name), by: caller)
            return factorSetup(
                id: enrolled.id, secret: enrolled.totp.secret, qrCode: enrolled.totp.qrCode, language: language,
                cookies: cookies)
        } catch let error as APIError {
            return try await accountPages.account(notice: .refused(error), status: error.status)
        }
    }

    private func factorSetup(
        id: String, secret: String, qrCode: String, error: String? = nil, status: HTTPResponse.Status = .ok,
        language: String, cookies: [String]
    ) -> WebAnswer {
        var fields: [String: Any] = [
            "factor_id": id, "qr_code": qrCode, "secret": RecoveryCodes.grouped(secret),
        ]
        if let error { fields["error"] = error }
        return .page(
            kit.render(
                "factor-setup", page: "factor-setup", title: kit.text("factor_setup_title", language), fields,
                language: language),
            status: status, cookies: cookies)
    }

    /// Verifies the new factor with its first code; the session becomes aal2, and the first time recovery codes are
    /// made and shown, once.
    func confirmFactor(id: String, code: String) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        let language = kit.language(of: caller)
        let raised: Schemas.Session
        do {
            raised = try await stepUp(factorID: id, code: code, caller: caller)
        } catch let error as APIError {
            guard let pending = try await factors.pendingEnrollment(id, caller: caller) else {
                return try await accountPages.account(notice: .refused(error), status: error.status)
            }
            return factorSetup(
                id: id, secret: pending.secret, qrCode: pending.qrCode, error: codeRefusal(error, language),
                status: error.status, language: language, cookies: cookies)
        }
        let newCookies = kit.session.cookies(for: raised)
        guard let upgraded = await kit.access.account(token: raised.accessToken),
            (try? await factors.recoveryStatus(by: upgraded)) == nil,
            let codes = try? await factors.generateRecoveryCodes(by: upgraded).codes
        else { return .redirect("/account?notice=factor_added", cookies: newCookies) }
        return .page(
            kit.render(
                "recovery-codes", page: "recovery-codes", title: kit.text("recovery_codes_title", language),
                ["codes": codes.map(RecoveryCodes.grouped)], language: language), cookies: newCookies)
    }

    /// Removes a factor (a verified one needs this session to have given a code).
    func removeFactor(id: String) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            let all = try await factors.factors(accountID: caller.accountID)
            let factor = all.first { $0.id == id }
            let lastApp = !all.contains { $0.factorType == .totp && $0.status == .verified && $0.id != id }
            // The codes stand beside an app, never alone: removing the last app here removes them too (the API asks
            // for the two steps).
            if factor?.factorType == .recoveryCode
                || (factor?.status == .verified && lastApp && all.contains { $0.factorType == .recoveryCode })
            {
                _ = try await factors.deleteRecoveryCodes(by: caller)
            }
            if factor?.factorType != .recoveryCode { _ = try await factors.unenroll(id, by: caller) }
        } catch let error as APIError {
            return try await accountPages.account(notice: .refused(error), status: error.status)
        }
        return .redirect("/account?notice=factor_removed", cookies: cookies)
    }

    // MARK: Signing in with a second factor

    /// The sign-in step after the password or mailed code, when the account has a verified factor.
    func secondFactorPage(error: APIError? = nil) async throws -> WebAnswer {
        let (caller, cookies) = try await kit.signedIn()
        guard try await accountPages.factorFields(caller).needsCode else {
            return .redirect("/account", cookies: cookies)
        }
        let language = kit.language(of: caller)
        var fields: [String: Any] = [:]
        if let error { fields["error"] = codeRefusal(error, language) }
        return .page(
            kit.render(
                "second-factor", page: "second-factor", title: kit.text("second_factor_title", language), fields,
                language: language),
            status: error?.status ?? .ok, cookies: cookies)
    }

    /// A code from the authenticator app (six digits) or a recovery code.
    func giveSecondFactor(code: String) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, _) = try await kit.signedIn()
        let digits = code.filter { !$0.isWhitespace }
        do {
            let raised: Schemas.Session
            if digits.count == TOTP.digits, digits.allSatisfy(\.isNumber) {
                guard
                    let factor = try await factors.factors(accountID: caller.accountID).first(where: {
                        $0.factorType == .totp && $0.status == .verified
                    })
                else { return .redirect("/account") }
                raised = try await stepUp(factorID: factor.id, code: digits, caller: caller)
            } else {
                raised = try await factors.verifyRecoveryCode(.init(code: code), by: caller)
            }
            return .redirect("/account", cookies: kit.session.cookies(for: raised))
        } catch let error as APIError {
            return try await secondFactorPage(error: error)
        }
    }

    private func stepUp(factorID: String, code: String, caller: Caller) async throws -> Schemas.Session {
        let challenge = try await factors.challenge(factorID, by: caller)
        return try await factors.verify(factorID, .init(challengeId: challenge.id, code: code), by: caller)
    }

    /// What the pages say when a code is refused.
    func codeRefusal(_ error: APIError, _ language: String) -> String {
        error.code == ErrorCode.mfaVerificationFailed.rawValue
            ? kit.text("factor_code_wrong", language) : kit.errorText(error, language)
    }
}
