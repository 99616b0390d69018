import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// The session machine's decisions, input by input, on a clock that stands still unless the test moves it; then
/// seed 004's authentication flow through the whole client over a scripted transport (no server, no real time).
@Suite("Session machine")
struct SessionMachineTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    typealias Machine = SessionStateMachine

    /// A session issued at `t0` whose access token lasts an hour (`n` makes its tokens its own).
    static func session(
        _ n: Int, expiresIn: TimeInterval = 3600, endsIn: TimeInterval? = nil, company: String? = nil
    ) -> AuthSession {
        AuthSession(
            accessToken: "access-\(n)", refreshToken: "refresh-\(n)", expiresAt: t0.addingTimeInterval(expiresIn),
            userID: "user-1", email: "ada@example.com", companyID: company, endsAt: endsIn.map(t0.addingTimeInterval))
    }

    static func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }

    @Test("Restored: the refresh is due a margin before the access token expires, and the timer is set for it")
    func restoredSchedulesRefresh() {
        var machine = Machine(.account)
        let s1 = Self.session(1)
        #expect(
            machine.handle(.restored(s1), now: Self.t0) == [
                .announce(.initialSession(s1)), .wake(at: Self.at(3540)),
            ])
        // A timer that went off early (the wall clock set back meanwhile) is set again.
        #expect(machine.handle(.tick, now: Self.at(3539)) == [.wake(at: Self.at(3540))])
        #expect(machine.token(forceRefresh: false, now: Self.at(3539)) == .use(s1))
        #expect(machine.handle(.tick, now: Self.at(3540)) == [.refresh(s1)])
        #expect(machine.state == .refreshing(s1))

        var empty = Machine(.account)
        #expect(empty.handle(.restored(nil), now: Self.t0) == [.announce(.initialSession(nil))])
        #expect(empty.token(forceRefresh: false, now: Self.t0) == .notSignedIn)
    }

    @Test("One refresh at a time: a second caller waits for the one in flight; its answer is told, kept, rescheduled")
    func singleFlight() {
        var machine = Machine(.account)
        let s1 = Self.session(1)
        let s2 = Self.session(2, expiresIn: 7200)
        _ = machine.handle(.signedIn(s1), now: Self.t0)
        #expect(machine.token(forceRefresh: true, now: Self.at(10)) == .startRefresh(s1))
        #expect(machine.token(forceRefresh: true, now: Self.at(11)) == .awaitRefresh)
        #expect(machine.token(forceRefresh: false, now: Self.at(11)) == .use(s1))  // still good: no need to wait
        #expect(machine.token(forceRefresh: false, now: Self.at(3590)) == .awaitRefresh)
        #expect(
            machine.handle(.refreshed(from: s1, to: s2), now: Self.at(12)) == [
                .persist(s2), .announce(.refreshed(s2)), .wake(at: Self.at(7140)),
            ])
        #expect(machine.state == .active(s2))
    }

    @Test("Network failures keep the session and back off 1, 2, 4 … seconds up to the cap; success resets the count")
    func backoff() {
        var machine = Machine(.account, policy: .init(refreshMargin: 60, retryBase: 1, retryMax: 10))
        let s1 = Self.session(1)
        _ = machine.handle(.restored(s1), now: Self.t0)
        var now = Self.at(3540)
        #expect(machine.handle(.tick, now: now).contains(.refresh(s1)))
        var waits: [TimeInterval] = []
        for _ in 0..<6 {
            let effects = machine.handle(.refreshFailed(from: s1, .network("offline")), now: now)
            guard case .wake(let at) = effects.last else {
                Issue.record("no retry scheduled: \(effects)")
                return
            }
            #expect(!effects.contains { if case .announce = $0 { true } else { false } })
            waits.append(at.timeIntervalSince(now))
            now = at
            #expect(machine.handle(.tick, now: now).first == .refresh(s1))
        }
        #expect(waits == [1, 2, 4, 8, 10, 10])
        #expect(machine.session == s1 && machine.failures == 6)
        // A server error or a code this SDK does not know is no verdict either.
        _ = machine.handle(
            .refreshFailed(from: s1, .server(status: 503, code: "store_unavailable", message: "")), now: now)
        #expect(machine.session == s1 && machine.failures == 7)
        now = machine.wakeAt!
        _ = machine.handle(.tick, now: now)
        let s2 = Self.session(2, expiresIn: 7200)
        _ = machine.handle(.refreshed(from: s1, to: s2), now: now)
        #expect(machine.failures == 0 && machine.state == .active(s2))
    }

    @Test(
        "A device clock ahead of the server's: tokens due on arrival are refreshed at the backoff's pace, not in a loop"
    )
    func clockAhead() {
        var machine = Machine(.account, policy: .init(refreshMargin: 60, retryBase: 1, retryMax: 10))
        let s1 = Self.session(1)
        _ = machine.handle(.restored(s1), now: Self.at(7200))
        #expect(machine.state == .refreshing(s1))
        let s2 = Self.session(2, expiresIn: 3700)  // the server's hour, already past on this device
        #expect(
            machine.handle(.refreshed(from: s1, to: s2), now: Self.at(7201)) == [
                .persist(s2), .announce(.refreshed(s2)), .wake(at: Self.at(7202)),
            ])
        #expect(machine.token(forceRefresh: false, now: Self.at(7201)) == .startRefresh(s2))
    }

    @Test("A rate-limited refresh waits at least until the server's Retry-After")
    func rateLimitedRefresh() {
        var machine = Machine(.account)
        let s1 = Self.session(1)
        _ = machine.handle(.restored(s1), now: Self.t0)
        _ = machine.handle(.tick, now: Self.at(3540))
        let retry = RetryAfter(date: Self.at(3570))
        #expect(
            machine.handle(.refreshFailed(from: s1, .rateLimited(retryAfter: retry)), now: Self.at(3540)) == [
                .wake(at: Self.at(3570))
            ])
        #expect(machine.state == .backingOff(s1, retryAt: Self.at(3570)))
    }

    @Test("An early refresh that fails goes back to the regular schedule, not to a retry loop")
    func earlyRefreshFails() {
        var machine = Machine(.account)
        let s1 = Self.session(1)
        _ = machine.handle(.restored(s1), now: Self.t0)
        #expect(machine.token(forceRefresh: true, now: Self.at(5)) == .startRefresh(s1))
        #expect(machine.handle(.refreshFailed(from: s1, .network("offline")), now: Self.at(6)) == [])
        #expect(machine.state == .active(s1) && machine.wakeAt == Self.at(3540))
    }

    @Test(
        "The server's verdicts end the session, told once, store cleared; nothing else does",
        arguments: [
            "refresh_token_not_found", "refresh_token_already_used", "session_expired", "session_not_found",
            "user_banned", "user_not_found",
        ])
    func verdictEnds(code: String) {
        let error = ErrorBody.error(status: 403, body: Data(#"{"code":"\#(code)"}"#.utf8), retryAfter: nil)
        #expect(Machine.verdict(on: error) == .ends)
        var machine = Machine(.account)
        let s1 = Self.session(1)
        _ = machine.handle(.restored(s1), now: Self.t0)
        _ = machine.handle(.tick, now: Self.at(3540))
        #expect(
            machine.handle(.refreshFailed(from: s1, error), now: Self.at(3541)) == [
                .removeStored, .announce(.signedOut(.sessionEnded)),
            ])
        #expect(machine.state == .signedOut)
    }

    @Test("Unreachable, busy, rate limited, or a code this SDK does not know: the session stays")
    func verdictKeeps() {
        let now = Self.t0
        #expect(Machine.verdict(on: .network("offline")) == .retry(notBefore: nil))
        #expect(
            Machine.verdict(on: .server(status: 500, code: "unexpected_failure", message: "")) == .retry(notBefore: nil)
        )
        #expect(
            Machine.verdict(on: .server(status: 400, code: "brand_new_code", message: "")) == .retry(notBefore: nil))
        #expect(
            Machine.verdict(on: .rateLimited(retryAfter: RetryAfter(date: now + 30))) == .retry(notBefore: now + 30))
    }

    @Test("Answers to a refresh the session outlived are ignored: a second factor raised it meanwhile")
    func staleAnswers() {
        var machine = Machine(.account)
        let s1 = Self.session(1)
        let raised = Self.session(2)
        _ = machine.handle(.restored(s1), now: Self.t0)
        #expect(machine.token(forceRefresh: true, now: Self.at(1)) == .startRefresh(s1))
        #expect(machine.handle(.raised(raised), now: Self.at(2)) == [.persist(raised), .announce(.refreshed(raised))])
        // The raise retired the refresh token the refresh sent: the server's refusal does not end the raised session.
        #expect(machine.handle(.refreshFailed(from: s1, .sessionExpired), now: Self.at(3)) == [])
        #expect(machine.handle(.refreshed(from: s1, to: Self.session(3)), now: Self.at(3)) == [])
        #expect(machine.state == .active(raised))
        // Signed out during a refresh: its answer brings nothing back.
        #expect(machine.token(forceRefresh: true, now: Self.at(4)) == .startRefresh(raised))
        _ = machine.handle(.signedOut(.requested), now: Self.at(5))
        #expect(machine.handle(.refreshed(from: raised, to: Self.session(4)), now: Self.at(6)) == [])
        #expect(machine.session == nil)
    }

    @Test("Expiring soon: told once, `expiryWarning` before the session's absolute end; a refresh keeps the end")
    func expiryWarning() {
        var machine = Machine(.account, policy: .init(refreshMargin: 60, expiryWarning: 300))
        let s1 = Self.session(1, expiresIn: 900, endsIn: 1800)
        // The warning (at 1500) comes after the first refresh (at 840).
        #expect(machine.handle(.signedIn(s1), now: Self.t0).last == .wake(at: Self.at(840)))
        // Refreshing, the warning's timer stays.
        #expect(machine.handle(.tick, now: Self.at(840)) == [.refresh(s1), .wake(at: Self.at(1500))])
        let s2 = Self.session(2, expiresIn: 1740, endsIn: 1800)
        #expect(
            machine.handle(.refreshed(from: s1, to: s2), now: Self.at(841)) == [
                .persist(s2), .announce(.refreshed(s2)),
            ])
        #expect(
            machine.handle(.tick, now: Self.at(1500)) == [
                .announce(.expiringSoon(companyID: nil, endsAt: Self.at(1800))), .wake(at: Self.at(1680)),
            ])
        _ = machine.handle(.tick, now: Self.at(1680))
        let s3 = Self.session(3, expiresIn: 1800, endsIn: 1800)
        #expect(
            !machine.handle(.refreshed(from: s2, to: s3), now: Self.at(1681)).contains(
                .announce(
                    .expiringSoon(companyID: nil, endsAt: Self.at(1800)))))
        // The end itself: the server refuses the refresh, and only that ends the session.
        _ = machine.handle(.tick, now: Self.at(1800))
        #expect(machine.state == .refreshing(s3))
        _ = machine.handle(.refreshFailed(from: s3, .sessionExpired), now: Self.at(1801))
        #expect(machine.state == .signedOut)

        // Without an end from the server, nothing is told: the refresh's refusal ends it.
        var endless = Machine(.account)
        _ = endless.handle(.signedIn(Self.session(4)), now: Self.t0)
        for hour in 1...48 {
            #expect(
                !endless.handle(.tick, now: Self.at(Double(hour) * 3600)).contains { effect in
                    if case .announce(.expiringSoon) = effect { true } else { false }
                })
        }
    }

    @Test("Locked: no timer, no refresh, no warning by itself, and never a sign-out; unlocking catches up")
    func lockAndUnlock() {
        var machine = Machine(.account)
        let s1 = Self.session(1, endsIn: 3000)
        _ = machine.handle(.signedIn(s1), now: Self.t0)
        #expect(machine.handle(.lock, now: Self.at(10)) == [.announce(.locked), .cancelWake])
        #expect(machine.handle(.lock, now: Self.at(11)) == [])
        #expect(machine.handle(.tick, now: Self.at(3600)) == [])
        #expect(machine.session == s1)
        // A call the app makes while locked still gets its token.
        #expect(machine.token(forceRefresh: false, now: Self.at(20)) == .use(s1))
        #expect(
            machine.handle(.unlock, now: Self.at(3545)) == [
                .announce(.unlocked), .announce(.expiringSoon(companyID: nil, endsAt: Self.at(3000))), .refresh(s1),
            ])
        // The company session follows the lock silently: the account's events tell the app.
        var company = Machine(.company)
        _ = company.handle(.signedIn(Self.session(2, company: "acme")), now: Self.t0)
        #expect(company.handle(.lock, now: Self.at(1)) == [.cancelWake])
        #expect(company.handle(.unlock, now: Self.at(2)) == [.wake(at: Self.at(3540))])
    }

    @Test("The company session tells which company is current, and a revoked membership")
    func companyEvents() {
        var machine = Machine(.company)
        let acme = Self.session(1, company: "acme")
        #expect(machine.handle(.restored(nil), now: Self.t0) == [.announce(.companyChanged(companyID: nil))])
        #expect(machine.handle(.signedOut(.requested), now: Self.t0) == [])  // no company session: nothing to tell
        #expect(
            machine.handle(.signedIn(acme), now: Self.t0) == [
                .persist(acme), .announce(.companyChanged(companyID: "acme")), .wake(at: Self.at(3540)),
            ])
        _ = machine.handle(.tick, now: Self.at(3540))
        #expect(
            machine.handle(.refreshFailed(from: acme, .companyAccessRevoked), now: Self.at(3541)) == [
                .removeStored, .announce(.companyChanged(companyID: nil)),
                .announce(.companyAccessRevoked(companyID: "acme")),
            ])
        // An account sign-out with no session still answers the app.
        var account = Machine(.account)
        #expect(
            account.handle(.signedOut(.requested), now: Self.t0) == [.removeStored, .announce(.signedOut(.requested))])
    }
}

