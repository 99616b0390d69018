import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

@Suite("Console: keys and settings")
struct ConsoleSettingsTests {
    static let metricsToken = "metrics-token-that-is-secret-7731"

    /// The token a key's result page shows, once.
    static func shownToken(_ page: HTTPReply) -> String? {
        page.body.firstMatch(of: /<textarea id="minted-token"[^>]*>([^<]+)<\/textarea>/).map { String($0.1) }
    }

    static func details(_ h: AccountHarness, _ action: String) async throws -> [String] {
        try await h.server.services.store.database.raw(
            "SELECT detail FROM audit_events WHERE action = \(bind: action) ORDER BY id"
        ).all(decodingColumn: "detail", as: String.self)
    }

    static func keyCount(_ h: AccountHarness) async throws -> Int {
        try await SweeperTests.count(h, "SELECT COUNT(*) AS n FROM service_keys")
    }

    @Test("every setting is listed with the running server's value, and secrets are masked")
    func settingsMasked() async throws {
        try await AccountHarness.with({ $0.metricsToken = Self.metricsToken }) { h in
            let op = try await h.consoleOperator()
            let page = try await h.console("/console/settings", as: op)
            #expect(page.status == 200 && page.body.contains("data-page=\"console-settings\""))
            for setting in Setting.allCases {
                #expect(page.body.contains("<td class=\"mono\">\(setting.flag)</td>"), "\(setting.flag)")
            }
            #expect(!page.body.contains(Self.metricsToken))
            #expect(page.body.contains("set, hidden"))
            // The values this server runs with, not the defaults.
            let configuration = h.server.services.configuration
            #expect(page.body.contains("<span class=\"mono\">\(configuration.port)</span>"))
            // On PostgreSQL the store's URL carries a password: it never reaches the page.
            if let url = configuration.databaseURL, let password = URLComponents(string: url)?.password,
                password.count >= 4
            {
                #expect(!page.body.contains(password))
            }
        }
    }

