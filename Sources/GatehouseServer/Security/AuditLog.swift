import Foundation
import GatehouseAPI
import Hummingbird
import Logging
import SQLKit

/// One audited decision or change. Details never hold a secret; emails appear only as digests.
public struct AuditEvent: Sendable {
    public var action: String
    public var accountID: String?
    public var companyID: String?
    public var ip: String?
    public var userAgent: String?
    public var detail: [String: String]

    public init(
        _ action: AuditAction, accountID: String? = nil, companyID: String? = nil, ip: String? = nil,
        userAgent: String? = nil, detail: [String: String] = [:]
    ) {
        self.action = action.rawValue
        self.accountID = accountID
        self.companyID = companyID
        self.ip = ip
        self.userAgent = userAgent
        self.detail = detail
    }
}

/// Writes and pages through audit events.
struct AuditLog {
    let db: any SQLDatabase
    let clock: any GatehouseClock

    func record(_ event: AuditEvent) async throws {
        let detail = String(decoding: try JSONEncoder.sortedKeys.encode(event.detail), as: UTF8.self)
        try await db.insert(into: "audit_events")
            .columns("occurred_at", "action", "account_id", "company_id", "ip", "user_agent", "detail")
            .values(
                SQLBind(clock.now.epochMilliseconds), SQLBind(event.action), SQLBind(event.accountID),
                SQLBind(event.companyID), SQLBind(event.ip), SQLBind(event.userAgent.map { String($0.prefix(512)) }),
                SQLBind(detail)
            )
            .run()
    }

    /// A page's size: 1…100, 50 when not given; anything else is refused as the contract says.
    static func pageSize(_ limit: Int?) throws -> Int {
        guard let limit else { return 50 }
        guard (1...100).contains(limit) else { throw APIError.validation("limit must be a whole number from 1 to 100") }
        return limit
    }

    /// The account's own events, newest first, `limit` at a time, before the event id `before`.
    func page(accountID: String, before: Int64?, limit: Int) async throws -> [Schemas.AuditEntry] {
        try await page(companyID: nil, accountID: accountID, before: before, limit: limit)
    }

    /// Events of one company (all of them, or one account's), or of one account anywhere, newest first.
    func page(companyID: String?, accountID: String?, before: Int64?, limit: Int) async throws -> [Schemas.AuditEntry] {
        var query = db.select().columns("id", "occurred_at", "action", "company_id", "ip", "user_agent", "detail")
            .from("audit_events")
        if let companyID { query = query.where("company_id", .equal, companyID) }
        if let accountID { query = query.where("account_id", .equal, accountID) }
        if let before { query = query.where("id", .lessThan, before) }
        return try await query.orderBy("id", .descending).limit(limit).all().map { row in
            let detail = try row.decode(column: "detail", as: String?.self)
            return Schemas.AuditEntry(
                id: try row.decode(column: "id", as: Int64.self),
                occurredAt: Date(epochMilliseconds: try row.decode(column: "occurred_at", as: Int64.self)),
                action: try row.decode(column: "action", as: String.self),
                companyId: try row.decode(column: "company_id", as: String?.self),
                ip: try row.decode(column: "ip", as: String?.self),
                userAgent: try row.decode(column: "user_agent", as: String?.self),
                detail: .init(
                    additionalProperties: detail.flatMap {
                        try? JSONDecoder().decode([String: String].self, from: Data($0.utf8))
                    } ?? [:]))
        }
    }
}

extension Store {
    /// Records an event from an operator command, on the system clock.
    public func recordAudit(_ event: AuditEvent) async throws {
        try await transaction { db in try await AuditLog(db: db, clock: SystemClock()).record(event) }
    }
}
