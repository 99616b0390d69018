import Crypto
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
    let secrets: ServerSecrets
    let hasher: PasswordHasher
    let limiter: RateLimiter
    let apple: AppleIdentityVerifier
    let publicURL: String
    let logger: Logger
    /// The allow-list with the site URL's own origin and path, parsed once.
    let redirects: RedirectAllowList

    var siteURL: String { settings.siteURL ?? publicURL }

    /// Runs `body` in one transaction that may queue mail, then wakes the mail worker once it has committed, so the
    /// mail leaves when what it announces is stored, and never before.
    func transactionQueuingMail<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let result = try await store.transaction(body)
        mailer.queue.wake()
        return result
    }

    /// The step every sign-in by a proof of the address shares (a mailed code, an Apple identity token): an account
    /// not yet confirmed becomes confirmed with what `pending` holds (a sign-up's choices, or nothing when another
    /// proof confirmed it) and its other sign-up codes are voided; then the sign-in through `provider` is recorded.
    func confirmAndSignIn(
        _ account: inout AccountRecord, pending: PendingSignup, provider: String, now: Date, db: any SQLDatabase
    ) async throws {
        let accounts = AccountRepository(db: db)
        if account.emailConfirmedAt == nil {
            account.passwordHash = pending.passwordHash
            account.userMetadata = pending.metadata
            account.emailConfirmedAt = now
            try await OneTimeCodes(db: db, clock: clock, settings: settings).voidSignups(email: account.email)
        }
        account.lastSignInAt = now
        account.updatedAt = now
        try await accounts.update(account)
        try await accounts.touchIdentity(provider: provider, accountID: account.id, at: now)
    }

    /// The per-IP limit for `rule`, answered with 429 and `Retry-After` when spent (and audited).
    func limit(
        _ name: String, _ rule: RateLimit, client: ClientInfo, code: ErrorCode = .overRequestRateLimit
    ) async throws {
        if let wait = limiter.check("\(name):\(client.ip ?? "unknown")", rule) {
            await sessions.audit(
                client.event(.rateLimited, accountID: nil, detail: ["limit": name, "retry_after": "\(wait)"]))
            throw APIError.rateLimited(code, retryAfter: wait)
        }
    }

    /// Counts an attempt at the secret behind `key` before it is checked; 429 (audited) while backing off.
    func admit(_ key: String, rule: FailureBackoff.Rule, client: ClientInfo, accountID: String? = nil) async throws {
        let now = clock.now
        let wait = try await store.transaction { db in
            try await ThrottleRepository(db: db).admit(key, now: now, rule: rule)
        }
        if let wait {
            await sessions.audit(
                client.event(
                    .rateLimited, accountID: accountID,
                    detail: ["limit": Self.throttleName(key), "retry_after": "\(wait)"]))
            throw APIError.rateLimited(.overRequestRateLimit, retryAfter: wait)
        }
    }

    /// Consumes a mailed code of `email`: the try is counted against the address's ceiling across all its codes
    /// before the code is compared, and a match clears that count. Nil for a wrong, used or expired code.
    func consumeCode(email: String, code: String, purposes: [CodePurpose], client: ClientInfo) async throws
        -> ConsumedCode?
    {
        let key = "codes:" + Secrets.digest(email)
        try await admit(key, rule: .codes(ceiling: settings.limits.codeFailuresPerDay), client: client)
        return try await store.transaction { [clock, settings] db in
            let found = try await OneTimeCodes(db: db, clock: clock, settings: settings)
                .consume(email: email, code: code, purposes: purposes)
            if found != nil { try await ThrottleRepository(db: db).clear(key) }
            return found
        }
    }

    /// Forgets the failures behind `key` after a success.
    func clearThrottle(_ key: String) async throws {
        try await store.transaction { db in try await ThrottleRepository(db: db).clear(key) }
    }

    /// The throttle key's kind, for the audit trail (the rest is a digest or ids).
    static func throttleName(_ key: String) -> String {
        String(key.prefix { $0 != ":" })
    }

    /// The backoff key of an account password, shared by sign-in and every check of the current password.
    static func passwordKey(_ email: String) -> String { "password:" + Secrets.digest(email) }

    var passwordRule: FailureBackoff.Rule { .passwords(ceiling: settings.limits.failuresPerHour) }

    /// Claims the resend cooldown of one address and purpose (whether or not it has an account).
    func claimCooldown(_ purpose: String, email: String) async throws -> String {
        let key = "cooldown:\(purpose):\(Secrets.digest(email))"
        let wait = try await store.transaction { db in
            try await CooldownRepository(db: db).claim(key, cooldown: settings.resendCooldown, now: clock.now)
        }
        if let wait {
            throw APIError.rateLimited(
                .overEmailSendRateLimit, retryAfter: wait,
                message: "For security purposes, you can only request this after \(wait) seconds.")
        }
        return key
    }

    /// Mails a code of `purpose` to the account at `email` when it exists, is not disabled and is `eligible`;
    /// otherwise does nothing, so the caller answers the same either way. The mail is queued with the code.
    func mailCode(
        to email: String, purpose: CodePurpose, client: ClientInfo, auditAction: AuditAction,
        codeChallenge: String? = nil,
        eligible: @escaping @Sendable (AccountRecord) -> Bool,
        template: @escaping @Sendable (IssuedCode) -> Mailer.Template
    ) async throws {
        try await transactionQueuingMail { [self] db in
            guard let account = try await AccountRepository(db: db).find(email: email), account.disabledAt == nil,
                eligible(account)
            else { return }
            try await AuditRepository(db: db, clock: clock).record(client.event(auditAction, accountID: account.id))
            try await issueAndMail(
                to: email, purpose: purpose, accountID: account.id, codeChallenge: codeChallenge, db: db,
                template: template)
        }
    }

    /// Issues a code for `purpose` and queues its mail, in the caller's transaction.
    func issueAndMail(
        to email: String, purpose: CodePurpose, accountID: String, newEmail: String? = nil,
        pending: PendingSignup? = nil, codeChallenge: String? = nil, db: any SQLDatabase,
        template: (IssuedCode) -> Mailer.Template
    ) async throws {
        let code = try await OneTimeCodes(db: db, clock: clock, settings: settings)
            .issue(
                email: email, purpose: purpose, accountID: accountID, newEmail: newEmail, pending: pending,
                codeChallenge: codeChallenge)
        // A sign-up's own choice, else the account's (an email change mails an address no account has yet). English
        // when neither names one: the mailer's own lookup by address would only find this account again.
        var locale = Mailer.locale(in: pending?.metadata)
        if locale == nil {
            locale = Mailer.locale(in: try await AccountRepository(db: db).find(id: accountID)?.userMetadata) ?? "en"
        }
        try await mailer.enqueue(template(code), to: email, locale: locale, db: db)
    }

    /// A link into `GET /auth/v1/verify`, carrying the link token and where to land afterwards.
    func verifyLink(token: String, type: String, redirectTo: String?) -> String {
        var components = URLComponents(string: publicURL + "/auth/v1/verify")
        components?.queryItems = [
            URLQueryItem(name: "token", value: token), URLQueryItem(name: "type", value: type),
            URLQueryItem(name: "redirect_to", value: redirectTarget(redirectTo)),
        ]
        return components?.string ?? publicURL
    }

    /// `candidate` when the allow-list (or the site URL's own origin and path) admits it; nil otherwise.
    func allowedRedirect(_ candidate: String?) -> String? {
        guard let candidate, !candidate.isEmpty else { return nil }
        return redirects.admits(candidate) ? candidate : nil
    }

    /// Where a link goes after it is used: `candidate` when allowed, else the site URL.
    func redirectTarget(_ candidate: String?) -> String {
        allowedRedirect(candidate) ?? siteURL
    }

    /// The user object a sign-up answers for an address that already has a confirmed account: shaped exactly like
    /// a new sign-up's, with ids derived from the address under a server key, so asking twice gives the same ids
    /// (as it does for an address that is new or unconfirmed).
    func decoyUser(email: String, metadata: [String: JSONValue], now: Date) async throws -> Schemas.User {
        let key = try await secrets.key("decoy_key")
        func id(_ label: String) -> String {
            let mac = Array(HMAC<SHA256>.authenticationCode(for: Data("\(label):\(email)".utf8), using: key))
            var bytes = Array(mac.prefix(16))
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            return UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                    bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                )
            ).uuidString.lowercased()
        }
        let accountID = id("account")
        let identity = IdentityRecord(
            id: id("identity"), accountID: accountID, provider: "email", providerID: accountID, email: email,
            createdAt: now, lastSignInAt: nil)
        return AccountRecord(
            id: accountID, email: email, emailConfirmedAt: nil, passwordHash: nil, userMetadata: metadata,
            createdAt: now,
            updatedAt: now, lastSignInAt: nil, disabledAt: nil
        ).wire(identities: [identity], confirmationSentAt: now)
    }

    /// What joins a refused password's reasons in its `weak_password` message (the password page lists them apart).
    static let reasonSeparator = "; "

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
                .unprocessableContent, code: .weakPassword,
                message: problems.map { $0.message(for: policy) }.joined(separator: Self.reasonSeparator),
                details: ["weak_password": .object(["reasons": .array(problems.map { .string($0.rawValue) })])])
        }
    }

    func validEmail(_ raw: String) throws -> String {
        guard let email = EmailAddress.normalize(raw) else {
            throw APIError.validation("Unable to validate email address: invalid format")
        }
        return email
    }

    /// A valid address mail can be sent to: one with non-ASCII characters needs a mail server with SMTPUTF8.
    func deliverableEmail(_ raw: String) async throws -> String {
        let email = try validEmail(raw)
        guard await mailer.canDeliver(to: email) else {
            throw APIError(
                .unprocessableContent, code: .emailAddressNotSupported,
                message: "Mail cannot be sent to addresses with non-ASCII characters from this server")
        }
        return email
    }

    /// The account with its identities, as its owner sees it.
    func user(_ account: AccountRecord, db: any SQLDatabase) async throws -> Schemas.User {
        account.wire(identities: try await AccountRepository(db: db).identities(accountID: account.id))
    }

    /// The account as its owner sees it, from the cache while it holds it; nil when there is no such account.
    func user(id: String) async throws -> Schemas.User? {
        let cache = sessions.cache
        if let user = cache.user(id) { return user }
        let ticket = cache.ticket()
        guard let account = try await AccountRepository(db: store.database).find(id: id) else { return nil }
        let user = try await user(account, db: store.database)
        cache.keep(user: user, accountID: id, ticket: ticket)
        return user
    }
}

/// Where a request came from, for limits and the audit trail.
struct ClientInfo: Sendable {
    let ip: String?
    let userAgent: String?

    init(headers: HTTPFields, peerAddress: String?, settings: AuthSettings) {
        ip = ClientAddress.resolve(
            peer: peerAddress, forwardedFor: headers[values: Self.forwardedFor], trustedProxies: settings.trustedProxies
        )
        userAgent = headers[.userAgent]
    }

    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    func event(_ action: AuditAction, accountID: String?, detail: [String: String] = [:]) -> AuditEvent {
        AuditEvent(action, accountID: accountID, ip: ip, userAgent: userAgent, detail: detail)
    }
}
