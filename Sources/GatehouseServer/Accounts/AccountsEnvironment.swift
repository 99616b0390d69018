import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import Logging
import SQLKit

/// What the account and session endpoints share.
struct AccountsEnvironment: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let keys: SigningKeys
    let mailer: Mailer
    let hasher: PasswordHasher
    let limiter: RateLimiter
    let apple: AppleIdentityVerifier
    let publicURL: String
    let logger: Logger

    var siteURL: String { settings.siteURL ?? publicURL }

    /// Records an audit event in its own transaction.
    func audit(_ event: AuditEvent) async throws {
        try await store.transaction { db in try await AuditLog(db: db, clock: clock).record(event) }
    }

    /// The per-IP limit for `rule`, answered with 429 and `Retry-After` when spent.
    func limit(_ name: String, _ rule: RateLimit, client: ClientInfo, code: String = "over_request_rate_limit") throws {
        if let wait = limiter.check("\(name):\(client.ip ?? "unknown")", rule) {
            throw APIError.rateLimited(code, retryAfter: wait)
        }
    }

    /// Claims the resend cooldown of one address and purpose (whether or not it has an account).
    func claimCooldown(_ purpose: String, email: String) async throws -> String {
        let key = "cooldown:\(purpose):\(Secrets.digest(email))"
        let wait = try await store.transaction { db in
            try await CooldownRepository(db: db).claim(key, cooldown: settings.resendCooldown, now: clock.now)
        }
        if let wait {
            throw APIError.rateLimited(
                "over_email_send_rate_limit", retryAfter: wait,
                message: "For security purposes, you can only request this after \(wait) seconds.")
        }
        return key
    }

    /// Sends a mail; when it cannot be sent, undoes what `undo` names, frees the cooldown, and answers 503.
    func deliver(
        _ template: Mailer.Template, to email: String, cooldownKey: String,
        undo: @escaping @Sendable (any SQLDatabase) async throws -> Void = { _ in }
    ) async throws {
        do {
            try await mailer.send(template, to: email)
        } catch {
            logger.error(
                "mail could not be sent",
                metadata: ["to": "\(Secrets.emailDigest(email))", "error": "\(error)"])
            try await store.transaction { db in
                try await undo(db)
                try await CooldownRepository(db: db).release(cooldownKey)
            }
            throw APIError(
                .serviceUnavailable, code: "email_send_failed",
                message: "The email could not be sent right now; nothing was changed, please try again")
        }
    }

    /// Mails a code of `purpose` to the account at `email` when it exists, is not disabled and is `eligible`;
    /// otherwise does nothing, so the caller answers the same either way.
    func mailCode(
        to email: String, purpose: CodePurpose, cooldownKey: String,
        client: ClientInfo, auditAction: String,
        eligible: @escaping @Sendable (AccountRecord) -> Bool,
        template: (IssuedCode) -> Mailer.Template
    ) async throws {
        let settings = self.settings
        let clock = self.clock
        let code: IssuedCode? = try await store.transaction { db in
            guard let account = try await AccountRepository(db: db).find(email: email), account.disabledAt == nil,
                eligible(account)
            else { return nil }
            try await AuditLog(db: db, clock: clock).record(client.event(auditAction, accountID: account.id))
            return try await OneTimeCodes(db: db, clock: clock, settings: settings)
                .issue(email: email, purpose: purpose, accountID: account.id)
        }
        guard let code else { return }
        try await deliver(template(code), to: email, cooldownKey: cooldownKey) { db in
            try await OneTimeCodes(db: db, clock: clock, settings: settings).withdraw(id: code.id)
        }
    }

    /// A link into `GET /auth/v1/verify`, carrying the link token and where to land afterwards.
    func verifyLink(token: String, type: String, redirectTo: String?) -> String {
        var components = URLComponents(string: publicURL + "/auth/v1/verify")
        components?.queryItems = [
            URLQueryItem(name: "token", value: token), URLQueryItem(name: "type", value: type),
            URLQueryItem(name: "redirect_to", value: allowedRedirect(redirectTo) ?? siteURL),
        ]
        return components?.string ?? publicURL
    }

    /// `candidate` when the allow-list admits it (exactly, or by a prefix ending in `*`); nil otherwise.
    func allowedRedirect(_ candidate: String?) -> String? {
        guard let candidate, !candidate.isEmpty, URL(string: candidate)?.scheme != nil else { return nil }
        if candidate == siteURL || candidate.hasPrefix(siteURL + "/") { return candidate }
        for pattern in settings.redirectAllowList {
            if pattern.hasSuffix("*") {
                if candidate.hasPrefix(String(pattern.dropLast())) { return candidate }
            } else if candidate == pattern {
                return candidate
            }
        }
        return nil
    }

    /// Refuses an account password the policy rejects, with Supabase's `weak_password` reasons.
    func checkPassword(_ password: String, email: String) throws {
        try checkPassword(password, forbidden: [email, EmailAddress.localPart(email)], policy: settings.passwordPolicy)
    }

    /// Refuses a password `policy` rejects (or that holds a NUL, which C hashing would cut short).
    func checkPassword(_ password: String, forbidden: [String], policy: PasswordPolicy) throws {
        guard !password.contains("\u{0}") else {
            throw APIError.validation("A password cannot contain a NUL character")
        }
        let problems = policy.problems(for: password, forbidden: forbidden)
        guard problems.isEmpty else {
            throw APIError(
                .unprocessableContent, code: "weak_password",
                message: problems.map { $0.message(for: policy) }.joined(separator: "; "),
                details: ["weak_password": .object(["reasons": .array(problems.map { .string($0.rawValue) })])])
        }
    }

    func validEmail(_ raw: String) throws -> String {
        guard let email = EmailAddress.normalize(raw) else {
            throw APIError.validation("Unable to validate email address: invalid format")
        }
        return email
    }

    /// The account with its identities, as its owner sees it.
    func user(_ account: AccountRecord, db: any SQLDatabase) async throws -> AuthUser {
        account.wire(identities: try await AccountRepository(db: db).identities(accountID: account.id))
    }
}

/// Where a request came from, for limits and the audit trail.
struct ClientInfo: Sendable {
    let ip: String?
    let userAgent: String?

    init(_ request: Request, peerAddress: String?, settings: AuthSettings) {
        if settings.trustForwardedFor, let forwarded = request.headers[HTTPField.Name("X-Forwarded-For")!] {
            ip = forwarded.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? peerAddress
        } else {
            ip = peerAddress
        }
        userAgent = request.headers[.userAgent]
    }

    func event(_ action: String, accountID: String?, detail: [String: String] = [:]) -> AuditEvent {
        AuditEvent(action, accountID: accountID, ip: ip, userAgent: userAgent, detail: detail)
    }
}

extension AuthSession: ResponseGenerator, ResponseEncodable {}
extension AuthUser: ResponseGenerator, ResponseEncodable {}
extension SessionList: ResponseGenerator, ResponseEncodable {}
extension AuditPage: ResponseGenerator, ResponseEncodable {}
