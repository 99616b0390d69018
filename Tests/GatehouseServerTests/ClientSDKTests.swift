import Foundation
import GatehouseClientTesting
import HTTPTypes
import NIOConcurrencyHelpers
import OpenAPIRuntime
import Testing

@testable import GatehouseClient

/// The SDK against the server (through its router; on a port where the server goes away and comes back): sessions
/// through the failures supabase-swift's users report most.
@Suite("GatehouseClient sessions")
struct ClientSDKTests {
    /// Counts the refresh requests a client sends.
    final class RefreshCounter: ClientMiddleware, Sendable {
        let count = NIOLockedValueBox(0)

        func intercept(
            _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
            next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
        ) async throws -> (HTTPResponse, HTTPBody?) {
            if request.path?.contains("grant_type=refresh_token") == true { count.withLockedValue { $0 += 1 } }
            return try await next(request, body, baseURL)
        }
    }

    /// A store whose writes fail, as a full disk or a locked keychain does.
    struct FailingStore: SessionStore {
        struct Full: Error {}
        func load() throws -> AuthSession? { nil }
        func save(_ session: AuthSession) throws { throw Full() }
        func remove() throws {}
        func companion(named name: String) -> any SessionStore { self }
    }

    /// A client of the harness's server: through its router, or over URLSession when it is live.
    private static func client(
        _ h: AccountHarness, store: any SessionStore, middlewares: [any ClientMiddleware] = []
    ) throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: h.server.baseURL)), sessionStore: store, refreshMargin: 60,
            middlewares: middlewares, transport: h.sdkTransport)
    }

    private static func storeFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-sdk-\(UUID().uuidString)/session.json")
    }

    /// Signs up through the SDK and confirms with the mailed code.
    private static func signedUp(_ h: AccountHarness, _ client: GatehouseClient) async throws -> (String, AuthSession) {
        let email = AccountHarness.newEmail("sdk")
        try await client.auth.signUp(email: email, password: "correct horse battery")
        let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
        return (email, try await client.auth.verify(email: email, code: code, type: .signup))
    }

    @Test("Sign-up by code: the session is kept in a 0600 file and restored at the next launch")
    func signUpAndRestore() async throws {
        try await AccountHarness.with { h in
            let file = Self.storeFile()
            let client = try Self.client(h, store: FileSessionStore(url: file))
            let (_, session) = try await Self.signedUp(h, client)
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let relaunched = try Self.client(h, store: FileSessionStore(url: file))
            #expect(try await relaunched.auth.restoreSession() == session)
            var events = relaunched.auth.events.makeAsyncIterator()
            #expect(await events.next() == .initialSession(session))
            #expect(try await relaunched.auth.session().userID == session.userID)
        }
    }

    @Test("testSessionRefreshFlow: two refreshes race: one refresh request, the same new session for both, no sign-out")
    func refreshRace() async throws {
        try await AccountHarness.with { h in
            let counter = RefreshCounter()
            let client = try Self.client(h, store: MemorySessionStore(), middlewares: [counter])
            let (_, first) = try await Self.signedUp(h, client)
            async let one = client.auth.refreshSession()
            async let two = client.auth.refreshSession()
            let (a, b) = try await (one, two)
            #expect(a == b)
            #expect(a.refreshToken != first.refreshToken)
            #expect(counter.count.withLockedValue { $0 } == 1)
            #expect(try await client.auth.refreshSession().userID == first.userID)
        }
    }

    @Test("testOfflineAuthFlow: offline at launch, ten failed refreshes, then the server is back: the session recovers")
    func offlineThenBack() async throws {
        let h = try await AccountHarness.start(live: true)
        var restarted: LiveServer?
        do {
            let store = MemorySessionStore()
            let (_, session) = try await Self.signedUp(h, try Self.client(h, store: store))
            let configuration = h.server.services.configuration
            try await h.stop()
            // The app launches with the server unreachable: the session stays, every refresh fails as network.
            let client = try Self.client(h, store: store)
            #expect(try await client.auth.restoreSession() == session)
            for _ in 0..<10 {
                await #expect(throws: GatehouseError.self) { try await client.auth.refreshSession() }
            }
            #expect(await client.auth.currentSession == session)
            #expect(try store.load() == session)
            // The server comes back on the same address and store.
            restarted = try await LiveServer.start(configuration, clock: h.clock)
            let renewed = try await client.auth.refreshSession()
            #expect(renewed.userID == session.userID)
            #expect(renewed.refreshToken != session.refreshToken)
            #expect(try store.load() == renewed)
        } catch {
            try? await restarted?.stop()
            throw error
        }
        try await restarted?.stop()
    }

    @Test(
        "The background refresher on the client's clock: offline near expiry it retries with backoff, and renews once the server is back",
        .timeLimit(.minutes(2))
    )
    func backgroundRefresh() async throws {
        let h = try await AccountHarness.start(live: true)
        var restarted: LiveServer?
        do {
            let email = AccountHarness.newEmail("sdk")
            let account = try await h.confirmedAccount(email)
            // The SDK's time is its own clock, moved by this test: no wait here depends on the wall clock.
            let clock = ManualSessionClock(h.clock.now)
            let signedUp = AuthSession(
                accessToken: account.access, refreshToken: account.refresh, expiresAt: clock.now + 5,
                userID: account.userID, email: email)
            let store = MemorySessionStore(signedUp)
            let configuration = h.server.services.configuration
            try await h.stop()
            // The app launches offline with a session near its end: the refresher is due in a second and keeps
            // trying, with backoff, while the server is unreachable.
            let counter = RefreshCounter()
            let client = GatehouseClient(
                url: try #require(URL(string: h.server.baseURL)), sessionStore: store, refreshMargin: 4,
                middlewares: [counter], retryBase: .milliseconds(50), retryMax: .milliseconds(400), clock: clock)
            let events = client.auth.events
            #expect(try await client.auth.restoreSession() == signedUp)
            var wake = await clock.nextWake()
            #expect(wake == signedUp.expiresAt - 4)
            var waits: [TimeInterval] = []
            for _ in 0..<6 {
                clock.advance(to: wake)
                let next = await clock.nextWake()  // the attempt failed and the next one is scheduled
                waits.append((next.timeIntervalSince(wake) * 1000).rounded())
                wake = next
            }
            #expect(counter.count.withLockedValue { $0 } == 6)
            #expect(waits == [50, 100, 200, 400, 400, 400])
            let session = try #require(await client.auth.currentSession)
            #expect(session == signedUp)
            restarted = try await LiveServer.start(configuration)
            clock.advance(to: wake)
            for await event in events {
                if case .refreshed(let renewed) = event {
                    #expect(renewed.userID == session.userID && renewed.refreshToken != session.refreshToken)
                    break
                }
            }
            #expect(counter.count.withLockedValue { $0 } == 7)
            // Signing out stops the refresher (a server shutting down waits for no more of its requests).
            try await client.auth.signOut()
            #expect(await client.auth.currentSession == nil)
            #expect(clock.sleeping == 0)
        } catch {
            try? await restarted?.stop()
            throw error
        }
        try await restarted?.stop()
    }

    @Test("A global sign-out on another device: this client's next refresh ends its session, with the reason")
    func signedOutElsewhere() async throws {
        try await AccountHarness.with { h in
            let store = MemorySessionStore()
            let client = try Self.client(h, store: store)
            let (email, _) = try await Self.signedUp(h, client)
            let other = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(other.access, scope: "global").status == 204)
            var events = client.auth.events.makeAsyncIterator()
            await #expect(throws: GatehouseError.sessionExpired) { try await client.auth.refreshSession() }
            #expect(await client.auth.currentSession == nil)
            #expect(try store.load() == nil)
            var seen: [AuthEvent] = []
            while let event = await events.next() {
                seen.append(event)
                if case .signedOut = event { break }
            }
            #expect(seen.last == .signedOut(.sessionEnded))
        }
    }

    @Test("The account API: magic link by PKCE from the opened URL, recovery, re-authentication, profile, devices")
    func accountAPI() async throws {
        try await AccountHarness.with(PKCETests.configure) { h in
            let client = try Self.client(h, store: MemorySessionStore())
            let (email, _) = try await Self.signedUp(h, client)
            try await client.auth.signOut()

            // A magic link: the app asks with its redirect, the link opens the app with ?code=, the app hands it in.
            let callback = try #require(URL(string: PKCETests.callback))
            h.clock.advance(by: 61)  // one mail a minute per address
            try await client.auth.sendCode(email: email, createUser: false, redirectTo: callback)
            let code = try await PKCETests.authCode(h, to: email, subject: "Your sign-in code")
            let opened = try #require(URL(string: "\(PKCETests.callback)?code=\(code)"))
            let linked = try await client.auth.handleOpenURL(opened)
            #expect(linked.email == email)
            await #expect(throws: GatehouseError.self) { try await client.auth.handleOpenURL(opened) }
            let expired = try #require(URL(string: "\(PKCETests.callback)#error=access_denied&error_code=otp_expired"))
            await #expect(throws: GatehouseError.server(status: 403, code: "otp_expired", message: "")) {
                try await client.auth.handleOpenURL(expired)
            }

            // Profile, then a password change authorized by a mailed re-authentication code.
            let user = try await client.auth.updateUser(profile: ["first_name": "Ada", "last_name": "Lovelace"])
            #expect(user.profile["first_name"] == "Ada" && user.email == email)
            h.clock.advance(by: 61)  // one mail a minute per address
            try await client.auth.reauthenticate()
            let nonce = try #require(try await h.mail(to: email, subject: "Confirm it is you").code)
            try await client.auth.updateUser(password: "analytical engine 1843", nonce: nonce)
            #expect(try await h.client.password(email, "analytical engine 1843").status == 200)

            // Devices: the password sign-in above is another session; revoking it leaves this one.
            let devices = try await client.auth.deviceSessions()
            #expect(devices.count == 2 && devices.filter(\.isCurrent).count == 1)
            let other = try #require(devices.first { !$0.isCurrent })
            try await client.auth.revokeSession(id: other.id)
            #expect(try await client.auth.deviceSessions().map(\.id) == devices.filter(\.isCurrent).map(\.id))

            // Recovery: a reset code signs in; resend answers alike for a confirmed address.
            h.clock.advance(by: 61)  // one mail a minute per address
            try await client.auth.sendPasswordReset(email: email)
            let reset = try #require(try await h.mail(to: email, subject: "Reset your password").code)
            #expect(try await client.auth.verify(email: email, code: reset, type: .recovery).email == email)
            h.clock.advance(by: 61)  // one mail a minute per address
            try await client.auth.resendSignUpCode(email: email)
            #expect(try await client.auth.user().profile["last_name"] == "Lovelace")
        }
    }

    @Test(
        "An email change through the SDK: the first code throws otherAddressPending, the second signs in with the new address"
    )
    func emailChange() async throws {
        try await AccountHarness.with { h in
            let client = try Self.client(h, store: MemorySessionStore())
            let (email, _) = try await Self.signedUp(h, client)
            let newEmail = AccountHarness.newEmail("sdk-new")
            let asked = try await client.auth.updateUser(email: newEmail)
            #expect(asked.email == email)
            let current = try #require(
                try await h.mail(to: email, subject: "Confirm the change of your email address").code)
            let fresh = try #require(try await h.mail(to: newEmail, subject: "Confirm your new email address").code)
            await #expect(throws: GatehouseError.otherAddressPending) {
                try await client.auth.verify(email: newEmail, code: fresh, type: .emailChange)
            }
            let session = try await client.auth.verify(email: email, code: current, type: .emailChange)
            #expect(session.email == newEmail)
            #expect(try await client.auth.user().email == newEmail)
        }
    }

    @Test("Sign in with Apple: the app gives Apple the nonce helper's hash, and the SDK the raw nonce")
    func signInWithApple() async throws {
        let apple = try await FakeAppleKeys.start()
        do {
            try await Self.appleSignIn(apple)
        } catch {
            try? await apple.server.stop()
            throw error
        }
        try await apple.server.stop()
    }

    private static func appleSignIn(_ apple: FakeAppleKeys) async throws {
        try await AccountHarness.with(
            {
                $0.auth.appleAudiences = ["com.example.app"]
                $0.auth.appleJWKSURL = apple.jwksURL
            }
        ) { h in
            let client = try Self.client(h, store: MemorySessionStore())
            let email = AccountHarness.newEmail("apple")
            let nonce = AppleNonce()
            #expect(nonce.raw != AppleNonce().raw && nonce.hashed.count == 64)
            let token = try await apple.token(
                sub: "001.\(UUID().uuidString.prefix(8))", email: email, hashedNonce: nonce.hashed)
            let session = try await client.auth.signInWithApple(idToken: token, nonce: nonce.raw)
            #expect(session.email == email)
            #expect(try await client.auth.user().emailConfirmedAt != nil)
            let replay = try await apple.token(
                sub: "002.\(UUID().uuidString.prefix(8))", email: email, hashedNonce: nonce.hashed)
            await #expect(throws: GatehouseError.self) {
                try await client.auth.signInWithApple(idToken: replay, nonce: "another nonce")
            }
        }
    }

    @Test("Each session carries its end, and the SDK warns five minutes before it")
    func expiringSoon() async throws {
        let h = try await AccountHarness.start { $0.auth.sessionLifetime = 600 }
        do {
            let client = GatehouseClient(
                url: try #require(URL(string: h.server.baseURL)), sessionStore: MemorySessionStore(),
                refreshMargin: 60, middlewares: [], expiryWarning: 900, transport: h.sdkTransport,
                clock: ManualSessionClock(h.clock.now))
            let events = client.auth.events
            let (_, session) = try await Self.signedUp(h, client)
            let endsAt = try #require(session.endsAt)
            // The harness's clock stands still: the end is sign-in plus the lifetime, in whole seconds.
            #expect(
                Int64(endsAt.timeIntervalSince1970) == Int64(h.clock.now.addingTimeInterval(600).timeIntervalSince1970))
            var seen: AuthEvent?
            for await event in events {
                if case .expiringSoon = event {
                    seen = event
                    break
                }
            }
            #expect(seen == .expiringSoon(companyID: nil, endsAt: endsAt))
            // A refresh keeps the same end: the lifetime counts from sign-in.
            #expect(try await client.auth.refreshSession().endsAt == endsAt)
        } catch {
            try? await h.stop()
            throw error
        }
        try await h.stop()
    }

    @Test("Typed errors, and a session store that fails to write reaches the app")
    func errors() async throws {
        try await AccountHarness.with { h in
            let client = try Self.client(h, store: MemorySessionStore())
            let (email, _) = try await Self.signedUp(h, client)
            await #expect(throws: GatehouseError.invalidCredentials) {
                try await client.auth.signIn(email: email, password: "not the password")
            }
            do throws(GatehouseError) {
                try await client.auth.signUp(email: AccountHarness.newEmail("weak"), password: "password")
                Issue.record("a weak password was accepted")
            } catch {
                guard case .weakPassword(let reasons) = error else {
                    Issue.record("expected weak_password, got \(error)")
                    return
                }
                #expect(!reasons.isEmpty)
            }
            let failing = try Self.client(h, store: FailingStore())
            do throws(GatehouseError) {
                try await failing.auth.signIn(email: email, password: "correct horse battery")
                Issue.record("the store's failure was swallowed")
            } catch {
                guard case .sessionStore(let message) = error else {
                    Issue.record("expected a store error, got \(error)")
                    return
                }
                #expect(!message.isEmpty)
            }
            #expect(await failing.auth.currentSession?.email == email)
        }
    }
}
