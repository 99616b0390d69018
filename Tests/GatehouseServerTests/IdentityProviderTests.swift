import Crypto
import Foundation
import GatehouseJSON
import Hummingbird
import JWTKit
import NIOConcurrencyHelpers
import Testing

@testable import GatehouseServer

/// The claims of an id token as Google or Apple write them (Google's `email_verified` is a boolean).
struct ProviderTestClaims: JWTPayload {
    var iss: String
    var aud: String
    var sub: String
    var exp: Int
    var iat: Int
    var nonce: String?
    var email: String?
    var email_verified: Bool?
    var name: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// What Apple's client secret claims, as the fake token and revoke endpoints check them.
struct ClientSecretClaims: JWTPayload {
    var iss: String
    var iat: Int
    var exp: Int
    var aud: String
    var sub: String

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A stand-in for Apple's and Google's servers on loopback: published keys that can rotate, and Apple's
/// `/auth/token` and `/auth/revoke`, which check the client secret's signature (the team's public key) and claims
/// as Apple does, remember what they were given, and can be told to be down.
final class FakeProviders: Sendable {
    struct State {
        var kid = "k1"
        var signing = ES256PrivateKey()
        var published: [(kid: String, key: ES256PrivateKey)] = []
        var revoked: [String] = []
        var revokeFailures = 0
        var secretsSeen: [String] = []
        /// Authorization codes the fake OpenID provider issued (`approve`), by code.
        var codes: [String: Approval] = [:]
        /// How often the discovery document was fetched.
        var discoveryFetches = 0
    }

    /// A user the fake OpenID provider vouches for, bound to the authorization request it answered.
    struct Approval {
        var sub: String
        var email: String?
        var verified = true
        /// The `nonce` and `code_challenge` of the authorization request.
        var nonce: String?
        var challenge: String?
        var issuer: String?
        var audience = "acme-client"
    }
    static let acmeSecret = "acme-secret"
    let state = NIOLockedValueBox(State())
    let teamKey = ES256PrivateKey()
    let teamID = "TEAM123456"
    let keyID = "KEY1234567"
    let clientID = "com.example.app"
    private let started = NIOLockedValueBox<FakeHTTPServer?>(nil)
    var server: FakeHTTPServer { started.withLockedValue { $0! } }

    static func start() async throws -> FakeProviders {
        let fake = FakeProviders()
        fake.state.withLockedValue { $0.published = [($0.kid, $0.signing)] }
        let server = try await FakeHTTPServer.start { router in
            router.get("/auth/keys") { _, _ in fake.jwks() }
            router.get("/google/certs") { _, _ in fake.jwks() }
            // An OpenID provider of its own, issuer the server's base URL, for custom providers.
            router.get("/.well-known/openid-configuration") { _, _ in
                fake.state.withLockedValue { $0.discoveryFetches += 1 }
                let base = fake.baseURL
                return
                    #"{"issuer":"\#(base)","jwks_uri":"\#(base)/google/certs","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token","response_types_supported":["code"]}"#
            }
            router.post("/auth/token") { request, _ in try await fake.token(request) }
            router.post("/token") { request, _ in try await fake.oidcToken(request) }
            router.post("/auth/revoke") { request, _ in try await fake.revoke(request) }
        }
        fake.started.withLockedValue { $0 = server }
        return fake
    }

    var baseURL: String { server.baseURL }

    func jwks() -> String {
        let keys = state.withLockedValue { $0.published }.map { entry in
            let p = entry.key.publicKey.parameters!
            return JWK.ecdsa(.es256, identifier: JWKIdentifier(string: entry.kid), x: p.x, y: p.y, curve: .p256)
        }
        return String(decoding: try! JSONEncoder().encode(JWKS(keys: keys)), as: UTF8.self)
    }

    /// A new signing key under a new key id, published beside the old one (as providers rotate).
    func rotate() {
        state.withLockedValue {
            $0.kid = "k\($0.published.count + 1)"
            $0.signing = ES256PrivateKey()
            $0.published.append(($0.kid, $0.signing))
        }
    }

    func idToken(
        iss: String, sub: String, email: String?, verified: Bool = true, audience: String = "com.example.app",
        nonce: String? = nil, name: String? = nil
    ) async throws -> String {
        let (kid, key) = state.withLockedValue { ($0.kid, $0.signing) }
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let now = Int(Date().timeIntervalSince1970)
        return try await keys.sign(
            ProviderTestClaims(
                iss: iss, aud: audience, sub: sub, exp: now + 600, iat: now,
                nonce: nonce.map { SHA256.hash(data: Data($0.utf8)).map { String(format: "%02x", $0) }.joined() },
                email: email, email_verified: email == nil ? nil : verified, name: name),
            kid: JWKIdentifier(string: kid))
    }

