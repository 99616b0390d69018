import Foundation
import Testing

@testable import GatehouseServer

@Suite("Console: who may enter")
struct ConsoleAccessTests {
    /// Every console page and form, for the checks that hold on all of them.
    static let paths: [(method: String, path: String)] = [
        ("GET", "/console"), ("GET", "/console/users"), ("GET", "/console/companies"), ("GET", "/console/audit"),
        ("GET", "/console/settings"), ("GET", "/console/users/00000000-0000-0000-0000-000000000000"),
        ("GET", "/console/no-such-page"),
    ]

    @Test(
        "a visitor without a session and a signed-in account without the role get the 404 of a path that is not there")
    func everyoneElseGets404() async throws {
        try await AccountHarness.with { h in
            let unknown = try await h.page("/console/no-such-page")
            #expect(unknown.status == 404)
            let person = try await h.confirmedAccount(AccountHarness.newEmail())
            for (_, path) in Self.paths {
                for session in [nil, person.access] {
                    let reply = try await h.page(path, session: session)
                    #expect(reply.status == 404, "\(path)")
                    #expect(reply.body == unknown.body, "\(path) says more than a missing page")
                }
            }
            // Its forms too, with a token of its own session: nothing says the console is there.
            let sessionID = try #require(try FactorFlowTests.claims(person.access)["session_id"] as? String)
            let token = PasskeyPages.pageTokens(sessionID: sessionID, box: h.server.services.box)[0]
            let posted = try await h.form(
                "/console/settings/keys", ["csrf_token": token, "confirm": "yes"], session: person.access)
            #expect(posted.status == 404)
            #expect(try await h.page("/console", session: person.access).body.contains("data-page=\"error\""))
        }
    }

    @Test("an operator at aal1 gives a code first and comes back; one without a second factor is told to add one")
    func secondFactorFirst() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("operator")
            let account = try await h.confirmedAccount(email)
            _ = try await Operator(store: h.server.services.store).addOperator(email: email)
            let bare = try await h.page("/console/users", session: account.access)
            #expect(bare.status == 403 && bare.body.contains("Set up a second factor first"))

            let factor = try await h.enrolled(account.access)
            _ = try await h.stepUp(factor, bearer: account.access)
            let low = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let sent = try await h.page("/console/users", session: low.access)
            #expect(sent.status == 303 && sent.headers["location"] == "/account/second-factor")
            let cookie = try #require(sent.headers["set-cookie"])
            #expect(cookie.hasPrefix(ConsoleKit.returnCookie + "=%2Fconsole%2Fusers;"))
            #expect(cookie.contains("Path=/account") && cookie.contains("HttpOnly"))

