import Foundation

/// Limits on the account endpoints: per-IP rate limits, failure backoff on every secret (kept in the store, shared by
/// all instances) and the resend cooldown of mailed codes.
struct AccountThrottling: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    /// Where refusals are audited.
    let trail: AuditTrail
    let limiter: RateLimiter
    /// What mailed codes are digested under.
    let codeKeys: CodeKeys

    /// The per-IP limit for `rule` (an IPv6 client's whole /64 shares one), answered with 429 and `Retry-After` when
    /// spent (and audited).
    func limit(
        _ name: String, _ rule: RateLimit, client: ClientInfo, code: ErrorCode = .overRequestRateLimit
    ) async throws {
        if let wait = limiter.check("\(name):\(client.limitKey)", rule) {
            await trail.recordRefusal(
                client.event(.rateLimited, accountID: nil, detail: ["limit": name, "retry_after": "\(wait)"]))
            throw APIError.rateLimited(code, retryAfter: wait)
        }
    }

    /// Counts an attempt at the secret behind `key` before it is checked; 429 (audited) while backing off.
    func admit(
        _ key: String, rule: FailureBackoff.Rule, client: ClientInfo, accountID: String? = nil,
        code: ErrorCode = .overRequestRateLimit
    ) async throws {
        let now = clock.now
        let wait = try await store.transaction { db in
            try await Throttles(db: db).admit(key, now: now, rule: rule)
        }
        if let wait {
            await trail.recordRefusal(
                client.event(
                    .rateLimited, accountID: accountID,
                    detail: ["limit": Self.throttleName(key), "retry_after": "\(wait)"]))
            throw APIError.rateLimited(code, retryAfter: wait)
        }
    }

    /// Consumes a mailed code of `email`: the try is counted against the address's ceiling across all its codes
    /// before the code is compared, and a match clears that count. Nil for a wrong, used or expired code.
    func consumeCode(email: String, code: String, purposes: [CodePurpose], client: ClientInfo) async throws
        -> ConsumedCode?
    {
        let key = "codes:" + Secrets.digest(email)
        try await admit(key, rule: .codes(ceiling: settings.limits.codeFailuresPerDay), client: client)
        return try await store.transaction { [clock, settings, codeKeys] db in
            let found = try await OneTimeCodes(db: db, clock: clock, settings: settings)
                .consume(email: email, code: code, purposes: purposes, keys: codeKeys)
            if found != nil { try await Throttles(db: db).clear(key) }
            return found
        }
    }

    /// Forgets the failures behind `key` after a success.
    func clearThrottle(_ key: String) async throws {
        try await store.transaction { db in try await Throttles(db: db).clear(key) }
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
            try await Throttles(db: db).claim(key, cooldown: settings.resendCooldown, now: clock.now)
        }
        if let wait {
            throw APIError.rateLimited(
                .overEmailSendRateLimit, retryAfter: wait,
                message: "For security purposes, you can only request this after \(wait) seconds.")
        }
        return key
    }
}
