import Foundation
import HTTPTypes
import Hummingbird

/// The console's audit explorer (`/console/audit`): the trail newest first, narrowed by action, actor (an account
/// id, or an address read as its account), company, client address, time, session and request id, 50 events a page
/// by id; and the same events as CSV (`/console/audit.csv`), an export that is itself audited.
struct ConsoleAudit: Sendable {
    let kit: ConsoleKit
    let store: Store
    let trail: AuditTrail
    let clock: any GatehouseClock

    static let pageSize = 50
    /// The most rows one export holds; its last line says when there were more.
    static let exportLimit = 10_000
    /// Events read per query while exporting.
    static let exportBatch = 500
    /// The longest value a text filter takes.
    static let filterLength = 200

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        store = services.parts.store
        trail = services.parts.trail
        clock = services.parts.clock
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/audit") { request, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return try await explorer(request.uri.query, console)
            }
        }
        router.get("/console/audit.csv") { request, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return try await export(request.uri.query, console)
            }
        }
    }

    // MARK: The filters

    /// The explorer's filters as the operator wrote them, for the form, the links and the export's audit.
    struct Filters: Sendable {
        var action: String?
        var actor: String?
        var company: String?
        var ip: String?
        var from: String?
        var to: String?
        var session: String?
        var request: String?

        static let names = ["action", "actor", "company", "ip", "from", "to", "session", "request"]

        init(_ parameters: ConsoleFilterParameters) {
            action = parameters["action"]
            actor = parameters["actor"]
            company = parameters["company"]
            ip = parameters["ip"]
            from = parameters["from"]
            to = parameters["to"]
            session = parameters["session"]
            request = parameters["request"]
        }

        var pairs: [(String, String?)] {
            [
                ("action", action), ("actor", actor), ("company", company), ("ip", ip), ("from", from), ("to", to),
                ("session", session), ("request", request),
            ]
        }
    }

    /// The filters read into the trail's terms: nil when the actor is an address no account has (nothing matches).
    func filter(_ filters: Filters) async throws -> AuditFilter? {
        for (name, value) in filters.pairs {
            if let value, value.count > Self.filterLength {
                throw ConsoleBadRequest("audit_bad_length", ["name": name, "limit": String(Self.filterLength)])
            }
        }
        var filter = AuditFilter()
        if let action = filters.action {
            guard AuditAction(rawValue: action) != nil else { throw ConsoleBadRequest("audit_bad_action") }
            filter.action = action
        }
        if let actor = filters.actor {
            if actor.contains("@") {
                guard let account = try await AccountDirectory(db: store.database).find(email: actor.lowercased())
                else { return nil }
                filter.accountID = account.id
            } else {
                filter.accountID = actor
            }
        }
        filter.companyID = filters.company
        filter.ip = filters.ip
        filter.sessionID = filters.session
        filter.requestID = filters.request
        if let from = filters.from {
            guard let time = ConsoleTime(from) else { throw ConsoleBadRequest("audit_bad_time", ["name": "from"]) }
            filter.from = time.start
        }
        if let to = filters.to {
            guard let time = ConsoleTime(to) else { throw ConsoleBadRequest("audit_bad_time", ["name": "to"]) }
            filter.until = time.until
        }
        if let from = filter.from, let until = filter.until, from >= until {
            throw ConsoleBadRequest("audit_bad_range")
        }
        return filter
    }

    // MARK: The explorer

    func explorer(_ query: String?, _ console: ConsoleCaller) async throws -> WebAnswer {
        var filters: Filters?
        do {
            let parameters = try ConsoleFilterParameters(query)
            let read = Filters(parameters)
            filters = read
            var before: Int64?
            if let text = parameters["before"] {
                guard let id = Int64(text), id > 0 else { throw ConsoleBadRequest("audit_bad_before") }
                before = id
            }
            guard let filter = try await filter(read) else {
                return page(console, read, entries: [], before: before, notice: kit.text("audit_no_actor", console))
            }
            let entries = try await trail.explore(filter, before: before, limit: Self.pageSize + 1)
            return page(console, read, entries: entries, before: before)
        } catch let bad as ConsoleBadRequest {
            return page(
                console, filters, entries: [], before: nil, error: kit.text(bad.key, console, bad.values),
                status: .badRequest)
        }
    }

    private func page(
        _ console: ConsoleCaller, _ filters: Filters?, entries: [AuditEntry], before: Int64?, notice: String? = nil,
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) -> WebAnswer {
        let shown = Array(entries.prefix(Self.pageSize))
        let pairs = filters?.pairs ?? []
        var fields: [String: Any] = [
            "rows": shown.map(Self.row), "has_rows": !shown.isEmpty,
            "actions": AuditAction.allCases.map { action in
                ["value": action.rawValue, "selected": action.rawValue == filters?.action]
            },
            "csv": ConsoleFilterParameters.link("/console/audit.csv", pairs),
        ]
        for (name, value) in pairs { fields["filter_" + name] = value ?? "" }
        if entries.count > Self.pageSize, let last = shown.last {
            fields["next"] = ConsoleFilterParameters.link(
                "/console/audit", pairs + [("before", String(last.record.id))])
        }
        if before != nil { fields["first"] = ConsoleFilterParameters.link("/console/audit", pairs) }
        if let notice { fields["notice"] = notice }
        if let error { fields["error"] = error }
        return kit.page(
            "audit", title: kit.text("console_nav_audit", console), fields, for: console, status: status,
            section: "audit")
    }

    /// One event as a row of the explorer (and of a company's or a user's recent audit,
    /// `console-audit-rows.mustache`): its links follow its account, company, session and request.
    static func row(_ entry: AuditEntry) -> [String: Any] {
        let record = entry.record
        var row: [String: Any] = [
            "id": String(record.id), "time": timeText(record.occurredAt), "action": record.action,
            "detail": detailText(record.detail),
        ]
        if let account = entry.accountID {
            row["account"] = account
            row["account_href"] = "/console/users/" + ConsoleFilterParameters.segment(account)
        }
        if let company = record.companyID {
            row["company"] = company
            row["company_href"] = "/console/companies/" + ConsoleFilterParameters.segment(company)
        }
        if let ip = record.ip {
            row["ip"] = ip
            row["ip_href"] = ConsoleFilterParameters.link("/console/audit", [("ip", ip)])
        }
        if let session = entry.sessionID {
            row["session"] = session
            row["session_href"] = ConsoleFilterParameters.link("/console/audit", [("session", session)])
        }
        if let request = entry.requestID {
            row["request"] = request
            row["request_href"] = ConsoleFilterParameters.link("/console/audit", [("request", request)])
        }
        return row
    }

    /// `2026-11-29 14:05:09 UTC`.
    static func timeText(_ date: Date) -> String {
        let text = date.iso8601
        return String(text.prefix(10)) + " " + String(text.dropFirst(11).prefix(8)) + " UTC"
    }

    /// `key=value key=value`, keys sorted.
    static func detailText(_ detail: [String: String]) -> String {
        detail.keys.sorted().map { "\($0)=\(detail[$0] ?? "")" }.joined(separator: " ")
    }

    // MARK: The export

    func export(_ query: String?, _ console: ConsoleCaller) async throws -> WebAnswer {
        let filters: Filters
        let filter: AuditFilter?
        do {
            filters = Filters(try ConsoleFilterParameters(query))
            filter = try await self.filter(filters)
        } catch let bad as ConsoleBadRequest {
            return page(
                console, nil, entries: [], before: nil, error: kit.text(bad.key, console, bad.values),
                status: .badRequest)
        }
        var csv = ConsoleCSV()
        csv.append(ConsoleCSV.header)
        var rows = 0
        var more = false
        if let filter {
            var before: Int64?
            reading: while true {
                let batch = try await trail.explore(filter, before: before, limit: Self.exportBatch)
                for entry in batch {
                    guard rows < Self.exportLimit else {
                        more = true
                        break reading
                    }
                    csv.append(ConsoleCSV.fields(entry))
                    rows += 1
                }
                guard batch.count == Self.exportBatch, let last = batch.last else { break }
                before = last.record.id
            }
        }
        if more {
            csv.comment(
                "only the newest \(Self.exportLimit) events are here: narrow the filters or the time range for the rest"
            )
        }
        var detail = ["rows": String(rows), "truncated": more ? "yes" : "no"]
        for (name, value) in filters.pairs { if let value { detail["filter_" + name] = value } }
        await kit.record(console, "audit_exported", detail: detail)
        let stamp = clock.now.iso8601.filter { $0.isNumber || $0 == "T" }.prefix(15)
        var answer = WebAnswer(status: .ok, html: csv.text, contentType: "text/csv; charset=utf-8")
        answer.headers[.contentDisposition] = "attachment; filename=\"gatehouse-audit-\(stamp)Z.csv\""
        answer.setCookies(console.cookies)
        return answer
    }
}
