import Foundation
import Testing

@testable import GatehouseServer

/// A provider on a router harness with the OAuth server on: clients registered by the operator, codes approved by a
/// signed-in user through the consent API, and one helper per endpoint.
private struct Provider {
    let h: AccountHarness
    let api: API

    static func with(_ body: (Provider) async throws -> Void) async throws {
        try await AccountHarness.with({ $0.auth.oauthServer.enabled = true }) { h in
            try await body(Provider(h: h, api: try API(h.server.services)))
        }
    }

    static let redirectURI = "https://app.example.com/callback"

    /// A client registered by the operator; the secret of a confidential one.
    func client(
        _ type: String = "confidential", grants: [String] = ["authorization_code", "refresh_token"],
        scope: String? = nil
    ) async throws -> (id: String, secret: String?) {
        var metadata = OAuthClientMetadata()
        metadata.name = "Test app"
        metadata.redirectURIs = [Self.redirectURI]
        metadata.clientType = type
        metadata.grantTypes = grants
        metadata.scope = scope
        let (client, secret) = try await api.oauthClients.register(metadata, by: .commandLine)
        return (client.id, secret)
    }

    /// Posts a form to `/auth/v1/oauth/<path>`, authenticating as `basic`: with Basic when it has a secret, else (a
    /// public client) by `client_id` in the form.
    func post(_ path: String, _ fields: [String: String], basic: (String, String?)? = nil) async throws -> HTTPReply {
        var fields = fields
        var basic = basic
        if let (id, secret) = basic, secret == nil {
            fields["client_id"] = id
            basic = nil
        }
        var components = URLComponents()
        components.queryItems = fields.map { URLQueryItem(name: $0.key, value: $0.value) }
        let body = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        var headers = h.client.headers + [("Content-Type", "application/x-www-form-urlencoded")]
        if let (id, secret) = basic {
            headers.append(("Authorization", "Basic " + Data("\(id):\(secret ?? "")".utf8).base64EncodedString()))
        }
        return try await h.http.send(
            .POST, h.server.baseURL + "/auth/v1/oauth/" + path, rawBody: body, headers: headers)
    }

    /// A verifier and its S256 challenge.
    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Secrets.token() + Secrets.token()
        return (verifier, PKCE.s256(verifier))
    }

    /// Walks `/oauth/authorize` and the consent API as `user`: the approved code and its verifier.
    func approvedCode(_ clientID: String, user: SignedIn, scope: String = "openid email profile", nonce: String = "n-1")
        async throws -> (code: String, verifier: String)
    {
        let (verifier, challenge) = Self.pkce()
        let location = try await api.oauth.authorize(
            [
                "client_id": clientID, "redirect_uri": Self.redirectURI, "response_type": "code", "scope": scope,
                "state": "s-1", "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256",
            ], from: ClientInfo(headers: [:], peerAddress: "127.0.0.1", settings: AuthSettings()))
        let id = try #require(
            URLComponents(string: location)?.queryItems?.first { $0.name == "authorization_id" }?.value)
        let opened = try await h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: user.access)
        #expect(opened.status == 200)
        var redirect = opened.json["redirect_url"] as? String
        if redirect == nil {
            let decided = try await h.client.post(
                "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: user.access)
            #expect(decided.status == 200)
            redirect = decided.json["redirect_url"] as? String
        }
        let items = URLComponents(string: try #require(redirect))?.queryItems ?? []
        #expect(items.first { $0.name == "state" }?.value == "s-1")
        return (try #require(items.first { $0.name == "code" }?.value), verifier)
    }

    /// Exchanges a code at the token endpoint.
    func exchange(_ code: String, verifier: String?, client: (String, String?)) async throws -> HTTPReply {
        var fields = ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI]
        fields["code_verifier"] = verifier
        return try await post("token", fields, basic: client)
    }

    func userinfo(_ access: String) async throws -> HTTPReply {
        try await h.client.get("/auth/v1/oauth/userinfo", bearer: access)
    }

    /// The claims of a JWT, unverified (the test checks the signature separately where it matters).
    static func claims(_ jwt: String) throws -> [String: Any] { try CompanyFlowTests.claims(jwt) }
}

