import Foundation
import Testing

@testable import GatehouseServer

/// The OAuth provider's pure rules: scopes, client credentials, the authorization request's checks, device codes and
/// polls, and when a session is fresh and strong enough for a request. No store, no server.
@Suite("OAuth provider: rules")
struct OAuthRulesTests {
    static let client = OAuthClient(
        id: "5b0f5a8e-8a56-4c6f-9f55-0d0c2a5e8a11", name: "Dashboard", type: .confidential,
        secretHash: Secrets.digest("s3cret"), authMethod: "client_secret_basic", registrationType: "manual",
        clientURI: nil, logoURI: nil, redirectURIs: ["https://app.example.com/cb"],
        grantTypes: ["authorization_code", "refresh_token"], responseTypes: ["code"],
        scope: "openid email profile", createdAt: 0, updatedAt: 0)

    @Test("scopes: the default is email, unknown ones are named, registrations and consents are compared")
    func scopes() throws {
        #expect(try OAuthScopes.parse(nil).get() == ["email"])
        #expect(try OAuthScopes.parse("  ").get() == ["email"])
        #expect(try OAuthScopes.parse("openid email openid").get() == ["openid", "email"])
        #expect(throws: OAuthScopes.Unknown.self) { try OAuthScopes.parse("openid admin").get() }
        #expect(OAuthScopes.notAllowed(["openid", "phone", "company"], client: Self.client) == ["phone", "company"])
        #expect(OAuthScopes.covers(granted: ["openid", "email"], requested: ["email"]))
        #expect(!OAuthScopes.covers(granted: ["email"], requested: ["email", "profile"]))
        #expect(OAuthScopes.merged(["profile", "openid"], ["email"]) == ["openid", "email", "profile"])
    }

