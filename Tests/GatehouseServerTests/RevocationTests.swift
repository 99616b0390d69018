import Foundation
import Testing

@testable import GatehouseServer

/// Every way a session ends, with its row already in the instance's cache: its token must fail on the very next
/// request here, and on another instance or process soon after (at once through the bus on PostgreSQL, within
/// `AuthCache.lifetime` in any case).
@Suite("Revocation: a cached session fails at once on every path")
struct RevocationTests {
    /// The session id an access token names.
    static func sessionID(_ access: String) throws -> String {
        let payload = String(try #require(access.split(separator: ".").dropFirst().first))
        var base64 = payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let claims = try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: base64)))
        return try #require((claims as? [String: Any])?["session_id"] as? String)
    }

    /// Uses the token, so its session row is cached, and checks that it is. An entry lives `AuthCache.lifetime` (one
    /// second of real time), which a loaded machine can spend between the answer and the look: then it goes again.
    static func warm(_ h: AccountHarness, _ access: String, path: String = "/auth/v1/user") async throws {
        let id = try sessionID(access)
        let cached = try await LiveServer.eventually(timeout: .seconds(60)) {
            try await h.client.get(path, bearer: access).status == 200
                && h.server.services.parts.sessions.cache.session(id) != nil
        }
        #expect(cached)
    }

    /// Whether the token now gets what a revoked session's token gets: 403 with `code`.
    static func refused(
        _ h: AccountHarness, _ access: String, path: String = "/auth/v1/user", code: String = "session_not_found"
    ) async throws -> Bool {
        let reply = try await h.client.get(path, bearer: access)
        // /v1 answers errors as {code, message}; /auth/v1 as Supabase's {error_code, msg} unless asked otherwise.
        return reply.status == 403 && (reply.json["error_code"] ?? reply.json["code"]) as? String == code
    }

    @Test("logout: others, local and global each end cached sessions at once")
    func logoutScopes() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            let b = try SignedIn(try await h.client.password(email, "correct horse battery"))
            for session in [a, b] { try await Self.warm(h, session.access) }
            #expect(try await h.client.logout(a.access, scope: "others").status == 204)
            #expect(try await Self.refused(h, b.access))
            #expect(try await h.client.user(a.access).status == 200)

            #expect(try await h.client.logout(a.access, scope: "local").status == 204)
            #expect(try await Self.refused(h, a.access))

            let c = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let d = try SignedIn(try await h.client.password(email, "correct horse battery"))
            for session in [c, d] { try await Self.warm(h, session.access) }
            #expect(try await h.client.logout(c.access, scope: "global").status == 204)
            #expect(try await Self.refused(h, c.access))
            #expect(try await Self.refused(h, d.access))
        }
    }

    @Test("a device session ended from the session list fails at once")
    func endedFromTheList() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            let b = try SignedIn(try await h.client.password(email, "correct horse battery"))
            try await Self.warm(h, b.access)
            #expect(
                try await h.client.delete("/v1/sessions/\(try Self.sessionID(b.access))", bearer: a.access).status
                    == 204)
            #expect(try await Self.refused(h, b.access))
        }
    }

    @Test("a refresh token presented again after its grace ends the session, whose cached tokens then fail")
    func reuseDetection() async throws {
        try await AccountHarness.with { h in
            let first = try await h.confirmedAccount(AccountHarness.newEmail())
            let next = try SignedIn(try await h.client.refresh(first.refresh))
            try await Self.warm(h, next.access)
            h.clock.advance(by: 11)
            let replay = try await h.client.refresh(first.refresh)
            #expect(replay.json["error_code"] as? String == "refresh_token_already_used")
            #expect(try await Self.refused(h, next.access))
            #expect(try await Self.refused(h, first.access))
        }
    }

    @Test("changing the password ends the other cached sessions at once, and the cached user shows the change")
    func passwordChange() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            let b = try SignedIn(try await h.client.password(email, "correct horse battery"))
            for session in [a, b] { try await Self.warm(h, session.access) }
            let changed = try await h.client.put(
                "/auth/v1/user",
                ["password": "next password 1", "current_password": "correct horse battery", "data": ["n": 2]],
                bearer: a.access)
            #expect(changed.status == 200)
            #expect(try await Self.refused(h, b.access))
            let user = try await h.client.user(a.access)
            #expect((user.json["user_metadata"] as? [String: Any])?["n"] as? Int == 2)
        }
    }

    @Test("the company credential's new password ends other cached company sessions; deleting it ends them all")
    func credentialChange() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("cred")
            let cid = try await h.company("Cred Co", owner: &owner)
            let first = try #require(owner.company)
            let second = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: owner.account.access))
            let path = "/v1/companies/\(cid)"
            for session in [first, second] { try await Self.warm(h, session.access, path: path) }
            let changed = try await h.client.post(
                "/v1/companies/\(cid)/credential/password",
                ["current_password": "company secret 1", "new_password": "next company pw"], bearer: first.access)
            #expect(changed.status == 204)
            #expect(try await Self.refused(h, second.access, path: path))
            #expect(try await h.client.get(path, bearer: first.access).status == 200)
            #expect(try await h.client.delete("/v1/companies/\(cid)/credential", bearer: first.access).status == 204)
            #expect(try await Self.refused(h, first.access, path: path))
        }
    }

    @Test("a member removed from a company: their cached company session fails at once with access revoked")
    func removal() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            var guest = try await h.person("guest")
            let cid = try await h.company("Removal Co", owner: &owner)
            try await h.join(cid, &guest, owner: owner)
            let path = "/v1/companies/\(cid)"
            let session = try #require(guest.company)
            try await Self.warm(h, session.access, path: path)
            #expect(
                try await h.client.delete(
                    "/v1/companies/\(cid)/members/\(guest.id)", bearer: try #require(owner.company?.access)
                ).status == 204)
            #expect(try await Self.refused(h, session.access, path: path, code: "company_access_revoked"))
            #expect(try await h.client.user(guest.account.access).status == 200)
        }
    }

    @Test("an account the operator disables: its cached sessions fail at once")
    func disable() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            try await Self.warm(h, a.access)
            #expect(try await Operator(store: h.server.services.store).disableUser(email))
            #expect(try await Self.refused(h, a.access))
        }
    }

    @Test("the operator's command in another process (its own store handle) reaches the serving instance")
    func disableFromAnotherProcess() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            try await Self.warm(h, a.access)
            let other = try Store(location: h.server.services.store.location, logger: h.log.logger)
            do {
                try await other.migrate()
                #expect(try await Operator(store: other).signOutUser(email) == 1)
            } catch {
                await other.close()
                throw error
            }
            await other.close()
            // Through the bus on PostgreSQL; on SQLite no notice crosses processes and the entry's lifetime bounds it.
            let ended = try await LiveServer.eventually(timeout: .seconds(60)) { try await Self.refused(h, a.access) }
            #expect(ended)
        }
    }

    @Test("idle and absolute timeouts end a cached session without any write")
    func timeouts() async throws {
        try await AccountHarness.with({
            $0.auth.sessionIdleTimeout = 600
            $0.auth.sessionLifetime = 750
        }) { h in
            let email = AccountHarness.newEmail()
            let idle = try await h.confirmedAccount(email)
            try await Self.warm(h, idle.access)
            h.clock.advance(by: 601)
            #expect(try await Self.refused(h, idle.access))

            let s = try SignedIn(try await h.client.password(email, "correct horse battery"))
            h.clock.advance(by: 500)
            let refreshed = try SignedIn(try await h.client.refresh(s.refresh))
            try await Self.warm(h, refreshed.access)
            h.clock.advance(by: 300)  // 300 s idle, but 800 s since the start: past the 750 s lifetime
            #expect(try await Self.refused(h, refreshed.access))
        }
    }

    @Test(
        "Two instances on one PostgreSQL: a logout on one ends the session cached on the other",
        .enabled(if: TestStore.postgresURL != nil))
    func twoInstances() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let a = try await h.confirmedAccount(email)
            var configuration = h.server.services.configuration
            configuration.publicURL = configuration.effectivePublicURL
            let other = try await RouterServer.start(configuration, clock: h.clock)
            do {
                let there = AuthClient(http: other, base: other.baseURL, headers: h.client.headers)
                // The new instance empties its cache once its listener connects: warm it until the entry stays.
                let sessionID = try Self.sessionID(a.access)
                let warm = try await LiveServer.eventually(timeout: .seconds(60)) {
                    try await there.user(a.access).status == 200
                        && other.services.parts.sessions.cache.session(sessionID) != nil
                }
                #expect(warm)
                #expect(try await h.client.logout(a.access, scope: "global").status == 204)
                let ended = try await LiveServer.eventually(timeout: .seconds(60)) {
                    try await there.user(a.access).status == 403
                }
                #expect(ended)
            } catch {
                try? await other.stop()
                throw error
            }
            try await other.stop()
        }
    }
}