private func error(_ reply: HTTPReply) -> String? { reply.json["error"] as? String }

@Suite("OAuth provider: token endpoint, id tokens, userinfo, revocation, introspection, devices, logout, discovery")
struct OAuthTokenTests {
    @Test("code flow: tokens with no-store, an id token signed by the JWKS keys, userinfo by scope, refresh")
    func codeFlow() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let reply = try await p.exchange(code, verifier: verifier, client: client)
            #expect(reply.status == 200)
            #expect(reply.headers["cache-control"] == "no-store")
            #expect(reply.headers["pragma"] == "no-cache")
            #expect(reply.json["token_type"] as? String == "bearer")
            #expect(reply.json["scope"] as? String == "openid email profile")
            let access = try #require(reply.json["access_token"] as? String)
            let refresh = try #require(reply.json["refresh_token"] as? String)
            let idToken = try #require(reply.json["id_token"] as? String)

            let verified = try await p.api.keys.verify(idToken, as: OAuthIDTokenClaims.self)
            #expect(verified.iss == p.h.server.baseURL + "/auth/v1")
            #expect(verified.aud == client.id && verified.azp == client.id)
            #expect(verified.sub == user.userID)
            #expect(verified.nonce == "n-1")
            #expect(verified.acr == "aal1")
            #expect(verified.atHash == OAuthIDTokenClaims.accessTokenHash(access))
            #expect(verified.email != nil && verified.emailVerified == true)
            let accessClaims = try Provider.claims(access)
            #expect(verified.sid == accessClaims["session_id"] as? String)
            #expect(accessClaims["client_id"] as? String == client.id)

            let info = try await p.userinfo(access)
            #expect(info.status == 200)
            #expect(info.json["sub"] as? String == user.userID)
            #expect(info.json["email_verified"] as? Bool == true)
            #expect(info.json["name"] != nil)
            #expect(info.json["phone"] == nil)

