import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// The OAuth provider's clients through the router: the admin API in GoTrue's `admin/oauth/clients` shape (what
/// supabase-swift's `OAuthClient` decodes), and dynamic registration in RFC 7591's.
@Suite("OAuth server: client registration")
struct OAuthClientTests {
    static let clients = "/auth/v1/admin/oauth/clients"
    static let register = "/auth/v1/oauth/clients/register"

    /// A harness with the provider on (and `configure` on top), and a service key.
    private static func start(
        _ configure: @escaping (inout GatehouseConfiguration) -> Void = { _ in }
    ) async throws -> (AccountHarness, AdminClient) {
        let h = try await AccountHarness.start {
            $0.auth.oauthServer.enabled = true
            configure(&$0)
        }
        return (h, AdminClient(client: h.client, key: try await AdminClient.mint(h).token))
    }

    /// Creates a client from `body`; answers the reply's JSON, expecting 201.
    private static func create(_ admin: AdminClient, _ body: [String: Any]) async throws -> [String: Any] {
        let reply = try await admin.send(.post, clients, body)
        #expect(reply.status == 201, "\(reply.body)")
        return reply.json
    }

    /// The GoTrue error code and message of a reply (the legacy envelope).
    private static func error(_ reply: HTTPReply) -> (code: String?, message: String?) {
        (reply.json["error_code"] as? String, reply.json["msg"] as? String)
    }

    /// Every field supabase-swift's `OAuthClient` decodes without an optional, as it decodes them.
    private static func decodesAsSupabaseSwift(_ json: [String: Any]) {
        #expect(UUID(uuidString: json["client_id"] as? String ?? "") != nil)
        #expect(json["client_name"] is String)
        #expect(["public", "confidential"].contains(json["client_type"] as? String ?? ""))
        #expect(json["token_endpoint_auth_method"] is String)
        #expect(["manual", "dynamic"].contains(json["registration_type"] as? String ?? ""))
        #expect(json["redirect_uris"] is [String] && json["grant_types"] is [String])
        #expect(json["response_types"] as? [String] == ["code"])
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        for key in ["created_at", "updated_at"] {
            let text = json[key] as? String ?? ""
            #expect(formatter.date(from: text) != nil || plain.date(from: text) != nil, "\(key): \(text)")
        }
    }

    private static func details(_ h: AccountHarness, _ action: String) async throws -> [String] {
        try await ConsoleSettingsTests.details(h, action)
    }

    @Test("public and confidential clients are created with every field supabase-swift needs; the secret only once")
    func createAndRead() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let confidential = try await Self.create(
            admin,
            [
                "client_name": "Dashboard", "client_uri": "https://dash.example.com",
                "logo_uri": "https://dash.example.com/logo.png",
                "redirect_uris": ["https://dash.example.com/callback", "http://localhost:3000/cb"],
                "scope": "openid email", "response_types": ["code"],
            ])
        Self.decodesAsSupabaseSwift(confidential)
        #expect(confidential["client_type"] as? String == "confidential")
        #expect(confidential["token_endpoint_auth_method"] as? String == "client_secret_basic")
        #expect(confidential["registration_type"] as? String == "manual")
        #expect(confidential["grant_types"] as? [String] == ["authorization_code", "refresh_token"])
        #expect(confidential["scope"] as? String == "openid email")
        #expect(confidential["client_uri"] as? String == "https://dash.example.com")
        #expect(confidential["logo_uri"] as? String == "https://dash.example.com/logo.png")
        let secret = try #require(confidential["client_secret"] as? String)
        #expect(secret.count >= 43)
        let id = try #require(confidential["client_id"] as? String)
        #expect(id == id.lowercased())

