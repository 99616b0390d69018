import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// An operator in the console: signed in with a second factor, the role read fresh on this request. Only
/// `ConsoleKit.enter` makes one.
struct ConsoleCaller: Sendable {
    let caller: Caller
    /// Cookies of a web session refreshed on the way in, to send back.
    let cookies: [String]
    /// The forms' token (`csrf_token`), bound to this session.
    let formToken: String
    /// The language the console speaks to this operator.
    let language: String
    let email: String

    var operatorID: String { caller.accountID }

    /// The admin API's rules, audited `by: console` with this operator's id.
    var admin: AdminCaller { .console(operatorID: caller.accountID, client: caller.client) }
}

/// What every console page shares: who may enter (`enter`), the layout, the forms' check, the confirmation step and
/// the audit of each action. The console's pages are the account pages' kind (`PageKit`): server-rendered mustache,
/// the same style and content security policy, no script of their own but the SVG the server draws.
///
/// Entering takes, on every request: a web session (the account pages' sign-in), the operator role, and a second
/// factor (aal2 from an authenticator app, or a passkey sign-in, which verified its user). Anyone else gets the
/// router's own 404, as for a path that does not exist; an operator at aal1 is sent to the second-factor page. A
/// console session ends after `idleLimit` without a request, or `lifetime` after it began, and its account session
/// with it: the operator signs in again.
struct ConsoleKit: Sendable {
    let pages: PageKit
    let store: Store
    let clock: any GatehouseClock
    let box: SecretBox
    let trail: AuditTrail
    let accountSessions: AccountSessions
    /// Whether an operator at aal1 has a code to give.
    let factors: FactorService

    static let idleLimit: TimeInterval = 15 * 60
    static let lifetime: TimeInterval = 8 * 3600
    /// The cookie that brings a browser back to the console page it asked for after signing in (`AccountPages`).
    static let returnCookie = "gh_console_return"

    /// The operator behind this request, or the answer that sends anyone else away.
    func enter() async throws -> ConsoleCaller {
        let path = RequestScope.current?.path ?? "/console"
        guard let (caller, cookies) = try await pages.caller() else {
            // A web session whose access token has expired: the refresh cookie goes to the account pages only, so
            // the sign-in page renews it there and the browser comes back (`returnCookie`). No session at all: 404.
            guard WebSession.read(WebSession.accessCookie, from: pages.requestHeaders) != nil else {
                throw APIError.noRoute
            }
            throw WebAnswer.redirect("/account/sign-in", cookies: [returnCookie(Self.returnPath(path))])
        }
        let repository = ConsoleRepository(db: store.database)
        guard try await repository.isOperator(caller.accountID) else { throw APIError.noRoute }
        guard Self.hasSecondFactor(caller.identity) else {
            let verified = try await factors.factors(accountID: caller.accountID)
                .contains { $0.factorType == .totp && $0.status == .verified }
            guard verified else {
                let account = try await AccountDirectory(db: store.database).find(id: caller.accountID)
                throw pages.message(
                    page: "console-needs-factor", titleKey: "console_needs_factor_title",
                    keys: ["console_needs_factor"],
                    language: pages.language(account: Mailer.locale(in: account?.userMetadata)), status: .forbidden,
                    accountLink: true, cookies: cookies)
            }
            throw WebAnswer.redirect(
                "/account/second-factor", cookies: cookies + [returnCookie(Self.returnPath(path))])
        }
        let now = clock.now
        let sessionID = caller.identity.sessionID
        if let seen = try await repository.consoleSession(sessionID) {
            let idle = now.timeIntervalSince(seen.lastSeenAt) >= Self.idleLimit
            if idle || now.timeIntervalSince(seen.startedAt) >= Self.lifetime {
                // The account session first: were the row forgotten and the sign-out to fail, the next request
                // would start a new console session on the same account session.
                try await accountSessions.logout(.local, by: caller)
                try await repository.endConsoleSession(sessionID)
                await trail.record(
                    caller.client.event(
                        .consoleSessionEnded, accountID: caller.accountID,
                        detail: ["reason": idle ? "idle" : "lifetime", "session_id": sessionID]))
                throw WebAnswer.redirect(
                    "/account/sign-in?notice=console_ended",
                    cookies: pages.session.clearing + [returnCookie(Self.returnPath(path))])
            }
            try await repository.touchConsoleSession(sessionID, at: now)
        } else {
            try await repository.startConsoleSession(sessionID, accountID: caller.accountID, at: now)
            await trail.record(
                caller.client.event(
                    .consoleSessionStarted, accountID: caller.accountID, detail: ["session_id": sessionID]))
        }
        let account = try await AccountDirectory(db: store.database).find(id: caller.accountID)
        return ConsoleCaller(
            caller: caller, cookies: cookies,
            formToken: PasskeyPages.pageTokens(sessionID: sessionID, box: box)[0],
            language: pages.language(account: Mailer.locale(in: account?.userMetadata)),
            email: account?.email ?? caller.identity.email)
    }

