import Foundation
import Testing

@testable import GatehouseServer

/// The attack review's rules as pure functions: no server, no store, no clock of their own.
@Suite("Security rules")
struct SecurityRulesTests {
    // MARK: Finding 2: X-Forwarded-For

    static let proxies = [IPNetwork("10.0.0.0/8")!, IPNetwork("127.0.0.1")!, IPNetwork("fd00::/8")!]

    @Test(
        "the client is the rightmost X-Forwarded-For entry that is not a trusted proxy, whatever the client wrote first"
    )
    func rightmostUntrusted() {
        // The client forged "1.2.3.4"; its own address 203.0.113.7 was appended by the proxy.
        #expect(
            ClientAddress.resolve(
                peer: "10.1.2.3", forwardedFor: ["1.2.3.4, 203.0.113.7"], trustedProxies: Self.proxies) == "203.0.113.7"
        )
        // Through two proxies, over two header lines.
        #expect(
            ClientAddress.resolve(
                peer: "10.1.2.3", forwardedFor: ["9.9.9.9, 198.51.100.2", "10.0.0.5"], trustedProxies: Self.proxies)
                == "198.51.100.2")
        #expect(
            ClientAddress.resolve(peer: "fd00::1", forwardedFor: ["2001:db8::9"], trustedProxies: Self.proxies)
                == "2001:db8::9")
    }

    @Test("X-Forwarded-For is ignored from a peer that is not a trusted proxy, and when no proxy is configured")
    func untrustedPeer() {
        #expect(
            ClientAddress.resolve(peer: "203.0.113.9", forwardedFor: ["1.2.3.4"], trustedProxies: Self.proxies)
                == "203.0.113.9")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["1.2.3.4"], trustedProxies: []) == "127.0.0.1")
    }

    @Test("a malformed entry stops the walk at the last address a trusted proxy vouched for")
    func malformedHop() {
        #expect(
            ClientAddress.resolve(peer: "10.0.0.1", forwardedFor: ["1.2.3.4, not-an-ip"], trustedProxies: Self.proxies)
                == "10.0.0.1")
        #expect(
            ClientAddress.resolve(peer: "10.0.0.1", forwardedFor: ["10.0.0.2, 10.0.0.3"], trustedProxies: Self.proxies)
                == "10.0.0.2")
    }

    @Test("CIDR networks contain exactly their addresses; IPv4-mapped IPv6 counts as IPv4")
    func networks() throws {
        let net = try #require(IPNetwork("192.168.8.0/22"))
        #expect(net.contains(IPNetwork.parseAddress("192.168.11.255")!))
        #expect(!net.contains(IPNetwork.parseAddress("192.168.12.0")!))
        #expect(IPNetwork("10.0.0.0/8")!.contains(IPNetwork.parseAddress("::ffff:10.9.8.7")!))
        #expect(IPNetwork("10.0.0.0/33") == nil)
        #expect(IPNetwork("example.com") == nil)
    }

    // MARK: Finding 3: redirect allow-list

    @Test(
        "a prefix pattern admits its own origin only: not a longer host, not userinfo, not another port or scheme",
        arguments: [
            ("https://good.example/after/login", true),
            ("https://good.example", true),
            ("https://GOOD.example/x", true),
            ("https://good.example.evil.test/steal", false),
            ("https://good.example@evil.test/steal", false),
            ("https://user:pw@good.example/x", false),
            ("https://good.example:8443/x", false),
            ("http://good.example/x", false),
            ("https://good.example\\@evil.test/", false),
            ("javascript:alert(1)", false),
        ])
    func originPrefix(candidate: String, admitted: Bool) {
        #expect(RedirectAllowList(["https://good.example*"]).admits(candidate) == admitted)
    }

    @Test("a wildcard inside the path stays inside the path; app schemes match exactly; dot segments are refused")
    func pathWildcards() {
        let list = RedirectAllowList(["https://app.example/auth/*", "myapp://login-callback"])
        #expect(list.admits("https://app.example/auth/callback?x=1"))
        #expect(!list.admits("https://app.example/other"))
        #expect(!list.admits("https://app.example/auth/../admin"))
        #expect(list.admits("myapp://login-callback"))
        #expect(!list.admits("myapp://login-callback.evil"))
        #expect(!list.admits("myapp://other"))
        #expect(RedirectAllowList.entry("https://*.example.com") == nil)
    }

    // MARK: Findings 4, 6, 9: backoff counted before the check

    @Test("attempts are admitted and counted before the check: three free, then a second's wait, and the ceiling")
    func backoffCountsEveryAttempt() {
        let start = Date(timeIntervalSince1970: 1_000_000)
        let rule = FailureBackoff.Rule.passwords(ceiling: 100)
        var state = FailureBackoff(failures: 0, windowStartedAt: start, lastFailureAt: start)
        var admitted = 0
        // Sixty guesses at the same instant: only those the backoff allows are admitted, each counted.
        for _ in 0..<60 {
            let (wait, next) = state.admitting(now: start, rule: rule)
            if wait == nil { admitted += 1 }
            state = next
        }
        #expect(admitted == 4)
        #expect(state.failures == 4)
        #expect(state.admitting(now: start.addingTimeInterval(1), rule: rule).wait == nil)
    }

    @Test("mailed codes: no backoff between tries, but a ceiling per address across all codes for a day")
    func codeCeiling() {
        let start = Date(timeIntervalSince1970: 1_000_000)
        let rule = FailureBackoff.Rule.codes(ceiling: 100)
        var state = FailureBackoff(failures: 0, windowStartedAt: start, lastFailureAt: start)
        for _ in 0..<100 {
            let (wait, next) = state.admitting(now: start, rule: rule)
            #expect(wait == nil)
            state = next
        }
        let refused = state.admitting(now: start.addingTimeInterval(3600), rule: rule)
        #expect(refused.wait == 23 * 3600)
        #expect(state.admitting(now: start.addingTimeInterval(24 * 3600), rule: rule).wait == nil)
    }

    // MARK: Finding 12: passwords

    @Test(
        "common passwords are refused, also with a decoration of digits and symbols",
        arguments: ["Password123!", "qwerty123", "iloveyou1", "Dragon2024"])
    func commonPasswords(password: String) {
        #expect(PasswordPolicy().problems(for: password) == [.common])
    }

    @Test("the list holds at least 20,000 passwords, and ordinary passphrases are not on it")
    func commonList() {
        #expect(CommonPasswords.count >= 20_000)
        #expect(PasswordPolicy().problems(for: "correct horse battery") == [])
        #expect(PasswordPolicy().problems(for: "wombat-Quartz-17") == [])
    }

    @Test("passwords are NFKC-normalised: full-width and composed forms are one password")
    func normalisation() async throws {
        #expect(PasswordPolicy.normalized("ｐａｓｓ ｗｏｒｄ") == "pass word")
        #expect(PasswordPolicy.normalized("e\u{301}te\u{301}") == "\u{e9}t\u{e9}")
        let hasher = PasswordHasher()
        let hash = try await hasher.hash("ｆｕｌｌ ｗｉｄｔｈ ｐａｓｓ")
        #expect(await hasher.verify("full width pass", against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify("full width pasS", against: hash) == .invalid)
    }

    @Test("an unknown user's password runs through the same hash function and parameters as a real one")
    func dummyHashMatchesRealParameters() async throws {
        let hasher = PasswordHasher()
        let real = try await hasher.hash("some password")
        #expect(PasswordHasher.yescryptCost(of: hasher.dummyHash) == PasswordHasher.yescryptCost(of: real))
        #expect(hasher.dummyHash.split(separator: "$").prefix(2) == real.split(separator: "$").prefix(2))
        #expect(await hasher.verify("some password", against: hasher.dummyHash) == .invalid)
    }

    // MARK: Findings 11, 14, 17

    @Test("sealed secrets open with any configured key, are bound to their context, and name no key they lack")
    func secretBox() throws {
        let old = SecretBox.newKey()
        let new = SecretBox.newKey()
        let sealed = try SecretBox(base64Keys: [old]).seal("private key", context: "signing_key:a")
        #expect(!sealed.contains("private key"))
        let rotated = try SecretBox(base64Keys: [new, old])
        #expect(try rotated.open(sealed, context: "signing_key:a") == "private key")
        #expect(!rotated.isCurrent(sealed))
        #expect(throws: SecretBoxError.self) { try rotated.open(sealed, context: "signing_key:b") }
        #expect(throws: SecretBoxError.self) { try SecretBox(base64Keys: [new]).open(sealed, context: "signing_key:a") }
        #expect(throws: ConfigurationError.self) { try SecretBox(base64Keys: ["short"]) }
    }

    @Test("PKCE: only S256, a challenge of 43–128 base64url characters, and the verifier must hash to it")
    func pkce() throws {
        let verifier = String(repeating: "v", count: 64)
        let challenge = PKCE.s256(verifier)
        #expect(try PKCE.challenge(challenge, method: "s256") == challenge)
        #expect(try PKCE.challenge(challenge, method: "S256") == challenge)
        #expect(try PKCE.challenge(nil, method: nil) == nil)
        #expect(throws: APIError.self) { try PKCE.challenge(challenge, method: "plain") }
        #expect(throws: APIError.self) { try PKCE.challenge("short", method: "s256") }
        #expect(throws: APIError.self) { try PKCE.challenge(challenge, method: nil) }
        #expect(PKCE.verifies(verifier, challenge: challenge))
        #expect(!PKCE.verifies(verifier + "x", challenge: challenge))
    }

    @Test("access token times: iat in the future, a lifetime longer than the server gives, or expiry are refused")
    func tokenTimes() {
        func claims(iat: Int64, exp: Int64) -> AccessTokenClaims {
            AccessTokenClaims(
                iss: "i", aud: "authenticated", sub: "s", exp: exp, iat: iat, nbf: iat, email: "e", phone: "",
                role: "authenticated", aal: "aal1", amr: [], sessionID: "x", sid: "x", isAnonymous: false)
        }
        let now: Int64 = 1_000_000
        #expect(TokenTimes.acceptable(claims(iat: now - 10, exp: now + 890), now: now, maximumLifetime: 900))
        #expect(!TokenTimes.acceptable(claims(iat: now + 3600, exp: now + 4500), now: now, maximumLifetime: 900))
        #expect(!TokenTimes.acceptable(claims(iat: now - 10, exp: now + 86_400), now: now, maximumLifetime: 900))
        #expect(!TokenTimes.acceptable(claims(iat: now - 1000, exp: now - 100), now: now, maximumLifetime: 900))
    }

    @Test("a session is live only unrevoked, before its end and inside its idle timeout")
    func sessionLiveness() {
        #expect(SessionLiveness.isLive(revokedAt: nil, expiresAt: 10_000, refreshedAt: 0, idleSeconds: 5, now: 4_999))
        #expect(!SessionLiveness.isLive(revokedAt: nil, expiresAt: 10_000, refreshedAt: 0, idleSeconds: 5, now: 5_000))
        #expect(!SessionLiveness.isLive(revokedAt: 1, expiresAt: 10_000, refreshedAt: 0, idleSeconds: 5, now: 1))
        #expect(!SessionLiveness.isLive(revokedAt: nil, expiresAt: 100, refreshedAt: 0, idleSeconds: 5, now: 100))
        // A company policy cannot stretch the idle timeout past the server's.
        #expect(SessionLiveness.idleSeconds(own: 31_536_000, server: 1_209_600) == 1_209_600)
        #expect(SessionLiveness.idleSeconds(own: 28_800, server: 1_209_600) == 28_800)
        #expect(SessionLiveness.idleSeconds(own: nil, server: 1_209_600) == 1_209_600)
    }

    @Test("configuration: trusted proxies and redirect patterns are parsed, and bad ones are refused by name")
    func configuration() throws {
        let config = try GatehouseConfiguration.resolve(
            flags: [.trustedProxies: "10.0.0.0/8, 127.0.0.1", .redirectURLs: "https://good.example/*,myapp://cb"],
            environment: [:])
        #expect(config.auth.trustedProxies == [IPNetwork("10.0.0.0/8")!, IPNetwork("127.0.0.1")!])
        #expect(throws: ConfigurationError.self) {
            try GatehouseConfiguration.resolve(flags: [.trustedProxies: "10.0.0.0/99"], environment: [:])
        }
        #expect(throws: ConfigurationError.self) {
            try GatehouseConfiguration.resolve(flags: [.redirectURLs: "https://*.example.com"], environment: [:])
        }
        #expect(throws: ConfigurationError.self) {
            try GatehouseConfiguration.resolve(flags: [.metricsToken: "short"], environment: [:])
        }
        let smtp = try GatehouseConfiguration.resolve(
            flags: [.smtpURL: "smtp+insecure://relay.internal"], environment: [:])
        #expect(smtp.smtpURL == "smtp+insecure://relay.internal")
    }
}
