import Foundation
import GatehouseServer
import SQLKit
import Testing

@testable import GatehouseServer

/// The attack review of wave 2 (issue 22), replayed: logs, stored digests, live streams and the audit trail.
@Suite("Hardening: logs and digests, live streams, refusal audits")
struct HardeningTests {
    @Test("F3: at the most verbose log level, no line holds an address, a password hash or a code's digest")
    func debugLogsHoldNoSecrets() async throws {
        try await AccountHarness.with { h in
            // The harness logs at trace, below --log-level debug.
            let email = AccountHarness.newEmail()
            _ = try await h.client.signUp(email, password: "correct horse battery")
            let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
            let db = h.server.services.store.database
            let row = try #require(
                try await db.select().columns("id", "code_hash").from("one_time_codes").where("email", .equal, email)
                    .first())
            let codeID = try row.decode(column: "id", as: String.self)
            let stored = try row.decode(column: "code_hash", as: String.self)
            _ = try SignedIn(try await h.client.verify(email, code: code, type: "signup"))
            _ = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let passwordHash = try #require(
                try await db.select().column("password_hash").from("accounts").where("email", .equal, email)
                    .first(decodingColumn: "password_hash", as: String.self))

            let lines = h.log.all
            #expect(!lines.isEmpty)
            for (what, secret) in [
                ("the address", email), ("the password hash", passwordHash), ("the stored code digest", stored),
                ("the code's unkeyed digest", Secrets.digest("\(codeID):\(code)")),
            ] {
                #expect(!lines.contains { $0.contains(secret) }, "a log line holds \(what)")
            }
            // A copy of the database does not give the code away either: its digest is keyed with a key that is not
            // in the database, so hashing the million six-digit codes with the row's id finds nothing.
            #expect(stored.hasPrefix("hmac:"))
            #expect(stored != Secrets.digest("\(codeID):\(code)"))
        }
    }
}

extension HardeningTests {
    @Test("F2: a connection that never finishes its headers, or sits idle after an answer, is closed")
    func slowAndIdleConnectionsClose() async throws {
        try await AccountHarness.with(live: true, { $0.idleTimeout = 1 }) { h in
            let port = try #require(URL(string: h.server.baseURL)?.port)
            let slow = try RawConnection(port: port)
            try slow.send("GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            let idle = try RawConnection(port: port)
            try idle.send("GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            // Neither is closed by the client; the server ends both (before: both stayed open for good).
            #expect(try await firstValue(within: .seconds(30)) { slow.isClosedByPeer ? true : nil } == true)
            #expect(try await firstValue(within: .seconds(30)) { idle.isClosedByPeer ? true : nil } == true)
        }
    }

    @Test("F2: live streams are capped per session (429 too_many_streams) and per instance (503 server_busy)")
    func liveStreamCaps() async throws {
        try await AccountHarness.with(
            live: true,
            {
                $0.sync.liveStreamsPerSession = 2
                $0.sync.liveStreamsPerInstance = 3
                // A stream's reader going away is seen at its next write: the keep-alive.
                $0.sync.liveCheckInterval = 0.5
            }
        ) { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Depot", owner: &owner)
            let first = try #require(owner.company?.access)
            let path = "/v1/companies/\(cid)/sync/live"
            let open = { (bearer: String) in
                try await LiveStream.open(AccountHarness.http, base: h.server.baseURL, cid: cid, bearer: bearer)
            }
            let a = try await open(first)
            defer { a.close() }
            let b = try await open(first)
            defer { b.close() }
            #expect(a.status == 200 && b.status == 200)
            let third = try await h.client.get(path, bearer: first)
            #expect(third.status == 429)
            #expect(third.json["code"] as? String == "too_many_streams")

            // A second session of the same account has its own two; the instance's third stream is its last.
            let second = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: owner.account.access))
            let c = try await open(second.access)
            defer { c.close() }
            #expect(c.status == 200)
            let busy = try await h.client.get(path, bearer: second.access)
            #expect(busy.status == 503)
            #expect(busy.json["code"] as? String == "server_busy")
            #expect(busy.headers["retry-after"] != nil)

            // A stream the device closes frees its place.
            a.close()
            let again = try await firstValue(within: .seconds(30)) { () async throws -> LiveStream? in
                let stream = try await open(first)
                if stream.status == 200 { return stream }
                return nil
            }
            defer { again?.close() }
            #expect(again != nil)
        }
    }

