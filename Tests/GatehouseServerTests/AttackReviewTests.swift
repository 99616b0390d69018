import AsyncHTTPClient
import Foundation
import GatehouseServer
import SQLKit
import Testing

/// The attack review's findings, each replayed as the attacker did it, against a live server with a real SMTP
/// server. Every test here failed before the fix it names (docs/security.md maps them).
@Suite("Attack review: each finding, as the attacker ran it")
struct AttackReviewTests {
    static let victimPassword = "victim's own passphrase"
    static let attackerPassword = "attacker knows this one"

    @Test("F1 pre-hijack: an attacker's sign-up password and profile never survive the owner confirming the address")
    func preHijack() async throws {
        try await AccountHarness.with { h in
            // By a magic-link code.
            let victim = AccountHarness.newEmail("victim")
            #expect(
                try await h.client.signUp(victim, password: Self.attackerPassword, data: ["name": "Mallory"]).status
                    == 200)
            _ = try await h.mail(to: victim, subject: "Confirm your email")
            h.clock.advance(by: 61)
            #expect(try await h.client.otp(victim).status == 200)
            let code = try #require(try await h.mail(to: victim, subject: "Your sign-in code").code)
            let session = try SignedIn(try await h.client.verify(victim, code: code, type: "magiclink"))
            #expect(
                try await h.client.password(victim, Self.attackerPassword).json["error_code"] as? String
                    == "invalid_credentials")
            #expect((try await h.client.user(session.access).json["user_metadata"] as? [String: Any])?.isEmpty == true)

            // By recovery.
            let second = AccountHarness.newEmail("victim")
            _ = try await h.client.signUp(second, password: Self.attackerPassword)
            _ = try await h.mail(to: second, subject: "Confirm your email")
            #expect(try await h.client.post("/auth/v1/recover", ["email": second]).status == 200)
            let recovery = try #require(try await h.mail(to: second, subject: "Reset your password").code)
            #expect(try await h.client.verify(second, code: recovery, type: "recovery").status == 200)
            #expect(try await h.client.password(second, Self.attackerPassword).status == 400)

            // Signing up again does not replace the owner's pending choice: each sign-up's code carries its own.
            let third = AccountHarness.newEmail("victim")
            _ = try await h.client.signUp(third, password: Self.victimPassword)
            let own = try #require(try await h.mail(to: third, subject: "Confirm your email").code)
            h.clock.advance(by: 61)
            _ = try await h.client.signUp(third, password: Self.attackerPassword, data: ["name": "Mallory"])
            _ = try await h.mail(to: third, subject: "Confirm your email")
            let confirmed = try SignedIn(try await h.client.verify(third, code: own, type: "signup"))
            #expect(try await h.client.password(third, Self.victimPassword).status == 200)
            #expect(try await h.client.password(third, Self.attackerPassword).status == 400)
            #expect((try await h.client.user(confirmed.access).json["user_metadata"] as? [String: Any])?["name"] == nil)

