import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// What an operator does to a user from the console: ban and unban, delete, remove second factors, end sessions, mail
/// a password reset, generate a sign-in link. Each is a form (`POST /console/users/{id}/{action}`) with the page's
/// token, answered first with a confirmation step, and done when the form comes back with `confirm=yes`. Each is
/// audited with the operator's id: by the admin service it goes through (`console.admin`), else `ConsoleKit.record`.
struct ConsoleUserActions: Sendable {
    let kit: ConsoleKit
    let admin: AdminService
    let signUps: SignUpService
    let factors: FactorService
    let page: ConsoleUserPage

    enum Action: String, Sendable {
        case ban, unban, delete
        case removeFactor = "remove-factor"
        case endSession = "end-session"
        case recovery, link
    }

    /// Every action's form; each reads the fields it needs.
    struct Form: Decodable, Sendable {
        let csrfToken: String?
        let confirm: String?
        /// The ban's length (`ConsoleUserPage.banDurations`).
        let duration: String?
        /// One factor or session; none for all of them.
        let factorID: String?
        let sessionID: String?
        /// The link's kind: `magiclink` or `recovery`.
        let type: String?

        enum CodingKeys: String, CodingKey {
            case confirm, duration, type
            case csrfToken = "csrf_token"
            case factorID = "factor_id"
            case sessionID = "session_id"
        }

        var confirmed: Bool { confirm == "yes" }
    }

    init(kit: ConsoleKit, api: API, page: ConsoleUserPage) {
        self.kit = kit
        admin = api.admin
        signUps = api.signUps
        factors = api.factors
        self.page = page
    }

    /// Checks the form (same site, the session's token, an operator still), then asks or acts. A refusal of the
    /// service (a user owning companies cannot be deleted, an anonymous one has no address to mail) is the user's
    /// page with the refusal's words and status.
    func perform(_ action: Action, on rawID: String, _ form: Form) async throws -> WebAnswer {
        let console = try await kit.form(token: form.csrfToken)
        let account = try await page.account(rawID)
        do {
            // An operator's account, the caller's own included, is changed from the command line only: one operator
            // generating a link for another, or removing the other's factor, would take over that console.
            if action != .recovery, action != .unban,
                try await kit.isOperator(account.id) || account.id == console.operatorID
            {
                throw ConsoleBadRequest("users_operator_protected")
            }
            switch action {
            case .ban: return try await ban(account, form, console)
            case .unban: return try await unban(account, form, console)
            case .delete: return try await delete(account, form, console)
            case .removeFactor: return try await removeFactors(account, form, console)
            case .endSession: return try await endSessions(account, form, console)
            case .recovery: return try await recovery(account, form, console)
            case .link: return try await link(account, form, console)
            }
        } catch let refusal as APIError {
            return try await page.page(
                account, console, error: kit.pages.pageMessage(refusal, console.language), status: refusal.status)
        } catch let bad as ConsoleBadRequest {
            return try await page.page(
                account, console, error: kit.text(bad.key, console, bad.values), status: .badRequest)
        }
    }

    // MARK: The actions

    private func ban(_ account: AccountRecord, _ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        guard let choice = ConsoleUserPage.banDurations.first(where: { $0.value == form.duration }) else {
            throw ConsoleBadRequest("user_error_duration")
        }
        try refuseDisabledForGood(account)
        guard form.confirmed else {
            return ask(
                account, console, "ban", fields: ["duration": choice.value],
                values: ["duration": kit.text(choice.label, console)])
        }
        _ = try await admin.update(
            account.id, Schemas.AdminUserAttributes(banDuration: choice.duration), by: console.admin)
        return back(account, "banned", console)
    }

    private func unban(_ account: AccountRecord, _ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        try refuseDisabledForGood(account)
        guard form.confirmed else { return ask(account, console, "unban", danger: false) }
        _ = try await admin.update(account.id, Schemas.AdminUserAttributes(banDuration: "none"), by: console.admin)
        return back(account, "unbanned", console)
    }

    /// An account disabled at the command line (`gatehouse users disable`) has no ban to set or lift: only
    /// `gatehouse users enable` ends it (`BanDuration.apply`).
    private func refuseDisabledForGood(_ account: AccountRecord) throws {
        if account.disabledAt != nil, account.bannedUntil == nil { throw ConsoleBadRequest("user_error_disabled") }
    }

    private func delete(_ account: AccountRecord, _ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        guard form.confirmed else { return ask(account, console, "delete") }
        try await admin.delete(account.id, by: console.admin)
        await kit.record(console, "user_deleted", accountID: account.id)
        return .redirect("/console/users?notice=deleted", cookies: console.cookies)
    }

