import Foundation
import Logging

/// Everything `gatehouse serve` needs to start, resolved from flags, `GATEHOUSE_*` variables and defaults.
public struct GatehouseConfiguration: Sendable, Equatable {
    /// How log lines are written.
    public enum LogFormat: String, Sendable, CaseIterable { case text, json }

    public var host = "127.0.0.1"
    public var port = 8080
    public var dataDirectory = "./gatehouse-data"
    /// `postgres://…` selects PostgreSQL; `sqlite:///path` names another SQLite file; nil uses the data directory.
    public var databaseURL: String?
    /// The PostgreSQL schema to keep every table in; unset uses the server's default search path.
    public var databaseSearchPath: String?
    /// The URL users reach this server at; used in links the server mails out.
    public var publicURL: String?
    public var logLevel: Logger.Level = .info
    public var logFormat: LogFormat = .text
    /// Largest request body accepted, in bytes.
    public var maxBodySize = 1 << 20
    /// How many connections each event loop may open to the store.
    public var storeConnectionsPerLoop = 4
    /// A connection with no request in flight, or one still sending its headers, is closed after this long, seconds.
    public var idleTimeout: TimeInterval = 60
    /// Sessions, codes, limits and sign-in providers.
    public var auth = AuthSettings()
    /// Company records: how long the change log keeps tombstones, and how often live streams re-check.
    public var sync = SyncSettings()
    /// What the sweeper deletes, and when.
    public var sweep = SweepSettings()
    /// `smtp://user:pass@host:587` (STARTTLS when offered), `smtp+starttls://…` (required), `smtps://…` (TLS from
    /// the start); unset writes mail to the development outbox under the data directory.
    public var smtpURL: String?
    /// The sender of every mail.
    public var mailFrom = "no-reply@gatehouse.local"
    /// The bearer token `/metrics` asks for; unset, `/metrics` is refused.
    public var metricsToken: String?
    /// Base64 key-encryption keys, newest first; unset uses `<data-dir>/gatehouse.key`, made on first start.
    public var encryptionKeys: [String]?
    /// A folder of page and mail templates (`pages/`, `mail/LOCALE/`), each replacing the built-in one of its name.
    public var templatesDirectory: String?
    /// Where a share page's "Open in the app" goes: a custom scheme (`myapp://`) or a universal-link base, to which
    /// `share/<token>` is added; unset hides the button.
    public var appURL: String?
    /// Where a share page says to get the app.
    public var appStoreURL: String?
    /// Passkeys: on or off, the relying party, the origins allowed to use it.
    public var passkeys = PasskeySettings()
    /// `TEAMID.bundle.id` of the apps `/.well-known/apple-app-site-association` names; empty answers 404.
    public var appleAppIDs: [String] = []
    /// In-app purchases of company tiers: which apps, environments and products count, and whose signatures.
    public var appStore = AppStoreSettings()
    /// The DNS resolver (`HOST:PORT`) that company domains' TXT records are looked up through; nil for the system's
    /// (the first `nameserver` in /etc/resolv.conf).
    public var dnsResolver: String?
    /// Outbound webhooks: whether targets on loopback and private ranges are let through.
    public var webhooks = WebhookSettings()

    public init() {}

    /// Where the store lives, derived from `databaseURL` and `dataDirectory`.
    public var storeLocation: StoreLocation {
        guard let databaseURL else {
            return .sqlite(path: (dataDirectory as NSString).appendingPathComponent("gatehouse.sqlite"))
        }
        if databaseURL.hasPrefix("sqlite://") {
            return .sqlite(path: String(databaseURL.dropFirst("sqlite://".count)))
        }
        return .postgres(url: databaseURL, searchPath: databaseSearchPath)
    }