    func google(sub: String, email: String?, verified: Bool = true, nonce: String? = nil) async throws -> String {
        try await idToken(
            iss: "https://accounts.google.com", sub: sub, email: email, verified: verified,
            audience: "google-client.apps.googleusercontent.com", nonce: nonce)
    }

    func apple(sub: String, email: String?) async throws -> String {
        try await idToken(iss: "https://appleid.apple.com", sub: sub, email: email)
    }

    /// Signs a JWS with the current key, as Apple signs its notifications.
    func sign(_ payload: some JWTPayload) async throws -> String {
        let (kid, key) = state.withLockedValue { ($0.kid, $0.signing) }
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: kid))
        return try await keys.sign(payload, kid: JWKIdentifier(string: kid))
    }

    private func form(_ request: Request) async throws -> [String: String] {
        let body = try await request.body.collect(upTo: 1 << 16)
        var form: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        return form
    }

    /// Apple's checks of a client secret: our team key's signature and `kid`, `iss` the team, `sub` the client, `aud`
    /// Apple, and a lifetime of at most 15,777,000 s.
    private func checkSecret(_ form: [String: String]) async -> Bool {
        guard let secret = form["client_secret"], form["client_id"] == clientID else { return false }
        let keys = await JWTKeyCollection().add(ecdsa: teamKey.publicKey, kid: JWKIdentifier(string: keyID))
        guard let claims = try? await keys.verify(secret, as: ClientSecretClaims.self) else { return false }
        state.withLockedValue { $0.secretsSeen.append(secret) }
        return claims.iss == teamID && claims.sub == clientID && claims.aud == "https://appleid.apple.com"
            && claims.exp > claims.iat && claims.exp - claims.iat <= 15_777_000
    }