    @Test("client credentials: Basic, post and none are read; a public secret and a wrong method are refused")
    func credentials() throws {
        let basic = "Basic " + Data("\(Self.client.id):s3cret".utf8).base64EncodedString()
        let read = try OAuthClientCredentials.read(authorization: basic, form: [:]).get()
        #expect(read == OAuthClientCredentials(clientID: Self.client.id, secret: "s3cret", method: .basic))
        #expect(OAuthClientCredentials.check(try #require(read), against: Self.client) == nil)
        let post = try #require(
            try OAuthClientCredentials.read(
                authorization: nil, form: ["client_id": Self.client.id, "client_secret": "s3cret"]
            ).get())
        #expect(OAuthClientCredentials.check(post, against: Self.client)?.error == "invalid_client")
        let wrong = OAuthClientCredentials(clientID: Self.client.id, secret: "nope", method: .basic)
        #expect(OAuthClientCredentials.check(wrong, against: Self.client)?.status == 401)
        var publicClient = Self.client
        publicClient.secretHash = nil
        let publicOne = OAuthClient(
            id: publicClient.id, name: "CLI", type: .public, secretHash: nil, authMethod: "none",
            registrationType: "manual", clientURI: nil, logoURI: nil, redirectURIs: [], grantTypes: [],
            responseTypes: ["code"], scope: "openid", createdAt: 0, updatedAt: 0)
        #expect(
            OAuthClientCredentials.check(
                OAuthClientCredentials(clientID: publicOne.id, secret: nil, method: .none), against: publicOne) == nil)
        #expect(
            OAuthClientCredentials.check(
                OAuthClientCredentials(clientID: publicOne.id, secret: "x", method: .post), against: publicOne)?
                .error == "invalid_client")
        #expect(OAuthClientCredentials.check(wrong, against: nil)?.error == "invalid_client")
        if case .success = OAuthClientCredentials.read(authorization: "Basic !!!", form: [:]) {
            Issue.record("malformed Basic credentials were read")
        }
        #expect(try OAuthClientCredentials.read(authorization: nil, form: [:]).get() == nil)
    }

    @Test("the authorization request: acr_values, PKCE and prompt are checked in order, the state goes back")
    func authorizeRequest() async throws {
        let base = [
            "client_id": Self.client.id, "redirect_uri": "https://app.example.com/cb", "response_type": "code",
            "code_challenge": String(repeating: "a", count: 43), "code_challenge_method": "S256", "state": "s",
        ]
        let find: (String) async throws -> OAuthClient? = { $0 == Self.client.id ? Self.client : nil }
        let parsed = try await AuthorizeRequest.parse(base.merging(["acr_values": "urn:x:aal2"]) { $1 }, find: find)
        #expect(try parsed.get().acr == "aal2")
        #expect(try parsed.get().scope == ["email"])
        let refused = try await AuthorizeRequest.parse(base.merging(["prompt": "sometimes"]) { $1 }, find: find)
        guard case .failure(let refusal) = refused else { Issue.record("a bad prompt passed"); return }
        #expect(refusal.error.error == "invalid_request" && refusal.state == "s")
        await #expect(throws: APIError.self) {
            _ = try await AuthorizeRequest.parse(
                base.merging(["redirect_uri": "https://app.example.com/cb/"]) { $1 }, find: find)
        }
        #expect(AuthorizeRequest.acr("aal1 aal2") == "aal2" && AuthorizeRequest.acr("aal1") == nil)
    }

    @Test("device codes: eight letters without vowels, typed in any case with or without the dash")
    func userCodes() {
        let code = DeviceUserCode.make()
        #expect(code.count == 8 && code.allSatisfy(DeviceUserCode.alphabet.contains))
        #expect(DeviceUserCode.normalize(DeviceUserCode.display(code).lowercased()) == code)
        #expect(DeviceUserCode.normalize("bcdf ghjk") == "BCDFGHJK")
        #expect(DeviceUserCode.normalize("ABCD-EFGH") == nil)
        #expect(DeviceUserCode.normalize("BCDF") == nil)
    }

    @Test("a device's poll: pending, slow_down within the interval, denied, expired, used, approved")
    func devicePolls() {
        let now: Int64 = 1_000_000
        func verdict(_ status: OAuthAuthorizationRow.Status, expires: Int64 = 2_000_000, polled: Int64? = nil)
            -> DevicePoll
        {
            DevicePoll.verdict(status: status, expiresAt: expires, polledAt: polled, interval: 5, now: now)
        }
        #expect(verdict(.pending) == .pending)
        #expect(verdict(.pending, polled: now - 4_999) == .slowDown)
        #expect(verdict(.pending, polled: now - 5_000) == .pending)
        #expect(verdict(.pending, expires: now) == .expired)
        #expect(verdict(.approved) == .approved)
        #expect(verdict(.denied) == .denied)
        #expect(verdict(.exchanged) == .used)
    }

    @Test("a request's session: prompt=login wants a later sign-in, max_age one near the request, aal2 a second factor")
    func freshness() throws {
        let now = Date(timeIntervalSince1970: 10_000)
        func identity(signedInAt: Int64, aal: AssuranceLevel = .aal1, method: String = "password") -> Identity {
            let claims = AccessTokenClaims(
                iss: "i", aud: "authenticated", sub: "u", exp: 20_000, iat: 9_990, nbf: 9_990, email: "a@b.c",
                phone: "", role: "authenticated", aal: aal.rawValue,
                amr: [AuthenticationMethod(method: method, timestamp: signedInAt)], sessionID: "s", sid: "s",
                isAnonymous: false)
            return Identity(
                accountID: "u", sessionID: "s", email: "a@b.c", companyID: nil, parentSessionID: nil, claims: claims,
                aal: aal)
        }
        func row(prompt: String? = nil, maxAge: Int64? = nil, acr: String? = nil) -> OAuthAuthorizationRow {
            OAuthAuthorizationRow(
                id: "r", kind: .code, clientID: "c", accountID: nil, redirectURI: "x", scope: "email", state: nil,
                nonce: nil, codeChallenge: nil, acr: acr, maxAge: maxAge, prompt: prompt, status: .pending,
                userCode: nil, createdAt: 9_000_000, expiresAt: 11_000_000)
        }
        #expect(throws: OAuthAuthorizationNeed.signIn) {
            try OAuthAuthorizations.check(row(prompt: "login"), identity: identity(signedInAt: 8_000), now: now)
        }
        try OAuthAuthorizations.check(row(prompt: "login"), identity: identity(signedInAt: 9_500), now: now)
        #expect(throws: OAuthAuthorizationNeed.signIn) {
            try OAuthAuthorizations.check(row(maxAge: 60), identity: identity(signedInAt: 8_900), now: now)
        }
        // Measured from the request (at 9,000 s), not from the click: a long read of the page still approves.
        try OAuthAuthorizations.check(row(maxAge: 60), identity: identity(signedInAt: 8_950), now: now)
        // A company login's own sign-in does not count: its account session's does.
        #expect(throws: OAuthAuthorizationNeed.signIn) {
            try OAuthAuthorizations.check(
                row(prompt: "login"), identity: identity(signedInAt: 9_990), now: now,
                amr: [AuthenticationMethod(method: "password", timestamp: 8_000)])
        }
        #expect(throws: OAuthAuthorizationNeed.secondFactor) {
            try OAuthAuthorizations.check(row(acr: "aal2"), identity: identity(signedInAt: 9_990), now: now)
        }
        try OAuthAuthorizations.check(row(acr: "aal2"), identity: identity(signedInAt: 9_990, aal: .aal2), now: now)
        try OAuthAuthorizations.check(
            row(acr: "aal2"), identity: identity(signedInAt: 9_990, method: "passkey"), now: now)
    }
}
