import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

@Suite("Console: webhooks")
struct ConsoleWebhooksTests {
    /// A target that registration accepts without contacting it.
    static let publicURL = "https://hooks.example.com/gatehouse"

    /// The secret an answer page shows, once.
    static func shownSecret(_ page: HTTPReply) -> String? {
        page.body.firstMatch(of: /<textarea id="webhook-secret"[^>]*>([^<]+)<\/textarea>/).map { String($0.1) }
    }

    /// Text as the pages write it (mustache's escaping).
    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// An endpoint registered at the command line, for the tests that start from one.
    static func registered(
        _ h: AccountHarness, url: String = publicURL, events: [String] = ["*"]
    ) async throws -> WebhookEndpoint {
        try await h.server.services.webhooks.register(
            url: url, events: events, includeRecordFields: false, description: nil, by: .commandLine
        ).0
    }

    /// `count` user.updated events, written as a change's transaction writes them, each a delivery to the endpoints.
    static func events(_ h: AccountHarness, count: Int) async throws {
        let webhooks = h.server.services.webhooks
        try await h.server.services.store.transaction { db in
            try await webhooks.outbox.write(
                (0..<count).map { WebhookEvent(type: .userUpdated, data: ["user_id": "user-\($0)"]) }, in: db)
        }
    }

    static func details(_ h: AccountHarness, _ action: String) async throws -> [String] {
        try await ConsoleSettingsTests.details(h, action)
    }

    @Test("an endpoint added in the console is listed, its secret shown once, and removed after a confirmation")
    func addListRemove() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let empty = try await h.console("/console/webhooks", as: op)
            #expect(empty.status == 200 && empty.body.contains("data-page=\"console-webhooks\""))
            #expect(empty.body.contains("id=\"no-webhooks\""))
            #expect(empty.body.contains("href=\"/console/webhooks\" aria-current=\"page\""))
            for type in WebhookEventType.allCases {
                #expect(empty.body.contains("name=\"events[]\" value=\"\(type.rawValue)\""), "\(type.rawValue)")
            }
            #expect(empty.body.contains("name=\"events[]\" value=\"*\""))

            let added = try await h.consoleForm(
                "/console/webhooks",
                [
                    "url": Self.publicURL, "events[]": "user.created", "include_record_fields": "yes",
                    "description": "The CRM",
                ], as: op)
            #expect(added.status == 200 && added.body.contains("data-page=\"console-webhook-secret\""))
            #expect(added.body.contains("id=\"secret-warning\""))
            let secret = try #require(Self.shownSecret(added))
            #expect(secret.hasPrefix("whsec_"))

            let endpoint = try #require(try await h.server.services.webhooks.list().first)
            #expect(endpoint.url == Self.publicURL && endpoint.events == ["user.created"])
            #expect(endpoint.includeRecordFields && endpoint.description == "The CRM" && endpoint.enabled)

            let listed = try await h.console("/console/webhooks", as: op)
            #expect(listed.body.contains("href=\"/console/webhooks/\(endpoint.id)\">\(Self.publicURL)</a>"))
            #expect(listed.body.contains("<td class=\"mono\">user.created</td>"))
            #expect(listed.body.contains("The CRM") && listed.body.contains("<td class=\"webhook-state\">On</td>"))
            #expect(!listed.body.contains(secret))
            let page = try await h.console("/console/webhooks/\(endpoint.id)", as: op)
            #expect(page.status == 200 && page.body.contains("data-page=\"console-webhook\""))
            #expect(page.body.contains("id=\"no-deliveries\"") && !page.body.contains(secret))

            let created = try await Self.details(h, "webhook_created")
            #expect(created.count == 1 && created.first?.contains("\"operator_id\":\"\(op.accountID)\"") == true)
            #expect(created.first?.contains(secret) == false)