    private func token(_ request: Request) async throws -> Response {
        let form = try await form(request)
        guard await checkSecret(form) else { return Self.json(.badRequest, #"{"error":"invalid_client"}"#) }
        guard form["grant_type"] == "authorization_code", let code = form["code"], code.hasPrefix("good-") else {
            return Self.json(.badRequest, #"{"error":"invalid_grant"}"#)
        }
        // The code names the Apple ID it was issued for: good-<sub>.
        let sub = String(code.dropFirst(5))
        let idToken = try await apple(sub: sub, email: nil)
        return Self.json(
            .ok,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-\#(sub)","id_token":"\#(idToken)"}"#
        )
    }

    /// The fake OpenID provider's authorization: the user approved the request `authorizeURL` names; returns the
    /// code its redirect carries.
    func approve(_ authorizeURL: String, _ approval: Approval) -> String {
        let items = URLComponents(string: authorizeURL)?.queryItems ?? []
        var approval = approval
        approval.nonce = items.first { $0.name == "nonce" }?.value
        approval.challenge = items.first { $0.name == "code_challenge" }?.value
        let code = "code-\(UUID().uuidString)"
        state.withLockedValue { $0.codes[code] = approval }
        return code
    }

    /// The fake OpenID provider's token endpoint: HTTP Basic client authentication, a code used once, PKCE's
    /// verifier checked, and an id token naming the approved user.
    private func oidcToken(_ request: Request) async throws -> Response {
        let expected = "Basic " + Data("acme-client:\(Self.acmeSecret)".utf8).base64EncodedString()
        guard request.headers[.authorization] == expected else {
            return Self.json(.unauthorized, #"{"error":"invalid_client"}"#)
        }
        let form = try await form(request)
        let approval = state.withLockedValue { $0.codes.removeValue(forKey: form["code"] ?? "") }
        guard let approval, form["redirect_uri"]?.hasSuffix("/auth/v1/callback") == true else {
            return Self.json(.badRequest, #"{"error":"invalid_grant"}"#)
        }
        if let challenge = approval.challenge {
            let verifier = form["code_verifier"] ?? ""
            let computed = Data(SHA256.hash(data: Data(verifier.utf8))).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            guard computed == challenge else { return Self.json(.badRequest, #"{"error":"invalid_grant"}"#) }
        }
        let (kid, key) = state.withLockedValue { ($0.kid, $0.signing) }
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let now = Int(Date().timeIntervalSince1970)
        let idToken = try await keys.sign(
            ProviderTestClaims(
                iss: approval.issuer ?? baseURL, aud: approval.audience, sub: approval.sub, exp: now + 600, iat: now,
                nonce: approval.nonce, email: approval.email, email_verified: approval.verified, name: "Ada"),
            kid: JWKIdentifier(string: kid))
        return Self.json(
            .ok, #"{"access_token":"upstream-access","token_type":"Bearer","expires_in":3600,"id_token":"\#(idToken)"}"#
        )
    }

    private func revoke(_ request: Request) async throws -> Response {
        let form = try await form(request)
        guard await checkSecret(form) else { return Self.json(.badRequest, #"{"error":"invalid_client"}"#) }
        let down = state.withLockedValue { state -> Bool in
            if state.revokeFailures > 0 {
                state.revokeFailures -= 1
                return true
            }
            state.revoked.append(form["token"] ?? "")
            return false
        }
        return down ? Self.json(.serviceUnavailable, "{}") : Self.json(.ok, "")
    }

    private static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    var revoked: [String] { state.withLockedValue { $0.revoked } }

    func configure(_ c: inout GatehouseConfiguration, manualLinking: Bool = true, codes: Bool = true) {
        c.auth.appleAudiences = [clientID]
        c.auth.appleJWKSURL = baseURL + "/auth/keys"
        c.auth.googleClientIDs = ["google-client.apps.googleusercontent.com", "other-client"]
        c.auth.googleJWKSURL = baseURL + "/google/certs"
        c.auth.manualLinking = manualLinking
        if codes {
            c.auth.appleSignIn.teamID = teamID
            c.auth.appleSignIn.keyID = keyID
            c.auth.appleSignIn.privateKey = teamKey.pemRepresentation
            c.auth.appleSignIn.apiURL = baseURL
        }
    }
}

private let idTokenGrant = "/auth/v1/token?grant_type=id_token"

/// The session a sign-in answered, saying what the server answered instead when it is not one.
private func signedIn(_ reply: HTTPReply, sourceLocation: SourceLocation = #_sourceLocation) throws -> SignedIn {
    #expect(reply.status == 200, "\(reply.json)", sourceLocation: sourceLocation)
    return try SignedIn(reply)
}

@Suite("Identities: Google, Apple done completely, linking, Apple's notifications")
struct IdentityProviderTests {
    @Test("every provider name a client may send gets a clear error naming it, not bad_json")
    func unknownProviders() async throws {
        try await AccountHarness.with { h in
            for (name, code) in [
                ("google", "provider_disabled"), ("apple", "provider_disabled"), ("azure", "provider_disabled"),
                ("github", "provider_disabled"), ("custom:acme", "validation_failed"), ("nope", "validation_failed"),
            ] {
                let reply = try await h.client.post(idTokenGrant, ["provider": name, "id_token": "a.b.c"])
                #expect(reply.status == 400, "\(name)")
                #expect(reply.json["error_code"] as? String == code, "\(name)")
                #expect((reply.json["msg"] as? String)?.contains("\"\(name)\"") == true, "\(name): \(reply.json)")
            }
            let settings = try await h.client.get("/auth/v1/settings").json["external"] as? [String: Any]
            #expect(settings?["google"] as? Bool == false)
        }
    }

    @Test("Google id tokens: both issuer spellings, audiences, GoTrue's nonce rule and error shape, a key rotation")
    func google() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let settings = try await h.client.get("/auth/v1/settings").json["external"] as? [String: Any]
            #expect(settings?["google"] as? Bool == true)
            let email = AccountHarness.newEmail("google")
            let sub = "g-\(UUID().uuidString.prefix(8))"
            let token = try await fake.google(sub: sub, email: email, nonce: "raw")
            let first = try await h.client.post(
                idTokenGrant, ["provider": "google", "id_token": token, "nonce": "raw"])
            #expect(first.status == 200, "\(first.json)")
            let session = try signedIn(first)
            let user = try await h.client.user(session.access).json
            let identities = user["identities"] as? [[String: Any]] ?? []
            #expect(Set(identities.compactMap { $0["provider"] as? String }) == ["email", "google"])
            #expect((user["app_metadata"] as? [String: Any])?["providers"] as? [String] != nil)

            // The other spelling of Google's issuer, same person, same account.
            let bare = try await fake.idToken(
                iss: "accounts.google.com", sub: sub, email: email, audience: "other-client")
            #expect(
                try signedIn(try await h.client.post(idTokenGrant, ["provider": "google", "id_token": bare])).userID
                    == session.userID)

            // Refusals in GoTrue's OAuth shape, with our stable code.
            func refused(_ body: [String: Any]) async throws -> [String: Any] {
                let reply = try await h.client.post(idTokenGrant, body)
                #expect(reply.status == 400)
                #expect(reply.json["error_code"] as? String == "bad_jwt")
                return reply.json
            }
            let wrongAudience = try await refused([
                "provider": "google",
                "id_token": try await fake.idToken(
                    iss: "https://accounts.google.com", sub: sub, email: email, audience: "someone-else"),
            ])
            #expect(wrongAudience["error"] as? String == "invalid request")
            #expect(wrongAudience["error_description"] as? String == "Unacceptable audience in id_token")
            let wrongIssuer = try await refused([
                "provider": "google",
                "id_token": try await fake.idToken(
                    iss: "https://evil.example", sub: sub, email: email, audience: "other-client"),
            ])
            #expect(wrongIssuer["error"] as? String == "invalid request")
            let mismatch = try await refused([
                "provider": "google", "id_token": try await fake.google(sub: sub, email: email, nonce: "one"),
                "nonce": "two",
            ])
            #expect(mismatch["error"] as? String == "invalid nonce")
            let missing = try await refused([
                "provider": "google", "id_token": try await fake.google(sub: sub, email: email, nonce: "one"),
            ])
            #expect(
                missing["error_description"] as? String
                    == "Passed nonce and nonce in id_token should either both exist or not.")
            let extra = try await refused([
                "provider": "google", "id_token": try await fake.google(sub: sub, email: email), "nonce": "one",
            ])
            #expect(extra["error"] as? String == "invalid request")
            // A token is good for one sign-in.
            _ = try await refused(["provider": "google", "id_token": bare])

            // The provider rotates its key in the middle of the run: the new key id is fetched at once.
            fake.rotate()
            let rotated = try await fake.google(sub: sub, email: email)
            #expect(
                try signedIn(try await h.client.post(idTokenGrant, ["provider": "google", "id_token": rotated])).userID
                    == session.userID)
        }
    }

    @Test("an address the provider did not verify neither joins an existing account nor makes one; nothing changes")
    func unverifiedEmail() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let email = AccountHarness.newEmail("victim")
            let owner = try await h.confirmedAccount(email)
            let token = try await fake.google(sub: "attacker", email: email, verified: false)
            let reply = try await h.client.post(idTokenGrant, ["provider": "google", "id_token": token])
            #expect(reply.status == 422)
            #expect(reply.json["error_code"] as? String == "provider_email_needs_verification")
            let identities = try await h.client.user(owner.access).json["identities"] as? [[String: Any]] ?? []
            #expect(identities.compactMap { $0["provider"] as? String } == ["email"])
            let fresh = try await fake.google(sub: "nobody", email: AccountHarness.newEmail("new"), verified: false)
            #expect(try await h.client.post(idTokenGrant, ["provider": "google", "id_token": fresh]).status == 422)
        }
    }

    @Test("Apple: the code is exchanged with a signed client secret, the name kept once, the token revoked on deletion")
    func appleComplete() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let sub = "001.\(UUID().uuidString.prefix(8))"
            let email = AccountHarness.newEmail("apple")
            let first = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "apple", "id_token": try await fake.apple(sub: sub, email: email),
                    "authorization_code": "good-\(sub)",
                    "full_name": ["given_name": "Ada", "family_name": "Lovelace"],
                ])
            let session = try signedIn(first)
            var metadata = try await h.client.user(session.access).json["user_metadata"] as? [String: Any]
            #expect(metadata?["full_name"] as? String == "Ada Lovelace")
            #expect(metadata?["name"] as? String == "Ada Lovelace")
            #expect(metadata?["given_name"] as? String == "Ada")

