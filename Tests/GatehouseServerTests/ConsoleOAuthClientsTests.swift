import Foundation
import Testing

@testable import GatehouseServer

@Suite("Console: OAuth clients")
struct ConsoleOAuthClientsTests {
    static let redirectURI = "https://dash.example.com/callback"

    /// The secret a page shows, once.
    static func shownSecret(_ page: HTTPReply) -> String? {
        page.body.firstMatch(of: /<textarea id="oauth-client-secret"[^>]*>([^<]+)<\/textarea>/).map { String($0.1) }
    }

    /// The client service of the harness's server.
    static func clients(_ h: AccountHarness) -> OAuthClients {
        let services = h.server.services
        return OAuthClients(
            store: services.store, clock: services.clock, trail: services.parts.trail,
            settings: services.configuration.auth.oauthServer)
    }

    static func details(_ h: AccountHarness, _ action: String) async throws -> [String] {
        try await ConsoleSettingsTests.details(h, action)
    }

    @Test("a client registered in the console is listed, its secret shown once, and removed after a confirmation")
    func addListRemove() async throws {
        try await AccountHarness.with({ $0.auth.oauthServer.enabled = true }) { h in
            let op = try await h.consoleOperator()
            let empty = try await h.console("/console/oauth-clients", as: op)
            #expect(empty.status == 200 && empty.body.contains("data-page=\"console-oauth-clients\""))
            #expect(empty.body.contains("id=\"no-oauth-clients\"") && !empty.body.contains("id=\"server-off\""))
            #expect(empty.body.contains("href=\"/console/oauth-clients\" aria-current=\"page\""))
            for grant in OAuthGrantType.allCases {
                #expect(empty.body.contains("name=\"grant_types[]\" value=\"\(grant.rawValue)\""), "\(grant)")
            }
            #expect(empty.body.contains("name=\"scopes[]\" value=\"company\">"))

            let added = try await h.consoleForm(
                "/console/oauth-clients",
                [
                    "name": "Dashboard", "redirect_uris": Self.redirectURI + "\r\nhttp://localhost:3000/cb\r\n",
                    "client_type": "confidential", "grant_types[]": "authorization_code", "scopes[]": "openid",
                ], as: op)
            #expect(added.status == 200 && added.body.contains("data-page=\"console-oauth-client\""))
            #expect(added.body.contains("id=\"secret-warning\""))
            let secret = try #require(Self.shownSecret(added))

            let client = try #require(try await Self.clients(h).list().first)
            #expect(client.name == "Dashboard" && client.type == .confidential)
            #expect(client.redirectURIs == [Self.redirectURI, "http://localhost:3000/cb"])
            #expect(client.grantTypes == ["authorization_code"] && client.scope == "openid")
            #expect(client.secretHash == Secrets.digest(secret))

            let listed = try await h.console("/console/oauth-clients", as: op)
            #expect(listed.body.contains("href=\"/console/oauth-clients/\(client.id)\">Dashboard</a>"))
            #expect(listed.body.contains("<td class=\"oauth-client-type\">Confidential</td>"))
            #expect(listed.body.contains(Self.redirectURI) && !listed.body.contains(secret))
            let page = try await h.console("/console/oauth-clients/\(client.id)", as: op)
            #expect(page.status == 200 && page.body.contains("id=\"oauth-client-id\">\(client.id)</dd>"))
            #expect(!page.body.contains(secret) && Self.shownSecret(page) == nil)
            #expect(page.body.contains("action=\"/console/oauth-clients/\(client.id)/regenerate\""))

            let created = try await Self.details(h, "oauth_client_created")
            #expect(created.count == 1 && created[0].contains("\"operator_id\":\"\(op.accountID)\""))
            #expect(!created[0].contains(secret))

            let path = "/console/oauth-clients/\(client.id)/remove"
            let asked = try await h.consoleForm(path, [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(asked.body.contains("Dashboard") && asked.body.contains("action=\"\(path)\""))
            #expect(try await Self.clients(h).list().count == 1)
            let removed = try await h.consoleForm(path, ["confirm": "yes"], as: op)
            #expect(removed.status == 303 && removed.headers["location"] == "/console/oauth-clients?notice=removed")
            #expect(try await Self.clients(h).list().isEmpty)
            let after = try await h.console("/console/oauth-clients?notice=removed", as: op)
            #expect(
                after.body.contains("The OAuth client is removed") && after.body.contains("id=\"no-oauth-clients\""))
            #expect(try await Self.details(h, "oauth_client_deleted").count == 1)
            #expect(try await h.console("/console/oauth-clients/\(client.id)", as: op).status == 404)
            #expect(try await h.console("/console/oauth-clients?notice=other", as: op).status == 400)
        }
    }

    @Test("a public client has no secret; a refused redirect URI is the list again with the reason and the form")
    func publicAndRefused() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let list = try await h.console("/console/oauth-clients", as: op)
            #expect(list.body.contains("id=\"server-off\""))
            let refused = try await h.consoleForm(
                "/console/oauth-clients",
                [
                    "name": "Bad", "redirect_uris": "http://app.example.com/cb", "client_type": "public",
                    "grant_types[]": "authorization_code",
                ], as: op)
            #expect(refused.status == 400 && refused.body.contains("data-page=\"console-oauth-clients\""))
            #expect(refused.body.contains("HTTP scheme only allowed for localhost"))
            #expect(refused.body.contains(">http://app.example.com/cb</textarea>"))
            #expect(refused.body.contains("value=\"public\" selected"))
            let noGrant = try await h.consoleForm(
                "/console/oauth-clients", ["name": "App", "redirect_uris": Self.redirectURI], as: op)
            #expect(noGrant.status == 400 && noGrant.body.contains("Choose at least one grant type."))
            #expect(try await Self.clients(h).list().isEmpty)

            let added = try await h.consoleForm(
                "/console/oauth-clients",
                [
                    "name": "Phone", "redirect_uris": "com.example.app:/callback", "client_type": "public",
                    "grant_types[]": "authorization_code",
                ], as: op)
            #expect(added.status == 200 && Self.shownSecret(added) == nil)
            #expect(added.body.contains("id=\"oauth-client-type\">Public</dd>"))
            let client = try #require(try await Self.clients(h).list().first)
            #expect(!added.body.contains("action=\"/console/oauth-clients/\(client.id)/regenerate\""))
            #expect(
                try await h.consoleForm(
                    "/console/oauth-clients/\(client.id)/regenerate", ["confirm": "yes"], as: op
                ).status == 400)
        }
    }

    @Test("a new secret is asked for first, shown once, and the old one stops working")
    func regenerate() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let (client, old) = try await Self.clients(h).register(
                OAuthClientMetadata(name: "Server", redirectURIs: [Self.redirectURI]), by: .commandLine)
            let path = "/console/oauth-clients/\(client.id)/regenerate"
            let asked = try await h.consoleForm(path, [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(try await Self.details(h, "oauth_client_secret_regenerated").isEmpty)
            let done = try await h.consoleForm(path, ["confirm": "yes"], as: op)
            #expect(done.status == 200 && done.body.contains("New client secret"))
            let secret = try #require(Self.shownSecret(done))
            #expect(secret != old)
            let stored = try #require(try await Self.clients(h).find(client.id))
            #expect(stored.secretHash == Secrets.digest(secret))
            #expect(!(try await h.console("/console/oauth-clients/\(client.id)", as: op)).body.contains(secret))
            let audit = try await Self.details(h, "oauth_client_secret_regenerated")
            #expect(audit.count == 1 && !audit[0].contains(secret))
        }
    }

    @Test("a signed-in account without the operator role gets the 404 of a path that is not there")
    func everyoneElseGets404() async throws {
        try await AccountHarness.with { h in
            let (client, _) = try await Self.clients(h).register(
                OAuthClientMetadata(name: "Server", redirectURIs: [Self.redirectURI]), by: .commandLine)
            let unknown = try await h.page("/console/no-such-page")
            let person = try await h.confirmedAccount(AccountHarness.newEmail())
            for path in ["/console/oauth-clients", "/console/oauth-clients/\(client.id)"] {
                for session in [nil, person.access] {
                    let reply = try await h.page(path, session: session)
                    #expect(reply.status == 404 && reply.body == unknown.body, "\(path)")
                }
            }
            let sessionID = try #require(try FactorFlowTests.claims(person.access)["session_id"] as? String)
            let token = PasskeyPages.pageTokens(sessionID: sessionID, box: h.server.services.box)[0]
            for path in [
                "/console/oauth-clients/\(client.id)/remove", "/console/oauth-clients/\(client.id)/regenerate",
            ] {
                let posted = try await h.form(path, ["csrf_token": token, "confirm": "yes"], session: person.access)
                #expect(posted.status == 404, "\(path)")
            }
            #expect(try await Self.clients(h).list().count == 1)
        }
    }

    @Test("the pages speak German to a German operator")
    func german() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let page = try await h.console("/console/oauth-clients", as: op, headers: [("Accept-Language", "de")])
            #expect(page.body.contains(">OAuth-Clients</a>") && page.body.contains("Client registrieren"))
        }
    }
}
