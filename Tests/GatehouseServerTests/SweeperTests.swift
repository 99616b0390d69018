import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// The sweeper deletes what no request can use any more, and nothing a request could still use: each test moves the
/// clock, sweeps, and checks both sides through the router (docs/operators.md, "A bounded store").
@Suite("The store stays bounded")
struct SweeperTests {
    /// A sweeper on the harness's store and clock, with the server's settings unless changed.
    static func sweeper(_ h: AccountHarness, _ change: (inout SweepSettings) -> Void = { _ in }) -> Sweeper {
        let services = h.server.services
        var settings = services.configuration.sweep
        change(&settings)
        return Sweeper(
            store: services.store, settings: settings, auth: services.configuration.auth, clock: h.clock,
            logger: h.log.logger)
    }

    static func count(_ h: AccountHarness, _ sql: SQLQueryString) async throws -> Int {
        try await h.server.services.store.database.raw(sql).first(decodingColumn: "n", as: Int.self) ?? -1
    }

    static func errorCode(_ reply: HTTPReply) -> String? { reply.json["error_code"] as? String }

    @Test("a rotated token within the grace still answers after a sweep, and one replayed later still ends its session")
    func reuseDetectionSurvives() async throws {
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            let second = try SignedIn(try await h.client.refresh(first.refresh))

            h.clock.advance(by: 5)
            try await Self.sweeper(h).sweep()
            // Inside the grace: the old token answers with the same successor (a client race).
            let raced = try SignedIn(try await h.client.refresh(first.refresh))
            #expect(raced.refresh == second.refresh)

            // Past the grace but within the reuse window: still in the store, so the replay ends the session.
            h.clock.advance(by: 20 * 60)
            let third = try SignedIn(try await h.client.refresh(second.refresh))
            try await Self.sweeper(h).sweep()
            let replay = try await h.client.refresh(first.refresh)
            #expect(replay.status == 400 && Self.errorCode(replay) == "refresh_token_already_used")
            #expect(Self.errorCode(try await h.client.refresh(third.refresh)) == "refresh_token_not_found")
            #expect(try await h.client.user(third.access).status == 403)
        }
    }

    @Test("a token rotated longer ago than the reuse window is forgotten; its live session and current token stay")
    func rotatedTokensGo() async throws {
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            var current = first
            // A device refreshing every 15 minutes for five hours: twenty rotations.
            for _ in 0..<20 {
                h.clock.advance(by: 15 * 60)
                current = try SignedIn(try await h.client.refresh(current.refresh))
            }
            let tokens: SQLQueryString =
                "SELECT COUNT(*) AS n FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id WHERE s.account_id = \(bind: first.userID)"
            #expect(try await Self.count(h, tokens) == 21)
            // Within the day (the reuse window) a sweep keeps them all.
            #expect(try await Self.sweeper(h).sweep().deleted[.rotatedTokens] ?? 0 == 0)

            // A day after the last refresh: kept are the current token and the last one rotated, exactly a day ago.
            h.clock.advance(by: 24 * 3600)
            let report = try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, tokens) == 2)
            #expect(report.deleted[.rotatedTokens] == 19)
            // The oldest token is now unknown: refused, and the session goes on.
            let replay = try await h.client.refresh(first.refresh)
            #expect(replay.status == 400 && Self.errorCode(replay) == "refresh_token_not_found")
            let next = try await h.client.refresh(current.refresh)
            #expect(next.status == 200)
        }
    }

    @Test("sessions go a retention after they ended (revoked or idle); a live one and a recently ended one stay")
    func endedSessionsGo() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let live = try await h.confirmedAccount(email)
            let revoked = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let idle = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(revoked.access, scope: "local").status == 204)
            let sessions: SQLQueryString = "SELECT COUNT(*) AS n FROM sessions WHERE account_id = \(bind: live.userID)"

            // Eight days on (the retention is seven): the revoked session goes, the idle one is not ended yet.
            h.clock.advance(by: 8 * 24 * 3600)
            var current = try SignedIn(try await h.client.refresh(live.refresh))
            try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, sessions) == 2)
            #expect(Self.errorCode(try await h.client.refresh(revoked.refresh)) == "refresh_token_not_found")

            // Fourteen days idle end the other one; seven more and it goes too.
            h.clock.advance(by: 13 * 24 * 3600)
            current = try SignedIn(try await h.client.refresh(current.refresh))
            try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, sessions) == 2)
            h.clock.advance(by: 8 * 24 * 3600)
            current = try SignedIn(try await h.client.refresh(current.refresh))
            let report = try await Self.sweeper(h).sweep()
            #expect(report.deleted[.idleSessions] == 1)
            #expect(try await Self.count(h, sessions) == 1)
            #expect(Self.errorCode(try await h.client.refresh(idle.refresh)) == "refresh_token_not_found")

            // The device that kept refreshing is signed in throughout.
            #expect(try await h.client.user(current.access).status == 200)
            #expect(try await h.client.refresh(current.refresh).status == 200)
        }
    }

    @Test("spent and expired codes go a day after they expire; a live code still verifies after a sweep")
    func codesGo() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let codes: SQLQueryString = "SELECT COUNT(*) AS n FROM one_time_codes WHERE email = \(bind: email)"
            #expect(try await Self.count(h, codes) == 1)

            // A fresh code survives a sweep and signs in.
            #expect(try await h.client.otp(email).status == 200)
            try await Self.sweeper(h).sweep()
            let code = try #require(try await h.mail(to: email, subject: "Your sign-in code").code)
            #expect(try await h.client.verify(email, code: code, type: "email").status == 200)
            #expect(try await Self.count(h, codes) == 2)

            // Expired an hour ago: kept (a used link still says so); a day after expiry: gone.
            h.clock.advance(by: 3600)
            try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, codes) == 2)
            h.clock.advance(by: 24 * 3600)
            let report = try await Self.sweeper(h).sweep()
            #expect(report.deleted[.codes] == 2)
            #expect(try await Self.count(h, codes) == 0)
            #expect(try await h.client.refresh(account.refresh).status == 200)
        }
    }

    @Test("a failure record still throttles after a sweep, and goes once its window has passed")
    func throttlesGo() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            // Three free failures, then a delay.
            for _ in 0..<4 { _ = try await h.client.password(email, "wrong password here") }
            try await Self.sweeper(h).sweep()
            #expect(try await h.client.password(email, "correct horse battery").status == 429)

            let rows: SQLQueryString = "SELECT COUNT(*) AS n FROM auth_throttle WHERE key LIKE 'password:%'"
            let before = try await Self.count(h, rows)
            #expect(before >= 1)
            h.clock.advance(by: 25 * 3600)
            let report = try await Self.sweeper(h).sweep()
            #expect((report.deleted[.throttles] ?? 0) >= 1)
            #expect(try await Self.count(h, rows) == 0)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
        }
    }

    @Test("a used PKCE code stays while the session it started exists, and goes with it")
    func flowStatesGo() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let sessionID = try #require(
                try await h.server.services.store.database.raw(
                    "SELECT id FROM sessions WHERE account_id = \(bind: account.userID)"
                ).first(decodingColumn: "id", as: String.self))
            let now = h.clock.now
            try await h.server.services.store.transaction { db in
                let flows = FlowStateRepository(db: db)
                for (id, session) in [("bound", sessionID), ("replayed", FlowStates.replayed)] {
                    try await flows.insert(
                        id: "flow-\(id)", authCodeHash: "hash-\(id)", challenge: "c", verified: "{}",
                        createdAt: now, expiresAt: now.addingTimeInterval(300))
                    try await flows.bindIfUnbound("hash-\(id)", sessionID: session)
                }
            }
            let flows: SQLQueryString = "SELECT COUNT(*) AS n FROM flow_states WHERE id LIKE 'flow-%'"
            h.clock.advance(by: 2 * 24 * 3600)
            let refreshed = try SignedIn(try await h.client.refresh(account.refresh))
            try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, flows) == 1)

            // The session ends, and a retention later it goes, and its code with it.
            #expect(try await h.client.logout(refreshed.access, scope: "global").status == 204)
            h.clock.advance(by: 8 * 24 * 3600)
            try await Self.sweeper(h).sweep()
            #expect(try await Self.count(h, flows) == 0)
        }
    }

    @Test("audit events older than the retention go; a retention of 0 keeps them all")
    func auditRetention() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let events: SQLQueryString =
                "SELECT COUNT(*) AS n FROM audit_events WHERE account_id = \(bind: account.userID)"
            let before = try await Self.count(h, events)
            #expect(before > 0)
            h.clock.advance(by: 3 * 24 * 3600)
            _ = try SignedIn(try await h.client.refresh(account.refresh))

            try await Self.sweeper(h) { $0.auditRetention = 0 }.sweep()
            #expect(try await Self.count(h, events) == before + 1)
            let report = try await Self.sweeper(h) { $0.auditRetention = 2 * 24 * 3600 }.sweep()
            #expect(report.deleted[.audit] ?? 0 >= before)
            #expect(try await Self.count(h, events) == 1)
        }
    }

    @Test("a sweep deletes in batches and logs one line with its counts and no secret")
    func batchesAndLog() async throws {
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            var current = first
            for _ in 0..<7 { current = try SignedIn(try await h.client.refresh(current.refresh)) }
            h.clock.advance(by: 25 * 3600)
            let report = try await Self.sweeper(h) { $0.batchSize = 2 }.sweep()
            #expect(report.deleted[.rotatedTokens] == 7)
            #expect(report.batches >= 4)
            let lines = h.log.entries.filter { $0["message"] == "store swept" }
            #expect(lines.count == 1)
            #expect(lines.first?["rotated_tokens"] == "7")
            let text = h.log.all.joined()
            #expect(!text.contains(first.refresh) && !text.contains(Secrets.digest(first.refresh)))
        }
    }

    @Test("on PostgreSQL a sweep gives way while another instance holds the sweeper's lock")
    func oneAtATime() async throws {
        guard TestStore.kind == "postgres" else { return }
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            _ = try await h.client.refresh(first.refresh)
            h.clock.advance(by: 25 * 3600)
            let (held, holding) = AsyncStream<Void>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            let other = Task {
                try await h.server.services.store.transaction { db in
                    let locked = try await SweepRepository(db: db).lock()
                    #expect(locked)
                    holding.yield()
                    for await _ in released { break }
                }
            }
            for await _ in held { break }
            let yielded = try await Self.sweeper(h).sweep()
            release.yield()
            try await other.value
            #expect(yielded.yielded && yielded.total == 0)
            let swept = try await Self.sweeper(h).sweep()
            #expect(!swept.yielded && swept.deleted[.rotatedTokens] == 1)
        }
    }

    @Test("the reuse window is a day, or four access-token lifetimes if longer, and never shorter than the grace")
    func reuseWindow() {
        var auth = AuthSettings()
        #expect(SweepRules.reuseWindow(auth) == 86_400)
        auth.accessTokenLifetime = 86_400
        #expect(SweepRules.reuseWindow(auth) == 4 * 86_400)
        auth.accessTokenLifetime = 60
        auth.refreshReuseGrace = 2 * 86_400
        #expect(SweepRules.reuseWindow(auth) == 2 * 86_400)
        let now = Date(epochMilliseconds: 10_000_000_000)
        var sweep = SweepSettings()
        sweep.auditRetention = 0
        let cutoffs = SweepRules.cutoffs(now: now, sweep: sweep, auth: AuthSettings())
        #expect(cutoffs.auditBefore == nil)
        #expect(cutoffs.rotatedBefore == now.epochMilliseconds - 86_400_000)
        #expect(cutoffs.sessionsEndedBefore == now.epochMilliseconds - 7 * 86_400_000)
    }
}