    @Test("a URL's password is masked, the rest of it shown; a whole secret is masked whole")
    func masking() {
        var configuration = GatehouseConfiguration()
        configuration.smtpURL = "smtp://mailer:s3cret-pass@mail.example:587"
        configuration.databaseURL = "postgres://gh:db-pass-123@db.example:5432/gatehouse"
        configuration.metricsToken = Self.metricsToken
        #expect(Setting.smtpURL.shownValue(in: configuration, mask: "***") == "smtp://mailer:***@mail.example:587")
        #expect(
            Setting.databaseURL.shownValue(in: configuration, mask: "***")
                == "postgres://gh:***@db.example:5432/gatehouse")
        #expect(Setting.metricsToken.shownValue(in: configuration, mask: "***") == "***")
        #expect(Setting.mailFrom.shownValue(in: configuration) == "no-reply@gatehouse.local")
        #expect(Setting.appStoreURL.shownValue(in: configuration) == nil)
        configuration.smtpURL = "smtp://mail.example"
        #expect(Setting.smtpURL.shownValue(in: configuration) == "smtp://mail.example")
        // A password in any other URL (a proxy's, say) is masked too.
        configuration.appStore.apiURL = "https://relay:proxy-pass@relay.example/app-store"
        #expect(
            Setting.appStoreAPIURL.shownValue(in: configuration, mask: "***")
                == "https://relay:***@relay.example/app-store")
        // Every setting reads back what its flag sets.
        let resolved = try? GatehouseConfiguration.resolve(
            flags: [.accessTokenTTL: "600", .passkeys: "on", .redirectURLs: "https://a.example/x, myapp://cb"],
            environment: [:])
        #expect(resolved.flatMap { Setting.accessTokenTTL.shownValue(in: $0) } == "600")
        #expect(resolved.flatMap { Setting.passkeys.shownValue(in: $0) } == "on")
        #expect(resolved.flatMap { Setting.redirectURLs.shownValue(in: $0) } == "https://a.example/x,myapp://cb")
    }

    @Test("minting asks first, then shows a token once that opens the admin API, audited with the operator")
    func mint() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let empty = try await h.console("/console/settings", as: op)
            #expect(empty.body.contains("id=\"no-keys\""))

            let asked = try await h.consoleForm("/console/settings/keys", [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(asked.body.contains("action=\"/console/settings/keys\""))
            #expect(try await Self.keyCount(h) == 0)

            let minted = try await h.consoleForm("/console/settings/keys", ["confirm": "yes"], as: op)
            #expect(minted.status == 200 && minted.body.contains("id=\"key-warning\""))
            let token = try #require(Self.shownToken(minted))
            #expect(try await AdminClient(client: h.client, key: token).get("/auth/v1/admin/users").status == 200)

            let listed = try await h.console("/console/settings", as: op)
            #expect(!listed.body.contains(token))
            let keyID = try #require(
                try await h.server.services.store.database.raw("SELECT id FROM service_keys")
                    .first(decodingColumn: "id", as: String.self))
            #expect(listed.body.contains("<td class=\"mono\">\(keyID)</td>"))
            #expect(listed.body.contains("action=\"/console/settings/keys/\(keyID)/revoke\""))

            let audit = try await Self.details(h, "service_key_minted")
            #expect(audit.count == 1)
            #expect(audit.first?.contains("\"operator_id\":\"\(op.accountID)\"") == true)
            #expect(audit.first?.contains("\"service_key\":\"\(keyID)\"") == true)
            #expect(audit.first?.contains(token) == false)
        }
    }

    @Test("revoking asks first, then the key is refused at once, audited with the operator")
    func revoke() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let (id, token) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: token)
            let path = "/console/settings/keys/\(id)/revoke"

            let asked = try await h.consoleForm(path, [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(asked.body.contains(id))
            #expect(try await admin.get("/auth/v1/admin/users").status == 200)

            let done = try await h.consoleForm(path, ["confirm": "yes"], as: op)
            #expect(done.status == 303 && done.headers["location"] == "/console/settings?notice=key_revoked#keys")
            #expect(try await admin.get("/auth/v1/admin/users").status != 200)
            let page = try await h.console("/console/settings?notice=key_revoked", as: op)
            #expect(page.body.contains("The service key is revoked."))
            #expect(!page.body.contains("action=\"\(path)\""))

            let audit = try await Self.details(h, "service_key_revoked")
            #expect(audit.count == 1 && audit.first?.contains("\"operator_id\":\"\(op.accountID)\"") == true)
            // Once revoked, or never minted, there is nothing to revoke.
            #expect(try await h.consoleForm(path, ["confirm": "yes"], as: op).status == 404)
            #expect(try await h.consoleForm("/console/settings/keys/nope/revoke", [:], as: op).status == 404)
            #expect(try await Self.details(h, "service_key_revoked").count == 1)
        }
    }

    @Test("a key form without the session's token is refused, and nothing is minted or revoked")
    func csrfRefused() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let (id, token) = try await AdminClient.mint(h)
            for forged in ["", "not-the-token"] {
                let mint = try await h.consoleForm(
                    "/console/settings/keys", ["csrf_token": forged, "confirm": "yes"], as: op)
                #expect(mint.status == 403)
                let revoke = try await h.consoleForm(
                    "/console/settings/keys/\(id)/revoke", ["csrf_token": forged, "confirm": "yes"], as: op)
                #expect(revoke.status == 403)
            }
            #expect(try await Self.keyCount(h) == 1)
            #expect(try await AdminClient(client: h.client, key: token).get("/auth/v1/admin/users").status == 200)
            #expect(try await Self.details(h, "service_key_minted").isEmpty)
            #expect(try await Self.details(h, "service_key_revoked").isEmpty)
            #expect(try await h.console("/console/settings?notice=other", as: op).status == 400)
        }
    }
}
