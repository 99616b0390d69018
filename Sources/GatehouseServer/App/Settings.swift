import Foundation
import JWTKit
import Logging

/// One setting of `gatehouse serve` and of the commands that open the store: its flag, its `GATEHOUSE_*` variable,
/// its default, what it means, and how a value is checked and applied.
///
/// `Setting.allCases` is the only list of settings: the command line parses its flags from it, `resolve` reads the
/// variables from it, `--help` prints it, and docs/configuration.md is generated from it
/// (`gatehouse settings --markdown`; a test holds the file equal to `markdownReference`).
public struct Setting: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// What a setting is when neither its flag nor its variable gives a value.
    public enum Default: Sendable, Hashable {
        /// A value the setting accepts and that `GatehouseConfiguration()` already holds, with an optional gloss.
        case value(String, note: String? = nil)
        /// No value: the feature is off, or falls back as the meaning says.
        case unset(note: String? = nil)
        /// Follows from other settings; Markdown, as docs/configuration.md shows it.
        case derived(String)

        /// The default column of docs/configuration.md.
        public var markdown: String {
            switch self {
            case .value(let value, let note): "`\(value)`" + (note.map { " (\($0))" } ?? "")
            case .unset(let note): "unset" + (note.map { " (\($0))" } ?? "")
            case .derived(let text): text
            }
        }
    }

    /// Checks one value and stores it; `source` is the flag or variable it came from, for the error message.
    typealias Apply =
        @Sendable (inout GatehouseConfiguration, _ value: String, _ source: String) throws(ConfigurationError) -> Void

    /// The flag without its dashes: `data-dir` for `--data-dir`.
    public let rawValue: String
    public let defaultValue: Default
    /// What the setting does, in Markdown: the meaning column of docs/configuration.md, and `--help` without the
    /// backticks.
    public let meaning: String
    let apply: Apply
    /// How much of the value is a secret, which the console's settings page masks.
    public let secrecy: Secrecy
    /// The value in a configuration, written as the flag takes it; nil when unset.
    let read: @Sendable (GatehouseConfiguration) -> String?

    /// What of a setting's value must not be shown.
    public enum Secrecy: Sendable {
        /// Nothing: shown as it is.
        case none
        /// All of it (a token, a key).
        case whole
        /// The password of a URL's user (`postgres://user:pass@…`, `smtp://user:pass@…`).
        case passwordInURL
    }

    init(
        _ name: String, default defaultValue: Default, meaning: String, secrecy: Secrecy = .none,
        read: @escaping @Sendable (GatehouseConfiguration) -> String?, apply: @escaping Apply
    ) {
        self.rawValue = name
        self.defaultValue = defaultValue
        self.meaning = meaning
        self.secrecy = secrecy
        self.read = read
        self.apply = apply
    }

    /// The setting's value in `configuration`, its secret part replaced by `mask`; nil when unset.
    public func shownValue(in configuration: GatehouseConfiguration, mask: String = "••••••") -> String? {
        guard let value = read(configuration) else { return nil }
        switch secrecy {
        case .none:
            // Any URL among the values may carry a password (`https://user:pass@proxy…`): never shown either.
            return value.replacing(/(:\/\/[^\/:@\s,]*:)[^@\/\s,]*@/) { "\($0.1)\(mask)@" }
        case .whole:
            return mask
        case .passwordInURL:
            guard var url = URLComponents(string: value) else { return mask }
            if url.password != nil { url.password = "PASSWORD" }
            // Only the password goes: anything that is not a URL with a scheme and host is masked whole.
            guard url.scheme != nil, url.host != nil, let shown = url.string else { return mask }
            return shown.replacingOccurrences(of: ":PASSWORD@", with: ":\(mask)@")
        }
    }

    /// The setting whose flag is `--name`, if there is one.
    public init?(rawValue name: String) {
        guard let setting = Self.allCases.first(where: { $0.rawValue == name }) else { return nil }
        self = setting
    }

    /// `--data-dir`.
    public var flag: String { "--" + rawValue }

    /// `GATEHOUSE_DATA_DIR` for `data-dir`, and so on.
    public var environmentName: String {
        "GATEHOUSE_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    public var description: String { flag }

    public static func == (lhs: Setting, rhs: Setting) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

extension Setting {
    /// Every setting, in the order of docs/configuration.md's table and of `--help`.
    public static let allCases: [Setting] = [
        host, port, dataDir, databaseURL, publicURL, logLevel, logFormat, maxBodySize, smtpURL, mailFrom, siteURL,
        redirectURLs, accessTokenTTL, sessionIdleTimeout, sessionLifetime, appleAudiences, appleJWKSURL,
        trustedProxies, codeFailuresPerDay, metricsToken, encryptionKeys, syncRetention, templatesDir, appURL,
        appStoreURL, idleTimeout, liveStreamsPerSession, liveStreamsPerInstance, auditRetention,
        sessionRetention, passwordReauthentication, secureEmailChange, revealAccounts, anonymousUsers,
        anonymousRetention, passkeys, passkeyRPID, passkeyOrigins, passkeyRPName, appleAppIDs, appStoreBundleIDs,
        appStoreAppID, appStoreEnvironments, appStoreProducts, appStoreRootCertificates, appStoreIssuerID,
        appStoreKeyID, appStoreKeyFile, appStoreAPIURL, appleTeamID, appleKeyID, applePrivateKeyFile, applePrivateKey,
        appleClientID, appleAPIURL, googleClientIDs, googleJWKSURL, manualLinking, dnsResolver,
        webhooksAllowPrivateTargets,
        hookCustomAccessTokenURI, hookCustomAccessTokenSecrets, hookBeforeUserCreatedURI, hookBeforeUserCreatedSecrets,
        hookSendEmailURI, hookSendEmailSecrets, hookPasswordVerificationAttemptURI,
        hookPasswordVerificationAttemptSecrets, hookMFAVerificationAttemptURI, hookMFAVerificationAttemptSecrets,
        oauthServer, oauthAuthorizationPath, oauthAllowDynamicRegistration,
    ]

    public static let host = Setting(
        "host", default: .value("127.0.0.1"), meaning: "address to listen on",
        read: { $0.host }
    ) {
        config, value, _ in config.host = value
    }

    public static let port = Setting(
        "port", default: .value("8080"), meaning: "port to listen on; `0` picks a free one (the start line names it)",
        read: { "\($0.port)" }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let port = Int(value), (0...65535).contains(port) else {
            throw ConfigurationError("\(source) must be a port number from 0 to 65535, got '\(value)'")
        }
        config.port = port
    }

    public static let dataDir = Setting(
        "data-dir", default: .value("./gatehouse-data"),
        meaning: "folder (made 0700) for the SQLite store (`gatehouse.sqlite`, 0600), the key file and the mail outbox",
        read: { $0.dataDirectory }
    ) { config, value, _ in config.dataDirectory = value }

    public static let databaseURL = Setting(
        "database-url", default: .unset(),
        meaning: """
            `postgres://user:pass@host:5432/db` to use PostgreSQL; `sqlite:///path/file.sqlite` for another SQLite file
            """,
        secrecy: .passwordInURL,
        read: { $0.databaseURL }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let scheme = value.split(separator: ":", maxSplits: 1).first.map({ $0.lowercased() }),
            ["postgres", "postgresql", "sqlite"].contains(scheme), value.contains("://")
        else {
            throw ConfigurationError("\(source) must start with postgres:// or sqlite://")
        }
        if scheme != "sqlite" {
            guard (try? SQLPostgresURL.validate(value)) != nil else {
                throw ConfigurationError("\(source) is not a usable PostgreSQL URL")
            }
        }
        config.databaseURL = value
    }

    public static let publicURL = Setting(
        "public-url", default: .derived("`http://HOST:PORT`"),
        meaning: "the URL users reach the server at, used in mailed links and the token issuer",
        read: { $0.publicURL }
    ) { (config, value, source) throws(ConfigurationError) in
        let url = try httpURL(value, source: source)
        config.publicURL = url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    public static let logLevel = Setting(
        "log-level", default: .value("info"),
        meaning: "`trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`",
        read: { $0.logLevel.rawValue }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let level = Logger.Level(rawValue: value.lowercased()) else {
            let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError("\(source) must be one of \(names), got '\(value)'")
        }
        config.logLevel = level
    }

    public static let logFormat = Setting(
        "log-format", default: .value("text"), meaning: "`text`, or `json` for one JSON object per line",
        read: { $0.logFormat.rawValue }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let format = GatehouseConfiguration.LogFormat(rawValue: value.lowercased()) else {
            throw ConfigurationError("\(source) must be text or json, got '\(value)'")
        }
        config.logFormat = format
    }

    public static let maxBodySize = Setting(
        "max-body-size", default: .value("1048576"), meaning: "largest request body in bytes; larger ones get 413",
        read: { "\($0.maxBodySize)" }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let size = Int(value), size >= 1024 else {
            throw ConfigurationError("\(source) must be a byte count of at least 1024, got '\(value)'")
        }
        config.maxBodySize = size
    }

    public static let smtpURL = Setting(
        "smtp-url", default: .unset(),
        meaning: """
            `smtp://user:pass@host:587` (STARTTLS required, except to a relay on loopback), `smtps://…` (TLS from the \
            start), `smtp+insecure://…` (plain text, explicitly); unset writes each mail to \
            `<data-dir>/outbox/*.eml` and logs the file name (never the code)
            """,
        secrecy: .passwordInURL,
        read: { $0.smtpURL }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let url = URL(string: value),
            ["smtp", "smtps", "smtp+starttls", "smtp+insecure"].contains(url.scheme ?? ""), url.host != nil
        else {
            throw ConfigurationError(
                "\(source) must be smtp://, smtp+starttls://, smtps:// or smtp+insecure:// with a host")
        }
        config.smtpURL = value
    }

    public static let mailFrom = Setting(
        "mail-from", default: .value("no-reply@gatehouse.local"), meaning: "sender of every mail",
        read: { $0.mailFrom }
    ) { (config, value, source) throws(ConfigurationError) in
        guard value.contains("@"), !value.contains(where: { "\r\n<>".contains($0) }) else {
            throw ConfigurationError("\(source) must be a plain email address, got '\(value)'")
        }
        config.mailFrom = value
    }

    public static let siteURL = Setting(
        "site-url", default: .derived("the public URL"),
        meaning: "where magic links land when no allowed `redirect_to` is given",
        read: { $0.auth.siteURL }
    ) { (config, value, source) throws(ConfigurationError) in config.auth.siteURL = try httpURL(value, source: source) }

    public static let redirectURLs = Setting(
        "redirect-urls", default: .unset(),
        meaning: """
            comma-separated URLs a magic link may redirect to, matched by scheme, host and port exactly; a `*` is a \
            wildcard inside the path only (`https://app.example/auth/*`); custom app schemes (`myapp://callback`) \
            match exactly
            """,
        read: { shown($0.auth.redirectAllowList) }
    ) { (config, value, source) throws(ConfigurationError) in
        let patterns = list(value)
        for pattern in patterns where RedirectAllowList.entry(pattern) == nil {
            throw ConfigurationError(
                "\(source): '\(pattern)' must be a URL with a scheme and host; a * may appear only in its path")
        }
        config.auth.redirectAllowList = patterns
    }

    public static let accessTokenTTL = Setting(
        "access-token-ttl", default: .value("900"), meaning: "access token lifetime, seconds",
        read: { shown($0.auth.accessTokenLifetime) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.accessTokenLifetime = try seconds(value, source: source, range: 60...86_400)
    }

    public static let sessionIdleTimeout = Setting(
        "session-idle-timeout", default: .value("1209600", note: "14 days"),
        meaning: "a session not refreshed for this long ends",
        read: { shown($0.auth.sessionIdleTimeout) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.sessionIdleTimeout = try seconds(value, source: source, range: 300...31_536_000)
    }

    public static let sessionLifetime = Setting(
        "session-lifetime", default: .value("7776000", note: "90 days"),
        meaning: "a session ends this long after sign-in, whatever its use",
        read: { shown($0.auth.sessionLifetime) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.sessionLifetime = try seconds(value, source: source, range: 300...31_536_000)
    }

    public static let appleAudiences = Setting(
        "apple-audiences", default: .unset(note: "off"),
        meaning: "comma-separated bundle ids accepted in Sign in with Apple identity tokens",
        read: { shown($0.auth.appleAudiences) }
    ) { config, value, _ in config.auth.appleAudiences = list(value) }

    public static let appleJWKSURL = Setting(
        "apple-jwks-url", default: .value("https://appleid.apple.com/auth/keys"),
        meaning: "where Apple's signing keys are fetched (cached for an hour)",
        read: { $0.auth.appleJWKSURL }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.appleJWKSURL = try httpURL(value, source: source)
    }

    public static let appleTeamID = Setting(
        "apple-team-id", default: .unset(note: "authorization codes are not exchanged"),
        meaning: "the Apple developer team id that signs Sign in with Apple's client secret (its `iss`)",
        read: { $0.auth.appleSignIn.teamID }
    ) { config, value, _ in config.auth.appleSignIn.teamID = value }

    public static let appleKeyID = Setting(
        "apple-key-id", default: .unset(note: "authorization codes are not exchanged"),
        meaning: "the id of the Sign in with Apple key that signs the client secret (its `kid`)",
        read: { $0.auth.appleSignIn.keyID }
    ) { config, value, _ in config.auth.appleSignIn.keyID = value }

    public static let applePrivateKeyFile = Setting(
        "apple-private-key-file", default: .unset(note: "authorization codes are not exchanged"),
        meaning: "the Sign in with Apple key's `.p8` file (PEM), which signs the client secret",
        secrecy: .whole,
        read: { $0.auth.appleSignIn.privateKey }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let pem = try? String(contentsOfFile: value, encoding: .utf8) else {
            throw ConfigurationError("\(source) names a file that cannot be read: '\(value)'")
        }
        config.auth.appleSignIn.privateKey = try applePrivateKeyPEM(pem, source: source)
    }

    public static let applePrivateKey = Setting(
        "apple-private-key", default: .unset(note: "`--apple-private-key-file`"),
        meaning: """
            the Sign in with Apple key itself (PEM), for platforms that pass secrets as variables; on a command line \
            (where `ps` shows it) only as `--apple-private-key=…`, since the PEM starts with dashes
            """,
        secrecy: .whole,
        read: { $0.auth.appleSignIn.privateKey }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.appleSignIn.privateKey = try applePrivateKeyPEM(value, source: source)
    }

    public static let appleClientID = Setting(
        "apple-client-id", default: .derived("the first of `--apple-audiences`"),
        meaning: "the client id (bundle id or Services ID) Apple issued the authorization codes for",
        read: { $0.auth.appleSignIn.clientID }
    ) { config, value, _ in config.auth.appleSignIn.clientID = value }

    public static let appleAPIURL = Setting(
        "apple-api-url", default: .value("https://appleid.apple.com"),
        meaning:
            "Sign in with Apple's REST API: codes are exchanged at `/auth/token`, tokens revoked at `/auth/revoke`",
        read: { $0.auth.appleSignIn.apiURL }
    ) { (config, value, source) throws(ConfigurationError) in
        var url = try httpURL(value, source: source)
        while url.hasSuffix("/") { url.removeLast() }
        config.auth.appleSignIn.apiURL = url
    }

    public static let googleClientIDs = Setting(
        "google-client-ids", default: .unset(note: "off"),
        meaning: "comma-separated OAuth client ids accepted as the audience of Google id tokens",
        read: { shown($0.auth.googleClientIDs) }
    ) { config, value, _ in config.auth.googleClientIDs = list(value) }

    public static let googleJWKSURL = Setting(
        "google-jwks-url", default: .value("https://www.googleapis.com/oauth2/v3/certs"),
        meaning: "where Google's signing keys are fetched (cached for an hour, fetched again for an unknown key id)",
        read: { $0.auth.googleJWKSURL }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.googleJWKSURL = try httpURL(value, source: source)
    }

    public static let dnsResolver = Setting(
        "dns-resolver", default: .unset(note: "the system's: the first `nameserver` in /etc/resolv.conf"),
        meaning: """
            `HOST:PORT` (`[IPv6]:PORT`; the port defaults to 53) of the recursive resolver that company domains' TXT \
            records are looked up through, over UDP, three seconds per lookup
            """,
        read: { $0.dnsResolver }
    ) { (config, value, source) throws(ConfigurationError) in
        guard DNSResolver.address(value) != nil else {
            throw ConfigurationError("\(source) must be an IP address and port such as 127.0.0.1:53, got '\(value)'")
        }
        config.dnsResolver = value
    }

    public static let manualLinking = Setting(
        "manual-linking", default: .value("off"),
        meaning: """
            `on` lets a signed-in user link another identity (`linkIdentity`, `linkIdentityWithIdToken`) and unlink \
            one; `off` answers 404 `manual_linking_disabled`, as GoTrue does by default
            """,
        read: { shown($0.auth.manualLinking) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.manualLinking = try onOff(value, source: source)
    }

    public static let trustedProxies = Setting(
        "trusted-proxies", default: .unset(),
        meaning: """
            comma-separated proxy addresses or CIDRs (`10.0.0.0/8,127.0.0.1`); from them, the client is the \
            rightmost `X-Forwarded-For` entry that is not a trusted proxy. Unset ignores the header
            """,
        read: { shown($0.auth.trustedProxies.map(\.description)) }
    ) { (config, value, source) throws(ConfigurationError) in
        var networks: [IPNetwork] = []
        for item in list(value) {
            guard let network = IPNetwork(item) else {
                throw ConfigurationError(
                    "\(source): '\(item)' is not an IP address or CIDR network such as 10.0.0.0/8")
            }
            networks.append(network)
        }
        config.auth.trustedProxies = networks
    }

    public static let codeFailuresPerDay = Setting(
        "code-failures-per-day", default: .value("100"),
        meaning: "wrong mailed codes allowed per address in a day, across all its codes (1–100)",
        read: { "\($0.auth.limits.codeFailuresPerDay)" }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let count = Int(value), (1...100).contains(count) else {
            throw ConfigurationError("\(source) must be a number from 1 to 100 (NIST SP 800-63B's ceiling)")
        }
        config.auth.limits.codeFailuresPerDay = count
    }

    public static let webhooksAllowPrivateTargets = Setting(
        "webhooks-allow-private-targets", default: .value("off"),
        meaning: """
            `on` lets webhook endpoints on loopback, link-local and private address ranges through (a receiver on the \
            same host or network); `off` refuses them when registered and again, after the name is resolved, at \
            every delivery
            """,
        read: { shown($0.webhooks.allowPrivateTargets) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.webhooks.allowPrivateTargets = try onOff(value, source: source)
    }

    public static let oauthServer = Setting(
        "oauth-server", default: .value("off"),
        meaning: """
            `on` makes Gatehouse an OAuth 2.1 and OpenID Connect provider (GoTrue's `OAUTH_SERVER_ENABLED`): other \
            software signs in with these accounts through `/auth/v1/oauth/…` (docs/oauth-server.md)
            """,
        read: { shown($0.auth.oauthServer.enabled) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.oauthServer.enabled = try onOff(value, source: source)
    }

    public static let oauthAuthorizationPath = Setting(
        "oauth-authorization-path", default: .unset(note: "Gatehouse's own consent page, `/account/authorize`"),
        meaning: """
            the app's consent page, a path joined to the site URL (GoTrue's `OAUTH_SERVER_AUTHORIZATION_PATH`): \
            `/oauth/authorize` sends the browser there with `?authorization_id=`
            """,
        read: { $0.auth.oauthServer.authorizationPath }
    ) { (config, value, source) throws(ConfigurationError) in
        guard value.hasPrefix("/"), !value.hasPrefix("//"), !value.contains("?"), !value.contains("#") else {
            throw ConfigurationError("\(source) must be a path starting with / (no query, no fragment)")
        }
        config.auth.oauthServer.authorizationPath = value
    }

    public static let oauthAllowDynamicRegistration = Setting(
        "oauth-allow-dynamic-registration", default: .value("off"),
        meaning: """
            `on` lets anyone register an OAuth client (RFC 7591, `POST /auth/v1/oauth/clients/register`; GoTrue's \
            `OAUTH_SERVER_ALLOW_DYNAMIC_REGISTRATION`); `off` leaves registration to the operator
            """,
        read: { shown($0.auth.oauthServer.allowDynamicRegistration) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.oauthServer.allowDynamicRegistration = try onOff(value, source: source)
    }

    public static let hookCustomAccessTokenURI = hookURI("custom-access-token", \.customAccessToken)
    public static let hookCustomAccessTokenSecrets = hookSecrets("custom-access-token", \.customAccessToken)
    public static let hookBeforeUserCreatedURI = hookURI("before-user-created", \.beforeUserCreated)
    public static let hookBeforeUserCreatedSecrets = hookSecrets("before-user-created", \.beforeUserCreated)
    public static let hookSendEmailURI = hookURI("send-email", \.sendEmail)
    public static let hookSendEmailSecrets = hookSecrets("send-email", \.sendEmail)
    public static let hookPasswordVerificationAttemptURI = hookURI(
        "password-verification-attempt", \.passwordVerificationAttempt)
    public static let hookPasswordVerificationAttemptSecrets = hookSecrets(
        "password-verification-attempt", \.passwordVerificationAttempt)
    public static let hookMFAVerificationAttemptURI = hookURI("mfa-verification-attempt", \.mfaVerificationAttempt)
    public static let hookMFAVerificationAttemptSecrets = hookSecrets(
        "mfa-verification-attempt", \.mfaVerificationAttempt)

    /// `--hook-<name>-uri`: the hook is on when set; https, or http to a loopback address.
    private static func hookURI(_ name: String, _ hook: WritableKeyPath<AuthHookSettings, AuthHookEndpoint> & Sendable)
        -> Setting
    {
        Setting(
            "hook-\(name)-uri", default: .unset(note: "the hook is off"),
            meaning: """
                the \(name.replacingOccurrences(of: "-", with: " ")) auth hook's URL (GoTrue's \
                `GOTRUE_HOOK_\(name.uppercased().replacingOccurrences(of: "-", with: "_"))_URI`): `https://`, or \
                `http://` to a loopback address; it is called with a signed POST and fails closed (docs/hooks.md)
                """,
            read: { $0.auth.hooks[keyPath: hook].uri }
        ) { (config, value, source) throws(ConfigurationError) in
            guard let url = URL(string: value), let host = url.host, !host.isEmpty,
                url.scheme == "https" || (url.scheme == "http" && AuthHookSettings.isLoopback(host))
            else {
                throw ConfigurationError(
                    "\(source) must be an https:// URL, or http:// to a loopback address, got '\(value)'")
            }
            config.auth.hooks[keyPath: hook].uri = value
        }
    }

    /// `--hook-<name>-secrets`: `v1,whsec_<base64>`, several separated by `|`; the first signs.
    private static func hookSecrets(
        _ name: String, _ hook: WritableKeyPath<AuthHookSettings, AuthHookEndpoint> & Sendable
    ) -> Setting {
        Setting(
            "hook-\(name)-secrets", default: .unset(note: "required when the hook's URI is set"),
            meaning: """
                the \(name.replacingOccurrences(of: "-", with: " ")) hook's signing secrets: `v1,whsec_<base64>`, \
                several separated by `|` (the first signs, all are sent during a rotation)
                """,
            secrecy: .whole,
            read: {
                $0.auth.hooks[keyPath: hook].secrets.isEmpty
                    ? nil : "(\($0.auth.hooks[keyPath: hook].secrets.count) keys)"
            }
        ) { (config, value, source) throws(ConfigurationError) in
            var keys: [[UInt8]] = []
            for part in value.split(separator: "|") {
                let text = part.trimmingCharacters(in: .whitespaces)
                guard text.hasPrefix("v1,whsec_"), let key = WebhookSecret.key(String(text.dropFirst(3))) else {
                    throw ConfigurationError("\(source) must be v1,whsec_<base64> keys separated by |")
                }
                keys.append(key)
            }
            guard !keys.isEmpty else { throw ConfigurationError("\(source) must name at least one key") }
            config.auth.hooks[keyPath: hook].secrets = keys
        }
    }

    public static let metricsToken = Setting(
        "metrics-token", default: .unset(),
        meaning: "bearer token `GET /metrics` requires; unset, `/metrics` answers 403",
        secrecy: .whole,
        read: { $0.metricsToken }
    ) { (config, value, source) throws(ConfigurationError) in
        guard value.count >= 16 else { throw ConfigurationError("\(source) must be at least 16 characters") }
        config.metricsToken = value
    }

    public static let encryptionKeys = Setting(
        "encryption-keys", default: .derived("`<data-dir>/gatehouse.key`"),
        meaning: """
            base64 32-byte keys, newest first, that encrypt signing keys, server keys and queued mail in the store; \
            unset uses a 0600 key file made on first start. Prefer the variable to the flag (flags show in `ps`)
            """,
        secrecy: .whole,
        read: { $0.encryptionKeys.flatMap(shown) }
    ) { (config, value, _) throws(ConfigurationError) in
        let keys = list(value)
        _ = try SecretBox(base64Keys: keys)
        config.encryptionKeys = keys
    }

    public static let syncRetention = Setting(
        "sync-retention", default: .value("2592000", note: "30 days"),
        meaning: """
            seconds the change log keeps tombstones and mutation results; a device whose token is older gets the \
            digest exchange (its ids and seqs in, the difference out), never a full download
            """,
        read: { shown($0.sync.retention) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sync.retention = try seconds(value, source: source, range: 3600...315_360_000)
    }

    public static let templatesDir = Setting(
        "templates-dir", default: .unset(),
        meaning: """
            a folder of page and mail templates (`pages/NAME.mustache`, \
            `mail/LOCALE/NAME.{subject,text,html}.mustache`); each file replaces the built-in one of its name, the \
            rest stay. A template that does not parse stops the start with its file name
            """,
        read: { $0.templatesDirectory }
    ) { config, value, _ in config.templatesDirectory = value }

    public static let appURL = Setting(
        "app-url", default: .unset(),
        meaning: """
            the app's link base (`myapp://` or a universal-link `https://…/`); a share link's page offers "Open in \
            the app" at `<app-url>share/<token>`. Unset hides the button
            """,
        read: { $0.appURL }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let scheme = URLComponents(string: value)?.scheme, !scheme.isEmpty,
            !["javascript", "data", "vbscript"].contains(scheme.lowercased())
        else {
            throw ConfigurationError("\(source) must be a URL with a scheme (myapp:// or https://…), got '\(value)'")
        }
        config.appURL = value.hasSuffix("/") ? value : value + "/"
    }

    public static let appStoreURL = Setting(
        "app-store-url", default: .unset(), meaning: "where a share link's page says to get the app",
        read: { $0.appStoreURL }
    ) { (config, value, source) throws(ConfigurationError) in config.appStoreURL = try httpURL(value, source: source) }

    public static let idleTimeout = Setting(
        "idle-timeout", default: .value("60"),
        meaning: """
            seconds a connection may stay open with no request in flight, or take to send a request's headers, \
            before it is closed
            """,
        read: { shown($0.idleTimeout) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.idleTimeout = try seconds(value, source: source, range: 1...600)
    }

    public static let liveStreamsPerSession = Setting(
        "live-streams-per-session", default: .value("4"),
        meaning:
            "live event streams one company session may hold open at once (an account, four times as many); more are refused with 429",
        read: { "\($0.sync.liveStreamsPerSession)" }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sync.liveStreamsPerSession = try count(value, source: source, range: 1...100)
    }

    public static let liveStreamsPerInstance = Setting(
        "live-streams-per-instance", default: .value("10000"),
        meaning: "live event streams this instance holds open at once; more are refused with 503 and `Retry-After`",
        read: { "\($0.sync.liveStreamsPerInstance)" }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sync.liveStreamsPerInstance = try count(value, source: source, range: 1...1_000_000)
    }

    public static let auditRetention = Setting(
        "audit-retention", default: .value("34560000", note: "400 days"),
        meaning: "seconds audit events are kept before the sweeper deletes them; `0` keeps them all",
        read: { shown($0.sweep.auditRetention) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sweep.auditRetention =
            value == "0" ? 0 : try seconds(value, source: source, range: 86_400...3_153_600_000)
    }

    public static let sessionRetention = Setting(
        "session-retention", default: .value("604800", note: "7 days"),
        meaning: """
            seconds an ended or expired session and its refresh tokens are kept (listed, audited) before the \
            sweeper deletes them
            """,
        read: { shown($0.sweep.endedSessionRetention) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sweep.endedSessionRetention = try seconds(value, source: source, range: 0...31_536_000)
    }

    public static let passwordReauthentication = Setting(
        "password-reauthentication", default: .value("86400", note: "a day"),
        meaning: """
            seconds after a session's sign-in during which it may set a new password without the current one or a \
            `reauthenticate` code (GoTrue's secure password change); `0` always asks, `off` never does (GoTrue's \
            default). A password or code that is given is checked either way
            """,
        read: { $0.auth.passwordReauthenticationWindow.map(shown) ?? "off" }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.passwordReauthenticationWindow =
            value == "off" ? nil : value == "0" ? 0 : try seconds(value, source: source, range: 60...31_536_000)
    }

    public static let secureEmailChange = Setting(
        "secure-email-change", default: .value("on"),
        meaning: """
            `on`: an email change takes a code or link mailed to the current address and one mailed to the new \
            address (GoTrue's secure email change). `off`: the new address alone confirms, and asking for the change \
            needs re-authentication as `--password-reauthentication` says
            """,
        read: { shown($0.auth.secureEmailChange) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.secureEmailChange = try onOff(value, source: source)
    }
}

extension Setting {
    private static func httpURL(_ value: String, source: String) throws(ConfigurationError) -> String {
        guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ConfigurationError("\(source) must be an http:// or https:// URL, got '\(value)'")
        }
        return value
    }

    private static func count(
        _ value: String, source: String, range: ClosedRange<Int>
    ) throws(ConfigurationError) -> Int {
        guard let count = Int(value), range.contains(count) else {
            throw ConfigurationError("\(source) must be a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return count
    }

    private static func seconds(
        _ value: String, source: String, range: ClosedRange<Int>
    ) throws(ConfigurationError) -> TimeInterval {
        guard let seconds = Int(value), range.contains(seconds) else {
            throw ConfigurationError(
                "\(source) must be a number of seconds from \(range.lowerBound) to \(range.upperBound)")
        }
        return TimeInterval(seconds)
    }

    public static let revealAccounts = Setting(
        "reveal-accounts", default: .value("off"),
        meaning: """
            `on` answers as GoTrue does where that tells whether an address has an account: a sign-up of a \
            confirmed address answers a user with no identities (what supabase-js apps test), and a code asked with \
            `create_user: false` for an unknown address 422 `otp_disabled`. Anyone may then test addresses; `off` \
            answers both as for any address
            """,
        read: { shown($0.auth.revealAccounts) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.revealAccounts = try onOff(value, source: source)
    }

    public static let anonymousUsers = Setting(
        "anonymous-users", default: .value("off"),
        meaning: """
            `on`: a sign-up without an email signs in a new anonymous user (GoTrue's anonymous sign-in, 30 an hour \
            from one address), who becomes permanent, with the same id, by confirming an email; until then it may \
            not create companies or accept shares. `off` answers 422 `anonymous_provider_disabled`
            """,
        read: { shown($0.auth.anonymousUsers) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.auth.anonymousUsers = try onOff(value, source: source)
    }

    public static let anonymousRetention = Setting(
        "anonymous-retention", default: .value("2592000", note: "30 days"),
        meaning: "seconds an anonymous user may go without a sign-in or refresh before the sweeper deletes it",
        read: { shown($0.sweep.anonymousRetention) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.sweep.anonymousRetention = try seconds(value, source: source, range: 3600...315_360_000)
    }

    public static let passkeys = Setting(
        "passkeys", default: .value("off"),
        meaning: """
            `on`: accounts register passkeys and sign in with them (Supabase's `/auth/v1/passkeys` wire format), and \
            members log in to a company with a company passkey instead of the credential's password. `off` answers \
            404 `passkey_disabled`
            """,
        read: { shown($0.passkeys.enabled) }
    ) { (config, value, source) throws(ConfigurationError) in
        config.passkeys.enabled = try onOff(value, source: source)
    }

    public static let passkeyRPID = Setting(
        "passkey-rp-id", default: .derived("the public URL's host"),
        meaning: """
            the domain passkeys belong to (the WebAuthn relying party id): the public URL's host or a parent domain \
            of it; an app's associated domain (`webcredentials:`) names the same
            """,
        read: { $0.passkeys.relyingPartyID }
    ) { (config, value, source) throws(ConfigurationError) in
        let host = value.lowercased()
        guard !host.isEmpty, host.count <= 253, !host.contains("/"), !host.contains(":"),
            host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" })
        else { throw ConfigurationError("\(source) must be a domain name such as example.com, got '\(value)'") }
        config.passkeys.relyingPartyID = host
    }

    public static let passkeyOrigins = Setting(
        "passkey-origins", default: .derived("the public URL's origin"),
        meaning: """
            comma-separated origins a passkey ceremony may come from: `https://app.example.com` (pages and apps \
            whose associated domain is the RP id report `https://RPID`), or `android:apk-key-hash:…`
            """,
        read: { shown($0.passkeys.origins) }
    ) { (config, value, source) throws(ConfigurationError) in
        let origins = list(value)
        for origin in origins where !origin.hasPrefix("android:apk-key-hash:") {
            guard let url = URL(string: origin), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                url.path.isEmpty, url.query == nil
            else {
                throw ConfigurationError(
                    "\(source) must list origins such as https://example.com (no path), got '\(origin)'")
            }
        }
        config.passkeys.origins = origins
    }

    public static let passkeyRPName = Setting(
        "passkey-rp-name", default: .value("Gatehouse"),
        meaning: "the name a passkey prompt shows for this server (the WebAuthn relying party name)",
        read: { $0.passkeys.relyingPartyName }
    ) { (config, value, source) throws(ConfigurationError) in
        guard value.count <= 64 else { throw ConfigurationError("\(source) must be at most 64 characters") }
        config.passkeys.relyingPartyName = value
    }

    public static let appleAppIDs = Setting(
        "apple-app-ids", default: .unset(note: "`/.well-known/apple-app-site-association` answers 404"),
        meaning: """
            comma-separated `TEAMID.bundle.id` of your iOS and macOS apps: the app-site association names them for \
            passkeys (`webcredentials`) and for share pages and mailed links (`applinks`), so those open the app
            """,
        read: { shown($0.appleAppIDs) }
    ) { (config, value, source) throws(ConfigurationError) in
        let ids = list(value)
        for id in ids {
            let parts = id.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 10,
                parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }),
                parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") })
            else {
                throw ConfigurationError(
                    "\(source) must list app ids such as ABCDE12345.com.example.app, got '\(id)'")
            }
        }
        config.appleAppIDs = ids
    }

    public static let appStoreBundleIDs = Setting(
        "app-store-bundle-ids", default: .unset(note: "purchases off: the subscription endpoints answer 404"),
        meaning: """
            comma-separated bundle ids whose StoreKit 2 transactions and App Store Server Notifications buy company \
            tiers
            """,
        read: { shown($0.appStore.bundleIDs) }
    ) { (config, value, source) throws(ConfigurationError) in
        let ids = list(value)
        for id in ids where !id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) {
            throw ConfigurationError("\(source) must list bundle ids such as com.example.app, got '\(id)'")
        }
        config.appStore.bundleIDs = ids
    }

    public static let appStoreAppID = Setting(
        "app-store-app-id", default: .unset(note: "required when Production is accepted"),
        meaning: "the App Apple ID (a number from App Store Connect) that Production notifications must name",
        read: { $0.appStore.appAppleID.map { "\($0)" } }
    ) { (config, value, source) throws(ConfigurationError) in
        guard let id = Int64(value), id > 0 else {
            throw ConfigurationError("\(source) must be the App Apple ID, a positive number, got '\(value)'")
        }
        config.appStore.appAppleID = id
    }

    public static let appStoreEnvironments = Setting(
        "app-store-environments", default: .value("Production"),
        meaning: """
            comma-separated App Store environments whose signed data counts: `Production`, `Sandbox`, `Xcode`, \
            `LocalTesting`
            """,
        read: { shown($0.appStore.environments) }
    ) { (config, value, source) throws(ConfigurationError) in
        let environments = list(value)
        for environment in environments where AppStoreEnvironment(rawValue: environment) == nil {
            throw ConfigurationError(
                "\(source) must list Production, Sandbox, Xcode or LocalTesting, got '\(environment)'")
        }
        guard !environments.isEmpty else { throw ConfigurationError("\(source) must name at least one environment") }
        config.appStore.environments = environments
    }

    public static let appStoreProducts = Setting(
        "app-store-products", default: .unset(),
        meaning: """
            which product buys which tier: `productId=tier,…` (tiers `business`, `enterprise`); a product not listed \
            is refused with `app_store_product_unknown`
            """,
        read: { shown($0.appStore.products.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.rawValue)" }) }
    ) { (config, value, source) throws(ConfigurationError) in
        var products: [String: CompanyTier] = [:]
        for pair in list(value) {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, let tier = CompanyTier(rawValue: parts[1]), tier != .free
            else {
                throw ConfigurationError(
                    "\(source) must list productId=tier pairs, tier business or enterprise, got '\(pair)'")
            }
            products[parts[0]] = tier
        }
        config.appStore.products = products
    }

    public static let appStoreRootCertificates = Setting(
        "app-store-root-certificates", default: .unset(note: "Apple Root CA - G3 only"),
        meaning: """
            comma-separated PEM or DER files of certificates trusted beside the built-in Apple Root CA - G3: \
            Xcode's StoreKit testing certificate, or a test root
            """,
        read: { shown($0.appStore.rootCertificateFiles) }
    ) { (config, value, source) throws(ConfigurationError) in
        let files = list(value)
        for file in files where !FileManager.default.isReadableFile(atPath: file) {
            throw ConfigurationError("\(source) names a file that cannot be read: '\(file)'")
        }
        config.appStore.rootCertificateFiles = files
    }

    public static let appStoreIssuerID = Setting(
        "app-store-issuer-id", default: .unset(note: "`gatehouse app-store reconcile` refuses to run"),
        meaning: "the issuer id of the team's App Store Connect API keys, for `gatehouse app-store reconcile`",
        read: { $0.appStore.issuerID }
    ) { config, value, _ in config.appStore.issuerID = value }

    public static let appStoreKeyID = Setting(
        "app-store-key-id", default: .unset(note: "`gatehouse app-store reconcile` refuses to run"),
        meaning: "the id of the team's in-app purchase key, for `gatehouse app-store reconcile`",
        read: { $0.appStore.keyID }
    ) { config, value, _ in config.appStore.keyID = value }

    public static let appStoreKeyFile = Setting(
        "app-store-key-file", default: .unset(note: "`gatehouse app-store reconcile` refuses to run"),
        meaning: "the in-app purchase key's `.p8` file (PEM), which signs the App Store Server API's tokens",
        read: { $0.appStore.keyFile }
    ) { (config, value, source) throws(ConfigurationError) in
        guard FileManager.default.isReadableFile(atPath: value) else {
            throw ConfigurationError("\(source) names a file that cannot be read: '\(value)'")
        }
        config.appStore.keyFile = value
    }

    public static let appStoreAPIURL = Setting(
        "app-store-api-url", default: .derived("Apple's, by the subscription's environment"),
        meaning: """
            the App Store Server API's base URL, replacing `https://api.storekit.itunes.apple.com` (Production) and \
            `https://api.storekit-sandbox.itunes.apple.com` (Sandbox): a proxy, or a test's fake
            """,
        read: { $0.appStore.apiURL }
    ) { (config, value, source) throws(ConfigurationError) in
        var url = try httpURL(value, source: source)
        while url.hasSuffix("/") { url.removeLast() }
        config.appStore.apiURL = url
    }

    /// A PEM private key on P-256, checked when the settings are read so a broken key stops the start.
    private static func applePrivateKeyPEM(_ pem: String, source: String) throws(ConfigurationError) -> String {
        guard (try? ES256PrivateKey(pem: pem)) != nil else {
            throw ConfigurationError("\(source) is not a PEM private key on P-256 (a Sign in with Apple .p8 key)")
        }
        return pem
    }

    private static func onOff(_ value: String, source: String) throws(ConfigurationError) -> Bool {
        switch value {
        case "on": return true
        case "off": return false
        default: throw ConfigurationError("\(source) must be on or off, got '\(value)'")
        }
    }

    /// Seconds as the flags take them.
    private static func shown(_ seconds: TimeInterval) -> String { String(Int(seconds)) }

    private static func shown(_ flag: Bool) -> String { flag ? "on" : "off" }

    /// A list as the flags take it; nil when empty.
    private static func shown(_ items: [String]) -> String? { items.isEmpty ? nil : items.joined(separator: ",") }

    /// The non-empty items of a comma-separated value, trimmed.
    private static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

extension Setting {
    /// The settings a command line gives: `--name value` or `--name=value`, a repeated flag's last value winning.
    /// Anything else is a usage error worded as swift-argument-parser words its own.
    public static func flags(in arguments: [String]) throws(ConfigurationError) -> [Setting: String] {
        var flags: [Setting: String] = [:]
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--" {
                // What follows a terminator is positional, and a server command takes no positional argument.
                if let extra = rest.first { throw ConfigurationError("Unexpected argument '\(extra)'") }
                break
            }
            guard argument.hasPrefix("-"), argument.count > 1 else {
                throw ConfigurationError("Unexpected argument '\(argument)'")
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard name.hasPrefix("--"), let setting = Setting(rawValue: String(name.dropFirst(2))) else {
                throw ConfigurationError("Unknown option '\(name)'")
            }
            if parts.count == 2 {
                flags[setting] = String(parts[1])
            } else if let value = rest.first, !value.hasPrefix("-") {
                flags[setting] = value
                rest.removeFirst()
            } else {
                throw ConfigurationError("Missing value for '\(setting.flag) <value>'")
            }
        }
        return flags
    }

    /// The arguments with every setting flag that follows the subcommand's name moved to the end (before any `--`),
    /// its value joined to it as `--name=value`. swift-argument-parser fills a command's positional arguments before
    /// it collects the arguments it does not know, and drops an unknown option that stands in front of one; the
    /// settings are such arguments to it, so they must come last.
    public static func settingsLast(_ arguments: [String]) -> [String] {
        var others: [String] = []
        var settings: [String] = []
        var rest = arguments[...]
        var afterCommandName = false
        while let argument = rest.popFirst() {
            if argument == "--" { return others + settings + [argument] + rest }
            let name = argument.dropFirst(2).prefix { $0 != "=" }
            guard afterCommandName, argument.hasPrefix("--"), Setting(rawValue: String(name)) != nil else {
                if !argument.hasPrefix("-") { afterCommandName = true }
                others.append(argument)
                continue
            }
            if !argument.contains("="), let value = rest.first, !value.hasPrefix("-") {
                settings.append(argument + "=" + value)
                rest.removeFirst()
            } else {
                // With a value already, or without one, which `flags(in:)` reports.
                settings.append(argument)
            }
        }
        return others + settings
    }
}