    /// Removes one factor, or every factor when the form names none. Removing the last authenticator app takes the
    /// recovery codes with it (`FactorService.adminDelete`); each removal is audited `factor_deleted`.
    private func removeFactors(
        _ account: AccountRecord, _ form: Form, _ console: ConsoleCaller
    ) async throws -> WebAnswer {
        let one = form.factorID.flatMap { $0.isEmpty ? nil : $0 }
        guard form.confirmed else {
            return ask(
                account, console, one == nil ? "remove_factors" : "remove_factor", fields: ["factor_id": one ?? ""])
        }
        let event = console.admin.event(.factorDeleted, accountID: account.id)
        if let one {
            _ = try await factors.adminDelete(accountID: account.id, rawFactorID: one, event: event)
            return back(account, "factor_removed", console)
        }
        // Apps first: the codes may go with the last of them.
        for factor in try await factors.factors(accountID: account.id).sorted(by: {
            $0.factorType == .totp && $1.factorType != .totp
        }) {
            do {
                _ = try await factors.adminDelete(accountID: account.id, rawFactorID: factor.id, event: event)
            } catch let gone as APIError where gone.status == .notFound {
                continue
            }
        }
        return back(account, "factors_removed", console)
    }

    /// Ends one session (and the company sessions opened from it), or every session of the account when the form
    /// names none; audited `session_revoked` or `signed_out_everywhere`. Its refresh tokens stop working at once.
    private func endSessions(
        _ account: AccountRecord, _ form: Form, _ console: ConsoleCaller
    ) async throws -> WebAnswer {
        let one = form.sessionID.flatMap { $0.isEmpty ? nil : $0 }
        guard form.confirmed else {
            return ask(account, console, one == nil ? "end_sessions" : "end_session", fields: ["session_id": one ?? ""])
        }
        let now = kit.clock.now
        let ended = try await kit.store.transaction { [kit] db in
            let ended = try await SessionChanges(db: db).end(
                one.map { .session($0, accountID: account.id) } ?? .account(account.id), now: now)
            let event =
                if let one {
                    console.admin.event(.sessionRevoked, accountID: account.id, detail: ["session": one])
                } else {
                    console.admin.event(
                        .signedOutEverywhere, accountID: account.id, detail: ["sessions": String(ended.count)])
                }
            if one == nil || !ended.isEmpty { try await kit.trail.within(db).record(event) }
            return ended
        }
        if one != nil, ended.isEmpty { throw APIError.notFound("No such session") }
        return back(account, one == nil ? "sessions_ended" : "session_ended", console)
    }

    /// Mails the user a password reset, as the recovery endpoint does (its cooldown and audit), and records the
    /// operator who sent it.
    private func recovery(_ account: AccountRecord, _ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        guard form.confirmed else { return ask(account, console, "recovery", danger: false) }
        try await signUps.recover(
            Schemas.EmailRequest(email: account.email), redirectTo: nil, client: console.caller.client)
        await kit.record(console, "recovery_mail_sent", accountID: account.id)
        return back(account, "recovery_sent", console)
    }

    /// A sign-in link made for the operator to hand over (`AdminService.generateLink`, audited
    /// `admin_link_generated`), shown once on the page this answers and never mailed.
    private func link(_ account: AccountRecord, _ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        guard let type = form.type.flatMap(Schemas.GenerateLinkRequest._TypePayload.init(rawValue:)),
            type == .magiclink || type == .recovery
        else { throw ConsoleBadRequest("user_error_link_type") }
        guard form.confirmed else {
            return ask(account, console, "link_" + type.rawValue, fields: ["type": type.rawValue])
        }
        let made = try await admin.generateLink(
            Schemas.GenerateLinkRequest(_type: type, email: account.email), redirectTo: nil, by: console.admin)
        let email = ConsoleUsers.shownEmail(account, console, kit)
        return kit.page(
            "user-link", title: kit.text("user_link_title", console, ["email": email]),
            [
                "user_id": account.id, "email": email, "action_link": made.value2.actionLink,
                "email_otp": made.value2.emailOtp,
            ], for: console, section: "users")
    }

    // MARK: Answers

    /// The confirmation step of `action` (its strings `user_confirm_<action>_title`, `…_text`, `…_button`), posting
    /// `fields` back with `confirm=yes`.
    private func ask(
        _ account: AccountRecord, _ console: ConsoleCaller, _ action: String, fields: [String: String] = [:],
        values: [String: String] = [:], danger: Bool = true
    ) -> WebAnswer {
        let values = values.merging(["email": ConsoleUsers.shownEmail(account, console, kit)]) { given, _ in given }
        let key = "user_confirm_" + action
        let path = action.hasPrefix("link_") ? "link" : Self.paths[action] ?? action
        return kit.confirmation(
            console, title: kit.text(key + "_title", console, values),
            explanation: kit.text(key + "_text", console, values),
            action: "/console/users/\(account.id)/\(path)", fields: fields.filter { !$0.value.isEmpty },
            button: kit.text(key + "_button", console, values), danger: danger, back: "/console/users/\(account.id)")
    }

    /// The form path of each confirmation's action, where it differs from the strings' name.
    private static let paths = [
        "remove_factor": "remove-factor", "remove_factors": "remove-factor", "end_session": "end-session",
        "end_sessions": "end-session",
    ]

    /// Back to the user's page, saying what was done.
    private func back(_ account: AccountRecord, _ notice: String, _ console: ConsoleCaller) -> WebAnswer {
        .redirect("/console/users/\(account.id)?notice=\(notice)", cookies: console.cookies)
    }
}
