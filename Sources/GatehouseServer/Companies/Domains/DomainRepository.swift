import Foundation
import SQLKit

/// A company's domain as stored: its challenge token, and for a verified one when it was proven and when it is looked
/// at next.
struct DomainRecord: Sendable {
    let id: String
    let companyID: String
    let domain: String
    let token: String
    var verifiedAt: Date?
    /// Scheduled re-checks in a row that did not find the record.
    var failures: Int
    /// When the worker looks at a verified domain next; nil while pending.
    var nextCheckAt: Date?
    var lastCheckedAt: Date?
    let createdAt: Date
}

/// SQL for company domains. Every company-scoped method takes the company id and filters by it in the query itself;
/// the re-check worker's methods go across companies.
struct DomainRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "company_id", "domain", "token", "verified_at", "failures", "next_check_at", "last_checked_at",
        "created_at",
    ]

    func insert(_ record: DomainRecord) async throws {
        try await db.insert(into: "company_domains").columns(Self.columns)
            .values(
                SQLBind(record.id), SQLBind(record.companyID), SQLBind(record.domain), SQLBind(record.token),
                SQLBind(record.verifiedAt?.epochMilliseconds), SQLBind(Int64(record.failures)),
                SQLBind(record.nextCheckAt?.epochMilliseconds), SQLBind(record.lastCheckedAt?.epochMilliseconds),
                SQLBind(record.createdAt.epochMilliseconds)
            )
            .run()
    }

    /// The company's domains, oldest first.
    func domains(_ companyID: String) async throws -> [DomainRecord] {
        try await db.select().columns(Self.columns).from("company_domains").where("company_id", .equal, companyID)
            .orderBy("created_at").orderBy("id").all().map(Self.record)
    }

    func domain(_ companyID: String, id: String) async throws -> DomainRecord? {
        try await db.select().columns(Self.columns).from("company_domains").where("company_id", .equal, companyID)
            .where("id", .equal, id).first().map(Self.record)
    }

    /// The company that holds `domain` verified, if one does.
    func verifiedHolder(of domain: String) async throws -> String? {
        try await db.select().column("company_id").from("company_domains").where("domain", .equal, domain)
            .where("verified_at", .isNot, SQLLiteral.null).first()?.decode(column: "company_id", as: String.self)
    }

    func count(_ companyID: String) async throws -> Int {
        try await db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("company_domains")
            .where("company_id", .equal, companyID).first()?.decode(column: "n", as: Int.self) ?? 0
    }

    /// Writes the verification state of the company's domain `id`.
    func update(_ record: DomainRecord) async throws {
        try await db.update("company_domains")
            .set("verified_at", to: SQLBind(record.verifiedAt?.epochMilliseconds))
            .set("failures", to: Int64(record.failures))
            .set("next_check_at", to: SQLBind(record.nextCheckAt?.epochMilliseconds))
            .set("last_checked_at", to: SQLBind(record.lastCheckedAt?.epochMilliseconds))
            .where("company_id", .equal, record.companyID).where("id", .equal, record.id).run()
    }

    /// Removes the company's domain `id`; false when it has none by that id.
    func delete(_ companyID: String, id: String) async throws -> Bool {
        !(try await db.delete(from: "company_domains").where("company_id", .equal, companyID)
            .where("id", .equal, id).returning("id").all()).isEmpty
    }

    // MARK: The re-check worker, across companies

    /// The verified domain whose re-check is most overdue at `now`.
    func nextDue(now: Date) async throws -> DomainRecord? {
        try await db.select().columns(Self.columns).from("company_domains")
            .where("verified_at", .isNot, SQLLiteral.null)
            .where("next_check_at", .lessThanOrEqual, now.epochMilliseconds)
            .orderBy("next_check_at").limit(1).first().map(Self.record)
    }

    /// Takes `record`'s re-check until `until`, so no other instance looks at it meanwhile; false when another
    /// instance took it first.
    func lease(_ record: DomainRecord, until: Date) async throws -> Bool {
        guard let due = record.nextCheckAt else { return false }
        return
            !(try await db.update("company_domains").set("next_check_at", to: until.epochMilliseconds)
            .where("id", .equal, record.id).where("next_check_at", .equal, due.epochMilliseconds)
            .returning("id").all()).isEmpty
    }

    private static func record(_ row: any SQLRow) throws -> DomainRecord {
        DomainRecord(
            id: try row.decode(column: "id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            domain: try row.decode(column: "domain", as: String.self),
            token: try row.decode(column: "token", as: String.self),
            verifiedAt: try row.decode(column: "verified_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            failures: Int(try row.decode(column: "failures", as: Int64.self)),
            nextCheckAt: try row.decode(column: "next_check_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            lastCheckedAt: try row.decode(column: "last_checked_at", as: Int64?.self)
                .map(Date.init(epochMilliseconds:)),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)))
    }
}