/// The cache's rules without I/O: lifetime, invalidation, reads racing an invalidation, capacity, and the notices
/// instances send each other.
@Suite("Session and user cache rules")
struct AuthCacheRulesTests {
    static let row = SessionRow(
        accountID: "acct", refreshedAt: 0, expiresAt: 1, revokedAt: nil, amr: [], aal: .aal1, factorID: nil,
        companyID: nil,
        username: nil,
        idleTimeout: nil, parentID: nil, accountDisabledAt: nil, parent: nil)

    @Test("an entry is served for less than its lifetime, then read again")
    func lifetime() {
        let cache = AuthCache()
        let start = ContinuousClock.now
        cache.keep(session: Self.row, id: "s", ticket: cache.ticket(), now: start)
        #expect(cache.session("s", now: start + .milliseconds(999)) != nil)
        #expect(cache.session("s", now: start + AuthCache.lifetime) == nil)
    }

    @Test("an ended session or changed account goes at once; a read that raced the change is not kept")
    func invalidation() {
        let cache = AuthCache()
        cache.keep(session: Self.row, id: "s", ticket: cache.ticket())
        cache.keep(session: Self.row, id: "t", ticket: cache.ticket())
        cache.forget(CacheInvalidation(endedSessions: ["s"]))
        #expect(cache.session("s") == nil)
        #expect(cache.session("t") != nil)

        let ticket = cache.ticket()  // a read starts…
        cache.forget(CacheInvalidation(endedSessions: ["s"]))  // …a revocation commits meanwhile…
        cache.keep(session: Self.row, id: "s", ticket: ticket)  // …and what it read is not kept
        #expect(cache.session("s") == nil)

        // Another key's change does not void a read in flight.
        let other = cache.ticket()
        cache.forget(CacheInvalidation(endedSessions: ["t"], changedAccounts: ["acct"]))
        cache.keep(session: Self.row, id: "u", ticket: other)
        #expect(cache.session("u") != nil)

        let before = cache.ticket()
        cache.forget(.all)
        #expect(cache.session("u") == nil)
        cache.keep(session: Self.row, id: "u", ticket: before)
        #expect(cache.session("u") == nil)
    }

