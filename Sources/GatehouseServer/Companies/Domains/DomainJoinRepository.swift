import Foundation
import SQLKit

/// A company's choice about joining by domain; no row is `off`.
struct DomainJoinSetting: Sendable, Equatable {
    enum Mode: String, Sendable {
        case off, automatic, approval
    }

    var mode: Mode = .off
    var role: MemberRole = .member
    var deptMask: Int64 = 0
}

/// A company an address's domain leads to: it holds the domain verified and allows joining by it.
struct DomainCompanyRecord: Sendable {
    let companyID: String
    let name: String
    let logoURL: String?
    let domain: String
    let setting: DomainJoinSetting
}

/// An account's request to join, waiting for the owner; its address as it is now.
struct JoinRequestRecord: Sendable {
    let id: String
    let companyID: String
    let accountID: String
    let email: String
    let createdAt: Date
}

/// SQL for joining by domain: the companies' settings and the requests waiting for approval.
struct DomainJoinRepository {
    let db: any SQLDatabase

    func setting(_ companyID: String) async throws -> DomainJoinSetting {
        guard
            let row = try await db.select().columns("mode", "role", "dept_mask").from("company_domain_join")
                .where("company_id", .equal, companyID).first()
        else { return DomainJoinSetting() }
        return try Self.setting(row)
    }

    func save(_ companyID: String, _ setting: DomainJoinSetting, now: Date) async throws {
        try await db.delete(from: "company_domain_join").where("company_id", .equal, companyID).run()
        try await db.insert(into: "company_domain_join").columns(
            "company_id", "mode", "role", "dept_mask", "updated_at"
        )
        .values(
            SQLBind(companyID), SQLBind(setting.mode.rawValue), SQLBind(setting.role.rawValue),
            SQLBind(setting.deptMask), SQLBind(now.epochMilliseconds)
        )
        .run()
    }

    /// The companies that hold `domain` verified and let its addresses join (one at most: one company per domain).
    func companies(domain: String) async throws -> [DomainCompanyRecord] {
        try await db.raw(
            """
            SELECT c.id, c.name, c.logo_url, d.domain, j.mode, j.role, j.dept_mask
            FROM company_domains d
            JOIN company_domain_join j ON j.company_id = d.company_id
            JOIN companies c ON c.id = d.company_id
            WHERE d.domain = \(bind: domain) AND d.verified_at IS NOT NULL AND j.mode <> 'off'
            ORDER BY c.name
            """
        ).all().map { row in
            DomainCompanyRecord(
                companyID: try row.decode(column: "id", as: String.self),
                name: try row.decode(column: "name", as: String.self),
                logoURL: try row.decode(column: "logo_url", as: String?.self),
                domain: try row.decode(column: "domain", as: String.self), setting: try Self.setting(row))
        }
    }

    /// Adds a request unless the account has one waiting already.
    func request(_ companyID: String, accountID: String, now: Date) async throws {
        guard try await pending(companyID, accountID: accountID) == false else { return }
        try await db.insert(into: "domain_join_requests").columns("id", "company_id", "account_id", "created_at")
            .values(
                SQLBind(Secrets.identifier()), SQLBind(companyID), SQLBind(accountID),
                SQLBind(now.epochMilliseconds)
            )
            .run()
    }

    func pending(_ companyID: String, accountID: String) async throws -> Bool {
        try await db.select().column("id").from("domain_join_requests").where("company_id", .equal, companyID)
            .where("account_id", .equal, accountID).first() != nil
    }

    /// The company's waiting requests, oldest first.
    func requests(_ companyID: String) async throws -> [JoinRequestRecord] {
        try await db.raw(
            """
            SELECT r.id, r.company_id, r.account_id, a.email, r.created_at
            FROM domain_join_requests r JOIN accounts a ON a.id = r.account_id
            WHERE r.company_id = \(bind: companyID)
            ORDER BY r.created_at, r.id
            """
        ).all().map(Self.request)
    }

    func request(_ companyID: String, id: String) async throws -> JoinRequestRecord? {
        try await db.raw(
            """
            SELECT r.id, r.company_id, r.account_id, a.email, r.created_at
            FROM domain_join_requests r JOIN accounts a ON a.id = r.account_id
            WHERE r.company_id = \(bind: companyID) AND r.id = \(bind: id)
            """
        ).first().map(Self.request)
    }

    /// Removes the company's request `id`; false when it has none by that id.
    func deleteRequest(_ companyID: String, id: String) async throws -> Bool {
        !(try await db.delete(from: "domain_join_requests").where("company_id", .equal, companyID)
            .where("id", .equal, id).returning("id").all()).isEmpty
    }

    private static func setting(_ row: any SQLRow) throws -> DomainJoinSetting {
        DomainJoinSetting(
            mode: DomainJoinSetting.Mode(rawValue: try row.decode(column: "mode", as: String.self)) ?? .off,
            role: MemberRole(rawValue: try row.decode(column: "role", as: String.self)) ?? .member,
            deptMask: try row.decode(column: "dept_mask", as: Int64.self))
    }

    private static func request(_ row: any SQLRow) throws -> JoinRequestRecord {
        JoinRequestRecord(
            id: try row.decode(column: "id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            accountID: try row.decode(column: "account_id", as: String.self),
            email: try row.decode(column: "email", as: String.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)))
    }
}
