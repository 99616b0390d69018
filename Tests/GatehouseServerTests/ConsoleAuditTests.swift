import Foundation
import Testing

@testable import GatehouseServer

/// The console's audit explorer: its filters, following a session or a request, paging, the CSV export and what
/// it escapes.
@Suite("Console: the audit explorer")
struct ConsoleAuditTests {
    /// A clock standing still at one time, to write events at times a filter can name.
    struct FixedClock: GatehouseClock {
        let now: Date
    }

    static func at(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    /// Writes `events` into the trail as if they happened at `time`.
    static func record(_ events: [AuditEvent], at time: Date, _ h: AccountHarness) async throws {
        try await AuditRepository(db: h.server.services.store.database, clock: FixedClock(now: time)).record(events)
    }

    static func event(
        _ action: AuditAction, account: String? = nil, company: String? = nil, ip: String? = nil,
        session: String? = nil, request: String? = nil, userAgent: String? = nil, detail: [String: String] = [:]
    ) -> AuditEvent {
        var event = AuditEvent(
            action, accountID: account, companyID: company, ip: ip, userAgent: userAgent, detail: detail)
        event.sessionID = session
        event.requestID = request
        return event
    }

    /// The page's table of events, without the form above it (whose choices name every action).
    static func table(_ body: String) -> String {
        guard let start = body.range(of: "<table id=\"audit-events\">") else { return "" }
        let rest = body[start.lowerBound...]
        return String(rest[..<(rest.range(of: "</table>")?.upperBound ?? rest.endIndex)])
    }

    /// How many events a page of the explorer lists.
    static func rows(_ body: String) -> Int { body.components(separatedBy: "<tr id=\"event-").count - 1 }

    /// The next page's link of a page, unescaped.
    static func next(_ body: String) -> String? {
        guard let start = body.range(of: "id=\"audit-next\" href=\"") else { return nil }
        let rest = body[start.upperBound...]
        return rest.prefix { $0 != "\"" }.replacingOccurrences(of: "&amp;", with: "&")
    }

    @Test("filters by action, actor, company, address, time, session and request id")
    func filters() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let (a, b, c1, c2) = ("acct-a-\(UUID())", "acct-b-\(UUID())", "co-1-\(UUID())", "co-2-\(UUID())")
            try await Self.record(
                [
                    Self.event(
                        .signedIn, account: a, company: c1, ip: "10.9.9.9", session: "sess-one", request: "req-one")
                ], at: try Self.at("2026-01-10T10:00:00Z"), h)
            try await Self.record(
                [Self.event(.signInFailed, account: b, ip: "10.8.8.8")], at: try Self.at("2026-01-11T12:30:00Z"), h)
            try await Self.record(
                [Self.event(.tierChanged, company: c2, detail: ["to": "business"])],
                at: try Self.at("2026-01-12T00:00:00Z"), h)

            func shows(_ query: String) async throws -> (a: Bool, b: Bool, c2: Bool) {
                let page = try await h.console("/console/audit?" + query, as: op)
                #expect(page.status == 200, "\(query)")
                let table = Self.table(page.body)
                return (table.contains(a), table.contains(b), table.contains(c2))
            }
            #expect(try await shows("action=sign_in_failed") == (false, true, false))
            #expect(try await shows("actor=\(a)") == (true, false, false))
            #expect(try await shows("company=\(c1)") == (true, false, false))
            #expect(try await shows("company=\(c2)") == (false, false, true))
            #expect(try await shows("ip=10.8.8.8") == (false, true, false))
            #expect(try await shows("from=2026-01-11&to=2026-01-11") == (false, true, false))
            #expect(try await shows("from=2026-01-10T09:00&to=2026-01-11T12:30") == (true, true, false))
            #expect(try await shows("from=2026-01-11T12:31") == (false, false, true))
            #expect(try await shows("session=sess-one") == (true, false, false))
            #expect(try await shows("request=req-one") == (true, false, false))
            #expect(try await shows("action=signed_in&ip=10.8.8.8") == (false, false, false))

            // An address is read as its account.
            let email = AccountHarness.newEmail("actor")
            let account = try await h.confirmedAccount(email)
            let encoded = try #require(email.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let byEmail = Self.table(try await h.console("/console/audit?actor=\(encoded)", as: op).body)
            #expect(byEmail.contains(account.userID))
            #expect(byEmail.contains(">signup<"))
            #expect(!byEmail.contains(a))
            let nobody = try await h.console("/console/audit?actor=nobody%40example.com", as: op)
            #expect(nobody.status == 200)
            #expect(Self.rows(nobody.body) == 0)
            #expect(nobody.body.contains("No account has this email address"))
        }
    }

    @Test("follows a request by its X-Request-Id and a session by its id, from the links in each row")
    func followRequestAndSession() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail("followed")
            _ = try await h.confirmedAccount(email)
            let signIn = try await h.client.post(
                "/auth/v1/token?grant_type=password", ["email": email, "password": "correct horse battery"],
                extra: [("X-Request-Id", "test-123")])
            #expect(signIn.status == 200)
            let page = try await h.console("/console/audit?request=test-123", as: op)
            #expect(page.status == 200)
            let byRequest = Self.table(page.body)
            #expect(byRequest.contains(">signed_in<"))
            #expect(!byRequest.contains(">signup<"), "only the request's events")
            #expect(byRequest.contains("href=\"/console/audit?request=test-123\""))

            // The operator's own console session names its session: its row links to the session's events.
            let session = try #require(try CompanyFlowTests.claims(op.access)["session_id"] as? String)
            let started = Self.table(try await h.console("/console/audit?action=console_session_started", as: op).body)
            #expect(started.contains("href=\"/console/audit?session=\(session)\""))
            let bySession = Self.table(try await h.console("/console/audit?session=\(session)", as: op).body)
            #expect(bySession.contains(">console_session_started<"))
            #expect(!bySession.contains(">signed_in<"), "another session's sign-in")
        }
    }

    @Test("pages newest first, 50 at a time, by the last id")
    func paging() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let events = (0..<60).map { Self.event(.otpSent, detail: ["n": String(format: "n%03d", $0)]) }
            try await Self.record(events, at: Date(), h)
            let first = try await h.console("/console/audit?action=otp_sent", as: op)
            #expect(Self.rows(first.body) == 50)
            #expect(first.body.contains("n=n059"), "newest first")
            #expect(!first.body.contains("n=n009"))
            let link = try #require(Self.next(first.body))
            #expect(link.hasPrefix("/console/audit?action=otp_sent&before="))
            let second = try await h.console(link, as: op)
            #expect(Self.rows(second.body) == 10)
            #expect(second.body.contains("n=n000"))
            #expect(!second.body.contains("n=n059"))
            #expect(Self.next(second.body) == nil)
        }
    }

    @Test("a filter it cannot read answers 400 with the reason")
    func badParameters() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            for (query, words) in [
                ("action=no_such_action", "There is no such action"), ("from=yesterday", "is not a time"),
                ("to=2026-02-30", "is not a time"), ("before=abc", "The page link is not valid"),
                ("from=2026-01-12&to=2026-01-11", "must be before"),
                ("ip=" + String(repeating: "1", count: 201), "is too long"), ("ip=%zz", "not properly encoded"),
            ] {
                let page = try await h.console("/console/audit?" + query, as: op)
                #expect(page.status == 400, "\(query)")
                #expect(page.body.contains(words), "\(query)")
            }
            let german = try await h.console(
                "/console/audit?from=gestern", as: op, headers: [("Accept-Language", "de-DE,de;q=0.9")])
            #expect(german.status == 400)
            #expect(german.body.contains("„from“ ist keine Zeitangabe"))
            let csv = try await h.console("/console/audit.csv?action=no_such_action", as: op)
            #expect(csv.status == 400)
        }
    }

    @Test("exports CSV: quoted by RFC 4180, formulas neutralised, an attachment, audited")
    func export() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            try await Self.record(
                [
                    Self.event(
                        .shareRefused, account: "@SUM(1)", company: "-2+3", ip: "10.1.2.3",
                        userAgent: "=HYPERLINK(\"http://evil\")", detail: ["note": "a, \"quoted\"\nline"])
                ], at: try Self.at("2026-01-10T10:00:00Z"), h)
            let reply = try await h.console("/console/audit.csv?action=share_refused", as: op)
            #expect(reply.status == 200)
            #expect(reply.headers["content-type"]?.hasPrefix("text/csv") == true)
            #expect(reply.headers["content-disposition"]?.hasPrefix("attachment; filename=\"gatehouse-audit-") == true)
            let lines = reply.body.components(separatedBy: "\r\n")
            #expect(
                lines[0] == "id,occurred_at,action,account_id,company_id,ip,session_id,request_id,user_agent,detail")
            #expect(lines.count == 3 || lines.count == 4)
            let row = lines.dropFirst().joined(separator: "\r\n")
            #expect(row.contains(",share_refused,'@SUM(1),'-2+3,10.1.2.3,,,\"'=HYPERLINK(\"\"http://evil\"\")\","))
            #expect(row.contains("\"note=a, \"\"quoted\"\"\nline\""))
            #expect(row.contains("2026-01-10T10:00:00"))

            let audit = try await h.server.services.parts.trail.explore(
                AuditFilter(action: AuditAction.consoleAction.rawValue), before: nil, limit: 10)
            let exported = try #require(audit.first { $0.record.detail["action"] == "audit_exported" })
            #expect(exported.record.detail["operator_id"] == op.accountID)
            #expect(exported.record.detail["filter_action"] == "share_refused")
            #expect(exported.record.detail["rows"] == "1")
        }
    }

    @Test("an export holds at most 10 000 rows and says so in its last line")
    func exportCap() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            for batch in 0..<11 {
                let count = batch == 10 ? 1 : 1000
                try await Self.record((0..<count).map { _ in Self.event(.otpSent) }, at: Date(), h)
            }
            let reply = try await h.console("/console/audit.csv?action=otp_sent", as: op)
            let lines = reply.body.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            #expect(lines.count == 1 + 10_000 + 1)
            #expect(lines.last?.hasPrefix("# only the newest 10000 events") == true)
        }
    }

    @Test("audit details, addresses and ids are escaped on the page")
    func escaping() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let probe = "\"><img src=x onerror=alert(1)>"
            try await Self.record(
                [Self.event(.shareRefused, account: probe, company: probe, ip: probe, detail: ["reason": probe])],
                at: Date(), h)
            let page = try await h.console("/console/audit?action=share_refused", as: op)
            #expect(page.status == 200)
            #expect(Self.rows(page.body) == 1)
            #expect(!page.body.contains("<img src=x"))
            #expect(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"))
        }
    }

    @Test("anyone but an operator gets 404")
    func operatorsOnly() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("plain")
            let account = try await h.confirmedAccount(email)
            let plain = ConsoleOperator(
                email: email, accountID: account.userID, access: account.access, refresh: account.refresh, formToken: ""
            )
            #expect(try await h.console("/console/audit", as: plain).status == 404)
            #expect(try await h.console("/console/audit.csv", as: plain).status == 404)
        }
    }
}