    /// The public URL, or one derived from host and port.
    public var effectivePublicURL: String {
        publicURL ?? "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// Passkeys (WebAuthn), off by default as in Supabase Auth.
public struct PasskeySettings: Sendable, Equatable {
    public var enabled = false
    /// The relying party id: the domain passkeys are bound to; unset, the public URL's host.
    public var relyingPartyID: String?
    /// The origins a ceremony may come from (`https://example.com`, `android:apk-key-hash:…`); unset, the public URL's
    /// origin. An iOS app using the RP id as its associated domain reports `https://RPID`.
    public var origins: [String] = []
    /// The name authenticators show beside the account.
    public var relyingPartyName = "Gatehouse"

    public init() {}
}

/// Company tiers bought in the app (StoreKit 2 and App Store Server Notifications V2): off until bundle ids are set.
public struct AppStoreSettings: Sendable, Equatable {
    /// The apps whose signed transactions and notifications are accepted; empty turns purchases off.
    public var bundleIDs: [String] = []
    /// The App Apple ID, which Production notifications must name.
    public var appAppleID: Int64?
    /// The environments accepted: Production by default; Sandbox, Xcode and LocalTesting only when listed.
    public var environments: [String] = ["Production"]
    /// Which product buys which tier.
    public var products: [String: CompanyTier] = [:]
    /// Files of certificates (PEM or DER) trusted beside Apple Root CA - G3.
    public var rootCertificateFiles: [String] = []
    /// The App Store Server API, for `gatehouse app-store reconcile`: the issuer id and the in-app purchase key (its
    /// id and its .p8 file) from App Store Connect, and a base URL replacing Apple's.
    public var issuerID: String?
    public var keyID: String?
    public var keyFile: String?
    public var apiURL: String?

    public init() {}

    /// Whether purchases are on.
    public var enabled: Bool { !bundleIDs.isEmpty }
}

/// Outbound webhooks (`--webhooks-…`).
public struct WebhookSettings: Sendable, Equatable {
    /// Lets endpoints on loopback, link-local and private ranges through the address check (tests, a receiver on the
    /// same network); off by default.
    public var allowPrivateTargets = false

    public init() {}
}

/// One auth hook: where it is sent and the `whsec_` keys it is signed with (the first signs; every one is listed in
/// `webhook-signature` during a rotation).
public struct AuthHookEndpoint: Sendable, Equatable {
    public var uri: String?
    public var secrets: [[UInt8]] = []

    public init() {}
}

/// The auth hooks, named as GoTrue names them (`GOTRUE_HOOK_<NAME>_URI` / `_SECRETS`).
public struct AuthHookSettings: Sendable, Equatable {
    public var customAccessToken = AuthHookEndpoint()
    public var beforeUserCreated = AuthHookEndpoint()
    public var sendEmail = AuthHookEndpoint()
    public var passwordVerificationAttempt = AuthHookEndpoint()
    public var mfaVerificationAttempt = AuthHookEndpoint()

    public init() {}

    /// Each hook with the name its settings carry (`--hook-<name>-uri`).
    var named: [(name: String, hook: AuthHookEndpoint)] {
        [
            ("custom-access-token", customAccessToken), ("before-user-created", beforeUserCreated),
            ("send-email", sendEmail), ("password-verification-attempt", passwordVerificationAttempt),
            ("mfa-verification-attempt", mfaVerificationAttempt),
        ]
    }

    /// Whether a hook's host is this machine: `localhost`, or a loopback address.
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if bare == "localhost" { return true }
        return TargetAddress(bare).map { $0.range == .loopback } ?? false
    }
}

/// A setting that cannot be used; the message names the setting and never echoes a secret.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension GatehouseConfiguration {
    /// Resolves settings: a flag wins over its environment variable, which wins over the default.
    /// Empty values count as unset.
    public static func resolve(
        flags: [Setting: String],
        environment: [String: String]
    ) throws(ConfigurationError) -> GatehouseConfiguration {
        var config = GatehouseConfiguration()
        for setting in Setting.allCases {
            let fromFlag = flags[setting].flatMap { $0.isEmpty ? nil : $0 }
            let fromEnvironment = environment[setting.environmentName].flatMap { $0.isEmpty ? nil : $0 }
            guard let value = fromFlag ?? fromEnvironment else { continue }
            try setting.apply(&config, value, fromFlag != nil ? setting.flag : setting.environmentName)
        }
        for (name, hook) in config.auth.hooks.named where hook.uri != nil && hook.secrets.isEmpty {
            throw ConfigurationError("--hook-\(name)-uri is set without --hook-\(name)-secrets to sign its calls")
        }
        return config
    }
}