            // Later sign-ins send no name, or another: the first one stays.
            for name in [["given_name": "", "family_name": ""], ["given_name": "Someone", "family_name": "Else"]] {
                let again = try await h.client.post(
                    idTokenGrant,
                    ["provider": "apple", "id_token": try await fake.apple(sub: sub, email: nil), "full_name": name])
                #expect(again.status == 200)
            }
            metadata = try await h.client.user(session.access).json["user_metadata"] as? [String: Any]
            #expect(metadata?["full_name"] as? String == "Ada Lovelace")

            // A code Apple refuses, or one issued for another Apple ID, refuses the sign-in and creates nothing.
            let strangerEmail = AccountHarness.newEmail("stranger")
            for code in ["used-code", "good-someone-else"] {
                let reply = try await h.client.post(
                    idTokenGrant,
                    [
                        "provider": "apple", "id_token": try await fake.apple(sub: "stranger", email: strangerEmail),
                        "authorization_code": code,
                    ])
                #expect(reply.status == 400)
                #expect(reply.json["error_code"] as? String == "apple_code_rejected")
            }
            #expect(
                try await h.client.password(strangerEmail, "anything at all").json["error_code"] as? String
                    == "invalid_credentials")

            // Deleting the account revokes Apple's token, first failing (Apple down) and then on the retry.
            fake.state.withLockedValue { $0.revokeFailures = 1 }
            let deleted = try await h.client.deleteAccount([:], bearer: session.access)
            #expect(deleted.status == 204 || deleted.status == 200, "\(deleted.status) \(deleted.json)")
            let retried = try await LiveServer.eventually {
                h.clock.advance(by: 60)
                return fake.revoked.contains("refresh-\(sub)")
            }
            #expect(retried)
            #expect(try await h.client.user(session.access).status != 200)
        }
    }

    @Test("a key Apple does not accept (the operator's mistake) never blocks a sign-in; it is logged")
    func misconfiguredKey() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({
            fake.configure(&$0)
            $0.auth.appleSignIn.teamID = "WRONGTEAM1"
        }) { h in
            let sub = "001.\(UUID().uuidString.prefix(8))"
            let reply = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "apple", "id_token": try await fake.apple(sub: sub, email: AccountHarness.newEmail()),
                    "authorization_code": "good-\(sub)",
                ])
            _ = try signedIn(reply)
            #expect(h.log.all.contains { $0.contains("invalid_client") }, "the log names Apple's answer")
        }
    }

    @Test("custom providers in GoTrue's admin shape: created, listed, read, changed, removed; an OIDC one signs in")
    func customProviders() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let body: [String: Any] = [
                "provider_type": "oidc", "identifier": "custom:acme", "name": "Acme", "client_id": "acme-client",
                "client_secret": "a secret the server keeps", "issuer": fake.baseURL, "scopes": ["openid", "email"],
                "acceptable_client_ids": ["acme-ios"],
            ]
            let created = try await admin.send(.post, "/auth/v1/admin/custom-providers", body)
            #expect(created.status == 201, "\(created.json)")
            #expect(created.json["identifier"] as? String == "custom:acme")
            #expect(created.json["client_secret"] == nil && !created.body.contains("a secret the server keeps"))
            let again = try await admin.send(.post, "/auth/v1/admin/custom-providers", body)
            #expect(again.status == 400)
            #expect(again.json["error_code"] as? String == "conflict")
            for (field, value) in [("identifier", "acme"), ("issuer", "ftp://x"), ("client_secret", "")] {
                var bad = body
                bad[field] = value
                bad["identifier"] = field == "identifier" ? value : "custom:other"
                let refused = try await admin.send(.post, "/auth/v1/admin/custom-providers", bad)
                #expect(refused.json["error_code"] as? String == "validation_failed", "\(field)")
            }
            var reserved = body
            reserved["identifier"] = "custom:reserved"
            reserved["authorization_params"] = ["state": "mine"]
            #expect(
                try await admin.send(.post, "/auth/v1/admin/custom-providers", reserved).json["error_code"]
                    as? String == "validation_failed")
            let list = try await admin.get("/auth/v1/admin/custom-providers?type=oidc")
            #expect(
                (list.json["providers"] as? [[String: Any]])?.compactMap { $0["identifier"] as? String }
                    == ["custom:acme"])
            #expect(
                try await admin.get("/auth/v1/admin/custom-providers/custom:nope").json["error_code"] as? String
                    == "provider_not_found")

            // Its id tokens sign in, for its client id or an acceptable one.
            let sub = "acme-\(UUID().uuidString.prefix(8))"
            let email = AccountHarness.newEmail("acme")
            let token = try await fake.idToken(iss: fake.baseURL, sub: sub, email: email, audience: "acme-ios")
            let reply = try await h.client.post(idTokenGrant, ["provider": "custom:acme", "id_token": token])
            let session = try signedIn(reply)
            let identities = try await h.client.user(session.access).json["identities"] as? [[String: Any]] ?? []
            #expect(identities.contains { $0["provider"] as? String == "custom:acme" && $0["id"] as? String == sub })

            // Disabled, it is refused by name; removed, it is unknown.
            let changed = try await admin.send(.put, "/auth/v1/admin/custom-providers/custom:acme", ["enabled": false])
            #expect(changed.json["enabled"] as? Bool == false)
            let off = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "custom:acme",
                    "id_token": try await fake.idToken(
                        iss: fake.baseURL, sub: sub, email: email, audience: "acme-client"),
                ])
            #expect(off.json["error_code"] as? String == "provider_disabled")
            #expect(try await admin.send(.delete, "/auth/v1/admin/custom-providers/custom:acme", [:]).status == 204)
            let gone = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "custom:acme",
                    "id_token": try await fake.idToken(
                        iss: fake.baseURL, sub: sub, email: email, audience: "acme-client"),
                ])
            #expect(gone.json["error_code"] as? String == "validation_failed")
            #expect((gone.json["msg"] as? String)?.contains("custom:acme") == true)
        }
    }

    @Test("linking and unlinking as GoTrue does: off by default, the last identity stays, another user's is refused")
    func linking() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0, manualLinking: false) }) { h in
            let me = try await h.confirmedAccount(AccountHarness.newEmail("off"))
            let link = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "google", "id_token": try await fake.google(sub: "x-off", email: nil),
                    "link_identity": true,
                ], bearer: me.access)
            #expect(link.status == 404)
            #expect(link.json["error_code"] as? String == "manual_linking_disabled")
            let unlink = try await h.client.delete("/auth/v1/user/identities/anything", bearer: me.access)
            #expect(unlink.status == 404)
            #expect(unlink.json["error_code"] as? String == "manual_linking_disabled")
        }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let me = try await h.confirmedAccount(AccountHarness.newEmail("me"))
            // The last identity cannot go.
            let emailIdentity = try #require(
                (try await h.client.user(me.access).json["identities"] as? [[String: Any]])?.first?["identity_id"]
                    as? String)
            let last = try await h.client.delete("/auth/v1/user/identities/\(emailIdentity)", bearer: me.access)
            #expect(last.status == 422)
            #expect(last.json["error_code"] as? String == "single_identity_not_deletable")

            // Link a Google identity with another address: a new session for the same user.
            let sub = "g-\(UUID().uuidString.prefix(8))"
            let linked = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "google",
                    "id_token": try await fake.google(sub: sub, email: AccountHarness.newEmail("other")),
                    "link_identity": true,
                ], bearer: me.access)
            #expect(linked.status == 200)
            #expect(try signedIn(linked).userID == me.userID)
            let identities = try await h.client.user(me.access).json["identities"] as? [[String: Any]] ?? []
            let google = try #require(identities.first { $0["provider"] as? String == "google" })
            #expect(google["id"] as? String == sub)

            // Someone else cannot take it.
            let them = try await h.confirmedAccount(AccountHarness.newEmail("them"))
            let taken = try await h.client.post(
                idTokenGrant,
                [
                    "provider": "google", "id_token": try await fake.google(sub: sub, email: nil),
                    "link_identity": true,
                ], bearer: them.access)
            #expect(taken.status == 422)
            #expect(taken.json["error_code"] as? String == "identity_already_exists")

            // Unlink by identity_id, not the provider's subject.
            let identityID = try #require(google["identity_id"] as? String)
            let bySubject = try await h.client.delete("/auth/v1/user/identities/\(sub)", bearer: me.access)
            #expect(bySubject.status == 422)
            #expect(bySubject.json["error_code"] as? String == "identity_not_found")
            let unlinked = try await h.client.delete("/auth/v1/user/identities/\(identityID)", bearer: me.access)
            #expect(unlinked.status == 200)
            let after = try await h.client.user(me.access).json["identities"] as? [[String: Any]] ?? []
            #expect(after.compactMap { $0["provider"] as? String } == ["email"])
            // Another user's identity is not found for me.
            let theirs = try #require(
                (try await h.client.user(them.access).json["identities"] as? [[String: Any]])?.first?["identity_id"]
                    as? String)
            #expect(
                try await h.client.delete("/auth/v1/user/identities/\(theirs)", bearer: me.access).json["error_code"]
                    as? String == "identity_not_found")
        }
    }

    @Test("unlinking an Apple identity queues its token for revocation at Apple")
    func unlinkRevokes() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let sub = "001.\(UUID().uuidString.prefix(8))"
            let session = try signedIn(
                try await h.client.post(
                    idTokenGrant,
                    [
                        "provider": "apple",
                        "id_token": try await fake.apple(sub: sub, email: AccountHarness.newEmail()),
                        "authorization_code": "good-\(sub)",
                    ]))
            let identities = try await h.client.user(session.access).json["identities"] as? [[String: Any]] ?? []
            let apple = try #require(
                identities.first { $0["provider"] as? String == "apple" }?["identity_id"] as? String)
            #expect(
                try await h.client.delete("/auth/v1/user/identities/\(apple)", bearer: session.access).status == 200)
            #expect(try await LiveServer.eventually { fake.revoked.contains("refresh-\(sub)") })
        }
    }
}

