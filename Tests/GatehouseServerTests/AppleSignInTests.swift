import Crypto
import Foundation
import GatehouseServer
import Hummingbird
import JWTKit
import Testing

/// The claims Apple puts in an identity token.
struct AppleTestClaims: JWTPayload {
    var iss = "https://appleid.apple.com"
    var aud: String
    var sub: String
    var exp: Int
    var iat: Int
    var nonce: String?
    var email: String?
    var email_verified: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A stand-in for Apple's key server on loopback: it publishes a key and signs identity tokens with it.
struct FakeAppleKeys {
    let keys: JWTKeyCollection
    let server: FakeHTTPServer

    static func start() async throws -> FakeAppleKeys {
        let key = ES256PrivateKey()
        let parameters = try #require(key.parameters)
        let jwks = JWKS(keys: [.ecdsa(.es256, identifier: "apple-test", x: parameters.x, y: parameters.y, curve: .p256)]
        )
        let body = String(decoding: try JSONEncoder().encode(jwks), as: UTF8.self)
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: "apple-test")
        let server = try await FakeHTTPServer.start { router in
            router.get("/auth/keys") { _, _ in body }
        }
        return FakeAppleKeys(keys: keys, server: server)
    }

    var jwksURL: String { server.baseURL + "/auth/keys" }

    /// A token for `sub`; its nonce claim is the SHA-256 of `nonce`, or `hashedNonce` as the app handed it to Apple.
    func token(
        sub: String, email: String?, audience: String = "com.example.app", nonce: String? = nil,
        hashedNonce: String? = nil
    ) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let hashed =
            hashedNonce ?? nonce.map { SHA256.hash(data: Data($0.utf8)).map { String(format: "%02x", $0) }.joined() }
        return try await keys.sign(
            AppleTestClaims(
                aud: audience, sub: sub, exp: now + 600, iat: now, nonce: hashed, email: email,
                email_verified: email == nil ? nil : "true"),
            kid: "apple-test")
    }
}

@Suite("Sign in with Apple")
struct AppleSignInTests {
    @Test("an Apple identity token signs in, creates or links the account, and checks audience and nonce")
    func appleSignIn() async throws {
        let apple = try await FakeAppleKeys.start()
        try await AccountHarness.with({
            $0.auth.appleAudiences = ["com.example.app"]
            $0.auth.appleJWKSURL = apple.jwksURL
        }) { h in
            let email = AccountHarness.newEmail("apple")
            let sub = "001234.\(UUID().uuidString.prefix(8))"
            let first = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                [
                    "provider": "apple", "id_token": try await apple.token(sub: sub, email: email, nonce: "raw-nonce"),
                    "nonce": "raw-nonce",
                ])
            #expect(first.status == 200)
            let session = try SignedIn(first)
            let user = try await h.client.user(session.access)
            let providers =
                (user.json["identities"] as? [[String: Any]])?.compactMap { $0["provider"] as? String } ?? []
            #expect(Set(providers) == ["email", "apple"])
            #expect(user.json["email_confirmed_at"] is String)

            // The same Apple ID again is the same account, even with no email in the token.
            let again = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                ["provider": "apple", "id_token": try await apple.token(sub: sub, email: nil)])
            #expect(try SignedIn(again).userID == session.userID)

            // An existing account with the same verified email is linked, not duplicated.
            let existing = AccountHarness.newEmail("linked")
            let owner = try await h.confirmedAccount(existing)
            let linked = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                [
                    "provider": "apple",
                    "id_token": try await apple.token(sub: "other.\(UUID().uuidString.prefix(6))", email: existing),
                ])
            #expect(try SignedIn(linked).userID == owner.userID)

            // Wrong audience, wrong nonce, a forged signature.
            let foreign = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                [
                    "provider": "apple",
                    "id_token": try await apple.token(sub: sub, email: email, audience: "com.other.app"),
                ])
            #expect(foreign.status == 400)
            let badNonce = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                [
                    "provider": "apple", "id_token": try await apple.token(sub: sub, email: email, nonce: "one"),
                    "nonce": "two",
                ])
            #expect(badNonce.status == 400)
            let token = try await apple.token(sub: sub, email: email)
            let forged = String(token.dropLast(4)) + (token.hasSuffix("AAAA") ? "BBBB" : "AAAA")
            let refused = try await h.client.post(
                "/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": forged])
            #expect(refused.status == 400)
            #expect(refused.json["error_code"] as? String == "bad_jwt")
        }
        try await apple.server.stop()
    }

    @Test("F10 Apple: a token carrying a nonce needs it, and a token signs in once")
    func appleNonceAndReplay() async throws {
        let apple = try await FakeAppleKeys.start()
        try await AccountHarness.with({
            $0.auth.appleAudiences = ["com.example.app"]
            $0.auth.appleJWKSURL = apple.jwksURL
        }) { h in
            let sub = "001234.\(UUID().uuidString.prefix(8))"
            let email = AccountHarness.newEmail("apple")
            let bound = try await apple.token(sub: sub, email: email, nonce: "raw-nonce")
            let withoutNonce = try await h.client.post(
                "/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": bound])
            #expect(withoutNonce.status == 400)
            #expect(withoutNonce.json["error_code"] as? String == "bad_jwt")
            let first = try await h.client.post(
                "/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": bound, "nonce": "raw-nonce"])
            #expect(first.status == 200)
            let replay = try await h.client.post(
                "/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": bound, "nonce": "raw-nonce"])
            #expect(replay.status == 400)
            #expect(replay.json["error_code"] as? String == "bad_jwt")
        }
        try await apple.server.stop()
    }

    @Test("Apple confirming an address that an attacker signed up drops the attacker's password")
    func applePreHijack() async throws {
        let apple = try await FakeAppleKeys.start()
        try await AccountHarness.with({
            $0.auth.appleAudiences = ["com.example.app"]
            $0.auth.appleJWKSURL = apple.jwksURL
        }) { h in
            let email = AccountHarness.newEmail("victim")
            #expect(try await h.client.signUp(email, password: "attacker knows this one").status == 200)
            let token = try await apple.token(sub: "victim.\(UUID().uuidString.prefix(6))", email: email)
            #expect(
                try await h.client.post("/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": token])
                    .status == 200)
            #expect(try await h.client.password(email, "attacker knows this one").status == 400)
        }
        try await apple.server.stop()
    }

    @Test("without configured audiences Sign in with Apple is off")
    func disabled() async throws {
        try await AccountHarness.with { h in
            let reply = try await h.client.post(
                "/auth/v1/token?grant_type=id_token", ["provider": "apple", "id_token": "x.y.z"])
            #expect(reply.status == 400)
            #expect(reply.json["error_code"] as? String == "provider_disabled")
            #expect(
                (try await h.client.get("/auth/v1/settings").json["external"] as? [String: Any])?["apple"] as? Bool
                    == false
            )
        }
    }
}
