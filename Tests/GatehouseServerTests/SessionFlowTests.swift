import AsyncHTTPClient
import Foundation
import GatehouseServer
import SQLKit
import Testing

@Suite("Sessions: refresh rotation, logout, revocation, keys, audit")
struct SessionFlowTests {
    @Test("refresh rotates; a just-rotated token returns the current pair; an old one ends the whole session")
    func rotationGraceAndReuse() async throws {
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            let second = try SignedIn(try await h.client.refresh(first.refresh))
            #expect(second.refresh != first.refresh)
            #expect(try await h.client.user(second.access).status == 200)

            // A client race: the same token again within 10 s gets the same new refresh token.
            h.clock.advance(by: 5)
            let raced = try SignedIn(try await h.client.refresh(first.refresh))
            #expect(raced.refresh == second.refresh)

            // Later, the old token again is reuse: refused, and the session ends for everyone.
            h.clock.advance(by: 11)
            let reuse = try await h.client.refresh(first.refresh)
            #expect(reuse.status == 400)
            #expect(reuse.json["error_code"] as? String == "refresh_token_already_used")
            #expect(try await h.client.refresh(second.refresh).status == 400)
            let refused = try await h.client.user(second.access)
            #expect(refused.status == 403)
            #expect(refused.json["error_code"] as? String == "session_not_found")
            let unknown = try await h.client.refresh("no-such-token")
            #expect(unknown.json["error_code"] as? String == "refresh_token_not_found")
        }
    }

    @Test("50 concurrent refreshes of one token: every client gets the same valid pair, the session survives")
    func concurrentRefreshes() async throws {
        try await AccountHarness.with({ $0.auth.limits.refreshesPerIP = RateLimit(limit: 1000, per: 300) }) { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail())
            let replies = try await withThrowingTaskGroup(of: HTTPReply.self) { group in
                for _ in 0..<50 { group.addTask { try await h.client.refresh(session.refresh) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == 200 })
            let tokens = Set(replies.compactMap { $0.json["refresh_token"] as? String })
            #expect(tokens.count == 1)
            let next = try #require(tokens.first)
            for reply in replies.prefix(5) {
                #expect(try await h.client.user(try SignedIn(reply).access).status == 200)
            }
            #expect(try await h.client.refresh(next).status == 200)
        }
    }

    @Test("20 sessions each refreshed twice at once, all together: each pair gets one successor, every successor works")
    func racingPairsTogether() async throws {
        try await AccountHarness.with({ $0.auth.limits.refreshesPerIP = RateLimit(limit: 1000, per: 300) }) { h in
            var sessions: [String] = []
            for _ in 0..<20 { sessions.append(try await h.confirmedAccount(AccountHarness.newEmail()).refresh) }
            // Both requests of a pair, and the pairs of every session, arrive while batches are being written.
            let replies = try await withThrowingTaskGroup(of: (Int, HTTPReply).self) { group in
                for (index, token) in sessions.enumerated() {
                    for _ in 0..<2 { group.addTask { (index, try await h.client.refresh(token)) } }
                }
                return try await group.reduce(into: [Int: [HTTPReply]]()) { $0[$1.0, default: []].append($1.1) }
            }
            #expect(replies.values.flatMap { $0 }.allSatisfy { $0.status == 200 })
            var successors: Set<String> = []
            for index in sessions.indices {
                let pair = Set((replies[index] ?? []).compactMap { $0.json["refresh_token"] as? String })
                #expect(pair.count == 1, "session \(index) got \(pair.count) successors")
                successors.formUnion(pair)
            }
            #expect(successors.count == sessions.count)
            for successor in successors { #expect(try await h.client.refresh(successor).status == 200) }
        }
    }

    @Test("logout scopes: others, local, global; a revoked session's access token is refused at once")
    func logoutScopes() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            let b = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let c = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(a.access, scope: "others").status == 204)
            #expect(try await h.client.user(a.access).status == 200)
            #expect(try await h.client.user(b.access).status == 403)
            #expect(try await h.client.user(c.access).status == 403)
            #expect(try await h.client.refresh(b.refresh).status == 400)

            let d = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(a.access, scope: "local").status == 204)
            #expect(try await h.client.user(a.access).status == 403)
            #expect(try await h.client.user(d.access).status == 200)

            let e = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(d.access, scope: "global").status == 204)
            #expect(try await h.client.user(d.access).status == 403)
            #expect(try await h.client.user(e.access).status == 403)
            #expect(try await h.client.logout(e.access, scope: "global").status == 403)
            #expect(try await h.client.get("/auth/v1/user").status == 401)
        }
    }

    @Test("GET /v1/sessions lists devices with the current one flagged; DELETE ends one; others' ids are not found")
    func sessionList() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            let b = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let list = try await h.client.get("/v1/sessions", bearer: a.access)
            #expect(list.status == 200)
            let sessions = try #require(list.json["sessions"] as? [[String: Any]])
            #expect(sessions.count == 2)
            #expect(sessions.filter { $0["current"] as? Bool == true }.count == 1)
            #expect(sessions.allSatisfy { $0["user_agent"] as? String == "GatehouseTests/1.0" && $0["ip"] is String })
            let otherID = try #require(sessions.first { $0["current"] as? Bool == false }?["id"] as? String)

            let stranger = try await h.confirmedAccount(AccountHarness.newEmail("stranger"))
            let foreign = try await h.client.delete("/v1/sessions/\(otherID)", bearer: stranger.access)
            #expect(foreign.status == 404)
            #expect(foreign.json["code"] as? String == "not_found")
            #expect(try await h.client.user(b.access).status == 200)

            #expect(try await h.client.delete("/v1/sessions/\(otherID)", bearer: a.access).status == 204)
            #expect(try await h.client.user(b.access).status == 403)
            let after = try await h.client.get("/v1/sessions", bearer: a.access)
            #expect((after.json["sessions"] as? [Any])?.count == 1)
            let noToken = try await h.client.get("/v1/sessions")
            #expect(noToken.status == 401)
            #expect(noToken.json["code"] as? String == "no_authorization")
        }
    }

    @Test("sessions expire when idle and at their absolute lifetime; access tokens at 15 minutes")
    func expiry() async throws {
        try await AccountHarness.with({
            $0.auth.sessionIdleTimeout = 3600
            $0.auth.sessionLifetime = 3 * 3600
        }) { h in
            let email = AccountHarness.newEmail()
            let s = try await h.confirmedAccount(email)
            h.clock.advance(by: 901)
            let expired = try await h.client.user(s.access)
            #expect(expired.status == 403)
            #expect(expired.json["error_code"] as? String == "bad_jwt")
            // Refreshed within the idle timeout, it lives on…
            var current = try SignedIn(try await h.client.refresh(s.refresh))
            for _ in 0..<3 {
                h.clock.advance(by: 3000)
                current = try SignedIn(try await h.client.refresh(current.refresh))
            }
            // …until its absolute lifetime (3 h; 9,901 s have passed, the last refresh 1,000 s ago).
            h.clock.advance(by: 1000)
            let ended = try await h.client.refresh(current.refresh)
            #expect(ended.status == 400)
            #expect(ended.json["error_code"] as? String == "session_expired")
            // And a session left alone past the idle timeout ends too.
            let idle = try SignedIn(try await h.client.password(email, "correct horse battery"))
            h.clock.advance(by: 3601)
            #expect(try await h.client.refresh(idle.refresh).json["error_code"] as? String == "session_expired")
        }
    }

    @Test("access tokens carry Supabase's claims and verify against the published key")
    func accessTokenClaims() async throws {
        try await AccountHarness.with { h in
            let s = try await h.confirmedAccount(AccountHarness.newEmail())
            let parts = s.access.split(separator: ".")
            #expect(parts.count == 3)
            func decode(_ part: Substring) throws -> [String: Any] {
                var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
                let data = try #require(Data(base64Encoded: base64))
                return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            }
            let header = try decode(parts[0])
            let claims = try decode(parts[1])
            #expect(header["alg"] as? String == "ES256")
            let jwks = try await h.client.get("/auth/v1/.well-known/jwks.json")
            #expect((jwks.json["keys"] as? [[String: Any]])?.first?["kid"] as? String == header["kid"] as? String)
            for claim in ["iss", "aud", "sub", "sid", "exp", "iat", "email", "role", "aal", "amr", "session_id"] {
                #expect(claims[claim] != nil, "missing \(claim)")
            }
            #expect(claims["sub"] as? String == s.userID)
            #expect(claims["aud"] as? String == "authenticated")
            #expect((claims["exp"] as? Int ?? 0) - (claims["iat"] as? Int ?? 0) == 900)
            // A token with its signature changed, or signed with "none", is refused.
            let tampered = parts[0] + "." + parts[1] + "." + String(parts[2].reversed())
            #expect(try await h.client.user(tampered).status == 403)
            let none = "eyJhbGciOiJub25lIn0." + parts[1] + "."
            #expect(try await h.client.user(none).status == 403)
        }
    }

    @Test("key rotation: new tokens use the new key, old tokens keep working, both keys are published")
    func keyRotation() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let before = try await h.confirmedAccount(email)
            let rotated = try await SigningKeys.rotate(
                h.server.services.store, box: h.server.services.box, now: h.clock.now)
            #expect(rotated.retired.count == 1)
            h.clock.advance(by: 31)
            let after = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let keys = try #require(
                try await h.client.get("/auth/v1/.well-known/jwks.json").json["keys"] as? [[String: Any]])
            #expect(Set(keys.compactMap { $0["kid"] as? String }) == Set(rotated.retired + [rotated.new]))
            #expect(try await h.client.user(before.access).status == 200)
            #expect(try await h.client.user(after.access).status == 200)
        }
    }

    @Test("the account's audit trail pages newest first and holds no secret")
    func audit() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let s = try await h.confirmedAccount(email)
            _ = try await h.client.password(email, "wrong password here")
            let fresh = try SignedIn(try await h.client.password(email, "correct horse battery"))
            _ = try await h.client.refresh(fresh.refresh)
            let page = try await h.client.get("/v1/account/audit?limit=3", bearer: s.access)
            #expect(page.status == 200)
            let events = try #require(page.json["events"] as? [[String: Any]])
            #expect(events.count == 3)
            #expect(events.first?["action"] as? String == "token_refreshed")
            let next = try #require(page.json["next_before"] as? Int)
            let rest = try await h.client.get("/v1/account/audit?before=\(next)&limit=100", bearer: s.access)
            let actions = (events + (rest.json["events"] as? [[String: Any]] ?? [])).compactMap {
                $0["action"] as? String
            }
            #expect(actions.contains("sign_in_failed"))
            #expect(actions.contains("signup"))
            #expect(actions.contains("verified"))
            let text = page.body + rest.body
            #expect(!text.contains(email))
            // Paging outside the contract is refused, not silently clamped.
            for query in ["limit=101", "limit=0", "limit=ten", "before=x"] {
                let refused = try await h.client.get("/v1/account/audit?\(query)", bearer: s.access)
                #expect(refused.status == 400, "\(query)")
                #expect(refused.json["code"] as? String == "validation_failed")
            }
            #expect(!text.contains("correct horse battery") && !text.contains(fresh.refresh))
        }
    }

    @Test("no issued token or code appears in any log line")
    func secretsNeverLogged() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.client.signUp(email, password: "correct horse battery")
            let mail = try await h.mail(to: email, subject: "Confirm your email")
            let code = try #require(mail.code)
            let link = try #require(mail.link)
            let s = try SignedIn(try await h.client.verify(email, code: code, type: "signup"))
            let r = try SignedIn(try await h.client.refresh(s.refresh))
            _ = try await h.client.password(email, "a wrong password")
            let lines = h.log.all
            #expect(!lines.isEmpty)
            let linkToken = try #require(URLComponents(string: link)?.queryItems?.first { $0.name == "token" }?.value)
            for secret in [
                code, linkToken, s.access, s.refresh, r.access, r.refresh, "correct horse battery", "a wrong password",
            ] {
                #expect(!lines.contains { $0.contains(secret) }, "a log line holds a secret")
            }
        }
    }

    @Test("with the mail server down: sign-up answers at once, the mail waits in the queue and arrives when it is back")
    func mailServerDown() async throws {
        // The sink holds its port while it is down, so nothing else can take it before it comes back.
        let late = try await SMTPSink.start(closed: true)
        defer { late.stop() }
        try await AccountHarness.with({ $0.smtpURL = "smtp://127.0.0.1:\(late.port)" }) { h in
            let email = AccountHarness.newEmail()
            let signedUp = try await h.client.signUp(email, password: "correct horse battery")
            #expect(signedUp.status == 200)
            // The first try has failed once it is rescheduled: the queue keeps the mail, sealed.
            let tried = try await LiveServer.eventually {
                let rows = try await h.server.services.store.database.select().columns("attempts", "message")
                    .from("mail_queue").all()
                return try rows.contains { try $0.decode(column: "attempts", as: Int.self) >= 1 }
            }
            #expect(tried)
            let sealed = try await h.server.services.store.database.select().column("message").from("mail_queue")
                .all(decodingColumn: "message", as: String.self)
            #expect(sealed.allSatisfy { $0.hasPrefix("gh1:") && !$0.contains("Confirm your email") })
            try late.open()
            // Retries follow the server's clock: move it past the backoff until the mail is through, but never near
            // the code's 600 s lifetime, however long the delivery takes in real time.
            var advanced: TimeInterval = 0
            let delivered = try await LiveServer.eventually {
                if advanced < 300 {
                    h.clock.advance(by: 5)
                    advanced += 5
                }
                return try await late.hasMail(to: email, subject: "Confirm your email")
            }
            #expect(delivered)
            let code = try #require(try await late.waitForMail(to: email, subject: "Confirm your email").code)
            #expect(try await h.client.verify(email, code: code, type: "signup").status == 200)
        }
    }

    @Test(
        "access tokens carry app_metadata and user_metadata as GoTrue's do, while they fit a web cookie (1 KiB together)"
    )
    func metadataClaims() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("claims")
            let session = try await h.confirmedAccount(email)
            #expect(
                try await h.client.put("/auth/v1/user", ["data": ["theme": "dark"]], bearer: session.access).status
                    == 200)
            let small = try SignedIn(try await h.client.refresh(session.refresh))
            let claims = try AnonymousTests.claims(small.access)
            #expect((claims["user_metadata"] as? [String: Any])?["theme"] as? String == "dark")
            #expect((claims["app_metadata"] as? [String: Any])?["provider"] as? String == "email")
            let large = String(repeating: "x", count: 2000)
            #expect(
                try await h.client.put("/auth/v1/user", ["data": ["bio": large]], bearer: small.access).status == 200)
            let big = try SignedIn(try await h.client.refresh(small.refresh))
            #expect(try AnonymousTests.claims(big.access)["user_metadata"] == nil)
            #expect(big.access.utf8.count < 4000)
        }
    }
}
