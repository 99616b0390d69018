import Foundation
import SQLKit

/// A company as the operators' list shows it.
struct CompanyListing: Sendable {
    let id: String
    let name: String
    let tier: CompanyTier
    let tierSource: TierSource?
    let memberCount: Int
    /// Records not deleted.
    let recordCount: Int
    /// The newest change in its records, or in its own row when that is newer.
    let lastActivity: Date
    let createdAt: Date
}

/// What the operators' list asks for: a search (a company's exact id, or a part of its name), a tier, and where the
/// page starts.
struct CompanyListQuery: Sendable {
    var search: String?
    var tier: CompanyTier?
    /// The last company of the page before: its creation time and id.
    var after: (createdAt: Int64, id: String)?
    var limit: Int
}

/// A member as an operator sees them: the account's address besides the role and masks the members see.
struct MemberListing: Sendable {
    let accountID: String
    let email: String
    let role: MemberRole
    let deptMask: Int64
    let managerMask: Int64
    let joinedAt: Date
}

/// SQL of the operators' views of companies (the console): every company, newest first, paged by (created_at, id)
/// so that a page costs the same at the millionth company; and a company's members with their addresses.
struct CompanyListingRepository {
    let db: any SQLDatabase

    /// One page of companies, newest first. A search matches the id exactly or the name anywhere, ignoring case.
    func companies(_ query: CompanyListQuery) async throws -> [CompanyListing] {
        var select = db.select()
            .column(SQLColumn("id", table: "c")).column(SQLColumn("name", table: "c"))
            .column(SQLColumn("tier", table: "c")).column(SQLColumn("tier_source", table: "c"))
            .column(SQLColumn("created_at", table: "c")).column(SQLColumn("updated_at", table: "c"))
            .column(
                SQLQueryString("(SELECT COUNT(*) FROM memberships m WHERE m.company_id = c.id)"), as: "member_count"
            )
            .column(
                SQLQueryString("(SELECT COUNT(*) FROM records r WHERE r.company_id = c.id AND r.deleted = 0)"),
                as: "record_count"
            )
            // The newest change is the record with the highest seq (the records_seq index), not a scan by time.
            .column(
                SQLQueryString(
                    "(SELECT r.updated_at FROM records r WHERE r.company_id = c.id ORDER BY r.seq DESC LIMIT 1)"),
                as: "last_change"
            )
            .from(SQLAlias(SQLIdentifier("companies"), as: SQLIdentifier("c")))
        if let search = query.search, !search.isEmpty {
            let pattern = "%" + Self.likeEscaped(search.lowercased()) + "%"
            select = select.where(
                SQLQueryString("(c.id = \(bind: search) OR LOWER(c.name) LIKE \(bind: pattern) ESCAPE '\\')"))
        }
        if let tier = query.tier {
            select = select.where(SQLColumn("tier", table: "c"), .equal, SQLBind(tier.rawValue))
        }
        if let after = query.after {
            select = select.where(
                SQLQueryString("(c.created_at, c.id) < (\(bind: after.createdAt), \(bind: after.id))"))
        }
        return
            try await select
            .orderBy(SQLOrderBy(expression: SQLColumn("created_at", table: "c"), direction: SQLDirection.descending))
            .orderBy(SQLOrderBy(expression: SQLColumn("id", table: "c"), direction: SQLDirection.descending))
            .limit(query.limit)
            .all(decoding: ListingRow.self)
            .map { row in
                CompanyListing(
                    id: row.id, name: row.name, tier: CompanyTier(rawValue: row.tier) ?? .free,
                    tierSource: row.tierSource.flatMap(TierSource.init(rawValue:)), memberCount: row.memberCount,
                    recordCount: row.recordCount,
                    lastActivity: Date(epochMilliseconds: max(row.updatedAt, row.lastChange ?? 0)),
                    createdAt: Date(epochMilliseconds: row.createdAt))
            }
    }

    /// `text` for a LIKE pattern: its `%`, `_` and `\` taken literally (`ESCAPE '\'`).
    static func likeEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "%" || character == "_" || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    private struct ListingRow: Decodable {
        let id: String
        let name: String
        let tier: String
        let tierSource: String?
        let createdAt: Int64
        let updatedAt: Int64
        let memberCount: Int
        let recordCount: Int
        let lastChange: Int64?

        enum CodingKeys: String, CodingKey {
            case id, name, tier
            case tierSource = "tier_source"
            case createdAt = "created_at"
            case updatedAt = "updated_at"
            case memberCount = "member_count"
            case recordCount = "record_count"
            case lastChange = "last_change"
        }
    }

    /// The company's members with their addresses, in the order they joined.
    func members(_ companyID: String) async throws -> [MemberListing] {
        try await db.raw(
            """
            SELECT m.account_id, a.email, m.role, m.dept_mask, m.manager_mask, m.joined_at
            FROM memberships m JOIN accounts a ON a.id = m.account_id
            WHERE m.company_id = \(bind: companyID)
            ORDER BY m.joined_at, m.account_id
            """
        ).all(decoding: MemberRow.self).map { row in
            MemberListing(
                accountID: row.accountID, email: row.email, role: MemberRole(rawValue: row.role) ?? .readOnly,
                deptMask: row.deptMask, managerMask: row.managerMask, joinedAt: Date(epochMilliseconds: row.joinedAt))
        }
    }

    private struct MemberRow: Decodable {
        let accountID: String
        let email: String
        let role: String
        let deptMask: Int64
        let managerMask: Int64
        let joinedAt: Int64

        enum CodingKeys: String, CodingKey {
            case email, role
            case accountID = "account_id"
            case deptMask = "dept_mask"
            case managerMask = "manager_mask"
            case joinedAt = "joined_at"
        }
    }
}
