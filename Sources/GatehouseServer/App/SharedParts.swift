import Foundation
import HTTPTypes
import Logging

/// The parts the features' services are built from, assembled once by `GatehouseServices` (the store, the clock, the
/// settings, sessions, the audit trail, keys, mail, secrets, hashing, limits) with the ones built from them (`mail`,
/// `throttling`, `passwords`, `users`). No service takes it whole: `API` and `PageRoutes` hand each service exactly
/// the parts it uses.
struct SharedParts: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    /// The audit trail every service records through.
    let trail: AuditTrail
    let keys: SigningKeys
    let mailer: Mailer
    let secrets: ServerSecrets
    let hasher: PasswordHasher
    let limiter: RateLimiter
    /// The providers whose id tokens sign in, and Apple's keys (identity tokens and notifications share them).
    let idTokens: IDTokenProviders
    let appleKeys: JWKSCache
    /// Sign in with Apple's REST API and the queue of tokens to revoke there, when the team's key is configured.
    let appleRevocations: AppleRevocations?
    let publicURL: String
    let logger: Logger
    /// The allow-list with the site URL's own origin and path, parsed once.
    let redirects: RedirectAllowList
    /// The auth hooks (`--hook-<name>-uri`), each on when its URI is set.
    let hooks: AuthHooks

    /// Mail, codes and the links in them.
    var mail: AccountMail {
        AccountMail(
            store: store, clock: clock, settings: settings, trail: trail, mailer: mailer, publicURL: publicURL,
            redirects: redirects, codeKeys: CodeKeys(secrets.box))
    }

    /// Rate limits, failure backoff and resend cooldowns.
    var throttling: AccountThrottling {
        AccountThrottling(
            store: store, clock: clock, settings: settings, trail: trail, limiter: limiter,
            codeKeys: CodeKeys(secrets.box))
    }

    /// What a password must be.
    var passwords: PasswordRules { PasswordRules(policy: settings.passwordPolicy) }

    /// Users as their owners see them.
    var users: UserReader { UserReader(store: store, sessions: sessions, secrets: secrets) }
}

/// Where a request came from, for limits and the audit trail.
struct ClientInfo: Sendable {
    let ip: String?
    let userAgent: String?
    /// What per-address limits count this client under: the address's /64 for IPv6 (`ClientAddress.limitKey`).
    var limitKey: String { ClientAddress.limitKey(ip) }

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