/// The claims of a Sign in with Apple notification.
struct AppleNotificationTestClaims: JWTPayload {
    var iss = "https://appleid.apple.com"
    var aud = "com.example.app"
    var iat: Int
    var jti: String
    var events: String

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

@Suite("Sign in with Apple's server-to-server notifications")
struct AppleNotificationTests {
    static func notification(
        _ fake: FakeProviders, type: String, sub: String, email: String? = nil, iat: Date = Date(),
        jti: String = UUID().uuidString, aud: String = "com.example.app"
    ) async throws -> [String: Any] {
        var event: [String: Any] = ["type": type, "sub": sub, "event_time": Int(iat.timeIntervalSince1970 * 1000)]
        if let email {
            event["email"] = email
            event["is_private_email"] = "true"
        }
        let events = String(decoding: try JSONSerialization.data(withJSONObject: event), as: UTF8.self)
        return [
            "payload": try await fake.sign(
                AppleNotificationTestClaims(
                    aud: aud, iat: Int(iat.timeIntervalSince1970), jti: jti, events: events))
        ]
    }

    @Test("relay mail off and on, consent revoked, account deleted; replays once; bad signature and old iat refused")
    func notifications() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let sub = "001.\(UUID().uuidString.prefix(8))"
            let relay = "\(UUID().uuidString.prefix(10).lowercased())@privaterelay.appleid.com"
            let session = try signedIn(
                try await h.client.post(
                    idTokenGrant, ["provider": "apple", "id_token": try await fake.apple(sub: sub, email: relay)]))
            let post = { (body: [String: Any]) in try await h.client.post("/v1/apple/notifications", body) }

