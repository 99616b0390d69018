import Foundation
import SQLKit

/// Writes and pages through audit events.
struct AuditRepository {
    let db: any SQLDatabase
    /// When `record` says an event occurred.
    let clock: any GatehouseClock

    func record(_ event: AuditEvent) async throws {
        try await record([event])
    }

    /// The events in one statement, all of them or none.
    func record(_ events: [AuditEvent]) async throws {
        guard !events.isEmpty else { return }
        let now = clock.now.epochMilliseconds
        var insert = db.insert(into: "audit_events")
            .columns(
                "occurred_at", "action", "account_id", "company_id", "ip", "user_agent", "detail", "request_id",
                "session_id")
        for event in events {
            let detail = event.detailJSON
            insert = insert.values(
                SQLBind(now), SQLBind(event.action), SQLBind(event.accountID), SQLBind(event.companyID),
                SQLBind(event.ip), SQLBind(event.userAgent.map { String($0.prefix(512)) }), SQLBind(detail),
                SQLBind(event.requestID), SQLBind(event.sessionID))
        }
        try await insert.run()
    }

    /// The trail forgets the person: the account's events lose their IP address and user agent, and every event that
    /// names the address by its digest (failed sign-ins record it without an account) loses that digest. What
    /// happened, and when, stays.
    func forget(accountID: String, emailDigest digest: String) async throws {
        try await db.update("audit_events").set("ip", to: SQLLiteral.null).set("user_agent", to: SQLLiteral.null)
            .where("account_id", .equal, accountID).run()
        let named = try await db.select().columns("id", "detail").from("audit_events")
            .where("detail", .like, "%\(digest)%").all()
        for row in named {
            let id = try row.decode(column: "id", as: Int64.self)
            let text = try row.decode(column: "detail", as: String?.self) ?? "{}"
            var detail = (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
            detail = detail.filter { $0.value != digest }
            try await db.update("audit_events")
                .set("detail", to: String(decoding: try JSONEncoder.sortedKeys.encode(detail), as: UTF8.self))
                .where("id", .equal, id).run()
        }
    }

    /// The account's own events, newest first, `limit` at a time, before the event id `before`.
    func page(accountID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await page(companyID: nil, accountID: accountID, before: before, limit: limit)
    }

    /// Events of one company (all of them, or one account's), or of one account anywhere, newest first.
    func page(companyID: String?, accountID: String?, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        var query = db.select().columns("id", "occurred_at", "action", "company_id", "ip", "user_agent", "detail")
            .from("audit_events")
        if let companyID { query = query.where("company_id", .equal, companyID) }
        if let accountID { query = query.where("account_id", .equal, accountID) }
        if let before { query = query.where("id", .lessThan, before) }
        return try await query.orderBy("id", .descending).limit(limit).all(decoding: Row.self).map { row in
            AuditRecord(
                id: row.id, occurredAt: Date(epochMilliseconds: row.occurredAt), action: row.action,
                companyID: row.companyID, ip: row.ip, userAgent: row.userAgent,
                detail: row.detail.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
                    ?? [:])
        }
    }

    /// Every event, newest first, `limit` after skipping `offset`, of one action or one account when given (the admin
    /// API's trail), with how many there are in all.
    func all(offset: Int, limit: Int, action: String?, accountID: String?) async throws -> (
        records: [(accountID: String?, record: AuditRecord)], total: Int
    ) {
        func narrowed(_ query: SQLSelectBuilder) -> SQLSelectBuilder {
            var query = query
            if let action { query = query.where("action", .equal, action) }
            if let accountID { query = query.where("account_id", .equal, accountID) }
            return query
        }
        let total =
            try await narrowed(
                db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "count").from("audit_events")
            ).first(decodingColumn: "count", as: Int.self) ?? 0
        let rows = try await narrowed(
            db.select().columns("id", "occurred_at", "action", "account_id", "company_id", "ip", "user_agent", "detail")
                .from("audit_events")
        ).orderBy("id", .descending).limit(limit).offset(offset).all()
        let records = try rows.map { sqlRow in
            let row = try sqlRow.decode(model: Row.self)
            return (
                try sqlRow.decode(column: "account_id", as: String?.self),
                AuditRecord(
                    id: row.id, occurredAt: Date(epochMilliseconds: row.occurredAt), action: row.action,
                    companyID: row.companyID, ip: row.ip, userAgent: row.userAgent,
                    detail: row.detail.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
                        ?? [:])
            )
        }
        return (records, total)
    }

    /// Events that match every part of `filter`, newest first, `limit` at a time, before the event id `before` (the
    /// console's audit explorer). Each filter of one column walks its index by id (audit_events_action, _account,
    /// _company, _ip, _session, _request), so a page costs the same however long the trail is.
    func explore(_ filter: AuditFilter, before: Int64?, limit: Int) async throws -> [AuditEntry] {
        var query = db.select()
            .columns(
                "id", "occurred_at", "action", "account_id", "company_id", "ip", "user_agent", "detail", "request_id",
                "session_id"
            )
            .from("audit_events")
        if let action = filter.action { query = query.where("action", .equal, action) }
        if let accountID = filter.accountID { query = query.where("account_id", .equal, accountID) }
        if let companyID = filter.companyID { query = query.where("company_id", .equal, companyID) }
        if let ip = filter.ip { query = query.where("ip", .equal, ip) }
        if let sessionID = filter.sessionID { query = query.where("session_id", .equal, sessionID) }
        if let requestID = filter.requestID { query = query.where("request_id", .equal, requestID) }
        if let from = filter.from { query = query.where("occurred_at", .greaterThanOrEqual, from.epochMilliseconds) }
        if let until = filter.until { query = query.where("occurred_at", .lessThan, until.epochMilliseconds) }
        if let before { query = query.where("id", .lessThan, before) }
        return try await query.orderBy("id", .descending).limit(limit).all().map { sqlRow in
            let row = try sqlRow.decode(model: Row.self)
            return AuditEntry(
                record: AuditRecord(
                    id: row.id, occurredAt: Date(epochMilliseconds: row.occurredAt), action: row.action,
                    companyID: row.companyID, ip: row.ip, userAgent: row.userAgent,
                    detail: row.detail.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
                        ?? [:]),
                accountID: try sqlRow.decode(column: "account_id", as: String?.self),
                requestID: try sqlRow.decode(column: "request_id", as: String?.self),
                sessionID: try sqlRow.decode(column: "session_id", as: String?.self))
        }
    }

    private struct Row: Decodable {
        let id: Int64
        let occurredAt: Int64
        let action: String
        let companyID: String?
        let ip: String?
        let userAgent: String?
        let detail: String?

        enum CodingKeys: String, CodingKey {
            case id, action, ip, detail
            case occurredAt = "occurred_at"
            case companyID = "company_id"
            case userAgent = "user_agent"
        }
    }
}

extension Store {
    /// Records an event from an operator command, on the system clock.
    public func recordAudit(_ event: AuditEvent) async throws {
        try await transaction { db in try await AuditRepository(db: db, clock: SystemClock()).record(event) }
    }
}
