import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// A user's page in the console (`/console/users/{id}`): the account, its identities, second factors, passkeys,
/// sessions, companies and recent audit, and the forms of the actions on it (`ConsoleUserActions`).
struct ConsoleUserPage: Sendable {
    let kit: ConsoleKit
    let admin: AdminService
    let factors: FactorService
    let passkeys: PasskeyService
    let sessions: SessionService

    /// How many of the account's latest audit events the page shows.
    static let auditLength = 20

    /// What the page may say after an action, by its `notice` parameter.
    static let notices = [
        "banned": "user_notice_banned", "unbanned": "user_notice_unbanned",
        "factor_removed": "user_notice_factor_removed", "factors_removed": "user_notice_factors_removed",
        "session_ended": "user_notice_session_ended", "sessions_ended": "user_notice_sessions_ended",
        "recovery_sent": "user_notice_recovery_sent",
    ]

    /// The choices of the ban form: the form's value, its words, and GoTrue's `ban_duration`.
    static let banDurations: [(value: String, label: String, duration: String)] = [
        ("1h", "user_ban_hour", "1h"), ("1d", "user_ban_day", "24h"), ("7d", "user_ban_week", "168h"),
        ("30d", "user_ban_month", "720h"),
        // A century, the longest ban the admin API takes: a ban, so unbanning lifts it (a disable without an end
        // is the command line's, `gatehouse users disable`).
        ("lifted", "user_ban_until_lifted", "876000h"),
    ]

    /// A ban ending later than this from now is shown as lasting until lifted.
    static let untilLifted: TimeInterval = 50 * 365 * 86400

    init(kit: ConsoleKit, api: API) {
        self.kit = kit
        admin = api.admin
        factors = api.factors
        passkeys = api.passkeys
        sessions = api.accountSessions.sessions
    }

    /// The account of a path's id; anyone asking for one that is not there gets the 404 page.
    func account(_ rawID: String) async throws -> AccountRecord {
        guard let id = Secrets.identifier(rawID),
            let account = try await AccountDirectory(db: kit.store.database).find(id: id)
        else { throw APIError.noRoute }
        return account
    }

    func answer(_ rawID: String, _ console: ConsoleCaller, notice: String?) async throws -> WebAnswer {
        let account = try await account(rawID)
        return try await page(account, console, notice: notice.map { kit.text($0, console) })
    }

    /// The page of `account`, with a notice or an error (answered with `status`).
    func page(
        _ account: AccountRecord, _ console: ConsoleCaller, notice: String? = nil, error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> WebAnswer {
        let db = kit.store.database
        let now = kit.clock.now
        let user = try await admin.user(account.id)
        let factorList = user.factors ?? []
        let sessionList = try await sessions.list(accountID: account.id, current: "")
        let passkeyList = try await passkeys.adminList(accountID: account.id)
        let companies = try await CompanyDirectory(db: db).summaries(accountID: account.id)
        let audit = try await kit.trail.explore(
            AuditFilter(accountID: account.id), before: nil, limit: Self.auditLength)
        let email = ConsoleUsers.shownEmail(account, console, kit)
        var fields: [String: Any] = [
            "user_id": account.id, "email": email, "stored_email": account.email,
            "created": PageKit.dateText(account.createdAt),
            "last_sign_in": account.lastSignInAt.map(PageKit.dateText) ?? kit.text("console_never", console),
            "confirmed": account.emailConfirmedAt.map(PageKit.dateText) ?? kit.text("console_no", console),
            "ban": banText(account, console, now: now), "banned": ConsoleUsers.isBanned(account, now: now),
            "disabled_for_good": account.disabledAt != nil && account.bannedUntil == nil,
            "anonymous": account.isAnonymous, "sso": account.isSSOUser,
            // No mail reaches an anonymous or single sign-on account's placeholder address.
            "no_mail": account.isAnonymous || account.isSSOUser,
            "user_metadata": Self.pretty(account.userMetadata), "app_metadata": Self.pretty(account.appMetadata),
            "identities": user.identities.map { identity in
                [
                    "provider": identity.provider, "identity_email": identity.email ?? "",
                    "identity_created": PageKit.dateText(identity.createdAt),
                    "identity_last_sign_in": identity.lastSignInAt.map(PageKit.dateText)
                        ?? kit.text("console_never", console),
                ]
            },
            "has_identities": !user.identities.isEmpty,
            "factors": factorList.map { factor in
                [
                    "factor_id": factor.id, "factor_name": factor.friendlyName ?? "",
                    "factor_type": factor.factorType.rawValue, "factor_status": factor.status.rawValue,
                    "factor_created": PageKit.dateText(factor.createdAt),
                ]
            },
            "has_factors": !factorList.isEmpty,
            "passkeys": passkeyList.map { passkey in
                [
                    "passkey_name": passkey.friendlyName, "passkey_created": PageKit.dateText(passkey.createdAt),
                    "passkey_last_used": passkey.lastUsedAt.map(PageKit.dateText) ?? kit.text("console_never", console),
                    "passkey_synced": passkey.backedUp,
                ]
            },
            "has_passkeys": !passkeyList.isEmpty,
            "sessions": sessionList.map { session in
                [
                    "session_id": session.id, "device": PageKit.device(session.userAgent), "ip": session.ip ?? "",
                    "session_created": PageKit.dateText(session.createdAt),
                    "last_seen": PageKit.dateText(session.refreshedAt),
                ]
            },
            "has_sessions": !sessionList.isEmpty,
            "companies": companies.map { company in
                [
                    "company_href": "/console/companies/" + company.id, "company_name": company.name,
                    "role": company.role.rawValue,
                ]
            },
            "has_companies": !companies.isEmpty,
            "rows": audit.map(ConsoleAudit.row), "has_rows": !audit.isEmpty,
            "audit_href": ConsoleFilterParameters.link("/console/audit", [("actor", account.id)]),
            "durations": Self.banDurations.map { ["value": $0.value, "label": kit.text($0.label, console)] },
        ]
        if let notice { fields["notice"] = notice }
        if let error { fields["error"] = error }
        return kit.page(
            "user", title: kit.text("user_title", console, ["email": email]), fields, for: console, status: status,
            section: "users")
    }

    /// How the account is barred from signing in: not, until a time, until lifted, or disabled for good.
    private func banText(_ account: AccountRecord, _ console: ConsoleCaller, now: Date) -> String {
        guard ConsoleUsers.isBanned(account, now: now) else { return kit.text("user_not_banned", console) }
        guard let until = account.bannedUntil else { return kit.text("user_disabled", console) }
        if until.timeIntervalSince(now) > Self.untilLifted { return kit.text("user_banned_until_lifted", console) }
        return kit.text("user_banned_until", console, ["until": PageKit.dateText(until)])
    }

    /// Metadata as indented JSON, keys sorted.
    static func pretty(_ metadata: [String: JSONValue]) -> String {
        guard !metadata.isEmpty else { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(metadata)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
