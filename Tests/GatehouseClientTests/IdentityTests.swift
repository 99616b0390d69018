import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// Sign in with Apple and Google, linked identities and the offered providers, against a scripted server: what the
/// SDK sends and what the app reads back.
@Suite("GatehouseClient identities")
struct IdentityTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let server = ScriptedTransport { Issue.record("no reply scripted for \($0)") }

    func client() throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: "https://auth.example.com")), sessionStore: MemorySessionStore(),
            transport: server, clock: ManualSessionClock(Self.t0))
    }

    /// An authorizer that answers as Apple would, and remembers the nonce it was given.
    final class FakeApple: AppleIDAuthorizer, @unchecked Sendable {
        let answer: Result<AppleIDAuthorization, any Error>
        private let lock = NSLock()
        private var nonces: [String] = []

        init(_ answer: Result<AppleIDAuthorization, any Error>) { self.answer = answer }

        var hashedNonces: [String] { lock.withLock { nonces } }

        func authorize(hashedNonce: String) async throws -> AppleIDAuthorization {
            lock.withLock { nonces.append(hashedNonce) }
            return try answer.get()
        }
    }

    /// The JSON body of a request, as an object.
    static func body(_ request: ScriptedTransport.Request) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any])
    }

    static func name(_ given: String?, _ family: String?) -> PersonNameComponents {
        var name = PersonNameComponents()
        name.givenName = given
        name.familyName = family
        return name
    }

    @Test("Sign in with Apple: Apple gets the nonce's SHA-256; the server the raw nonce, the code and the name")
    func appleSendsCodeAndName() async throws {
        let client = try client()
        server.answer("token", ScriptedTransport.session(access: "a1", refresh: "r1", expiresAt: Self.t0 + 3600))
        let apple = FakeApple(
            .success(
                AppleIDAuthorization(
                    identityToken: "apple.id.token", authorizationCode: "c0de", fullName: Self.name("Ada", "Lovelace")))
        )
        let session = try await client.auth.signInWithApple(using: apple)
        #expect(session.accessToken == "a1")
        #expect(await client.auth.currentSession == session)

        let sent = try Self.body(try #require(server.requests("token").first))
        let raw = try #require(sent["nonce"] as? String)
        #expect(apple.hashedNonces == [AppleNonce.hash(raw)])
        #expect(raw.count >= 43)
        #expect(sent["provider"] as? String == "apple")
        #expect(sent["id_token"] as? String == "apple.id.token")
        #expect(sent["authorization_code"] as? String == "c0de")
        let name = try #require(sent["full_name"] as? [String: Any])
        #expect(name["given_name"] as? String == "Ada")
        #expect(name["family_name"] as? String == "Lovelace")
        #expect(sent["link_identity"] == nil)
    }

    @Test("A later Apple authorization's empty name is not sent; a half name is; the old signature sends neither")
    func appleWithoutName() async throws {
        let client = try client()
        server.answer(
            "token", ScriptedTransport.session(access: "a1", refresh: "r1", expiresAt: Self.t0 + 3600),
            ScriptedTransport.session(access: "a2", refresh: "r2", expiresAt: Self.t0 + 3600),
            ScriptedTransport.session(access: "a3", refresh: "r3", expiresAt: Self.t0 + 3600))
        try await client.auth.signInWithApple(
            idToken: "t1", nonce: "n1", authorizationCode: "", fullName: Self.name("", nil))
        try await client.auth.signInWithApple(idToken: "t2", nonce: nil)
        try await client.auth.signInWithApple(idToken: "t3", nonce: nil, fullName: Self.name(nil, "Lovelace"))
        let sent = try server.requests("token").map(Self.body)
        #expect(sent.count == 3)
        for body in sent {
            #expect(body["authorization_code"] == nil)
        }
        #expect(sent[0]["full_name"] == nil)
        #expect(sent[1]["full_name"] == nil)
        #expect(sent[0]["nonce"] as? String == "n1")
        let half = try #require(sent[2]["full_name"] as? [String: Any])
        #expect(half["family_name"] as? String == "Lovelace")
        #expect(half["given_name"] == nil || half["given_name"] is NSNull)
    }

    @Test("A dismissed Apple sheet is authenticator(.cancelled), and nothing reaches the server")
    func appleCancelled() async throws {
        let client = try client()
        let apple = FakeApple(.failure(PasskeyAuthenticatorError.cancelled))
        await #expect(throws: GatehouseError.authenticator(.cancelled)) {
            try await client.auth.signInWithApple(using: apple)
        }
        struct Broken: Error {}
        await #expect(throws: GatehouseError.self) {
            try await client.auth.signInWithApple(using: FakeApple(.failure(Broken())))
        }
        #expect(server.requests.isEmpty)
        #expect(await client.auth.currentSession == nil)
    }

    @Test("Google signs in by id token; its refusal keeps its code")
    func google() async throws {
        let client = try client()
        server.answer(
            "token", ScriptedTransport.refusal(400, "provider_disabled"),
            ScriptedTransport.session(access: "a1", refresh: "r1", expiresAt: Self.t0 + 3600))
        await #expect(throws: GatehouseError.server(status: 400, code: "provider_disabled", message: "refused")) {
            try await client.auth.signInWithGoogle(idToken: "g1")
        }
        let session = try await client.auth.signInWithGoogle(idToken: "g2", nonce: "n2")
        #expect(session.accessToken == "a1")
        let sent = try Self.body(try #require(server.requests("token").last))
        #expect(sent["provider"] as? String == "google")
        #expect(sent["id_token"] as? String == "g2")
        #expect(sent["nonce"] as? String == "n2")
    }

    @Test("Linking sends link_identity with the session's bearer and takes the new session; unlinking names the id")
    func linkAndUnlink() async throws {
        let client = try client()
        server.answer(
            "token", ScriptedTransport.session(access: "a1", refresh: "r1", expiresAt: Self.t0 + 3600),
            ScriptedTransport.session(access: "a2", refresh: "r2", expiresAt: Self.t0 + 3600))
        server.answer(
            "unlinkIdentity", .json(200, "{}"), ScriptedTransport.refusal(422, "single_identity_not_deletable"))
        try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let linked = try await client.auth.linkIdentity(provider: .google, idToken: "g1", nonce: nil)
        let request = try #require(server.requests("token").last)
        #expect(request.bearer == "a1")
        let sent = try Self.body(request)
        #expect(sent["link_identity"] as? Bool == true)
        #expect(sent["provider"] as? String == "google")
        #expect(await client.auth.currentSession == linked)

        try await client.auth.unlinkIdentity("identity-7")
        #expect(server.requests("unlinkIdentity").first?.path == "/auth/v1/user/identities/identity-7")
        #expect(server.requests("unlinkIdentity").first?.bearer == "a2")
        do {
            try await client.auth.unlinkIdentity("identity-8")
            Issue.record("the last identity was unlinked")
        } catch let error as GatehouseError {
            #expect(error.code == .singleIdentityNotDeletable)
        }
    }

    @Test("The user's identities and the server's providers read as the app shows them")
    func identitiesAndProviders() async throws {
        let client = try client()
        server.answer(
            "getUser",
            .json(
                200,
                """
                {"id":"user-1","aud":"authenticated","role":"authenticated","email":"ada@example.com","phone":"",\
                "app_metadata":{},"user_metadata":{"full_name":"Ada Lovelace"},"created_at":"2026-01-01T00:00:00Z",\
                "updated_at":"2026-01-01T00:00:00Z","is_anonymous":false,"identities":[\
                {"identity_id":"i-1","id":"user-1","user_id":"user-1","identity_data":{},"provider":"email",\
                "email":"ada@example.com","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"},\
                {"identity_id":"i-2","id":"001234.abcd","user_id":"user-1","identity_data":{},"provider":"apple",\
                "email":"","created_at":"2026-01-02T00:00:00Z","updated_at":"2026-01-02T00:00:00Z"}]}
                """))
        server.answer(
            "getSettings",
            .json(
                200,
                """
                {"external":{"email":true,"apple":true,"google":false,"phone":false,"anonymous_users":false},\
                "disable_signup":false,"mailer_autoconfirm":false,"phone_autoconfirm":false,"sms_provider":"",\
                "saml_enabled":false}
                """))
        server.answer("token", ScriptedTransport.session(access: "a1", refresh: "r1", expiresAt: Self.t0 + 3600))
        try await client.auth.signIn(email: "ada@example.com", password: "correct horse battery")
        let identities = try await client.auth.identities()
        #expect(identities.map(\.provider) == [.email, .apple])
        #expect(identities.map(\.id) == ["i-1", "i-2"])
        #expect(identities[1].providerUserID == "001234.abcd")
        #expect(identities[1].email == nil)
        #expect(identities[0].email == "ada@example.com")
        #expect(try await client.auth.signInProviders() == SignInProviders(email: true, apple: true, google: false))
        #expect(SignInProviders() == SignInProviders(email: true, apple: false, google: false))
        #expect(IdentityProvider(rawValue: "custom:github").description == "custom:github")
    }
}