        let app = try await Self.create(
            admin,
            ["client_name": "Phone", "redirect_uris": ["com.example.app:/callback"], "client_type": "public"])
        Self.decodesAsSupabaseSwift(app)
        #expect(app["client_type"] as? String == "public" && app["token_endpoint_auth_method"] as? String == "none")
        #expect(app["client_secret"] == nil && app["client_uri"] == nil)
        #expect(app["scope"] as? String == OAuthScopes.text(OAuthScopes.registrationDefault))
        // GoTrue infers the type from the authentication method.
        let inferred = try await Self.create(
            admin, ["redirect_uris": ["https://cli.example.com/cb"], "token_endpoint_auth_method": "none"])
        #expect(inferred["client_type"] as? String == "public" && inferred["client_name"] as? String == "")

        // Read back by id (any case), and in the list: never the secret.
        let got = try await admin.get("\(Self.clients)/\(id.uppercased())")
        #expect(got.status == 200 && got.json["client_id"] as? String == id)
        Self.decodesAsSupabaseSwift(got.json)
        #expect(got.json["client_secret"] == nil && !got.body.contains(secret))
        let list = try await admin.get(Self.clients)
        #expect(list.status == 200 && list.json["aud"] as? String == "authenticated")
        #expect(list.headers["x-total-count"] == "3" && !list.body.contains(secret))
        let listed = try #require(list.json["clients"] as? [[String: Any]])
        #expect(listed.count == 3 && listed.allSatisfy { $0["client_secret"] == nil })
        listed.forEach(Self.decodesAsSupabaseSwift)
        let paged = try await admin.get("\(Self.clients)?page=2&per_page=2")
        #expect((paged.json["clients"] as? [[String: Any]])?.count == 1)
        #expect(paged.headers["x-total-count"] == "3")

