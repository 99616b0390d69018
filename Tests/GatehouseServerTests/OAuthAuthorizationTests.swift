import Foundation
import Testing

@testable import GatehouseServer

/// The OAuth provider's authorization side through the router: `/oauth/authorize` and its refusals, the consent API
/// an app's own page calls (GoTrue's `/oauth/authorizations/{id}`), auto-approval under an earlier consent, step-up
/// to aal2 by `acr_values`, a user's grants and their revocation, and Gatehouse's own consent page.
@Suite("OAuth provider: authorization, consent, grants")
struct OAuthAuthorizationTests {
    static let redirect = "https://app.example.com/callback"
    /// A PKCE pair: the challenge is the verifier's S256.
    static let verifier = "dBjftJeZ4CVP-mJ0kVuCnzMAIHu7LEd2GqR6KbiJhfo"
    static let challenge = "n_-aJEbarLubFR3cQED4Xzt5eCRf3keIKy9GCgif2tM"

    /// A harness with the provider on, a service key, and one public client.
    static func start(_ configure: @escaping (inout GatehouseConfiguration) -> Void = { _ in }) async throws
        -> (AccountHarness, AdminClient, String)
    {
        let h = try await AccountHarness.start {
            $0.auth.oauthServer.enabled = true
            configure(&$0)
        }
        let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
        let created = try await admin.send(
            .post, "/auth/v1/admin/oauth/clients",
            ["client_name": "Dashboard", "redirect_uris": [redirect], "client_type": "public"])
        #expect(created.status == 201, "\(created.body)")
        return (h, admin, try #require(created.json["client_id"] as? String))
    }

    static func authorizeQuery(_ clientID: String, scope: String = "openid email", extra: String = "") -> String {
        "/auth/v1/oauth/authorize?response_type=code&client_id=\(clientID)"
            + "&redirect_uri=\(redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
            + "&scope=\(scope.replacingOccurrences(of: " ", with: "%20"))&state=xyz"
            + "&code_challenge=\(challenge)&code_challenge_method=S256" + extra
    }

    /// Starts an authorization; answers its id.
    static func authorize(_ h: AccountHarness, _ clientID: String, scope: String = "openid email", extra: String = "")
        async throws -> String
    {
        let reply = try await h.client.get(authorizeQuery(clientID, scope: scope, extra: extra))
        #expect(reply.status == 302, "\(reply.body)")
        let location = try #require(reply.headers["location"].flatMap(URLComponents.init(string:)))
        #expect(location.path == "/account/authorize")
        return try #require(location.queryItems?.first { $0.name == "authorization_id" }?.value)
    }

    static func query(_ url: String) -> [String: String] {
        Dictionary(
            (URLComponents(string: url)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { first, _ in first })
    }

    /// Approves request `id` with `bearer` through GoTrue's consent API; answers the code.
    static func approvedCode(_ h: AccountHarness, _ id: String, bearer: String) async throws -> String {
        let consent = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: bearer)
        #expect(consent.status == 200, "\(consent.body)")
        let redirectURL = try #require(consent.json["redirect_url"] as? String)
        return try #require(Self.query(redirectURL)["code"])
    }

    /// Exchanges `code` at the token endpoint as the public client `clientID`, with the verifier.
    static func exchange(_ h: AccountHarness, _ clientID: String, code: String) async throws -> HTTPReply {
        try await h.client.http.send(
            .POST, h.server.baseURL + "/auth/v1/oauth/token", body: nil,
            rawBody: "grant_type=authorization_code&code=\(code)&client_id=\(clientID)&code_verifier=\(verifier)"
                + "&redirect_uri=\(redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
            headers: h.client.headers + [("Content-Type", "application/x-www-form-urlencoded")])
    }

    @Test("the client and its redirect URI are checked first and refused in JSON; one character off is refused")
    func refusedInJSON() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let missing = try await h.client.get("/auth/v1/oauth/authorize?response_type=code")
        #expect(missing.status == 400 && missing.json["error_code"] as? String == "validation_failed")
        let unknown = try await h.client.get(Self.authorizeQuery(UUID().uuidString))
        #expect(unknown.status == 400 && unknown.json["error_code"] as? String == "oauth_client_not_found")
        let offByOne = try await h.client.get(
            Self.authorizeQuery(clientID).replacingOccurrences(of: "callback", with: "callbacK"))
        #expect(offByOne.status == 400)
        #expect(
            offByOne.json["msg"] as? String == "invalid redirect_uri" || offByOne.body.contains("invalid redirect_uri"))
        #expect(offByOne.headers["location"] == nil)
    }

    @Test("PKCE, the response type and scopes are refused by redirect, with the RFC's error names and the state")
    func refusedByRedirect() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let cases: [(String, String)] = [
            (
                Self.authorizeQuery(clientID).replacingOccurrences(of: "&code_challenge_method=S256", with: ""),
                "invalid_request"
            ),
            (Self.authorizeQuery(clientID).replacingOccurrences(of: "S256", with: "plain"), "invalid_request"),
            (
                Self.authorizeQuery(clientID).replacingOccurrences(
                    of: "code_challenge=\(Self.challenge)", with: "code_challenge=short"),
                "invalid_request"
            ),
            (Self.authorizeQuery(clientID, scope: "openid admin"), "invalid_scope"),
            // The company scope is not in a registration's default: the client may not ask for it.
            (Self.authorizeQuery(clientID, scope: "openid company"), "invalid_scope"),
            (
                Self.authorizeQuery(clientID).replacingOccurrences(
                    of: "response_type=code", with: "response_type=token"),
                "unsupported_response_type"
            ),
        ]
        for (path, error) in cases {
            let reply = try await h.client.get(path)
            #expect(reply.status == 302, "\(path)")
            let location = try #require(reply.headers["location"])
            #expect(location.hasPrefix(Self.redirect + "?"), "\(location)")
            #expect(Self.query(location)["error"] == error, "\(path) → \(location)")
            #expect(Self.query(location)["state"] == "xyz")
            #expect(Self.query(location)["iss"] == h.server.baseURL + "/auth/v1")
        }
        // `S256` in any case is S256.
        _ = try await Self.authorize(h, clientID, extra: "").isEmpty
        let lower = try await h.client.get(Self.authorizeQuery(clientID).replacingOccurrences(of: "S256", with: "s256"))
        #expect(lower.headers["location"]?.contains("/account/authorize?authorization_id=") == true)
    }

    @Test("a user reads the request, approves it, and the client gets a code with its state and the issuer")
    func approve() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let person = try await h.person("oauth-approve")
        let id = try await Self.authorize(h, clientID)
        let details = try await h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: person.account.access)
        #expect(details.status == 200, "\(details.body)")
        #expect(details.json["authorization_id"] as? String == id)
        #expect(details.json["redirect_uri"] as? String == Self.redirect)
        #expect(details.json["scope"] as? String == "openid email")
        #expect((details.json["client"] as? [String: Any])?["name"] as? String == "Dashboard")
        #expect((details.json["client"] as? [String: Any])?["id"] as? String == clientID)
        #expect((details.json["user"] as? [String: Any])?["email"] as? String == person.email)
        // Another user cannot see a request claimed by the first.
        let other = try await h.person("oauth-other")
        let stolen = try await h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: other.account.access)
        #expect(stolen.status == 404 && stolen.json["error_code"] as? String == "oauth_authorization_not_found")
        let consent = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: person.account.access)
        #expect(consent.status == 200, "\(consent.body)")
        let url = try #require(consent.json["redirect_url"] as? String)
        #expect(url.hasPrefix(Self.redirect + "?"))
        let params = Self.query(url)
        #expect((params["code"]?.count ?? 0) >= 32)
        #expect(params["state"] == "xyz")
        #expect(params["iss"] == h.server.baseURL + "/auth/v1")
        // Decided: gone.
        let again = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: person.account.access)
        #expect(again.status == 404)
        // The grant is listed; a second request for the same scopes is approved at once.
        let grants = try await h.client.get("/auth/v1/user/oauth/grants", bearer: person.account.access)
        #expect(grants.status == 200)
        #expect(grants.jsonArray.count == 1)
        #expect(grants.jsonArray.first?["scopes"] as? [String] == ["openid", "email"])
        #expect((grants.jsonArray.first?["client"] as? [String: Any])?["name"] as? String == "Dashboard")
        let second = try await Self.authorize(h, clientID, scope: "email")
        let auto = try await h.client.get("/auth/v1/oauth/authorizations/\(second)", bearer: person.account.access)
        #expect(auto.status == 200)
        #expect((auto.json["redirect_url"] as? String).map { Self.query($0)["code"] != nil } == true)
        #expect(auto.json["authorization_id"] == nil)
        // `prompt=consent` asks again.
        let asked = try await Self.authorize(h, clientID, extra: "&prompt=consent")
        let shown = try await h.client.get("/auth/v1/oauth/authorizations/\(asked)", bearer: person.account.access)
        #expect(shown.json["authorization_id"] as? String == asked)
    }

    @Test("two approvals of one client by one user at once both give a code (two tabs), and one grant is listed")
    func concurrentApprovals() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let person = try await h.person("oauth-tabs")
        let first = try await Self.authorize(h, clientID, extra: "&prompt=consent")
        let second = try await Self.authorize(h, clientID, scope: "openid profile", extra: "&prompt=consent")
        async let one = Self.approvedCode(h, first, bearer: person.account.access)
        async let two = Self.approvedCode(h, second, bearer: person.account.access)
        let codes = try await [one, two]
        #expect(Set(codes).count == 2)
        let grants = try await h.client.get("/auth/v1/user/oauth/grants", bearer: person.account.access).jsonArray
        #expect(grants.count == 1)
    }

    @Test("denying sends access_denied back with the state; prompt=none without consent is consent_required")
    func deny() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let person = try await h.person("oauth-deny")
        let id = try await Self.authorize(h, clientID)
        let denied = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "deny"], bearer: person.account.access)
        let url = try #require(denied.json["redirect_url"] as? String)
        #expect(Self.query(url)["error"] == "access_denied" && Self.query(url)["state"] == "xyz")
        #expect(try await h.client.get("/auth/v1/user/oauth/grants", bearer: person.account.access).jsonArray.isEmpty)
        let silent = try await Self.authorize(h, clientID, extra: "&prompt=none")
        let answer = try await h.client.get("/auth/v1/oauth/authorizations/\(silent)", bearer: person.account.access)
        #expect((answer.json["redirect_url"] as? String).map { Self.query($0)["error"] } == "consent_required")
        let bad = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(silent)/consent", ["action": "maybe"], bearer: person.account.access)
        #expect(bad.status == 400)
    }

    @Test("acr_values=aal2 needs a second factor; max_age needs a recent sign-in")
    func stepUp() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let person = try await h.person("oauth-aal2")
        let id = try await Self.authorize(h, clientID, extra: "&acr_values=aal2")
        let refused = try await h.client.get("/auth/v1/oauth/authorizations/\(id)", bearer: person.account.access)
        #expect(refused.status == 403 && refused.json["error_code"] as? String == "insufficient_aal")
        // `prompt=none` asks nothing: the client hears interaction_required instead.
        let silent = try await Self.authorize(h, clientID, extra: "&acr_values=aal2&prompt=none")
        let quiet = try await h.client.get("/auth/v1/oauth/authorizations/\(silent)", bearer: person.account.access)
        #expect((quiet.json["redirect_url"] as? String).map { Self.query($0)["error"] } == "interaction_required")
        h.clock.advance(by: 120)
        let old = try await Self.authorize(h, clientID, extra: "&max_age=60")
        let stale = try await h.client.get("/auth/v1/oauth/authorizations/\(old)", bearer: person.account.access)
        #expect(stale.status == 403 && stale.json["error_code"] as? String == "reauthentication_needed")
    }

    @Test("revoking a grant ends the client's sessions; a second revocation is oauth_consent_not_found")
    func revoke() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let person = try await h.person("oauth-revoke")
        let id = try await Self.authorize(h, clientID)
        let code = try await Self.approvedCode(h, id, bearer: person.account.access)
        let token = try await Self.exchange(h, clientID, code: code)
        #expect(token.status == 200, "\(token.body)")
        let access = try #require(token.json["access_token"] as? String)
        #expect(try await h.client.get("/auth/v1/oauth/userinfo", bearer: access).status == 200)
        // The client's token is not the account's own session: the account API refuses it.
        #expect(try await h.client.get("/v1/companies", bearer: access).status == 403)
        let revoked = try await h.client.delete(
            "/auth/v1/user/oauth/grants?client_id=\(clientID.uppercased())", bearer: person.account.access)
        #expect(revoked.status == 204, "\(revoked.body)")
        #expect(try await h.client.get("/auth/v1/oauth/userinfo", bearer: access).status == 401)
        // A code approved before the revocation and not yet exchanged is void with it.
        let late = try await Self.authorize(h, clientID)
        let lateCode = try await Self.approvedCode(h, late, bearer: person.account.access)
        #expect(
            try await h.client.delete("/auth/v1/user/oauth/grants?client_id=\(clientID)", bearer: person.account.access)
                .status == 204)
        let voided = try await Self.exchange(h, clientID, code: lateCode)
        #expect(voided.status == 400 && voided.json["error"] as? String == "invalid_grant")
        let again = try await h.client.delete(
            "/auth/v1/user/oauth/grants?client_id=\(clientID)", bearer: person.account.access)
        #expect(again.status == 404 && again.json["error_code"] as? String == "oauth_consent_not_found")
    }

    @Test("the company scope: approved from the company's session, the client acts in it but not on the member's login")
    func companyScope() async throws {
        let (h, admin, _) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let created = try await admin.send(
            .post, "/auth/v1/admin/oauth/clients",
            [
                "client_name": "Books", "redirect_uris": [Self.redirect], "client_type": "public",
                "scope": "openid email company",
            ])
        let clientID = try #require(created.json["client_id"] as? String)
        var owner = try await h.person("oauth-company")
        let cid = try await h.company("Ledger Ltd", owner: &owner)
        let id = try await Self.authorize(h, clientID, scope: "openid company")
        // From the account session alone the company scope cannot be approved: no company login was passed.
        let refused = try await h.client.post(
            "/auth/v1/oauth/authorizations/\(id)/consent", ["action": "approve"], bearer: owner.account.access)
        #expect(refused.status == 403 && refused.json["error_code"] as? String == "company_context_required")
        let company = try #require(owner.company?.access)
        let code = try await Self.approvedCode(h, id, bearer: company)
        let token = try await Self.exchange(h, clientID, code: code)
        #expect(token.status == 200, "\(token.body)")
        let access = try #require(token.json["access_token"] as? String)
        let claims = try CompanyFlowTests.claims(access)
        #expect(claims["cid"] as? String == cid)
        #expect(claims["company_role"] as? String == "owner")
        #expect(claims["client_id"] as? String == clientID)
        // Scopes bound the token too: no `email` scope, no address; no `profile`, no user metadata.
        #expect(claims["email"] as? String == "" && claims["user_metadata"] == nil)
        let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: access)
        #expect(members.status == 200, "\(members.body)")
        // The member's own login, and the company's existence, stay the member's.
        for path in ["/v1/companies/\(cid)/credential", "/v1/companies/\(cid)"] {
            let refused = try await h.client.delete(path, bearer: access)
            #expect(refused.status == 403 && refused.json["code"] as? String == "forbidden", "\(path): \(refused.body)")
        }
        #expect(try await h.client.get("/v1/companies/\(cid)", bearer: company).status == 200)
        let policy = try await h.client.patch("/v1/companies/\(cid)", ["name": "Renamed"], bearer: access)
        #expect(policy.status == 403, "an app changed the company: \(policy.body)")
    }

    @Test("with the provider off every endpoint is oauth_server_disabled; an app's consent path is used when set")
    func settings() async throws {
        let off = try await AccountHarness.start()
        defer { Task { try? await off.stop() } }
        let person = try await off.person("oauth-off")
        for path in ["/auth/v1/oauth/authorize?client_id=x", "/auth/v1/user/oauth/grants"] {
            let reply = try await off.client.get(path, bearer: person.account.access)
            #expect(reply.status == 404 && reply.body.contains("oauth_server_disabled"), "\(path): \(reply.body)")
        }
        let (h, _, clientID) = try await Self.start {
            $0.auth.oauthServer.authorizationPath = "/oauth/consent"
            $0.auth.siteURL = "https://app.example.com/"
        }
        defer { Task { try? await h.stop() } }
        let reply = try await h.client.get(Self.authorizeQuery(clientID))
        #expect(reply.headers["location"]?.hasPrefix("https://app.example.com/oauth/consent?authorization_id=") == true)
    }

    @Test("Gatehouse's consent page: signed out it goes to sign-in (prompt=none: login_required); it lists the scopes")
    func consentPage() async throws {
        let (h, _, clientID) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let id = try await Self.authorize(h, clientID, scope: "openid email profile")
        let signedOut = try await h.client.get("/account/authorize?authorization_id=\(id)")
        #expect(signedOut.status == 303 && signedOut.headers["location"] == "/account/sign-in")
        #expect(signedOut.headers["set-cookie"]?.contains("gh_console_return=") == true)
        // `prompt=none` shows no page: signed out, the client hears login_required.
        let silent = try await Self.authorize(h, clientID, extra: "&prompt=none")
        let refused = try await h.client.get("/account/authorize?authorization_id=\(silent)")
        let refusal = try #require(refused.headers["location"])
        #expect(refusal.hasPrefix(Self.redirect) && Self.query(refusal)["error"] == "login_required")
        let person = try await h.person("oauth-page")
        let cookie = "gh_session=\(person.account.access)"
        let page = try await h.client.get(
            "/account/authorize?authorization_id=\(id)", extra: [("Cookie", cookie)])
        #expect(page.status == 200, "\(page.body)")
        #expect(page.body.contains("Dashboard wants to sign in with your account"))
        #expect(page.body.contains("See your name and picture"))
        #expect(page.headers["content-security-policy"]?.contains("https://app.example.com") == true)
    }
}