            // Refused: another app's, an old one, a forged one, not a JWS.
            let other = try await post(try await Self.notification(fake, type: "email-disabled", sub: sub, aud: "x"))
            #expect(other.json["code"] as? String == "apple_notification_untrusted")
            let old = try await post(
                try await Self.notification(
                    fake, type: "email-disabled", sub: sub, iat: Date().addingTimeInterval(-7200)))
            #expect(old.status == 400)
            #expect(old.json["code"] as? String == "apple_notification_untrusted")
            var forged = try await Self.notification(fake, type: "account-delete", sub: sub)
            let jws = try #require(forged["payload"] as? String)
            forged["payload"] = String(jws.dropLast(4)) + (jws.hasSuffix("AAAA") ? "BBBB" : "AAAA")
            #expect(try await post(forged).json["code"] as? String == "apple_notification_untrusted")
            #expect(try await post(["payload": "nope"]).json["code"] as? String == "apple_notification_malformed")

            // Relay forwarding off: no mail goes to the address; on again, it does.
            #expect(try await post(try await Self.notification(fake, type: "email-disabled", sub: sub)).status == 200)
            #expect(try await h.client.otp(relay, createUser: false).status == 200)
            #expect(try await post(try await Self.notification(fake, type: "email-enabled", sub: sub)).status == 200)
            h.clock.advance(by: 61)
            #expect(try await h.client.otp(relay, createUser: false).status == 200)
            _ = try await h.mail(to: relay, subject: "Your sign-in code")
            #expect(try await !h.hasMail(to: relay, subject: "Your sign-in code"), "the mail sent while off")