/// Account and session policy (docs/security.md). Defaults are documented in docs/configuration.md.
public struct AuthSettings: Sendable, Equatable {
    /// Access token lifetime, seconds.
    public var accessTokenLifetime: TimeInterval = 15 * 60
    /// How long an already rotated refresh token still returns the current pair (client races), seconds.
    public var refreshReuseGrace: TimeInterval = 10
    /// A session not refreshed for this long ends, seconds.
    public var sessionIdleTimeout: TimeInterval = 14 * 24 * 3600
    /// A session ends this long after sign-in whatever its use, seconds.
    public var sessionLifetime: TimeInterval = 90 * 24 * 3600
    /// Mailed codes and links live this long, seconds.
    public var codeLifetime: TimeInterval = 10 * 60
    /// The code lifetime in whole minutes, as mails and pages state it.
    var codeLifetimeMinutes: Int { Int((codeLifetime / 60).rounded()) }
    /// Wrong codes allowed before a code is void.
    public var codeMaxAttempts = 5
    /// Least time between two mails of one kind to one address, seconds.
    public var resendCooldown: TimeInterval = 60
    /// Where magic links land when no allowed redirect is asked for; the public URL when unset.
    public var siteURL: String?
    /// Redirect URLs a magic link may go to: exact URLs, or prefixes ending in `*`. Custom app schemes allowed.
    public var redirectAllowList: [String] = []
    /// Bundle ids (Services IDs) an Apple identity token must be issued for; empty disables Sign in with Apple.
    public var appleAudiences: [String] = []
    /// Where Apple's signing keys are published.
    public var appleJWKSURL = "https://appleid.apple.com/auth/keys"
    /// Sign in with Apple's REST API: the authorization code exchange and token revocation.
    public var appleSignIn = AppleSignInSettings()
    /// Auth hooks (GoTrue's HTTP hooks): each on when its URI is set.
    public var hooks = AuthHookSettings()
    /// OAuth client ids a Google id token must be issued for; empty turns Google off.
    public var googleClientIDs: [String] = []
    /// Where Google's signing keys are published.
    public var googleJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
    /// Gatehouse as an OAuth 2.1 and OpenID Connect provider (`--oauth-…`).
    public var oauthServer = OAuthServerSettings()
    /// Whether a signed-in user may link and unlink identities itself (GoTrue's manual linking; off by default).
    public var manualLinking = false
    /// Proxies whose `X-Forwarded-For` is believed: the client is the rightmost entry that is not one of them.
    /// Empty ignores the header.
    public var trustedProxies: [IPNetwork] = []
    public var passwordPolicy = PasswordPolicy()
    public var limits = AuthLimits()
    /// How long after a session's sign-in it may set a new password without the current one or a `reauthenticate`
    /// code, seconds (GoTrue's secure password change: a day); 0 always asks, nil never asks (GoTrue's default).
    public var passwordReauthenticationWindow: TimeInterval? = 24 * 3600
    /// Whether an email change is confirmed by both addresses (GoTrue's secure email change), or by the new one
    /// alone; then it needs re-authentication like a password change.
    public var secureEmailChange = true
    /// Answer as GoTrue does where that tells whether an address has an account (off: the same answer for any).
    public var revealAccounts = false
    /// Whether a sign-up without an email makes an anonymous user (GoTrue's anonymous sign-in; off by default).
    public var anonymousUsers = false

    public init() {}
}