            let refreshed = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: client)
            #expect(refreshed.status == 200)
            #expect(refreshed.json["refresh_token"] as? String != refresh)
            let again = try #require(refreshed.json["id_token"] as? String)
            #expect(try Provider.claims(again)["nonce"] == nil)
            #expect(try Provider.claims(again)["aud"] as? String == client.id)

            // The account's own token is not a client's: userinfo refuses it as RFC 6750 says.
            let own = try await p.userinfo(user.access)
            #expect(own.status == 401)
            #expect(own.headers["www-authenticate"]?.contains("error=\"invalid_token\"") == true)
        }
    }

    @Test("PKCE: a missing or wrong verifier is invalid_grant, and the code still works with the right one")
    func pkceRefusals() async throws {
        try await Provider.with { p in
            let client = try await p.client("public")
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let missing = try await p.exchange(code, verifier: nil, client: (client.id, nil))
            #expect(missing.status == 400 && error(missing) == "invalid_grant")
            let wrong = try await p.exchange(code, verifier: Provider.pkce().verifier, client: (client.id, nil))
            #expect(wrong.status == 400 && error(wrong) == "invalid_grant")
            let form = try await p.post(
                "token",
                [
                    "grant_type": "authorization_code", "code": code, "redirect_uri": Provider.redirectURI,
                    "code_verifier": verifier, "client_id": client.id,
                ])
            #expect(form.status == 200)
        }
    }

    @Test("a code used twice is invalid_grant and the tokens of its first exchange stop working")
    func codeReplay() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let first = try await p.exchange(code, verifier: verifier, client: client)
            let access = try #require(first.json["access_token"] as? String)
            let refresh = try #require(first.json["refresh_token"] as? String)
            #expect(try await p.userinfo(access).status == 200)

            let second = try await p.exchange(code, verifier: verifier, client: client)
            #expect(second.status == 400 && error(second) == "invalid_grant")
            #expect(try await p.userinfo(access).status == 401)
            let refreshed = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: client)
            #expect(error(refreshed) == "invalid_grant")
        }
    }

    @Test("a replayed refresh token is invalid_grant and ends the session; another client cannot refresh it")
    func refreshReplay() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let other = try await p.client()
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let first = try await p.exchange(code, verifier: verifier, client: client)
            let refresh = try #require(first.json["refresh_token"] as? String)
            let stolen = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: other)
            #expect(error(stolen) == "invalid_grant")

            let second = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: client)
            let next = try #require(second.json["refresh_token"] as? String)
            let nextAccess = try #require(second.json["access_token"] as? String)
            p.h.clock.advance(by: 30)
            let replay = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: client)
            #expect(replay.status == 400 && error(replay) == "invalid_grant")
            let after = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": next], basic: client)
            #expect(error(after) == "invalid_grant")
            #expect(try await p.userinfo(nextAccess).status == 401)
        }
    }

    @Test("client authentication and grants: invalid_client (401, Basic), unauthorized_client, unsupported_grant_type")
    func clientRefusals() async throws {
        try await Provider.with { p in
            let publicClient = try await p.client("public")
            let confidential = try await p.client()
            let secretOnPublic = try await p.post(
                "token",
                [
                    "grant_type": "refresh_token", "refresh_token": "x", "client_id": publicClient.id,
                    "client_secret": "guess",
                ])
            #expect(secretOnPublic.status == 401 && error(secretOnPublic) == "invalid_client")
            let wrongSecret = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": "x"], basic: (confidential.id, "wrong"))
            #expect(wrongSecret.status == 401 && error(wrongSecret) == "invalid_client")
            #expect(wrongSecret.headers["www-authenticate"] == "Basic realm=\"gatehouse\"")
            let anonymous = try await p.post("token", ["grant_type": "refresh_token", "refresh_token": "x"])
            #expect(anonymous.status == 401 && error(anonymous) == "invalid_client")
            let notRegistered = try await p.post("token", ["grant_type": "client_credentials"], basic: confidential)
            #expect(notRegistered.status == 400 && error(notRegistered) == "unauthorized_client")
            let unknown = try await p.post("token", ["grant_type": "password"], basic: confidential)
            #expect(unknown.status == 400 && error(unknown) == "unsupported_grant_type")
            let none = try await p.post("token", [:], basic: confidential)
            #expect(error(none) == "invalid_request")
        }
    }

    @Test("client credentials: a token for the client, no refresh token, refused by the account API, introspectable")
    func clientCredentials() async throws {
        try await Provider.with { p in
            let client = try await p.client(grants: ["client_credentials"])
            let reply = try await p.post("token", ["grant_type": "client_credentials"], basic: client)
            #expect(reply.status == 200)
            #expect(reply.json["refresh_token"] == nil && reply.json["id_token"] == nil)
            let token = try #require(reply.json["access_token"] as? String)
            #expect(try Provider.claims(token)["sub"] as? String == client.id)
            #expect(try Provider.claims(token)["aud"] as? String == p.h.server.baseURL + "/auth/v1")

            // No session: our own API does not take it.
            await #expect(throws: SessionService.TokenFailure.self) {
                _ = try await p.api.access.sessions.identify(bearer: token)
            }
            #expect(try await p.h.client.user(token).status != 200)
            #expect(try await p.userinfo(token).status == 401)

            let seen = try await p.post("introspect", ["token": token], basic: client)
            #expect(seen.json["active"] as? Bool == true)
            #expect(seen.json["sub"] as? String == client.id)

            let scoped = try await p.post(
                "token", ["grant_type": "client_credentials", "scope": "email"], basic: client)
            #expect(error(scoped) == "invalid_scope")
        }
    }

    @Test("device flow: invalid_scope, authorization_pending, slow_down, approval, expired_token")
    func deviceFlow() async throws {
        try await Provider.with { p in
            let device = try await p.client(
                "public", grants: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
                scope: "openid email")
            let refused = try await p.post("device_authorization", ["client_id": device.id, "scope": "openid profile"])
            #expect(refused.status == 400 && error(refused) == "invalid_scope")
            let started = try await p.post("device_authorization", ["client_id": device.id, "scope": "openid email"])
            #expect(started.status == 200)
            let deviceCode = try #require(started.json["device_code"] as? String)
            let userCode = try #require(started.json["user_code"] as? String)
            #expect(started.json["verification_uri"] as? String == p.api.oauth.verificationURI)
            #expect((started.json["verification_uri_complete"] as? String)?.hasSuffix("user_code=\(userCode)") == true)
            #expect(started.json["interval"] as? Int == 5)

            let poll = [
                "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": deviceCode,
                "client_id": device.id,
            ]
            #expect(error(try await p.post("token", poll)) == "authorization_pending")
            #expect(error(try await p.post("token", poll)) == "slow_down")

            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let id = try #require(try await p.api.oauth.deviceRequest(userCode: userCode))
            #expect(try await p.h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: user.access).status == 200)
            let approved = try await p.h.client.post(
                "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: user.access)
            #expect(approved.status == 200)
            p.h.clock.advance(by: 11)
            let tokens = try await p.post("token", poll)
            #expect(tokens.status == 200)
            #expect(tokens.json["id_token"] != nil && tokens.json["refresh_token"] != nil)
            #expect(error(try await p.post("token", poll)) == "invalid_grant")

            let late = try await p.post("device_authorization", ["client_id": device.id])
            let lateCode = try #require(late.json["device_code"] as? String)
            p.h.clock.advance(by: 601)
            let expired = try await p.post("token", poll.merging(["device_code": lateCode]) { $1 })
            #expect(expired.status == 400 && error(expired) == "expired_token")
        }
    }

    @Test("revocation ends the client's session; unknown or another client's token: 200 without effect")
    func revocation() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let other = try await p.client()
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let tokens = try await p.exchange(code, verifier: verifier, client: client)
            let access = try #require(tokens.json["access_token"] as? String)
            let refresh = try #require(tokens.json["refresh_token"] as? String)

            #expect(try await p.post("revoke", ["token": "nothing-like-a-token"], basic: client).status == 200)
            #expect(try await p.post("revoke", ["token": refresh], basic: other).status == 200)
            #expect(try await p.post("revoke", ["token": access], basic: other).status == 200)
            #expect(try await p.userinfo(access).status == 200)

            let revoked = try await p.post(
                "revoke", ["token": refresh, "token_type_hint": "refresh_token"], basic: client)
            #expect(revoked.status == 200)
            #expect(try await p.userinfo(access).status == 401)
            let refreshed = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": refresh], basic: client)
            #expect(error(refreshed) == "invalid_grant")
            #expect(error(try await p.post("revoke", ["token": refresh])) == "invalid_client")
        }
    }

    @Test("introspection: confidential clients only, active for the client's own live tokens")
    func introspection() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let other = try await p.client()
            let publicClient = try await p.client("public")
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let tokens = try await p.exchange(code, verifier: verifier, client: client)
            let access = try #require(tokens.json["access_token"] as? String)
            let refresh = try #require(tokens.json["refresh_token"] as? String)

            let seen = try await p.post("introspect", ["token": access], basic: client)
            #expect(seen.status == 200)
            #expect(seen.json["active"] as? Bool == true)
            #expect(seen.json["client_id"] as? String == client.id)
            #expect(seen.json["sub"] as? String == user.userID)
            #expect(seen.json["scope"] as? String == "openid email profile")
            #expect(seen.json["token_type"] as? String == "Bearer")
            #expect(seen.json["sid"] != nil && seen.json["exp"] != nil)
            #expect(try await p.post("introspect", ["token": refresh], basic: client).json["active"] as? Bool == true)

            let foreign = try await p.post("introspect", ["token": access], basic: other)
            #expect(foreign.json as NSDictionary == ["active": false] as NSDictionary)
            #expect(try await p.post("introspect", ["token": "x.y.z"], basic: client).json["active"] as? Bool == false)
            let open = try await p.post("introspect", ["token": access, "client_id": publicClient.id])
            #expect(open.status == 401 && error(open) == "invalid_client")
            #expect(
                try await p.post("introspect", ["token": user.access], basic: client).json["active"] as? Bool == false)
        }
    }

    @Test("RP-initiated logout: the hint's session ends, the browser goes to the registered URI with state")
    func logout() async throws {
        try await Provider.with { p in
            let client = try await p.client()
            let user = try await p.h.confirmedAccount(AccountHarness.newEmail())
            let (code, verifier) = try await p.approvedCode(client.id, user: user)
            let tokens = try await p.exchange(code, verifier: verifier, client: client)
            let access = try #require(tokens.json["access_token"] as? String)
            let idToken = try #require(tokens.json["id_token"] as? String)
            let hint = idToken.addingPercentEncoding(
                withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-_.")))!
            let target = Provider.redirectURI.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

            let foreign = try await p.h.client.get(
                "/auth/v1/oauth/logout?id_token_hint=\(hint)&post_logout_redirect_uri=https%3A%2F%2Fevil.example")
            #expect(foreign.status == 400 && error(foreign) == "invalid_request")
            #expect(try await p.userinfo(access).status == 200)
            // Without a hint no redirect is made, even to a registered URI: that would be anyone's open redirect.
            let unhinted = try await p.h.client.get(
                "/auth/v1/oauth/logout?client_id=\(client.id)&post_logout_redirect_uri=\(target)")
            #expect(unhinted.status == 400 && error(unhinted) == "invalid_request")

            p.h.clock.advance(by: 7200)
            let out = try await p.h.client.get(
                "/auth/v1/oauth/logout?id_token_hint=\(hint)&post_logout_redirect_uri=\(target)&state=bye")
            #expect(out.status == 302)
            #expect(out.headers["location"] == Provider.redirectURI + "?state=bye")
            let refreshed = try await p.post(
                "token", ["grant_type": "refresh_token", "refresh_token": tokens.json["refresh_token"] as! String],
                basic: client)
            #expect(error(refreshed) == "invalid_grant")
            #expect(try await p.h.client.get("/auth/v1/oauth/logout").status == 200)
        }
    }

    @Test("discovery: the whole document when on; only issuer and keys when off, where the rest is 404")
    func discovery() async throws {
        try await Provider.with { p in
            let issuer = p.h.server.baseURL + "/auth/v1"
            let document = try await p.h.client.get("/auth/v1/.well-known/openid-configuration")
            #expect(document.status == 200)
            #expect(document.json["issuer"] as? String == issuer)
            #expect(document.json["token_endpoint"] as? String == issuer + "/oauth/token")
            #expect(document.json["jwks_uri"] as? String == issuer + "/.well-known/jwks.json")
            #expect(document.json["end_session_endpoint"] as? String == issuer + "/oauth/logout")
            #expect(document.json["code_challenge_methods_supported"] as? [String] == ["S256"])
            #expect((document.json["grant_types_supported"] as? [String])?.count == 4)
            #expect(document.json["registration_endpoint"] == nil)
            let server = try await p.h.client.get("/auth/v1/.well-known/oauth-authorization-server")
            #expect(server.json["authorization_endpoint"] as? String == issuer + "/oauth/authorize")
        }
        try await AccountHarness.with { h in
            let document = try await h.client.get("/auth/v1/.well-known/openid-configuration")
            #expect(document.status == 200)
            #expect(Set(document.json.keys) == ["issuer", "jwks_uri", "id_token_signing_alg_values_supported"])
            let server = try await h.client.get("/auth/v1/.well-known/oauth-authorization-server")
            #expect(server.status == 404 && server.json["error_code"] as? String == "oauth_server_disabled")
            let token = try await h.http.send(
                .POST, h.server.baseURL + "/auth/v1/oauth/token", rawBody: "grant_type=client_credentials",
                headers: [("Content-Type", "application/x-www-form-urlencoded")])
            #expect(token.status == 404 && token.json["error_code"] as? String == "oauth_server_disabled")
            #expect(try await h.client.get("/auth/v1/oauth/userinfo").status == 404)
        }
    }
}