        let created = try await Self.details(h, "oauth_client_created")
        #expect(created.count == 3 && created.allSatisfy { !$0.contains(secret) })
        #expect(created.contains { $0.contains("\"client_id\":\"\(id)\"") })
    }

    @Test("a redirect URI is refused for each reason with GoTrue's words, and other metadata with its own")
    func refusals() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let refused: [(Any, String)] = [
            ([String](), "redirect_uris is required"),
            (Array(repeating: "https://a.example.com/cb", count: 11), "redirect_uris cannot exceed 10 items"),
            ([""], "invalid redirect_uri '': redirect URI cannot be empty"),
            (["https://a.example.com/c b"], "invalid redirect_uri 'https://a.example.com/c b': invalid URL format"),
            (["/callback"], "invalid redirect_uri '/callback': must have scheme and host"),
            (["https:///cb"], "invalid redirect_uri 'https:///cb': must have scheme and host"),
            (
                ["javascript:alert(1)"],
                "invalid redirect_uri 'javascript:alert(1)': scheme 'javascript' is not allowed for security reasons"
            ),
            (
                ["data:text/html,x"],
                "invalid redirect_uri 'data:text/html,x': scheme 'data' is not allowed for security reasons"
            ),
            (
                ["http://app.example.com/cb"],
                "invalid redirect_uri 'http://app.example.com/cb': HTTP scheme only allowed for localhost"
            ),
            (
                ["https://app.example.com/cb#x"],
                "invalid redirect_uri 'https://app.example.com/cb#x': fragment not allowed in redirect URI"
            ),
        ]
        for (uris, message) in refused {
            let reply = try await admin.send(.post, Self.clients, ["redirect_uris": uris])
            #expect(reply.status == 400)
            #expect(
                Self.error(reply).code == "validation_failed" && Self.error(reply).message == message, "\(reply.body)")
        }
        for uri in ["http://127.0.0.1:8765/cb", "http://[::1]/cb", "http://localhost/cb", "myapp://callback"] {
            #expect(try await admin.send(.post, Self.clients, ["redirect_uris": [uri]]).status == 201, "\(uri)")
        }
        let metadata: [([String: Any], String)] = [
            (["client_type": "secret"], "client_type must be 'public' or 'confidential'"),
            (
                ["token_endpoint_auth_method": "private_key_jwt"],
                "token_endpoint_auth_method must be one of: [none client_secret_basic client_secret_post]"
            ),
            (
                ["client_type": "public", "token_endpoint_auth_method": "client_secret_post"],
                "client_type 'public' is inconsistent with token_endpoint_auth_method 'client_secret_post' "
                    + "(expected client_type 'confidential')"
            ),
            (
                ["client_type": "public", "grant_types": ["client_credentials"]],
                "grant_type 'client_credentials' is only allowed for confidential clients"
            ),
            (["response_types": ["token"]], "response_types must only contain 'code'"),
            (["scope": "openid admin"], "unsupported scope: admin"),
            (["client_uri": "not a url"], "client_uri must be a valid URL"),
            (["logo_uri": "javascript:alert(1)"], "logo_uri must be a valid URL"),
        ]
        for (fields, message) in metadata {
            let body = fields.merging(["redirect_uris": ["https://a.example.com/cb"]]) { $1 }
            let reply = try await admin.send(.post, Self.clients, body)
            #expect(reply.status == 400 && Self.error(reply).message == message, "\(reply.body)")
        }
        let grants = try await admin.send(
            .post, Self.clients, ["redirect_uris": ["https://a.example.com/cb"], "grant_types": ["password"]])
        #expect(Self.error(grants).message?.hasPrefix("grant_types must only contain 'authorization_code'") == true)
        // A confidential client may use client credentials and the device grant.
        let machine = try await Self.create(
            admin,
            [
                "redirect_uris": ["https://a.example.com/cb"],
                "grant_types": ["client_credentials", "urn:ietf:params:oauth:grant-type:device_code"],
            ])
        #expect(
            machine["grant_types"] as? [String] == [
                "client_credentials", "urn:ietf:params:oauth:grant-type:device_code",
            ])
    }

    @Test("PUT changes what it names, refuses an empty body and a type change; unknown ids are 404")
    func update() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let created = try await Self.create(
            admin, ["client_name": "Old", "redirect_uris": ["https://a.example.com/cb"]])
        let id = try #require(created["client_id"] as? String)
        h.clock.advance(by: 5)
        let changed = try await admin.send(
            .put, "\(Self.clients)/\(id)",
            [
                "client_name": "New", "redirect_uris": ["https://b.example.com/cb"],
                "logo_uri": "https://b.example.com/l.png",
                "token_endpoint_auth_method": "client_secret_post", "scope": "openid",
            ])
        #expect(changed.status == 200, "\(changed.body)")
        #expect(changed.json["client_name"] as? String == "New")
        #expect(changed.json["redirect_uris"] as? [String] == ["https://b.example.com/cb"])
        #expect(changed.json["token_endpoint_auth_method"] as? String == "client_secret_post")
        #expect(changed.json["scope"] as? String == "openid" && changed.json["client_secret"] == nil)
        #expect(changed.json["updated_at"] as? String != created["updated_at"] as? String)
        #expect(try await admin.get("\(Self.clients)/\(id)").json["client_name"] as? String == "New")

        let empty = try await admin.send(.put, "\(Self.clients)/\(id)", [:])
        #expect(empty.status == 400 && Self.error(empty).message == "No fields provided for update")
        let noURIs = try await admin.send(.put, "\(Self.clients)/\(id)", ["redirect_uris": [String]()])
        #expect(Self.error(noURIs).message == "redirect_uris cannot be empty")
        let noGrants = try await admin.send(.put, "\(Self.clients)/\(id)", ["grant_types": [String]()])
        #expect(Self.error(noGrants).message == "grant_types cannot be empty")
        let none = try await admin.send(.put, "\(Self.clients)/\(id)", ["token_endpoint_auth_method": "none"])
        #expect(
            Self.error(none).message
                == "token_endpoint_auth_method 'none' is not valid for client_type 'confidential'; valid methods: "
                + "[client_secret_basic client_secret_post]")
        let retype = try await admin.send(.put, "\(Self.clients)/\(id)", ["client_type": "public"])
        #expect(retype.status == 400 && Self.error(retype).message == "client_type cannot be changed")
        #expect(try await Self.details(h, "oauth_client_updated").count == 1)

        for path in ["\(Self.clients)/\(UUID().uuidString)", "\(Self.clients)/not-a-uuid"] {
            let missing = try await admin.get(path)
            #expect(missing.status == 404)
            #expect(Self.error(missing).code == "oauth_client_not_found")
            #expect(Self.error(missing).message == "OAuth client not found")
            #expect(try await admin.send(.put, path, ["client_name": "x"]).status == 404)
            #expect(try await admin.send(.delete, path, [:]).status == 404)
            #expect(try await admin.send(.post, path + "/regenerate_secret", [:]).status == 404)
        }
    }

    @Test("a new secret replaces the old one for a confidential client; a public client has none to regenerate")
    func regenerate() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let created = try await Self.create(admin, ["redirect_uris": ["https://a.example.com/cb"]])
        let id = try #require(created["client_id"] as? String)
        let old = try #require(created["client_secret"] as? String)
        let regenerated = try await admin.send(.post, "\(Self.clients)/\(id)/regenerate_secret", [:])
        #expect(regenerated.status == 200)
        Self.decodesAsSupabaseSwift(regenerated.json)
        let new = try #require(regenerated.json["client_secret"] as? String)
        #expect(new != old)
        let services = h.server.services
        let clients = OAuthClients(
            store: services.store, clock: services.clock, trail: services.parts.trail,
            settings: services.configuration.auth.oauthServer)
        let basic = { (secret: String) in OAuthClientCredentials(clientID: id, secret: secret, method: .basic) }
        #expect((try? await clients.authenticate(basic(new)).get()) != nil)
        #expect((try? await clients.authenticate(basic(old)).get()) == nil)
        let audit = try await Self.details(h, "oauth_client_secret_regenerated")
        #expect(audit.count == 1 && !audit[0].contains(new) && audit[0].contains(id))

        let app = try await Self.create(
            admin, ["redirect_uris": ["https://a.example.com/cb"], "client_type": "public"])
        let appID = try #require(app["client_id"] as? String)
        let refused = try await admin.send(.post, "\(Self.clients)/\(appID)/regenerate_secret", [:])
        #expect(refused.status == 400)
        #expect(Self.error(refused).code == "validation_failed")
        #expect(Self.error(refused).message == "Cannot regenerate secret for public client")
    }

    @Test("removing a client ends its sessions, keeps the account's own, and is audited")
    func removeEndsSessions() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let created = try await Self.create(admin, ["redirect_uris": ["https://a.example.com/cb"]])
        let id = try #require(created["client_id"] as? String)
        let person = try await h.confirmedAccount(AccountHarness.newEmail("oauth-remove"))
        let services = h.server.services
        let sessions = services.parts.sessions
        let issued = try await services.store.transaction { db in
            try await sessions.start(
                accountID: person.userID, method: "oauth_provider/authorization_code", ip: nil, userAgent: nil, db: db,
                oauth: (id, "openid email"))
        }
        #expect(try await admin.send(.delete, "\(Self.clients)/\(id)", [:]).status == 204)
        let revoked = try await services.store.database.raw(
            "SELECT revoked_at FROM sessions WHERE id = \(bind: issued.sessionID)"
        ).first(decodingColumn: "revoked_at", as: Int64?.self)
        #expect(revoked != nil && revoked! != nil)
        await #expect(throws: (any Error).self) {
            _ = try await sessions.refresh(issued.refreshToken, oauthClient: id) { _ in
                AuditEvent(.tokenRefreshed, accountID: person.userID)
            }
        }
        // The account's own session goes on.
        #expect(try await h.client.get("/auth/v1/user", bearer: person.access).status == 200)
        #expect(try await admin.get("\(Self.clients)/\(id)").status == 404)
        let deleted = try await Self.details(h, "oauth_client_deleted")
        #expect(deleted.count == 1 && deleted[0].contains("\"client_id\":\"\(id)\""))
        #expect(deleted[0].contains("\"sessions_ended\":\"1\""))
    }

    @Test("with the provider off every client endpoint answers oauth_server_disabled; a user's token is not_admin")
    func serverOff() async throws {
        let (h, admin) = try await Self.start { $0.auth.oauthServer.enabled = false }
        defer { Task { try? await h.stop() } }
        let id = UUID().uuidString.lowercased()
        let replies = [
            try await admin.get(Self.clients),
            try await admin.send(.post, Self.clients, ["redirect_uris": ["https://a.example.com/cb"]]),
            try await admin.get("\(Self.clients)/\(id)"),
            try await admin.send(.put, "\(Self.clients)/\(id)", ["client_name": "x"]),
            try await admin.send(.delete, "\(Self.clients)/\(id)", [:]),
            try await admin.send(.post, "\(Self.clients)/\(id)/regenerate_secret", [:]),
            try await h.client.post(Self.register, ["redirect_uris": ["https://a.example.com/cb"]]),
        ]
        for reply in replies {
            #expect(reply.status == 404)
            #expect(Self.error(reply).code == "oauth_server_disabled")
            #expect(Self.error(reply).message == "OAuth 2.1 server is disabled")
        }
        let person = try await h.confirmedAccount(AccountHarness.newEmail("oauth-off"))
        let asUser = try await h.client.get(Self.clients, bearer: person.access)
        #expect(asUser.status == 403 && Self.error(asUser).code == "not_admin")
    }

    @Test("dynamic registration is 403 unless allowed; allowed, it answers RFC 7591's fields and errors")
    func dynamicRegistration() async throws {
        let (off, _) = try await Self.start()
        let refused = try await off.client.post(Self.register, ["redirect_uris": ["https://a.example.com/cb"]])
        try? await off.stop()
        #expect(refused.status == 403)
        #expect(Self.error(refused).code == "oauth_dynamic_client_registration_disabled")
        #expect(Self.error(refused).message == "Dynamic client registration is not enabled")

        let (h, admin) = try await Self.start { $0.auth.oauthServer.allowDynamicRegistration = true }
        defer { Task { try? await h.stop() } }
        let before = Int64(h.clock.now.timeIntervalSince1970)
        let registered = try await h.client.post(
            Self.register,
            [
                "client_name": "MCP agent", "redirect_uris": ["http://127.0.0.1:33418/callback"],
                "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"], "scope": "openid profile",
            ])
        #expect(registered.status == 201, "\(registered.body)")
        let json = registered.json
        let id = try #require(json["client_id"] as? String)
        #expect(json["client_secret"] == nil && json["client_secret_expires_at"] as? Int == 0)
        #expect((json["client_id_issued_at"] as? Int).map { Int64($0) >= before } == true)
        #expect(json["token_endpoint_auth_method"] as? String == "none")
        #expect(json["redirect_uris"] as? [String] == ["http://127.0.0.1:33418/callback"])
        #expect(json["response_types"] as? [String] == ["code"] && json["scope"] as? String == "openid profile")
        #expect(json["client_name"] as? String == "MCP agent")
        let stored = try await admin.get("\(Self.clients)/\(id)")
        #expect(stored.json["registration_type"] as? String == "dynamic")

        let confidential = try await h.client.post(Self.register, ["redirect_uris": ["https://a.example.com/cb"]])
        #expect(confidential.status == 201)
        #expect((confidential.json["client_secret"] as? String)?.isEmpty == false)
        #expect(confidential.json["token_endpoint_auth_method"] as? String == "client_secret_basic")

        let cases: [([String: Any], String, String)] = [
            (
                ["redirect_uris": ["javascript:alert(1)"]], "invalid_redirect_uri",
                "invalid redirect_uri 'javascript:alert(1)': scheme 'javascript' is not allowed for security reasons"
            ),
            ([:], "invalid_redirect_uri", "redirect_uris is required"),
            (
                ["redirect_uris": ["https://a.example.com/cb"], "grant_types": ["client_credentials"]],
                "invalid_client_metadata", "grant_type 'client_credentials' cannot be registered dynamically"
            ),
            (
                ["redirect_uris": ["https://a.example.com/cb"], "scope": "openid company"], "invalid_client_metadata",
                "scope 'company' cannot be registered dynamically"
            ),
        ]
        for (body, error, description) in cases {
            let reply = try await h.client.post(Self.register, body)
            #expect(reply.status == 400)
            #expect(reply.json["error"] as? String == error, "\(reply.body)")
            #expect(reply.json["error_description"] as? String == description)
            #expect(reply.json["error_code"] == nil)
        }
        let audit = try await Self.details(h, "oauth_client_created")
        #expect(audit.count == 2 && audit.allSatisfy { $0.contains("\"registration\":\"dynamic\"") })
    }

    @Test("the command line registers, lists, gives a new secret and removes, by the admin API's rules")
    func commandLine() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let op = Operator(store: h.server.services.store)
        let configuration = h.server.services.configuration
        let server = try await op.addOAuthClient(
            name: "Server", redirectURIs: ["https://a.example.com/cb"], isPublic: false,
            grantTypes: ["authorization_code", "client_credentials"], scope: "openid company",
            configuration: configuration)
        #expect(server.secret?.isEmpty == false)
        let app = try await op.addOAuthClient(
            name: "App", redirectURIs: ["com.example.app:/cb"], isPublic: true, grantTypes: nil, scope: nil,
            configuration: configuration)
        #expect(app.secret == nil)
        let read = try await admin.get("\(Self.clients)/\(server.id)").json
        #expect(read["grant_types"] as? [String] == ["authorization_code", "client_credentials"])
        #expect(read["scope"] as? String == "openid company")
        let lines = try await op.oauthClientLines(configuration: configuration)
        #expect(lines.count == 2 && lines[0].hasPrefix("\(app.id)  public  App  com.example.app:/cb"))
        await #expect(throws: OAuthClientCommandError.self) {
            _ = try await op.addOAuthClient(
                name: "Bad", redirectURIs: ["http://a.example.com/cb"], isPublic: false, grantTypes: nil, scope: nil,
                configuration: configuration)
        }
        let secret = try await op.regenerateOAuthClientSecret(server.id, configuration: configuration)
        #expect(secret != nil && secret != server.secret)
        await #expect(throws: OAuthClientCommandError.self) {
            _ = try await op.regenerateOAuthClientSecret(app.id, configuration: configuration)
        }
        #expect(try await op.regenerateOAuthClientSecret(UUID().uuidString, configuration: configuration) == nil)
        #expect(try await op.removeOAuthClient(app.id, configuration: configuration))
        #expect(!(try await op.removeOAuthClient(app.id, configuration: configuration)))
        let audit = try await Self.details(h, "oauth_client_created")
        #expect(audit.count == 2 && audit.allSatisfy { $0.contains("\"by\":\"operator\"") })
    }

    @Test("one address registers at most 10 clients an hour dynamically")
    func registrationRateLimit() async throws {
        let (h, _) = try await Self.start { $0.auth.oauthServer.allowDynamicRegistration = true }
        defer { Task { try? await h.stop() } }
        for _ in 0..<10 {
            let reply = try await h.client.post(Self.register, ["redirect_uris": ["https://a.example.com/cb"]])
            #expect(reply.status == 201)
        }
        let limited = try await h.client.post(Self.register, ["redirect_uris": ["https://a.example.com/cb"]])
        #expect(limited.status == 429 && limited.headers["retry-after"] != nil)
        #expect(Self.error(limited).code == "over_request_rate_limit")
    }
}