            // Consent revoked: every session ends.
            let revoked = try await Self.notification(fake, type: "consent-revoked", sub: sub)
            #expect(try await post(revoked).status == 200)
            #expect(try await h.client.refresh(session.refresh).status != 200)
            // A replay is acknowledged and changes nothing more.
            #expect(try await post(revoked).status == 200)

            // Apple account deleted: an account with only its relay address to sign in goes.
            let again = try signedIn(
                try await h.client.post(
                    idTokenGrant, ["provider": "apple", "id_token": try await fake.apple(sub: sub, email: relay)]))
            #expect(try await post(try await Self.notification(fake, type: "account-delete", sub: sub)).status == 200)
            #expect(try await h.client.user(again.access).status != 200)
            let back = try await h.client.post(
                idTokenGrant, ["provider": "apple", "id_token": try await fake.apple(sub: sub, email: nil)])
            #expect(back.status == 400, "the Apple ID is no longer linked and the token has no address")

            // An account with a real address keeps it, only the Apple identity goes.
            let kept = AccountHarness.newEmail("kept")
            let keeper = try await h.confirmedAccount(kept)
            let sub2 = "002.\(UUID().uuidString.prefix(8))"
            _ = try signedIn(
                try await h.client.post(
                    idTokenGrant, ["provider": "apple", "id_token": try await fake.apple(sub: sub2, email: kept)]))
            #expect(try await post(try await Self.notification(fake, type: "account-delete", sub: sub2)).status == 200)
            let identities = try await h.client.user(keeper.access).json["identities"] as? [[String: Any]] ?? []
            #expect(identities.compactMap { $0["provider"] as? String } == ["email"])
        }
    }
}

