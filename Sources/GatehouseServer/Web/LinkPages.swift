import Foundation
import GatehouseAPI

/// The page a mailed link opens and its Continue button (`LinkPageRoutes`).
struct LinkPages: Sendable {
    let kit: PageKit
    /// Where a link's button goes (its redirect, checked against the allow-list).
    let mail: AccountMail
    /// Read a link's codes (`OneTimeCodes`) without spending them.
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    /// Spends a link when its button is pressed.
    let verification: VerificationService

    // MARK: Mailed links

    /// The page a mailed link opens. Opening it spends nothing (mail scanners fetch links, with GET and HEAD); the
    /// person's one tap on Continue does. It also shows the link's six digits, for typing into the app on another
    /// device. A link that no longer works gets a page saying whether it was used or expired.
    func linkLanding(token: String, type: String, redirectTo: String?) async throws -> WebAnswer {
        let target = mail.redirectTarget(redirectTo)
        let codes = OneTimeCodes(db: store.database, clock: clock, settings: settings)
        guard let purposes = CodePurpose.accepted(byVerifyType: type), !token.isEmpty,
            try await codes.isLive(linkToken: token, purposes: purposes)
        else { return spentLink(try await codes.spentState(linkToken: token), type: type) }
        let code = Secrets.sixDigitCode(linkedTo: token)
        let title =
            switch type {
            case "recovery": "link_title_recovery"
            case "signup": "link_title_signup"
            case "email_change": "link_title_email_change"
            default: "link_title_sign_in"
            }
        let language = kit.language(account: nil)
        let html = kit.render(
            "link", page: "link", title: kit.text(title, language),
            [
                "token": token, "type": type, "redirect_to": target, "code": code,
                "code_spoken": code.map(String.init).joined(separator: " "),
                "expires_minutes": settings.codeLifetimeMinutes,
            ], language: language)
        var answer = WebAnswer.page(html)
        // The button's post is answered with a redirect to the app, which the policy's form-action must allow.
        answer.headers[SecurityHeaders.contentSecurityPolicy] = SecurityHeaders.pagePolicy(
            formTargets: landsHere(target) ? [] : [target])
        return answer
    }

    /// The landing page's button: to the app, or, for a link without an app redirect, signs this browser in and
    /// shows the result (a recovery link goes on to the new-password form).
    func continueLink(token: String, type: String, redirectTo: String?) async throws -> WebAnswer {
        let client = try kit.access.client()
        let target = mail.redirectTarget(redirectTo)
        let outcome = try await verification.continueLink(
            token: token, type: type, target: target, landsHere: landsHere(target),
            sameOrigin: LinkPage.isSameOrigin(kit.requestHeaders, publicURL: kit.publicURL), client: client)
        switch outcome {
        case .app(let redirect):
            return .redirect(redirect)
        case .spent(let state):
            return spentLink(state, type: type)
        case .confirmedOnce:
            return kit.message(
                page: "confirmed", titleKey: "link_confirmed_once_title",
                keys: ["link_confirmed_once", "link_confirmed_once_wait"], language: kit.language(account: nil))
        case .here(let signedIn, let purpose):
            let cookies = kit.session.cookies(for: signedIn)
            // Signed in now, the page speaks the account's language.
            let language = kit.language(account: Mailer.locale(in: signedIn.user.userMetadata))
            switch purpose {
            case .recovery:
                return WebAnswer.redirect("/account/password", cookies: cookies)
            case .signup, .emailChange:
                return kit.message(
                    page: "confirmed", titleKey: "link_confirmed_title", keys: ["link_confirmed"], language: language,
                    accountLink: true, cookies: cookies)
            default:
                return kit.message(
                    page: "confirmed", titleKey: "link_signed_in_title", keys: ["link_signed_in"], language: language,
                    accountLink: true, cookies: cookies)
            }
        }
    }

    /// Whether a link's target is this server itself (no app redirect was set), so the result is shown here.
    func landsHere(_ target: String) -> Bool {
        guard let own = URLComponents(string: kit.publicURL), let given = URLComponents(string: target) else {
            return false
        }
        return own.scheme?.lowercased() == given.scheme?.lowercased()
            && own.host?.lowercased() == given.host?.lowercased()
            && own.port == given.port && ["", "/"].contains(given.path)
    }

    /// The result of a link that no longer works.
    func spentLink(_ state: LinkState, type: String) -> WebAnswer {
        let purpose = type == "recovery" ? "recovery" : "magiclink"
        let language = kit.language(account: nil)
        switch state {
        case .used:
            return kit.message(
                page: "used", titleKey: "link_used_title", keys: ["link_used", "link_used_again"], language: language,
                newLink: purpose, signInLink: true)
        case .expired:
            return kit.message(
                page: "expired", titleKey: "link_expired_title", keys: ["link_expired"],
                ["minutes": settings.codeLifetimeMinutes], language: language, newLink: purpose, signInLink: true)
        }
    }
}