    @Test("past its capacity the cache drops stale entries first, and everything if none is stale")
    func capacity() {
        let cache = AuthCache(capacity: 3)
        let start = ContinuousClock.now
        for id in ["a", "b", "c"] { cache.keep(session: Self.row, id: id, ticket: cache.ticket(), now: start) }
        let later = start + .seconds(2)
        cache.keep(session: Self.row, id: "d", ticket: cache.ticket(), now: later)
        #expect(cache.count.sessions == 1)
        #expect(cache.session("d", now: later) != nil)
        for id in ["e", "f"] { cache.keep(session: Self.row, id: id, ticket: cache.ticket(), now: later) }
        cache.keep(session: Self.row, id: "g", ticket: cache.ticket(), now: later)
        #expect(cache.count.sessions == 1)
    }

    @Test("notices: ids in chunks under PostgreSQL's payload limit, read back exactly; others are not notices")
    func payloads() throws {
        let many = Set((0..<250).map { "session-\($0)-\(UUID().uuidString)" })
        let changes = CacheInvalidation(endedSessions: many, changedAccounts: ["acct-1"])
        let payloads = changes.payloads
        #expect(payloads.count == 4)
        #expect(payloads.allSatisfy { $0.utf8.count < 8000 })
        var read = CacheInvalidation()
        for payload in payloads { read.formUnion(try #require(CacheInvalidation(payload: payload))) }
        #expect(read == changes)
        #expect(CacheInvalidation(payload: "x") == .all)
        #expect(CacheInvalidation(payload: "c company 12") == nil)
        #expect(CacheInvalidation(payload: "s") == nil)
        #expect(InstanceBus.Message(payload: "c company 12") == .committed(companyID: "company", seq: 12))
        #expect(
            InstanceBus.Message(payload: "u acct-1") == .invalidated(CacheInvalidation(changedAccounts: ["acct-1"])))
    }
}