// MARK: - Seed 004's authentication flow, through the client over a scripted transport

@Suite("Authentication flow, scripted (seed 004)", .timeLimit(.minutes(1)))
struct AuthenticationFlowTests {
    let clock = ManualSessionClock(SessionMachineTests.t0)
    let server = ScriptedTransport { Issue.record("no reply scripted for \($0)") }
    let store = MemorySessionStore()
    let client: GatehouseClient

    init() throws {
        client = GatehouseClient(
            url: try #require(URL(string: "https://auth.example.com")), sessionStore: store, transport: server,
            clock: clock)
    }

    var t0: Date { SessionMachineTests.t0 }

    /// Signs in as Ada: an access token for an hour, the session for `endsIn` seconds when given.
    @discardableResult
    func signIn(endsIn: TimeInterval? = nil) async throws -> AuthSession {
        server.answer(
            "token",
            ScriptedTransport.session(
                access: "access-1", refresh: "refresh-1", expiresAt: t0 + 3600, endsAt: endsIn.map { t0 + $0 }))
        return try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
    }

    @Test("testSuccessfulSignIn: the session is in use, stored and announced; the password went only in the body")
    func testSuccessfulSignIn() async throws {
        var events = client.auth.events.makeAsyncIterator()
        let session = try await signIn()
        #expect(session.accessToken == "access-1" && session.userID == "user-1" && session.email == "ada@example.com")
        #expect(session.expiresAt == t0 + 3600)
        // Opening the stream starts reading the store; when that read ends before the sign-in, the stream first says
        // there was no stored session (`initialSession(nil)`), and then the sign-in.
        var first = await events.next()
        if first == .initialSession(nil) { first = await events.next() }
        #expect(first == .signedIn(session))
        #expect(await client.auth.currentSession == session)
        #expect(try store.load() == session)
        let request = try #require(server.requests("token").first)
        #expect(request.path.contains("grant_type=password") && !request.path.contains("correct"))
        #expect(request.body.contains("correct horse battery") && request.bearer == nil)
    }

