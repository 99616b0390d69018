import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// What an app that only listens hears at launch: the stored session as the first auth event, as supabase-swift's
/// `initialSession`, without calling `restoreSession()` first. No server: a request would be an unscripted one.
@Suite("The first auth event", .timeLimit(.minutes(1)))
struct InitialSessionTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let stored = AuthSession(
        accessToken: "access-1", refreshToken: "refresh-1", expiresAt: t0 + 3600, userID: "user-1",
        email: "ada@example.com")

    let server = ScriptedTransport { Issue.record("no reply scripted for \($0)") }

    func client(_ store: any SessionStore) throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: "https://auth.example.com")), sessionStore: store, transport: server,
            clock: ManualSessionClock(Self.t0))
    }

    @Test("A listener hears the stored session first, without restoreSession(); the session is then in use")
    func storedSessionFirst() async throws {
        let client = try client(MemorySessionStore(Self.stored))
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(Self.stored))
        #expect(await client.auth.currentSession == Self.stored)
        #expect(server.requests.isEmpty)
    }

    @Test("Signed out: the first event is an initialSession without a session")
    func nothingStored() async throws {
        let client = try client(MemorySessionStore())
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(nil))
        #expect(await client.auth.currentSession == nil)
    }

    @Test("The company signed in to at the last launch follows the account's session")
    func companyAfterAccount() async throws {
        let store = MemorySessionStore(Self.stored)
        let company = AuthSession(
            accessToken: "company-access", refreshToken: "company-refresh", expiresAt: Self.t0 + 3600,
            userID: "user-1", email: "ada@example.com", companyID: "acme")
        try store.companion(named: "company").save(company)
        let client = try client(store)
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(Self.stored))
        #expect(await events.next() == .companyChanged(companyID: "acme"))
        #expect(await client.companies.currentCompanyID == "acme")
    }

    @Test("restoreSession() still answers the stored session; with a listener too, the session is read and told once")
    func restoreSessionStillWorks() async throws {
        let store = MemorySessionStore(Self.stored)
        let client = try client(store)
        let events = client.auth.events
        #expect(try await client.auth.restoreSession() == Self.stored)
        #expect(try await client.auth.restoreSession() == Self.stored)
        // A second listener hears the session as it stands; the first heard it once.
        var late = client.auth.events.makeAsyncIterator()
        #expect(await late.next() == .initialSession(Self.stored))
        server.answer("logout", .unreachable)
        try await client.auth.signOut()
        var heard: [AuthEvent] = []
        for await event in events {
            heard.append(event)
            if case .signedOut = event { break }
        }
        #expect(heard.first == .initialSession(Self.stored))
        #expect(heard.filter { if case .initialSession = $0 { true } else { false } }.count == 1)
        #expect(heard.last == .signedOut(.requested))
    }

    @Test("Without a listener, restoreSession() reads the store, and a listener after it hears that session first")
    func restoreThenListen() async throws {
        let client = try client(MemorySessionStore(Self.stored))
        #expect(try await client.auth.restoreSession() == Self.stored)
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(Self.stored))
    }

    @Test("A Keychain still locked at launch tells no session; restoreSession() says why, and once open tells it")
    func lockedKeychain() async throws {
        let keychain = FakeKeychain()
        try KeychainStoreTests.store(keychain).save(Self.stored)
        keychain.answer(.copy, with: .interactionNotAllowed)
        let client = try client(KeychainStoreTests.store(keychain))
        var events = client.auth.events.makeAsyncIterator()
        // The listener's own read met the locked Keychain: the app asks, and hears why (a locked device, not a
        // sign-out).
        await #expect(throws: GatehouseError.sessionLocked) { try await client.auth.restoreSession() }
        #expect(await client.auth.currentSession == nil)
        // Unlocked: the next call reads it, and the listener's first event is the session.
        #expect(try await client.auth.restoreSession() == Self.stored)
        #expect(await events.next() == .initialSession(Self.stored))
    }

    @Test("After a sign-out and a new sign-in, restoreSession() answers the session in use, not the one read at launch")
    func restoreAnswersTheSessionInUse() async throws {
        let client = try client(MemorySessionStore(Self.stored))
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(Self.stored))
        server.answer("logout", .unreachable)
        try await client.auth.signOut()
        server.answer(
            "token", ScriptedTransport.session(access: "access-2", refresh: "refresh-2", expiresAt: Self.t0 + 3600))
        let signedIn = try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        #expect(try await client.auth.restoreSession() == signedIn)
    }

    @Test("A sign-in before the store was read is what the listener hears; the stored session does not replace it")
    func signInFirst() async throws {
        let client = try client(MemorySessionStore(Self.stored))
        server.answer(
            "token", ScriptedTransport.session(access: "access-2", refresh: "refresh-2", expiresAt: Self.t0 + 3600))
        let signedIn = try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        var events = client.auth.events.makeAsyncIterator()
        #expect(await events.next() == .initialSession(signedIn))
        #expect(try await client.auth.restoreSession() == signedIn)
        #expect(await client.auth.currentSession == signedIn)
    }
}
