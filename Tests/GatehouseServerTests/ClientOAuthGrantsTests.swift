import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's list of the apps an account let in through the server's OAuth provider, against the server through its
/// router: a grant made by the real flow (a client registered over the admin API, `/oauth/authorize`, the consent
/// API with the account's token) is listed with the app's name and scopes, revoked, and gone; revoking it again, or
/// any grant call while the provider is off, is a typed error.
@Suite("GatehouseClient OAuth grants")
struct ClientOAuthGrantsTests {
    /// Where the test's app wants its code sent (registered exactly so).
    static let redirectURI = "https://partner.example/callback"
    /// RFC 7636's example PKCE pair (appendix B).
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

    @Test("An approved app is listed (name, scopes); revoked, it is signed out and gone; revoked again, refused")
    func listAndRevoke() async throws {
        try await AccountHarness.with({ $0.auth.oauthServer.enabled = true }) { h in
            let device = try AppDevice(h)
            let email = try await device.signUp(h, "grants")
            #expect(try await device.client.auth.oauthGrants().isEmpty)

            let clientID = try await Self.registerClient(h, name: "Partner Dashboard")
            let code = try await Self.approve(h, device, clientID: clientID, scope: "openid email")
            let app = try await Self.exchange(h, code: code, clientID: clientID)
            #expect(try await h.client.get("/auth/v1/oauth/userinfo", bearer: app.access).status == 200)

            let grants = try await device.client.auth.oauthGrants()
            let grant = try #require(grants.first)
            #expect(grants.count == 1)
            #expect(grant.id == clientID && grant.clientID == clientID && grant.name == "Partner Dashboard")
            #expect(grant.url == URL(string: "https://partner.example"))
            #expect(Set(grant.scopes) == ["openid", "email"])
            #expect(abs(grant.grantedAt.timeIntervalSince(h.clock.now)) < 5)

            try await device.client.auth.revokeOAuthGrant(clientID: clientID)
            #expect(try await device.client.auth.oauthGrants().isEmpty)
            // The app is signed out: its access token and its refresh token stop working at once.
            #expect(try await h.client.get("/auth/v1/oauth/userinfo", bearer: app.access).status == 401)
            let refreshed = try await Self.token(
                h, ["grant_type": "refresh_token", "refresh_token": app.refresh, "client_id": clientID])
            #expect(
                refreshed.status == 400 && refreshed.json["error"] as? String == "invalid_grant", "\(refreshed.body)")
            do throws(GatehouseError) {
                try await device.client.auth.revokeOAuthGrant(clientID: clientID)
                Issue.record("a revoked grant was revoked again")
            } catch {
                #expect(error.code == .oauthConsentNotFound)
                guard case .server(let status, _, _) = error else {
                    Issue.record("not the server's refusal: \(error)")
                    return
                }
                #expect(status == 404)
            }
            // The account's own session is untouched by revoking an app's: the server still answers it.
            #expect(try await device.client.auth.user().email == email)
        }
    }

    @Test("Provider off: listing and revoking say oauth_server_disabled")
    func providerOff() async throws {
        try await AccountHarness.with { h in
            let device = try AppDevice(h)
            try await device.signUp(h, "grants-off")
            for attempt in 0..<2 {
                do throws(GatehouseError) {
                    if attempt == 0 {
                        _ = try await device.client.auth.oauthGrants()
                    } else {
                        try await device.client.auth.revokeOAuthGrant(clientID: UUID().uuidString.lowercased())
                    }
                    Issue.record("grant call \(attempt) answered while the provider is off")
                } catch {
                    #expect(error.code == .oauthServerDisabled)
                }
            }
            #expect(await device.client.auth.currentSession != nil)
        }
    }

    // MARK: Helpers

    /// Registers a public client over the admin API with a fresh service key; answers its client id.
    static func registerClient(_ h: AccountHarness, name: String) async throws -> String {
        let (_, key) = try await AdminClient.mint(h)
        let created = try await AdminClient(client: h.client, key: key).send(
            .post, "/auth/v1/admin/oauth/clients",
            [
                "client_name": name, "client_uri": "https://partner.example", "redirect_uris": [redirectURI],
                "client_type": "public", "token_endpoint_auth_method": "none",
            ])
        #expect(created.status == 201, "\(created.body)")
        return try #require(created.json["client_id"] as? String)
    }

    /// Walks the app's authorization as its browser and the account's consent page would: `/oauth/authorize` sends
    /// the browser to the consent page with `authorization_id`; the page reads the request and approves it with the
    /// account's token, and the app gets its code (answered).
    static func approve(_ h: AccountHarness, _ device: AppDevice, clientID: String, scope: String) async throws
        -> String
    {
        var authorize = try #require(URLComponents(string: "/auth/v1/oauth/authorize"))
        authorize.queryItems = [
            URLQueryItem(name: "client_id", value: clientID), URLQueryItem(name: "redirect_uri", value: redirectURI),
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "scope", value: scope),
            URLQueryItem(name: "state", value: "xyz"),
            URLQueryItem(name: "code_challenge", value: challenge),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        let path = try #require(authorize.string).replacingOccurrences(of: "+", with: "%2B")
        let redirected = try await h.client.get(path)
        #expect(redirected.status == 302, "\(redirected.body)")
        let location = try #require(redirected.headers["location"].flatMap(URLComponents.init(string:)))
        let id = try #require(location.queryItems?.first { $0.name == "authorization_id" }?.value)

        let token = try #require(await device.client.auth.currentSession?.accessToken)
        let details = try await h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: token)
        #expect(details.status == 200, "\(details.body)")
        #expect((details.json["client"] as? [String: Any])?["id"] as? String == clientID)
        let consent = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: token)
        #expect(consent.status == 200, "\(consent.body)")
        let back = try #require(consent.json["redirect_url"].flatMap { $0 as? String }.flatMap(URLComponents.init))
        #expect(back.host == "partner.example" && back.queryItems?.first { $0.name == "state" }?.value == "xyz")
        return try #require(back.queryItems?.first { $0.name == "code" }?.value)
    }

    /// The app exchanges its code with the PKCE verifier, as a public client (no secret); answers its tokens.
    static func exchange(_ h: AccountHarness, code: String, clientID: String) async throws
        -> (access: String, refresh: String)
    {
        let answer = try await token(
            h,
            [
                "grant_type": "authorization_code", "code": code, "client_id": clientID, "code_verifier": verifier,
                "redirect_uri": redirectURI,
            ])
        #expect(answer.status == 200, "\(answer.body)")
        return (
            try #require(answer.json["access_token"] as? String), try #require(answer.json["refresh_token"] as? String)
        )
    }

    /// A form post to the token endpoint.
    static func token(_ h: AccountHarness, _ form: [String: String]) async throws -> HTTPReply {
        var components = URLComponents()
        components.queryItems = form.map { URLQueryItem(name: $0.key, value: $0.value) }
        let body = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        return try await h.http.send(
            .POST, h.server.baseURL + "/auth/v1/oauth/token", rawBody: body,
            headers: h.client.headers + [("Content-Type", "application/x-www-form-urlencoded")])
    }
}