    /// aal2 by a code, or a passkey sign-in (a passkey verifies its user: something held and something known or
    /// been).
    static func hasSecondFactor(_ identity: Identity) -> Bool {
        identity.aal == .aal2 || identity.claims.amr.contains { $0.method == "passkey" }
    }

    /// A console path to come back to after signing in; anything else is the overview.
    static func returnPath(_ path: String) -> String {
        let console = path == "/console" || path.hasPrefix("/console/")
        // The OAuth provider's consent and device pages come back the same way (`OAuthPages`).
        let oauth =
            path.hasPrefix("/account/authorize?") || path == "/account/device"
            || path.hasPrefix("/account/device?")
        guard console || oauth, !path.contains("//"), !path.contains("\\") else { return "/console" }
        return path
    }

    func returnCookie(_ path: String) -> String {
        Self.returnCookie(path, secure: pages.session.secure)
    }

    /// The return cookie for `path`, ten minutes, sent to the account pages only.
    static func returnCookie(_ path: String, secure: Bool) -> String {
        let value = returnPath(path).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "%2Fconsole"
        return "\(returnCookie)=\(value); Path=/account; Max-Age=600; HttpOnly; SameSite=Lax"
            + (secure ? "; Secure" : "")
    }

    static func returnCookieClearing(secure: Bool) -> String {
        "\(returnCookie)=; Path=/account; Max-Age=0; HttpOnly; SameSite=Lax" + (secure ? "; Secure" : "")
    }

    /// Whether the account holds the operator role.
    func isOperator(_ accountID: String) async throws -> Bool {
        try await ConsoleRepository(db: store.database).isOperator(accountID)
    }

    // MARK: Pages

    /// Console page `name` (`console-NAME.mustache`) in the operator's language, with the layout's navigation, the
    /// operator's address and the forms' token.
    func page(
        _ name: String, title: String, _ fields: [String: Any], for console: ConsoleCaller,
        status: HTTPResponse.Status = .ok, section: String
    ) -> WebAnswer {
        var context = fields
        context["operator_email"] = console.email
        context["csrf_token"] = console.formToken
        context["section_" + section] = true
        return .page(
            pages.render(
                "console-\(name)", page: "console-\(name)", title: title, context, language: console.language),
            status: status, cookies: console.cookies)
    }

    /// A strings-table word for the operator's language, for titles written in Swift.
    func text(_ key: String, _ console: ConsoleCaller, _ values: [String: Any] = [:]) -> String {
        pages.text(key, console.language, values)
    }

    // MARK: Forms

    /// The operator posting a console form: same origin, the session's token, and still an operator at aal2.
    func form(token: String?) async throws -> ConsoleCaller {
        _ = try await pages.formClient()
        let console = try await enter()
        try PasskeyPages.checkPageToken(token, caller: console.caller, box: box)
        return console
    }

    /// The page that asks before an action: what it does, and a form posting `fields` to `action` again with
    /// `confirm=yes`.
    func confirmation(
        _ console: ConsoleCaller, title: String, explanation: String, action: String, fields: [String: String],
        button: String, danger: Bool = true, back: String
    ) -> WebAnswer {
        let hidden = fields.sorted { $0.key < $1.key }.map { ["name": $0.key, "value": $0.value] }
        return page(
            "confirm", title: title,
            [
                "explanation": explanation, "action": action, "hidden": hidden, "button": button, "danger": danger,
                "back": back,
            ], for: console, section: "none")
    }

    /// Records an operator's action in the console (for one that no admin service records itself).
    func record(
        _ console: ConsoleCaller, _ action: String, accountID: String? = nil, companyID: String? = nil,
        detail: [String: String] = [:]
    ) async {
        var event = console.caller.client.event(
            .consoleAction, accountID: accountID,
            detail: detail.merging(["action": action, "operator_id": console.operatorID]) { $1 })
        event.companyID = companyID
        await trail.record(event)
    }
}