    /// A member signed in afresh with `password`: an account session, a company session from it, and a live stream
    /// on `base` that has had its first event.
    private func signedInStream(
        _ h: AccountHarness, cid: String, email: String, username: String, password: String = "correct horse battery",
        base: String
    ) async throws -> (account: SignedIn, company: SignedIn, stream: LiveStream) {
        let account = try SignedIn(try await h.client.password(email, password))
        let company = try SignedIn(
            try await h.client.companyLogin(
                cid, username: username, password: "member secret 1", bearer: account.access))
        let stream = try await LiveStream.open(AccountHarness.http, base: base, cid: cid, bearer: company.access)
        #expect(stream.status == 200)
        #expect(try await stream.waitFor { $0.name == "seq" })
        return (account, company, stream)
    }

    /// Whether `stream` was told it closed, within a deadline far shorter than the periodic check's interval.
    private func closes(_ stream: LiveStream) async throws -> Bool {
        try await stream.waitFor(timeout: .seconds(10)) { $0.name == "closed" }
    }

    @Test(
        "F7: a live stream closes at once on every way its session ends (held on another instance on PostgreSQL)")
    func streamsCloseWhenSessionsEnd() async throws {
        // The periodic check is ten minutes away: only the immediate path can close a stream within the deadline.
        try await AccountHarness.with(live: true, { $0.sync.liveCheckInterval = 600 }) { h in
            let other = TestStore.postgresURL != nil ? try await h.secondInstance() : nil
            let base = other?.baseURL ?? h.server.baseURL
            do {
                var owner = try await h.person("owner")
                let cid = try await h.company("Depot", owner: &owner)
                var member = try await h.person("member")
                try await h.join(cid, &member, owner: owner)
                let username = "user-\(member.id.prefix(6))"

                // Signing the company session out.
                var held = try await signedInStream(h, cid: cid, email: member.email, username: username, base: base)
                #expect(try await h.client.logout(held.company.access, scope: "local").status == 204)
                #expect(try await closes(held.stream))
                held.stream.close()

                // Signing out everywhere from the account session.
                held = try await signedInStream(h, cid: cid, email: member.email, username: username, base: base)
                #expect(try await h.client.logout(held.account.access, scope: "global").status == 204)
                #expect(try await closes(held.stream))
                held.stream.close()

                // A password change from another sign-in ends this one.
                held = try await signedInStream(h, cid: cid, email: member.email, username: username, base: base)
                let changer = try SignedIn(try await h.client.password(member.email, "correct horse battery"))
                let changed = try await h.client.put(
                    "/auth/v1/user", ["password": "a brand new secret", "current_password": "correct horse battery"],
                    bearer: changer.access)
                #expect(changed.status == 200)
                #expect(try await closes(held.stream))
                held.stream.close()

                // Deleting the company credential.
                held = try await signedInStream(
                    h, cid: cid, email: member.email, username: username, password: "a brand new secret", base: base)
                #expect(
                    try await h.client.delete("/v1/companies/\(cid)/credential", bearer: held.company.access).status
                        == 204)
                #expect(try await closes(held.stream))
                held.stream.close()

                // Disabling the account.
                #expect(
                    try await h.client.createCredential(
                        cid, username: username, password: "member secret 1", bearer: held.account.access
                    ).status == 201)
                held = try await signedInStream(
                    h, cid: cid, email: member.email, username: username, password: "a brand new secret", base: base)
                #expect(try await Operator(store: h.server.services.store).disableUser(member.email))
                #expect(try await closes(held.stream))
                held.stream.close()

                // Deleting the account.
                var leaver = try await h.person("leaver")
                try await h.join(cid, &leaver, owner: owner)
                held = try await signedInStream(
                    h, cid: cid, email: leaver.email, username: "user-\(leaver.id.prefix(6))", base: base)
                let deleted = try await h.client.deleteAccount(
                    ["current_password": "correct horse battery"], bearer: held.account.access)
                #expect(deleted.status == 204)
                #expect(try await closes(held.stream))
                held.stream.close()
            } catch {
                try? await other?.stop()
                throw error
            }
            try await other?.stop()
        }
    }

    @Test("F7: a live stream closes when its session's lifetime ends, without waiting for the periodic check")
    func streamClosesAtSessionLifetime() async throws {
        try await AccountHarness.with(
            live: true,
            {
                $0.sync.liveCheckInterval = 600
                $0.auth.sessionLifetime = 2
            }
        ) { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Depot", owner: &owner)
            let stream = try await LiveStream.open(
                AccountHarness.http, base: h.server.baseURL, cid: cid, bearer: try #require(owner.company?.access))
            defer { stream.close() }
            #expect(try await stream.waitFor { $0.name == "seq" })
            h.clock.advance(by: 3)
            #expect(try await closes(stream))
        }
    }
}