    @Test("testFailedSignIn_InvalidCredentials: a typed error with a message to show, and no session")
    func testFailedSignIn_InvalidCredentials() async throws {
        server.answer("token", ScriptedTransport.refusal(400, "invalid_credentials"))
        await #expect(throws: GatehouseError.invalidCredentials) {
            try await client.auth.signIn(email: "ada@example.com", password: "wrong")
        }
        #expect(
            GatehouseError.invalidCredentials.localizedDescription == "The email, username or password is incorrect.")
        #expect(await client.auth.currentSession == nil)
        #expect(try store.load() == nil)
        // Wrong passwords in a row: the server backs off and the app counts down to the moment it names.
        server.answer(
            "token", ScriptedTransport.refusal(429, "over_request_rate_limit", headers: ["Retry-After": "30"]))
        await #expect(throws: GatehouseError.lockedOut(until: t0 + 30)) {
            try await client.auth.signIn(email: "ada@example.com", password: "wrong again")
        }
    }

    @Test("testFailedSignIn_NetworkError: offline, sign-in fails as `network`; a stored session is kept meanwhile")
    func testFailedSignIn_NetworkError() async throws {
        server.answer("token", .unreachable)
        do throws(GatehouseError) {
            try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
            Issue.record("signed in without a network")
        } catch {
            #expect(error.code == .networkError)
            #expect(error.localizedDescription == "The server can’t be reached.")
            #expect(error.recoverySuggestion == "Check your connection and try again.")
        }
        #expect(await client.auth.currentSession == nil)

        // A session from an earlier launch stays through a failed sign-in and a failed refresh.
        let earlier = SessionMachineTests.session(7)
        try store.save(earlier)
        #expect(try await client.auth.restoreSession() == earlier)
        server.answer("token", .unreachable, .unreachable)
        await #expect(throws: GatehouseError.self) {
            try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        }
        await #expect(throws: GatehouseError.self) { try await client.auth.refreshSession() }
        #expect(await client.auth.currentSession == earlier)
        #expect(try store.load() == earlier)
    }

    @Test("testSignOut: the server is told with the session's token; locally it ends even when the server is away")
    func testSignOut() async throws {
        let session = try await signIn()
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(session))
        server.answer("logout", .json(204, ""))
        try await client.auth.signOut()
        #expect(server.requests("logout").map(\.bearer) == ["access-1"])
        #expect(await events.next() == .signedOut(.requested))
        #expect(await client.auth.currentSession == nil)
        #expect(try store.load() == nil)
        #expect(clock.sleeping == 0)  // nothing left to refresh

        try await signIn()
        server.answer("logout", .unreachable)
        try await client.auth.signOut()
        #expect(await client.auth.currentSession == nil)
        #expect(try store.load() == nil)
    }

    @Test("testTokenRefresh: a minute before the access token expires the client renews it by itself, once")
    func testTokenRefresh() async throws {
        let session = try await signIn()
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(session))
        #expect(await clock.nextWake() == t0 + 3540)
        #expect(server.requests("token").count == 1)  // only the sign-in
        server.answer(
            "token", ScriptedTransport.session(access: "access-2", refresh: "refresh-2", expiresAt: t0 + 7200))
        clock.advance(to: t0 + 3540)
        guard case .refreshed(let renewed) = await events.next() else {
            Issue.record("no refresh")
            return
        }
        #expect(renewed.accessToken == "access-2" && renewed.refreshToken == "refresh-2")
        #expect(server.requests("token").last?.body.contains("refresh-1") == true)
        #expect(try store.load() == renewed)
        #expect(await clock.nextWake() == t0 + 7140)
        #expect(try await client.auth.session() == renewed)  // good for another hour: no request
        #expect(server.requests("token").count == 2)

        // Offline at the next one: the session stays, attempts back off (1, 2, 4 s …), and it renews when back.
        server.answer("token", .unreachable, .unreachable, .unreachable)
        var wake = t0 + 7140
        var waits: [TimeInterval] = []
        for _ in 0..<3 {
            clock.advance(to: wake)
            let next = await clock.nextWake()
            waits.append(next.timeIntervalSince(wake))
            wake = next
        }
        #expect(waits == [1, 2, 4])
        #expect(await client.auth.currentSession == renewed)
        server.answer(
            "token", ScriptedTransport.session(access: "access-3", refresh: "refresh-3", expiresAt: t0 + 9000))
        clock.advance(to: wake)
        #expect(await events.next() == .refreshed(try #require(try store.load())))
        #expect(await client.auth.currentSession?.accessToken == "access-3")
    }

    @Test("testTokenExpiration: warned five minutes before the session's end; at the end the server's refusal ends it")
    func testTokenExpiration() async throws {
        let session = try await signIn(endsIn: 1800)
        #expect(session.endsAt == t0 + 1800)
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(session))
        #expect(await clock.nextWake() == t0 + 1500)
        clock.advance(to: t0 + 1500)
        #expect(await events.next() == .expiringSoon(companyID: nil, endsAt: t0 + 1800))
        // The access token outlives the session: its refresh is refused as the session expired.
        #expect(await clock.nextWake() == t0 + 3540)
        server.answer("token", ScriptedTransport.refusal(403, "session_expired"))
        clock.advance(to: t0 + 3540)
        #expect(await events.next() == .signedOut(.sessionEnded))
        #expect(await client.auth.currentSession == nil)
        #expect(try store.load() == nil)
        await #expect(throws: GatehouseError.notSignedIn) { try await client.auth.session() }
    }

    @Test(
        "testConcurrentSignInPrevention: callers racing on an expired token spend its single-use refresh token once; sign-ins racing leave one session, stored"
    )
    func testConcurrentSignInPrevention() async throws {
        try await signIn()
        // The token expired while the app slept. A second refresh with the same token would be refused as reuse,
        // and that refusal would end the session: one reply is scripted, a second request fails the test.
        server.answer(
            "token", ScriptedTransport.session(access: "access-2", refresh: "refresh-2", expiresAt: t0 + 7200))
        clock.advance(to: t0 + 3600)
        async let one = client.auth.session()
        async let two = client.auth.session()
        async let three = client.auth.session()
        let sessions = try await [one, two, three]
        #expect(Set(sessions.map(\.accessToken)) == ["access-2"])
        #expect(server.requests("token").filter { $0.body.contains("refresh-1") }.count == 1)
        #expect(await client.auth.currentSession?.accessToken == "access-2")

        // Two sign-ins at once (a double tap): one session is in use at the end, and it is the stored one.
        server.answer(
            "token", ScriptedTransport.session(access: "access-a", refresh: "refresh-a", expiresAt: t0 + 9000),
            ScriptedTransport.session(access: "access-b", refresh: "refresh-b", expiresAt: t0 + 9000))
        async let first = client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        async let second = client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let signedIn = try await [first, second]
        let current = try #require(await client.auth.currentSession)
        #expect(signedIn.contains(current))
        #expect(try store.load() == current)
    }

    @Test("The app lock: locked, nothing runs by itself and the session stays; unlocked, the due refresh runs")
    func appLock() async throws {
        let session = try await signIn()
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(session))
        await client.auth.lock()
        #expect(await events.next() == .locked)
        #expect(await client.auth.isLocked)
        #expect(clock.sleeping == 0)
        clock.advance(to: t0 + 3580)
        #expect(server.requests("token").count == 1)
        #expect(await client.auth.currentSession == session)
        server.answer(
            "token", ScriptedTransport.session(access: "access-2", refresh: "refresh-2", expiresAt: t0 + 7200))
        await client.auth.unlock()
        #expect(await events.next() == .unlocked)
        guard case .refreshed(let renewed) = await events.next() else {
            Issue.record("no refresh on unlock")
            return
        }
        #expect(renewed.accessToken == "access-2")
    }

    @Test("Signing in and out of a company: one verb family, and `companyChanged` each time")
    func companySignInAndOut() async throws {
        try await signIn()
        var events = client.auth.events.makeAsyncIterator()
        _ = await events.next()
        server.answer(
            "companyLogin",
            ScriptedTransport.session(access: "company-1", refresh: "company-r1", expiresAt: t0 + 3600))
        let company = try await client.companies.signIn(to: "acme", username: "ada", password: "blue tractor 42")
        #expect(company.companyID == "acme")
        #expect(await events.next() == .companyChanged(companyID: "acme"))
        #expect(await client.companies.currentCompanyID == "acme")
        server.answer("logout", .json(204, ""))
        try await client.companies.signOut()
        #expect(server.requests("logout").map(\.bearer) == ["company-1"])
        #expect(await events.next() == .companyChanged(companyID: nil))
        #expect(await client.auth.currentSession?.accessToken == "access-1")
    }
}