/// What the server needs to talk to Sign in with Apple's REST API: the team's key signs a client secret with which
/// authorization codes are exchanged for Apple's refresh tokens, and those tokens revoked when the account goes.
public struct AppleSignInSettings: Sendable, Equatable {
    public var teamID: String?
    public var keyID: String?
    /// The key's PEM, read from `--apple-private-key-file` or given as `--apple-private-key`.
    public var privateKey: String?
    /// The client id the codes were issued for; the first Apple audience when unset.
    public var clientID: String?
    public var apiURL = "https://appleid.apple.com"

    /// Whether codes can be exchanged: a team, a key id and a key.
    public var enabled: Bool { teamID != nil && keyID != nil && privateKey != nil }

    public init() {}
}

/// Company records and their change log (docs/api.md, "Company records that sync").
public struct SyncSettings: Sendable, Equatable {
    /// Tombstones and mutation results older than this are compacted away, seconds; a device whose token is older
    /// gets the digest exchange instead of the changes it missed.
    public var retention: TimeInterval = 30 * 24 * 3600
    /// How often a live stream re-checks its session and membership and repeats the current seq as a keep-alive,
    /// seconds.
    public var liveCheckInterval: TimeInterval = 15
    /// Live streams one session may hold open at once; one more is refused with `too_many_streams`.
    public var liveStreamsPerSession = 4
    /// Live streams one instance holds open at once, over all sessions.
    public var liveStreamsPerInstance = 10_000

    public init() {}
}

/// The sweeper: what it keeps, and how it paces itself (docs/operators.md, "A bounded store").
public struct SweepSettings: Sendable, Equatable {
    /// Audit events older than this are deleted, seconds; 0 keeps them all.
    public var auditRetention: TimeInterval = 400 * 24 * 3600
    /// Ended and expired sessions, with their refresh tokens, are deleted this long after they ended, seconds.
    public var endedSessionRetention: TimeInterval = 7 * 24 * 3600
    /// Anonymous users with no sign-in or refresh for this long are deleted, seconds.
    public var anonymousRetention: TimeInterval = 30 * 24 * 3600
    /// How often each instance sweeps, seconds.
    public var interval: TimeInterval = 300
    /// Rows deleted per statement, so no sweep holds the write lock for long.
    public var batchSize = 1_000

    public init() {}
}

/// Abuse limits, after Supabase Auth's defaults.
public struct AuthLimits: Sendable, Equatable {
    /// Mails sent on behalf of one IP address.
    public var emailsPerIP = RateLimit(limit: 30, per: 3600)
    /// Code and link verifications from one IP address.
    public var verificationsPerIP = RateLimit(limit: 30, per: 300)
    /// Refresh token grants from one IP address.
    public var refreshesPerIP = RateLimit(limit: 150, per: 300, burst: 30)
    /// Password sign-in attempts from one IP address.
    public var signInsPerIP = RateLimit(limit: 30, per: 300)
    /// Failed password sign-ins allowed per account per hour; backoff grows before that.
    public var failuresPerHour = 100
    /// Wrong mailed codes allowed per address in a day, across all its codes (NIST SP 800-63B: at most 100).
    public var codeFailuresPerDay = 100
    /// Anonymous sign-ins from one IP address (GoTrue: 30 an hour).
    public var anonymousSignInsPerIP = RateLimit(limit: 30, per: 3600)

    public init() {}
}

/// The OAuth 2.1 / OpenID Connect provider (docs/oauth-server.md).
public struct OAuthServerSettings: Sendable, Equatable {
    /// Whether the provider answers (`--oauth-server`, off as in GoTrue).
    public var enabled = false
    /// The app's own consent page, a path joined to the site URL (GoTrue's `OAUTH_SERVER_AUTHORIZATION_PATH`); nil
    /// sends the browser to Gatehouse's own page.
    public var authorizationPath: String?
    /// Whether anyone may register a client (RFC 7591, `POST /auth/v1/oauth/clients/register`).
    public var allowDynamicRegistration = false
}