extension HardeningTests {
    @Test("F9: an outsider's refusals stay out of the company's trail, and refusals from one address are capped")
    func refusalAuditsAreBounded() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Depot", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let outsider = try await h.person("outsider")
            let intruder = [("User-Agent", "intruder/1.0"), ("X-Forwarded-For", "203.0.113.9")]
            for _ in 0..<30 {
                let refused = try await h.client.get(
                    "/v1/companies/\(cid)/members", bearer: outsider.account.access, extra: intruder)
                #expect(refused.status == 403)
            }
            // The company's trail holds none of it (before: its latest 100 events were the outsider's lines).
            let trail = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: ownerToken)
            let agents = (trail.json["events"] as? [[String: Any]] ?? []).compactMap { $0["user_agent"] as? String }
            #expect(!agents.isEmpty)
            #expect(!agents.contains("intruder/1.0"))
            // The outsider's own trail says what he tried, up to the cap.
            let own = try await h.client.get("/v1/account/audit?limit=100", bearer: outsider.account.access)
            let refusals = (own.json["events"] as? [[String: Any]] ?? []).filter {
                $0["action"] as? String == "authorization_refused"
            }
            #expect(refusals.count == 20)
            #expect(refusals.allSatisfy { ($0["detail"] as? [String: Any])?["company"] as? String == cid })

            // Garbage bearer tokens from one address: 400 requests, 20 rows and one note that counting stopped.
            let garbage = [("X-Forwarded-For", "198.51.100.7")]
            for index in 0..<400 {
                #expect(
                    try await h.client.get("/auth/v1/user", bearer: "garbage-\(index)", extra: garbage).status == 403)
            }
            let rows = try await h.server.services.store.database.select().column("action").from("audit_events")
                .where("ip", .equal, "198.51.100.7").all(decodingColumn: "action", as: String.self)
            #expect(rows.filter { $0 == "token_rejected" }.count == 20)
            #expect(rows.filter { $0 == "audit_suppressed" }.count == 1)
            #expect(rows.count == 21)
        }
    }
}

extension HardeningTests {
    @Test("F11: a sign-up's or a code request's data has the same total size as user_metadata (422 metadata_too_large)")
    func signUpDataIsBounded() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let big = ["notes": String(repeating: "x", count: 20_000)]
            let signUp = try await h.client.signUp(email, password: "correct horse battery", data: big)
            #expect(signUp.status == 422)
            #expect(signUp.json["error_code"] as? String == "metadata_too_large")
            let otp = try await h.client.post("/auth/v1/otp", ["email": email, "data": big])
            #expect(otp.status == 422)
            #expect(otp.json["error_code"] as? String == "metadata_too_large")
            // Nothing was mailed, and a sign-up within the limit goes through.
            #expect(try await !h.hasMail(to: email, subject: "Confirm your email"))
            #expect(try await h.client.signUp(email, password: "correct horse battery", data: ["n": "1"]).status == 200)
        }
    }
}

extension HardeningTests {
    @Test(
        "F2: the hub's caps, without I/O: per session, per account over its sessions, per instance; a closed place frees"
    )
    func hubCaps() throws {
        let streams = LiveStreams(perSession: 2, perInstance: 20)
        var open: [(UUID, AsyncStream<LiveEvent>)] = []
        for _ in 0..<2 { open.append(try streams.subscribe(companyID: "c", accountID: "a", sessionID: "s1")) }
        #expect(throws: LiveStreams.Refusal.sessionFull) {
            try streams.subscribe(companyID: "c", accountID: "a", sessionID: "s1")
        }
        // One account over many company logins: four sessions' worth, then no more.
        for session in 2...4 {
            for _ in 0..<2 {
                open.append(try streams.subscribe(companyID: "c", accountID: "a", sessionID: "s\(session)"))
            }
        }
        #expect(throws: LiveStreams.Refusal.sessionFull) {
            try streams.subscribe(companyID: "c", accountID: "a", sessionID: "s5")
        }
        // Other accounts fill the instance.
        for index in 0..<12 {
            open.append(try streams.subscribe(companyID: "c", accountID: "b\(index)", sessionID: "t\(index)"))
        }
        #expect(streams.subscriberCount == 20)
        #expect(throws: LiveStreams.Refusal.instanceFull) {
            try streams.subscribe(companyID: "c", accountID: "z", sessionID: "z")
        }
        // A stream that ends gives its place back.
        streams.unsubscribe(companyID: "c", id: open[0].0)
        #expect(streams.subscriberCount == 19)
        _ = try streams.subscribe(companyID: "c", accountID: "z", sessionID: "z")
    }
}