            let path = "/console/webhooks/\(endpoint.id)/remove"
            let asked = try await h.consoleForm(path, [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(asked.body.contains(Self.publicURL) && asked.body.contains("action=\"\(path)\""))
            #expect(try await h.server.services.webhooks.list().count == 1)

            let removed = try await h.consoleForm(path, ["confirm": "yes"], as: op)
            #expect(removed.status == 303 && removed.headers["location"] == "/console/webhooks?notice=removed")
            #expect(try await h.server.services.webhooks.list().isEmpty)
            let after = try await h.console("/console/webhooks?notice=removed", as: op)
            #expect(
                after.body.contains("The webhook endpoint is removed.") && after.body.contains("id=\"no-webhooks\""))
            let deleted = try await Self.details(h, "webhook_deleted")
            #expect(deleted.count == 1 && deleted.first?.contains("\"operator_id\":\"\(op.accountID)\"") == true)
            // Gone: nothing left to show or remove.
            #expect(try await h.console("/console/webhooks/\(endpoint.id)", as: op).status == 404)
            #expect(try await h.consoleForm(path, ["confirm": "yes"], as: op).status == 404)
        }
    }

    @Test("a refused URL or no event is the list again with the reason, the form as sent, and nothing added")
    func refusals() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let loopback = try await h.consoleForm(
                "/console/webhooks", ["url": "http://127.0.0.1/x", "events[]": "user.created"], as: op)
            #expect(loopback.status == 400 && loopback.body.contains("data-page=\"console-webhooks\""))
            #expect(
                loopback.body.contains(
                    "id=\"console-error\" class=\"error\" role=\"alert\">This URL cannot receive webhooks: "))
            #expect(loopback.body.contains("loopback"))
            #expect(loopback.body.contains("value=\"http://127.0.0.1/x\""))
            #expect(loopback.body.contains("value=\"user.created\" checked"))

            let noEvents = try await h.consoleForm("/console/webhooks", ["url": Self.publicURL], as: op)
            #expect(noEvents.status == 400 && noEvents.body.contains("Choose at least one event, or all events."))
            let notHTTP = try await h.consoleForm(
                "/console/webhooks", ["url": "ftp://hooks.example.com/x", "events[]": "*"], as: op)
            #expect(notHTTP.status == 400 && notHTTP.body.contains("This URL cannot receive webhooks: "))
            #expect(try await h.server.services.webhooks.list().isEmpty)
            #expect(try await Self.details(h, "webhook_created").isEmpty)
        }
    }

    @Test("with private targets allowed, a loopback URL is taken; all events stand for every type")
    func privateTargetsAllowed() async throws {
        try await AccountHarness.with({ $0.webhooks.allowPrivateTargets = true }) { h in
            let op = try await h.consoleOperator()
            let added = try await h.consoleForm(
                "/console/webhooks", ["url": "http://127.0.0.1:9/hook", "events[]": "*"], as: op)
            #expect(added.status == 200 && Self.shownSecret(added) != nil)
            let endpoint = try #require(try await h.server.services.webhooks.list().first)
            #expect(endpoint.events == ["*"])
            let listed = try await h.console("/console/webhooks", as: op)
            #expect(listed.body.contains("<td class=\"mono\">All events, including those added later</td>"))
        }
    }

    @Test("a signed-in account without the operator role gets the 404 of a path that is not there")
    func everyoneElseGets404() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let endpoint = try await Self.registered(h)
            let unknown = try await h.page("/console/no-such-page")
            let person = try await h.confirmedAccount(AccountHarness.newEmail())
            for path in ["/console/webhooks", "/console/webhooks/\(endpoint.id)"] {
                for session in [nil, person.access] {
                    let reply = try await h.page(path, session: session)
                    #expect(reply.status == 404 && reply.body == unknown.body, "\(path)")
                }
            }
            let sessionID = try #require(try FactorFlowTests.claims(person.access)["session_id"] as? String)
            let token = PasskeyPages.pageTokens(sessionID: sessionID, box: h.server.services.box)[0]
            for path in [
                "/console/webhooks", "/console/webhooks/\(endpoint.id)/remove",
                "/console/webhooks/\(endpoint.id)/rotate",
            ] {
                let posted = try await h.form(
                    path, ["csrf_token": token, "confirm": "yes", "url": Self.publicURL, "events[]": "*"],
                    session: person.access)
                #expect(posted.status == 404, "\(path)")
            }
            #expect(try await h.server.services.webhooks.list().map(\.id) == [endpoint.id])
            // An operator's form without the session's token changes nothing either.
            let forged = try await h.consoleForm(
                "/console/webhooks/\(endpoint.id)/remove", ["csrf_token": "forged", "confirm": "yes"], as: op)
            #expect(forged.status == 403)
            #expect(try await h.server.services.webhooks.list().count == 1)
        }
    }

    @Test("the delivery log shows each delivery newest first, 50 a page, and a replay queues one again")
    func deliveryLog() async throws {
        try await AccountHarness.with({ $0.webhooks.allowPrivateTargets = true }) { h in
            let op = try await h.consoleOperator()
            // Port 9 refuses the connection: each delivery fails its first attempt and waits for its next.
            let endpoint = try await Self.registered(h, url: "http://127.0.0.1:9/hook")
            try await Self.events(h, count: 51)
            let webhooks = h.server.services.webhooks
            let all =
                try await webhooks.deliveries(endpoint.id, before: nil, limit: 100)
            #expect(all.count == 51)

            let first = try await h.console("/console/webhooks/\(endpoint.id)", as: op)
            #expect(first.status == 200)
            let rows = first.body.matches(of: /<tr class="delivery" data-delivery-id="([^"]+)"/).map { String($0.1) }
            #expect(rows == all.prefix(50).map(\.id))
            #expect(first.body.contains("<td class=\"mono\">user.updated</td>"))
            let next = try #require(
                first.body.firstMatch(of: /<a id="deliveries-next" href="([^"]+)"/).map { String($0.1) })
            #expect(next == "/console/webhooks/\(endpoint.id)?before=\(all[49].id)")
            let second = try await h.console(next, as: op)
            let rest = second.body.matches(of: /<tr class="delivery" data-delivery-id="([^"]+)"/).map { String($0.1) }
            #expect(rest == [all[50].id])
            #expect(!second.body.contains("id=\"deliveries-next\"") && second.body.contains(">First page</a>"))

            // Once an attempt has failed, its row says so: status, attempts, the error, the next try.
            let deadline = Date().addingTimeInterval(20)
            var tried: WebhookDelivery?
            while Date() < deadline {
                tried = try await webhooks.deliveries(endpoint.id, before: nil, limit: 100)
                    .first { $0.attempts > 0 && $0.lastError != nil }
                if tried != nil { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let failed = try #require(tried)
            let page = try await h.console("/console/webhooks/\(endpoint.id)", as: op)
            let row = try #require(
                page.body.components(separatedBy: "data-delivery-id=\"\(failed.id)\"").dropFirst().first?
                    .components(separatedBy: "</tr>").first)
            #expect(row.contains("<td>\(failed.attempts)</td>"))
            #expect(row.contains(Self.escaped(failed.lastError ?? "")))
            #expect(row.contains(failed.status == .pending ? "Pending" : "Failed"))

            let replay = try await h.consoleForm(
                "/console/webhooks/\(endpoint.id)/deliveries/\(failed.id)/replay", [:], as: op)
            #expect(replay.status == 303)
            #expect(replay.headers["location"] == "/console/webhooks/\(endpoint.id)?notice=replayed")
            let replayed = try await Self.details(h, "webhook_replayed")
            #expect(replayed.count == 1 && replayed.first?.contains(failed.id) == true)
            #expect(replayed.first?.contains("\"operator_id\":\"\(op.accountID)\"") == true)
            let noticed = try await h.console("/console/webhooks/\(endpoint.id)?notice=replayed", as: op)
            #expect(noticed.body.contains("The delivery is queued and sent again now."))
            #expect(
                try await h.consoleForm("/console/webhooks/\(endpoint.id)/deliveries/nope/replay", [:], as: op).status
                    == 404)
        }
    }

    @Test("a disabled endpoint says why and is turned on again; rotating asks first and shows the new secret once")
    func enableAndRotate() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let endpoint = try await Self.registered(h, events: ["user.created", "session.created"])
            try await h.server.services.store.database.raw(
                "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = 'gone' WHERE id = \(bind: endpoint.id)"
            ).run()
            let path = "/console/webhooks/\(endpoint.id)"
            let off = try await h.console(path, as: op)
            #expect(off.body.contains("Off: the receiver answered 410 Gone"))
            #expect(off.body.contains("user.created, session.created"))
            #expect(off.body.contains("action=\"\(path)/enable\""))
            let listed = try await h.console("/console/webhooks", as: op)
            #expect(listed.body.contains("<td class=\"webhook-state\">Off: the receiver answered 410 Gone</td>"))

            let enabled = try await h.consoleForm(path + "/enable", [:], as: op)
            #expect(enabled.status == 303 && enabled.headers["location"] == path + "?notice=enabled")
            let on = try await h.console(path + "?notice=enabled", as: op)
            #expect(on.body.contains("The endpoint is on again") && !on.body.contains("action=\"\(path)/enable\""))
            #expect(try await h.server.services.webhooks.endpoint(endpoint.id).enabled)
            #expect(try await Self.details(h, "webhook_enabled").count == 1)

            let asked = try await h.consoleForm(path + "/rotate", [:], as: op)
            #expect(asked.status == 200 && asked.body.contains("data-page=\"console-confirm\""))
            #expect(asked.body.contains("24 hours"))
            #expect(try await Self.details(h, "webhook_secret_rotated").isEmpty)
            let rotated = try await h.consoleForm(path + "/rotate", ["confirm": "yes"], as: op)
            #expect(rotated.status == 200 && rotated.body.contains("data-page=\"console-webhook-secret\""))
            #expect(rotated.body.contains("id=\"secret-overlap\""))
            let secret = try #require(Self.shownSecret(rotated))
            #expect(secret.hasPrefix("whsec_"))
            #expect(!(try await h.console(path, as: op)).body.contains(secret))
            let audit = try await Self.details(h, "webhook_secret_rotated")
            #expect(audit.count == 1 && audit.first?.contains(secret) == false)

            #expect(try await h.console(path + "?notice=other", as: op).status == 400)
            #expect(try await h.console("/console/webhooks/nope", as: op).status == 404)
        }
    }

    @Test("the pages speak German to a German operator")
    func german() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let german = [("Accept-Language", "de")]
            let page = try await h.console("/console/webhooks", as: op, headers: german)
            #expect(page.body.contains(">Webhooks</a>") && page.body.contains("Endpunkt hinzufügen"))
        }
    }
}