            // With the code given, the account page sends the browser back to the console page it asked for.
            h.clock.advance(by: 30)
            let high = try await h.stepUp(factor, bearer: low.access)
            let back = cookie.prefix { $0 != ";" }
            let account2 = try await h.page(
                "/account", cookie: "\(WebSession.accessCookie)=\(high.access); \(back)")
            #expect(account2.status == 303 && account2.headers["location"] == "/console/users")
            let page = try await h.page("/console/users", session: high.access)
            #expect(page.status == 200 && page.body.contains("data-page=\"console-users\""))
        }
    }

    @Test("a console session ends after 15 idle minutes, and its account session with it")
    func idleEnds() async throws {
        try await AccountHarness.with { h in
            var op = try await h.consoleOperator()
            #expect(try await h.console("/console", as: op).status == 200)
            // Each step renews the access token, as the account pages do with the refresh cookie: only the console's
            // own clock ends it.
            func renewed(_ op: ConsoleOperator) async throws -> ConsoleOperator {
                let next = try SignedIn(try await h.client.refresh(op.refresh))
                return op.with(access: next.access, refresh: next.refresh)
            }
            h.clock.advance(by: 14 * 60)
            op = try await renewed(op)
            #expect(try await h.console("/console/users", as: op).status == 200)
            h.clock.advance(by: ConsoleKit.idleLimit)
            op = try await renewed(op)
            let ended = try await h.console("/console/users", as: op)
            #expect(ended.status == 303)
            #expect(ended.headers["location"] == "/account/sign-in?notice=console_ended", "\(ended.headers)")
            let after = try await h.client.get("/auth/v1/user", bearer: op.access)
            #expect(after.status == 403 && after.json["error_code"] as? String == "session_not_found", "\(after.body)")
            #expect(try await h.console("/console", as: op).status != 200)
            let trail = try await h.server.services.store.database.raw(
                "SELECT detail FROM audit_events WHERE action = 'console_session_ended'"
            ).all().map { try $0.decode(column: "detail", as: String.self) }
            #expect(trail.count == 1 && trail[0].contains("\"reason\":\"idle\""))
            let notice = try await h.page("/account/sign-in?notice=console_ended")
            #expect(notice.body.contains("Your console session ended"))
        }
    }

    @Test("the role is read on every request: removed, the console is a missing page at once; the admin API shows it")
    func roleReadFresh() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            #expect(try await h.console("/console", as: op).status == 200)
            let key = try await AdminClient.mint(h).token
            let shown = try await h.client.get("/auth/v1/admin/users/\(op.accountID)", bearer: key)
            #expect(shown.json["is_operator"] as? Bool == true)
            let listed = try await h.client.get("/auth/v1/admin/users?per_page=100", bearer: key)
            let users = try #require(listed.json["users"] as? [[String: Any]])
            #expect(users.first { $0["id"] as? String == op.accountID }?["is_operator"] as? Bool == true)
            #expect(users.filter { $0["is_operator"] as? Bool == true }.count == 1)

            let removed = try await Operator(store: h.server.services.store).removeOperator(email: op.email)
            #expect(removed == .changed(accountID: op.accountID))
            #expect(try await h.console("/console", as: op).status == 404)
            #expect(
                try await Operator(store: h.server.services.store).removeOperator(email: op.email)
                    == .unchanged(accountID: op.accountID))
            #expect(
                try await Operator(store: h.server.services.store).addOperator(email: "nobody@example.com")
                    == .noAccount)
        }
    }

    @Test("the console speaks the operator's language: the account's locale, then the browser's")
    func language() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let english = try await h.console("/console", as: op)
            #expect(english.body.contains("<html lang=\"en\">") && english.body.contains(">Users</a>"))
            let german = try await h.console("/console", as: op, headers: [("Accept-Language", "fr, de;q=0.8")])
            #expect(german.body.contains("<html lang=\"de\">") && german.body.contains(">Benutzer</a>"))
            let updated = try await h.client.put("/auth/v1/user", ["data": ["locale": "de-AT"]], bearer: op.access)
            #expect(updated.status == 200)
            let chosen = try await h.console("/console", as: op, headers: [("Accept-Language", "en")])
            #expect(chosen.body.contains("<html lang=\"de\">"))
        }
    }

    @Test("a console form from another site, or without the session's token, is refused and changes nothing")
    func forgedForms() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let crossSite = try await h.form(
                "/console/settings/keys", ["csrf_token": op.formToken, "confirm": "yes"], session: op.access,
                site: "cross-site")
            #expect(crossSite.status == 403)
            for token in ["", "not-the-token"] {
                let forged = try await h.consoleForm(
                    "/console/settings/keys", ["csrf_token": token, "confirm": "yes"], as: op)
                #expect(forged.status == 403, "token \(token)")
            }
            let minted = try await h.server.services.store.database.raw(
                "SELECT COUNT(*) AS n FROM service_keys"
            ).first()?.decode(column: "n", as: Int.self)
            #expect(minted == 0)
        }
    }

    @Test("every answer names its request: a trusted proxy's plain id kept, anything else replaced by a new one")
    func requestIDs() async throws {
        #expect(RequestIDMiddleware.accepted("lb-7f3a.01_x") == "lb-7f3a.01_x")
        for hostile in ["", String(repeating: "a", count: 65), "a b", "x\r\ny", "<script>", "ü"] {
            #expect(RequestIDMiddleware.accepted(hostile) == nil, "\(hostile)")
        }
        try await AccountHarness.with { h in
            let made = try await h.client.get("/health/live")
            #expect(made.headers["x-request-id"]?.count == 16)
            let kept = try await h.client.get("/health/live", extra: [("X-Request-Id", "edge-42")])
            #expect(kept.headers["x-request-id"] == "edge-42")
            let replaced = try await h.client.get("/health/live", extra: [("X-Request-Id", "<script>")])
            #expect(replaced.headers["x-request-id"] != "<script>" && replaced.headers["x-request-id"]?.count == 16)
        }
        // Without trusted proxies (the default) no client chooses its request's id.
        try await AccountHarness.with({ $0.auth.trustedProxies = [] }) { h in
            let chosen = try await h.client.get("/health/live", extra: [("X-Request-Id", "edge-42")])
            #expect(chosen.headers["x-request-id"] != "edge-42" && chosen.headers["x-request-id"]?.count == 16)
        }
    }

    @Test("an operator's account, and the operator's own, is not changed from the console")
    func operatorsProtected() async throws {
        try await AccountHarness.with { h in
            let one = try await h.consoleOperator()
            let other = try await h.consoleOperator()
            for (target, action) in [
                (other.accountID, "link"), (other.accountID, "remove-factor"), (other.accountID, "ban"),
                (other.accountID, "delete"), (other.accountID, "end-session"), (one.accountID, "ban"),
            ] {
                let refused = try await h.consoleForm(
                    "/console/users/\(target)/\(action)",
                    ["confirm": "yes", "type": "magiclink", "duration": "1h", "factor_id": "all", "session_id": "all"],
                    as: one)
                #expect(refused.status == 400, "\(action)")
                #expect(refused.body.contains("changed with the gatehouse command"), "\(action)")
            }
            #expect(try await h.console("/console", as: other).status == 200)
            let sessions = try await h.client.get("/auth/v1/user", bearer: other.access)
            #expect(sessions.status == 200)
        }
    }

    @Test("the return path after sign-in stays inside the console")
    func returnPath() {
        #expect(ConsoleKit.returnPath("/console/users/abc") == "/console/users/abc")
        for hostile in [
            "https://evil.example", "//evil.example", "/console//evil", "/consolex", "/account", "/console\\x",
        ] {
            #expect(ConsoleKit.returnPath(hostile) == "/console", "\(hostile)")
        }
    }
}