            // An unconfirmed account that holds a password (written by an older release, or imported) does not sign
            // in by it.
            let legacy = AccountHarness.newEmail("legacy")
            _ = try await h.client.signUp(legacy, password: Self.attackerPassword)
            let hash = try await PasswordHasher().hash(Self.attackerPassword)
            try await h.server.services.store.database.update("accounts").set("password_hash", to: hash)
                .where("email", .equal, legacy).run()
            let refused = try await h.client.password(legacy, Self.attackerPassword)
            #expect(refused.json["error_code"] as? String == "email_not_confirmed")
            #expect(refused.json["access_token"] == nil)
        }
    }

    @Test(
        "F2 X-Forwarded-For: forged leftmost entries do not escape the per-IP limit; the rightmost untrusted one counts"
    )
    func forwardedForSpoofing() async throws {
        try await AccountHarness.with { h in
            var statuses: [Int] = []
            for attempt in 0..<40 {
                let forged = AuthClient(
                    http: h.http, base: h.server.baseURL,
                    headers: [("X-Forwarded-For", "198.18.\(attempt).1, 203.0.113.77")])
                statuses.append(try await forged.password(AccountHarness.newEmail(), "whatever it is").status)
            }
            #expect(statuses.filter { $0 == 429 }.count == 10)
            let ips = try await h.server.services.store.database.select().column("ip").from("audit_events")
                .where("action", .equal, "sign_in_failed").all(decodingColumn: "ip", as: String.self)
            #expect(Set(ips) == ["203.0.113.77"])
        }
    }

    @Test("F3 redirect allow-list: look-alike hosts and userinfo tricks fall back to the site URL")
    func redirectLookAlikes() async throws {
        try await AccountHarness.with({
            $0.auth.siteURL = "https://site.example"
            $0.auth.redirectAllowList = ["https://good.example*"]
        }) { h in
            for (candidate, expected) in [
                ("https://good.example.evil.test/x", "https://site.example"),
                ("https://good.example@evil.test/x", "https://site.example"),
                ("https://good.example/app/cb", "https://good.example/app/cb"),
            ] {
                let email = AccountHarness.newEmail()
                let encoded = try #require(candidate.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
                #expect(try await h.client.post("/auth/v1/otp?redirect_to=\(encoded)", ["email": email]).status == 200)
                let link = try #require(try await h.mail(to: email, subject: "Your sign-in code").link)
                let target = URLComponents(string: link)?.queryItems?.first { $0.name == "redirect_to" }?.value
                #expect(target == expected, "\(candidate)")
            }
        }
    }

    @Test("F4 backoff race: 60 parallel wrong passwords from 60 addresses are each counted before the check")
    func backoffRace() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Raced", owner: &owner)
            let (email, bearer) = (owner.email, owner.account.access)
            let statuses = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for index in 0..<60 {
                    let client = AuthClient(
                        http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", "198.19.\(index).9")])
                    group.addTask {
                        let account = try await client.password(email, "not the password \(index)").status
                        let company = try await client.companyLogin(
                            cid, username: "boss", password: "wrong \(index)", bearer: bearer
                        ).status
                        return (account, company)
                    }
                }
                return try await group.reduce(into: [(Int, Int)]()) { $0.append($1) }
            }
            // Three free tries and a fourth are checked; every other guess waits (429) instead of being tried.
            #expect(statuses.filter { $0.0 == 400 }.count <= 4)
            #expect(statuses.filter { $0.0 == 429 }.count >= 56)
            #expect(statuses.filter { $0.1 == 400 }.count <= 4)
            #expect(statuses.filter { $0.1 == 429 }.count >= 56)
        }
    }

    @Test(
        "F5 email change: a stolen token alone cannot complete it (the current address must confirm); taken and free addresses answer alike"
    )
    func emailChange() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("owner")
            let stolen = try await h.confirmedAccount(email)
            let taken = AccountHarness.newEmail("taken")
            _ = try await h.confirmedAccount(taken)
            // The thief asks for his own address and confirms it from there: the account keeps its address, since
            // the code mailed to the owner's current address never reached him.
            let thief = AccountHarness.newEmail("thief")
            #expect(try await h.client.put("/auth/v1/user", ["email": thief], bearer: stolen.access).status == 200)
            let warned = try await h.mail(to: email, subject: "Confirm the change of your email address")
            #expect(warned.text.contains(thief))
            let code = try #require(try await h.mail(to: thief, subject: "Confirm your new email address").code)
            let half = try await h.client.verify(thief, code: code, type: "email_change")
            #expect(half.status == 200 && half.json["access_token"] == nil)
            #expect(try await h.client.user(stolen.access).json["email"] as? String == email)
            #expect(try await h.client.password(thief, "correct horse battery").status == 400)

            let free = AccountHarness.newEmail("free")
            h.clock.advance(by: 61)
            let toTaken = try await h.client.put("/auth/v1/user", ["email": taken], bearer: stolen.access)
            h.clock.advance(by: 61)
            let toFree = try await h.client.put("/auth/v1/user", ["email": free], bearer: stolen.access)
            #expect(toTaken.status == 200)
            #expect(toFree.status == toTaken.status)
            #expect(Set(toTaken.json.keys) == Set(toFree.json.keys))
            #expect(toTaken.json["email"] as? String == email)
            _ = try await h.mail(to: free, subject: "Confirm your new email address")
            #expect(try await h.hasMail(to: taken, subject: "Confirm your new email address") == false)
        }
    }

    @Test("F6 current-password checks back off like sign-in, for the account and for a company credential")
    func currentPasswordThrottled() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Guarded", owner: &owner)
            var account: [Int] = []
            var company: [Int] = []
            for attempt in 0..<8 {
                account.append(
                    try await h.client.put(
                        "/auth/v1/user",
                        ["password": "new passphrase \(attempt)", "current_password": "guess \(attempt)"],
                        bearer: owner.account.access
                    ).status)
                company.append(
                    try await h.client.post(
                        "/v1/companies/\(cid)/credential/password",
                        ["current_password": "guess \(attempt)", "new_password": "next company secret"],
                        bearer: try #require(owner.company?.access)
                    ).status)
            }
            #expect(account.prefix(4).allSatisfy { $0 == 400 })
            #expect(account.suffix(4).allSatisfy { $0 == 429 })
            #expect(company.prefix(4).allSatisfy { $0 == 400 })
            #expect(company.suffix(4).allSatisfy { $0 == 429 })
        }
    }

    @Test("F7 company sessions: end with their account session, never act on the account, never chain, capped timeouts")
    func companySessionsAreChildren() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Child", owner: &owner)
            let company = try #require(owner.company)
            // Not on the account endpoints.
            #expect(try await h.client.user(company.access).json["error_code"] as? String == "account_session_required")
            let change = try await h.client.put(
                "/auth/v1/user", ["password": "a new passphrase", "current_password": "correct horse battery"],
                bearer: company.access)
            #expect(change.status == 403)
            // Nor on the account's own business under /v1.
            for path in ["/v1/sessions", "/v1/account/audit", "/v1/companies"] {
                let refused = try await h.client.get(path, bearer: company.access)
                #expect(refused.json["code"] as? String == "account_session_required", "\(path)")
            }
            // No company login from a company session.
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: company.access
                ).status == 403)
            // The parent's local logout ends it.
            #expect(try await h.client.logout(owner.account.access, scope: "local").status == 204)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: company.access).status == 403)
            #expect(try await h.client.refresh(company.refresh).status == 400)

            // A company policy cannot stretch the idle timeout past the server's 14 days.
            let fresh = try SignedIn(try await h.client.password(owner.email, "correct horse battery"))
            let login = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: fresh.access))
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)", ["session_idle_timeout": 31_536_000], bearer: login.access
                ).status == 200)
            let capped = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: fresh.access))
            h.clock.advance(by: 10 * 86_400)
            let parent = try SignedIn(try await h.client.refresh(fresh.refresh))
            h.clock.advance(by: 5 * 86_400)
            // Fifteen days on: the account session, used on day 10, lives; the company one, idle since day 0, does not.
            #expect(try await h.client.refresh(parent.refresh).status == 200)
            let expired = try await h.client.refresh(capped.refresh)
            #expect(expired.status == 400)
            #expect(expired.json["error_code"] as? String == "session_expired")
        }
    }

    @Test(
        "F8 enumeration: mail leaves the request path (answers while the mail server is down) and decoy ids are stable")
    func enumeration() async throws {
        let port = try freeLoopbackPort()
        try await AccountHarness.with({ $0.smtpURL = "smtp://127.0.0.1:\(port)" }) { h in
            let known = AccountHarness.newEmail("known")
            _ = try await h.client.signUp(known, password: "correct horse battery")
            let unknown = AccountHarness.newEmail("unknown")
            let forKnown = try await h.client.post("/auth/v1/recover", ["email": known])
            let forUnknown = try await h.client.post("/auth/v1/recover", ["email": unknown])
            #expect(forKnown.status == 200 && forUnknown.status == 200)
            #expect(forKnown.body == forUnknown.body)
            let queued = try await h.server.services.store.database.select().column("recipient_digest").from(
                "mail_queue"
            )
            .all(decodingColumn: "recipient_digest", as: String.self)
            #expect(queued.contains(Secrets.emailDigest(known)))
        }
        // A confirmed address's decoy keeps its ids, as a new address's answer does.
        try await AccountHarness.with { online in
            let confirmed = AccountHarness.newEmail("confirmed")
            _ = try await online.confirmedAccount(confirmed)
            online.clock.advance(by: 61)
            let first = try await online.client.signUp(confirmed, password: "another passphrase")
            online.clock.advance(by: 61)
            let second = try await online.client.signUp(confirmed, password: "another passphrase")
            #expect(first.json["id"] as? String == second.json["id"] as? String)
            let firstIdentity = (first.json["identities"] as? [[String: Any]])?.first?["identity_id"] as? String
            let secondIdentity = (second.json["identities"] as? [[String: Any]])?.first?["identity_id"] as? String
            #expect(firstIdentity != nil && firstIdentity == secondIdentity)
        }
    }

    @Test("F9 code guessing: wrong codes count per address across codes, up to 100 a day, and are audited")
    func codeCeiling() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("target")
            _ = try await h.confirmedAccount(email)
            var failures = 0
            var lastCode = ""
            for round in 0..<20 {
                h.clock.advance(by: 61)
                let client = AuthClient(
                    http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", "198.51.\(round).1")])
                #expect(try await client.otp(email).status == 200)
                lastCode = try #require(try await h.mail(to: email, subject: "Your sign-in code").code)
                for guess in 0..<5 {
                    let wrong = String(format: "%06d", (Int(lastCode)! + 1 + guess) % 1_000_000)
                    if try await client.verify(email, code: wrong, type: "magiclink").status == 403 { failures += 1 }
                }
            }
            #expect(failures == 100)
            let late = AuthClient(http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", "198.51.200.1")])
            h.clock.advance(by: 61)
            _ = try await late.otp(email)
            let fresh = try #require(try await h.mail(to: email, subject: "Your sign-in code").code)
            let refused = try await late.verify(email, code: fresh, type: "magiclink")
            #expect(refused.status == 429)
            #expect(Int(refused.headers["retry-after"] ?? "") ?? 0 > 3600)
            let audited = try await h.server.services.store.database.select().column("detail").from("audit_events")
                .where("action", .equal, "verify_failed").all(decodingColumn: "detail", as: String.self)
            #expect(audited.filter { $0.contains(Secrets.emailDigest(email)) }.count == 100)
        }
    }

    @Test("F11 secrets at rest: 0700 folder, 0600 database, key file outside it, keys and server secrets sealed")
    func secretsAtRest() async throws {
        try await AccountHarness.with { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail())
            #expect(try await h.client.refresh(session.refresh).status == 200)
            let folder = h.server.services.configuration.dataDirectory
            func mode(_ path: String) throws -> Int {
                try #require(
                    (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
            }
            #expect(try mode(folder) == 0o700)
            #expect(try mode(folder + "/gatehouse.key") == 0o600)
            if case .sqlite(let path) = h.server.services.store.location {
                #expect(try mode(path) == 0o600)
            }
            let db = h.server.services.store.database
            let keys = try await db.select().column("private_key").from("signing_keys").all(
                decodingColumn: "private_key", as: String.self)
            #expect(!keys.isEmpty && keys.allSatisfy { $0.hasPrefix("gh1:") && !$0.contains("PRIVATE KEY") })
            let secrets = try await db.select().column("value").from("server_secrets").all(
                decodingColumn: "value", as: String.self)
            #expect(!secrets.isEmpty && secrets.allSatisfy { $0.hasPrefix("gh1:") })
        }
    }

    @Test("F12 common passwords are refused with a reason; NFKC makes full-width and plain input one password")
    func commonPasswords() async throws {
        try await AccountHarness.with { h in
            for password in ["Password123!", "qwerty123", "iloveyou1"] {
                let reply = try await h.client.signUp(AccountHarness.newEmail(), password: password)
                #expect(reply.status == 422)
                #expect((reply.json["weak_password"] as? [String: Any])?["reasons"] as? [String] == ["common"])
            }
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email, password: "ｗｉｄｅ ｐａｓｓ ｐｈｒａｓｅ")
            #expect(try await h.client.password(email, "wide pass phrase").status == 200)
        }
    }

    @Test("F13 headers and types: no-store tokens, nosniff everywhere, 415 for non-JSON bodies, /metrics closed")
    func headersAndTypes() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            let session = try await h.client.password(email, "correct horse battery")
            #expect(session.headers["cache-control"] == "no-store")
            #expect(session.headers["x-content-type-options"] == "nosniff")
            #expect(try await h.client.get("/health/live").headers["x-content-type-options"] == "nosniff")
            let forged = try await h.http.send(
                .POST, h.server.baseURL + "/auth/v1/token?grant_type=password",
                rawBody: #"{"email":"\#(email)","password":"correct horse battery"}"#,
                headers: [("Content-Type", "text/plain")])
            #expect(forged.status == 415)
            #expect(try await h.client.get("/metrics").status == 403)
        }
    }

    @Test("F14 magic links: fetching the link spends nothing; a cross-site post is refused; the button signs in once")
    func scannerSafeLinks() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.client.otp(email)
            let link = try #require(try await h.mail(to: email, subject: "Your sign-in code").link)
            // A scanner fetches it, twice.
            for _ in 0..<2 {
                let page = try await h.http.send(.GET, link)
                #expect(page.status == 200)
                #expect(page.body.contains("Continue"))
            }
            // And asks for its headers: the same answer, without the page.
            let head = try await h.http.send(.HEAD, link)
            #expect(head.status == 200)
            #expect(head.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(head.body.isEmpty)
            let fields = AccountHarness.formFields(try await h.http.send(.GET, link).body)
            var form = URLComponents()
            form.queryItems = fields.map { URLQueryItem(name: $0.key, value: $0.value) }
            #expect(try await h.http.send(.GET, link).headers["referrer-policy"] == "same-origin")
            for forged in [
                [("Origin", "https://evil.example")], [("Sec-Fetch-Site", "cross-site"), ("Origin", "null")],
                [("Origin", "null")],
            ] {
                let crossSite = try await h.http.send(
                    .POST, h.server.baseURL + "/auth/v1/verify/continue", rawBody: form.percentEncodedQuery,
                    headers: [("Content-Type", "application/x-www-form-urlencoded")] + forged)
                #expect(crossSite.status == 403)
            }
            // Without an app redirect the link lands here: this browser is signed in, by cookie.
            let (_, answer) = try await h.followLink(link)
            #expect(answer.status == 200)
            #expect(answer.body.contains("data-page=\"confirmed\""))
            #expect(answer.headers["set-cookie"]?.contains("HttpOnly; SameSite=Strict") == true)
        }
    }

    @Test("F15 a non-ASCII address gets a clear 422 when the mail server lacks SMTPUTF8")
    func internationalAddressRefused() async throws {
        // The test's SMTP server (aiosmtpd, as run by Support/smtp_sink.py) does not offer SMTPUTF8.
        let sink = try await SMTPSink.shared()
        try await AccountHarness.with({ $0.smtpURL = "smtp://127.0.0.1:\(sink.port)" }) { h in
            for path in ["/auth/v1/otp", "/auth/v1/signup", "/auth/v1/recover"] {
                let reply = try await h.client.post(path, ["email": "adá@exämple.com"])
                #expect(reply.status == 422, "\(path)")
                #expect(reply.json["error_code"] as? String == "email_address_not_supported")
            }
        }
    }

    @Test("F17 audit: 429s, refused authorizations, tampered tokens and subject-less failed verifications are recorded")
    func auditGaps() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Audited", owner: &owner)
            for _ in 0..<31 { _ = try await h.client.password(AccountHarness.newEmail(), "wrong password here") }
            _ = try await h.client.get("/v1/companies/\(cid)/members", bearer: owner.account.access)
            let token = owner.account.access
            _ = try await h.client.user(String(token.dropLast(3)) + (token.hasSuffix("AAA") ? "BBB" : "AAA"))
            _ = try await h.client.verify(AccountHarness.newEmail(), code: "000000", type: "magiclink")
            let actions = try await h.server.services.store.database.select().column("action").from("audit_events")
                .all(decodingColumn: "action", as: String.self)
            for action in ["rate_limited", "authorization_refused", "token_rejected", "verify_failed"] {
                #expect(actions.contains(action), "\(action)")
            }
        }
    }
}