@Suite("Id-token rules")
struct IDTokenRuleTests {
    static func fails(token: String?, request: String?, apple: Bool = false) -> Bool {
        (try? IDTokenRules.checkNonce(token: token, request: request, acceptsRawNonce: apple)) == nil
    }

    @Test("GoTrue's nonce rule: one or neither, and the token's is the hex SHA-256 of the request's")
    func nonce() {
        let hashed = IDTokenRules.hexSHA256("raw")
        #expect(hashed == SHA256.hash(data: Data("raw".utf8)).map { String(format: "%02x", $0) }.joined())
        #expect(!Self.fails(token: nil, request: nil))
        #expect(!Self.fails(token: hashed, request: "raw"))
        #expect(Self.fails(token: hashed, request: nil))
        #expect(Self.fails(token: nil, request: "raw"))
        #expect(Self.fails(token: hashed, request: "other"))
        #expect(Self.fails(token: "raw", request: "raw"), "a raw nonce is Apple's leniency only")
        #expect(!Self.fails(token: "raw", request: "raw", apple: true))
    }

    @Test("Apple's name is kept once: trimmed, first and last joined, never replaced, never emptied")
    func name() {
        var metadata: [String: JSONValue] = ["locale": .string("de")]
        #expect(!ExternalSignIn.keepName(&metadata, given: "  ", family: nil))
        #expect(ExternalSignIn.keepName(&metadata, given: " Ada ", family: nil))
        #expect(metadata["full_name"] == .string("Ada"))
        #expect(metadata["family_name"] == nil)
        #expect(!ExternalSignIn.keepName(&metadata, given: "Grace", family: "Hopper"))
        #expect(metadata["name"] == .string("Ada"))
        #expect(metadata["locale"] == .string("de"))
    }

    @Test("a notification's claims: Apple's issuer, our audience, at most an hour old, a jti, events as JSON text")
    func notificationClaims() throws {
        let now = Date()
        func claims(
            iss: String = "https://appleid.apple.com", aud: String = "app", age: TimeInterval = 0,
            jti: String? = "j", events: String = #"{"type":"consent-revoked","sub":"s"}"#
        )
            -> AppleNotifications.Claims
        {
            AppleNotifications.Claims(
                iss: iss, aud: AudienceClaim(value: [aud]), iat: IssuedAtClaim(value: now.addingTimeInterval(-age)),
                jti: jti, events: events)
        }
        let read = try AppleNotifications.event(claims(), audiences: ["app"], now: now)
        #expect(read.jti == "j")
        #expect(read.event.type == "consent-revoked")
        for (bad, code) in [
            (claims(iss: "x"), "apple_notification_untrusted"), (claims(aud: "y"), "apple_notification_untrusted"),
            (claims(age: 3601), "apple_notification_untrusted"), (claims(age: -600), "apple_notification_untrusted"),
            (claims(jti: nil), "apple_notification_malformed"), (claims(events: "{}"), "apple_notification_malformed"),
        ] {
            #expect(throws: APIError.self) { try AppleNotifications.event(bad, audiences: ["app"], now: now) }
            do {
                _ = try AppleNotifications.event(bad, audiences: ["app"], now: now)
            } catch let error as APIError {
                #expect(error.code == code)
            } catch {}
        }
    }
}
