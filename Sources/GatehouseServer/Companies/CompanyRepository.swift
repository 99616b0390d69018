import Foundation
import GatehouseAPI
import SQLKit

/// A company as stored.
struct CompanyRecord: Sendable {
    let id: String
    var name: String
    var logoURL: String?
    var ownerID: String
    var tier: CompanyTier
    var policy: CompanyPolicy
    let createdAt: Date
    var updatedAt: Date
    /// Who set the tier: nil for a company that never had a subscription or an operator's choice.
    var tierSource: TierSource? = nil
    /// The operator's reason for an override.
    var tierReason: String? = nil
    /// The UUID an app sets as a purchase's `appAccountToken`: a purchase counts for this company only.
    var appAccountToken: String = Secrets.identifier()
}

/// A share link as stored (its token only as a digest).
struct ShareLinkRecord: Sendable {
    let id: String
    let companyID: String
    let permission: SharePermission
    let createdBy: String
    let createdAt: Date
    let expiresAt: Date?
    let maxUses: Int?
    let uses: Int
    let revokedAt: Date?

    func usable(at now: Date) -> Bool {
        revokedAt == nil && (expiresAt.map { $0 > now } ?? true) && (maxUses.map { uses < $0 } ?? true)
    }
}

/// A company as one of its participants' lists shows it.
struct CompanySummaryRecord: Sendable {
    let id: String
    let name: String
    let tier: CompanyTier
    let logoURL: String?
    /// The account's role in it.
    let role: MemberRole
    let memberCount: Int
    /// Whether the account has a company credential there.
    let hasCredential: Bool
    let requiresCredential: Bool
    let requiresMFA: Bool
}

/// A member as the other members see them.
struct MemberRecord: Sendable {
    let accountID: String
    let displayName: String
    /// Whether their company credential carries a picture.
    let hasImage: Bool
    let role: MemberRole
    let deptMask: Int64
    let managerMask: Int64
    let joinedAt: Date
}

/// SQL for companies, memberships and share links. Every company-scoped method takes the company id and filters
/// by it in the query itself.
struct CompanyRepository {
    let db: any SQLDatabase

    private static let companyColumns = [
        "id", "name", "logo_url", "owner_id", "tier", "requires_credential", "password_min_length",
        "session_idle_timeout", "session_lifetime", "managers_can_share", "created_at", "updated_at", "requires_mfa",
        "tier_source", "tier_reason", "app_account_token",
    ]

    func insert(_ company: CompanyRecord) async throws {
        try await db.insert(into: "companies").columns(Self.companyColumns)
            .values(
                SQLBind(company.id), SQLBind(company.name), SQLBind(company.logoURL), SQLBind(company.ownerID),
                SQLBind(company.tier.rawValue), SQLBind(company.policy.requiresCredential ? 1 : 0),
                SQLBind(Int64(company.policy.passwordMinLength)), SQLBind(Int64(company.policy.sessionIdleTimeout)),
                SQLBind(Int64(company.policy.sessionLifetime)), SQLBind(company.policy.managersCanShare ? 1 : 0),
                SQLBind(company.createdAt.epochMilliseconds), SQLBind(company.updatedAt.epochMilliseconds),
                SQLBind(company.policy.requiresMFA ? 1 : 0), SQLBind(company.tierSource?.rawValue),
                SQLBind(company.tierReason), SQLBind(company.appAccountToken)
            )
            .run()
    }

    func company(_ companyID: String) async throws -> CompanyRecord? {
        try await db.select().columns(Self.companyColumns).from("companies").where("id", .equal, companyID).first()
            .map(Self.decodeCompany)
    }

    func update(_ company: CompanyRecord) async throws {
        try await db.update("companies")
            .set("name", to: company.name).set("logo_url", to: company.logoURL).set("owner_id", to: company.ownerID)
            .set("tier", to: company.tier.rawValue)
            .set("requires_credential", to: company.policy.requiresCredential ? 1 : 0)
            .set("password_min_length", to: Int64(company.policy.passwordMinLength))
            .set("session_idle_timeout", to: Int64(company.policy.sessionIdleTimeout))
            .set("session_lifetime", to: Int64(company.policy.sessionLifetime))
            .set("managers_can_share", to: company.policy.managersCanShare ? 1 : 0)
            .set("requires_mfa", to: company.policy.requiresMFA ? 1 : 0)
            .set("tier_source", to: company.tierSource?.rawValue).set("tier_reason", to: company.tierReason)
            .set("updated_at", to: company.updatedAt.epochMilliseconds)
            .where("id", .equal, company.id)
            .run()
    }

    /// Removes the company and, by cascade, its memberships, credentials and share links; ends its sessions.
    func delete(_ companyID: String, now: Date) async throws {
        try await SessionChanges(db: db).end(.wholeCompany(companyID), now: now)
        try await db.delete(from: "companies").where("id", .equal, companyID).run()
    }

    /// The company whose purchase token is `token`.
    func company(appAccountToken token: String) async throws -> CompanyRecord? {
        try await db.select().columns(Self.companyColumns).from("companies").where("app_account_token", .equal, token)
            .first().map(Self.decodeCompany)
    }

    func setTier(_ companyID: String, _ tier: CompanyTier, source: TierSource?, reason: String?, now: Date)
        async throws
    {
        try await db.update("companies").set("tier", to: tier.rawValue).set("tier_source", to: source?.rawValue)
            .set("tier_reason", to: reason).set("updated_at", to: now.epochMilliseconds)
            .where("id", .equal, companyID).run()
    }

    /// Every company with its settings, for operators.
    func all(limit: Int = 1000) async throws -> [CompanyRecord] {
        try await db.select().columns(Self.companyColumns).from("companies").orderBy("created_at").limit(limit).all()
            .map(Self.decodeCompany)
    }

    // MARK: Memberships

    func membership(_ companyID: String, accountID: String) async throws -> Membership? {
        try await db.select().columns("company_id", "account_id", "role", "dept_mask", "manager_mask", "joined_epoch")
            .from("memberships").where("company_id", .equal, companyID).where("account_id", .equal, accountID)
            .first().map(Self.decodeMembership)
    }

    /// Adds a member. An account that was a member before starts after its old membership's last epoch, so
    /// change tokens of that membership never work again.
    func addMember(_ companyID: String, accountID: String, role: MemberRole, now: Date) async throws {
        let epoch = try await former(companyID, accountID: accountID).map { $0.epoch + 1 } ?? 0
        try await db.insert(into: "memberships")
            .columns(
                "company_id", "account_id", "role", "dept_mask", "manager_mask", "joined_at", "access_epoch",
                "joined_epoch"
            )
            .values(
                SQLBind(companyID), SQLBind(accountID), SQLBind(role.rawValue), SQLBind(Int64(0)), SQLBind(Int64(0)),
                SQLBind(now.epochMilliseconds), SQLBind(epoch), SQLBind(epoch)
            )
            .run()
    }

    /// How the account's last membership of the company ended; nil if it never ended.
    func former(_ companyID: String, accountID: String) async throws -> FormerMembership? {
        try await db.select().columns("removed_at", "left_at", "left_role", "access_epoch").from("former_members")
            .where("company_id", .equal, companyID).where("account_id", .equal, accountID).first()
            .map { row in
                FormerMembership(
                    removedAt: try row.decode(column: "removed_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
                    leftAt: try row.decode(column: "left_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
                    leftRole: try row.decode(column: "left_role", as: String?.self).flatMap(MemberRole.init(rawValue:)),
                    epoch: try row.decode(column: "access_epoch", as: Int64.self))
            }
    }

    func updateMember(_ companyID: String, accountID: String, role: MemberRole, deptMask: Int64, managerMask: Int64)
        async throws
    {
        try await db.update("memberships").set("role", to: role.rawValue).set("dept_mask", to: deptMask)
            .set("manager_mask", to: managerMask)
            .where("company_id", .equal, companyID).where("account_id", .equal, accountID).run()
    }

    /// How a membership ends: the owner removed the account, or it left.
    enum MembershipEnd {
        case removed, left
    }

    /// Removes a member, their credential, and ends their sessions in this company; notes how the membership ended
    /// (`former`), so that a removal or a demotion outlives it.
    func removeMember(_ companyID: String, accountID: String, ending: MembershipEnd, now: Date) async throws {
        guard
            let row = try await db.select().columns("role", "access_epoch").from("memberships")
                .where("company_id", .equal, companyID).where("account_id", .equal, accountID).first()
        else { return }
        let role = try row.decode(column: "role", as: String.self)
        let epoch = try row.decode(column: "access_epoch", as: Int64.self)
        let at = now.epochMilliseconds
        switch ending {
        case .removed:
            try await db.raw(
                """
                INSERT INTO former_members (company_id, account_id, removed_at, access_epoch)
                VALUES (\(bind: companyID), \(bind: accountID), \(bind: at), \(bind: epoch))
                ON CONFLICT (company_id, account_id)
                DO UPDATE SET removed_at = excluded.removed_at, access_epoch = excluded.access_epoch
                """
            ).run()
        case .left:
            try await db.raw(
                """
                INSERT INTO former_members (company_id, account_id, left_at, left_role, access_epoch)
                VALUES (\(bind: companyID), \(bind: accountID), \(bind: at), \(bind: role), \(bind: epoch))
                ON CONFLICT (company_id, account_id)
                DO UPDATE SET left_at = excluded.left_at, left_role = excluded.left_role,
                              access_epoch = excluded.access_epoch
                """
            ).run()
        }
        try await db.delete(from: "memberships").where("company_id", .equal, companyID)
            .where("account_id", .equal, accountID).run()
        try await db.delete(from: "company_credentials").where("company_id", .equal, companyID)
            .where("account_id", .equal, accountID).run()
        try await endSessions(companyID, accountID: accountID, except: nil, now: now)
    }

    /// Ends an account's sessions in one company, but for `except`.
    func endSessions(_ companyID: String, accountID: String, except: String?, now: Date) async throws {
        try await SessionChanges(db: db).end(.company(companyID, accountID: accountID, except: except), now: now)
    }

    /// Participants besides the owner.
    func participantCount(_ companyID: String) async throws -> Int {
        try await db.raw(
            "SELECT COUNT(*) AS n FROM memberships WHERE company_id = \(bind: companyID) AND role <> 'owner'"
        )
        .first(decodingColumn: "n", as: Int.self) ?? 0
    }

    /// Takes the company row's write lock for the rest of the transaction (a no-op update).
    func lock(_ companyID: String) async throws {
        try await db.update("companies").set("updated_at", to: SQLColumn("updated_at")).where("id", .equal, companyID)
            .run()
    }

    func memberCount(_ companyID: String) async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM memberships WHERE company_id = \(bind: companyID)")
            .first(decodingColumn: "n", as: Int.self) ?? 0
    }

    /// The companies `accountID` owns, by name.
    func owned(by accountID: String) async throws -> [(id: String, name: String)] {
        try await db.select().columns("id", "name").from("companies").where("owner_id", .equal, accountID)
            .orderBy("name").orderBy("id").all()
            .map { (try $0.decode(column: "id", as: String.self), try $0.decode(column: "name", as: String.self)) }
    }

    /// The companies an account owns or participates in, with what its list shows, in one query.
    func summaries(accountID: String) async throws -> [CompanySummaryRecord] {
        try await db.raw(
            """
            SELECT c.id, c.name, c.tier, c.logo_url, c.requires_credential, c.requires_mfa, m.role,
                   (SELECT COUNT(*) FROM memberships x WHERE x.company_id = c.id) AS member_count,
                   (SELECT COUNT(*) FROM company_credentials k WHERE k.company_id = c.id AND k.account_id = m.account_id) AS credentials
            FROM memberships m JOIN companies c ON c.id = m.company_id
            WHERE m.account_id = \(bind: accountID)
            ORDER BY c.name, c.id
            """
        ).all(decoding: SummaryRow.self).map { row in
            CompanySummaryRecord(
                id: row.id, name: row.name, tier: CompanyTier(rawValue: row.tier) ?? .free, logoURL: row.logoURL,
                role: MemberRole(rawValue: row.role) ?? .readOnly, memberCount: row.memberCount,
                hasCredential: row.credentials > 0, requiresCredential: row.requiresCredential != 0,
                requiresMFA: row.requiresMFA != 0)
        }
    }

    private struct SummaryRow: Decodable {
        let id: String
        let name: String
        let tier: String
        let logoURL: String?
        let requiresCredential: Int
        let requiresMFA: Int
        let role: String
        let memberCount: Int
        let credentials: Int

        enum CodingKeys: String, CodingKey {
            case id, name, tier, role, credentials
            case logoURL = "logo_url"
            case requiresCredential = "requires_credential"
            case requiresMFA = "requires_mfa"
            case memberCount = "member_count"
        }
    }

    /// A company's members as other members see them: display name and whether they have a picture, never username
    /// or email.
    func members(_ companyID: String) async throws -> [MemberRecord] {
        try await db.raw(
            """
            SELECT m.account_id, m.role, m.dept_mask, m.manager_mask, m.joined_at, a.user_metadata,
                   (SELECT COUNT(*) FROM company_credentials k
                     WHERE k.company_id = m.company_id AND k.account_id = m.account_id AND k.image IS NOT NULL) AS images
            FROM memberships m JOIN accounts a ON a.id = m.account_id
            WHERE m.company_id = \(bind: companyID)
            ORDER BY m.joined_at, m.account_id
            """
        ).all(decoding: MemberRow.self).map { row in
            MemberRecord(
                accountID: row.accountID, displayName: Self.displayName(row.userMetadata), hasImage: row.images > 0,
                role: MemberRole(rawValue: row.role) ?? .readOnly, deptMask: row.deptMask,
                managerMask: row.managerMask, joinedAt: Date(epochMilliseconds: row.joinedAt))
        }
    }

    private struct MemberRow: Decodable {
        let accountID: String
        let role: String
        let deptMask: Int64
        let managerMask: Int64
        let joinedAt: Int64
        let userMetadata: String
        let images: Int

        enum CodingKeys: String, CodingKey {
            case role, images
            case accountID = "account_id"
            case deptMask = "dept_mask"
            case managerMask = "manager_mask"
            case joinedAt = "joined_at"
            case userMetadata = "user_metadata"
        }
    }

    /// The most characters of a display name other members see: the rest of the profile is the account's own.
    static let displayNameLength = 100

    /// The name other members see: the profile's display name, or first and last name, cut to
    /// `displayNameLength`; never the email.
    static func displayName(_ metadataJSON: String) -> String {
        displayName((try? JSONDecoder().decode([String: JSONValue].self, from: Data(metadataJSON.utf8))) ?? [:])
    }

    /// The same, from the profile as the account holds it.
    static func displayName(_ metadata: [String: JSONValue]) -> String {
        var name = metadata["display_name"]?.stringValue ?? ""
        if name.isEmpty {
            name = [metadata["first_name"]?.stringValue, metadata["last_name"]?.stringValue].compactMap { $0 }
                .filter { !$0.isEmpty }.joined(separator: " ")
        }
        return name.isEmpty ? "Member" : String(name.prefix(displayNameLength))
    }

    // MARK: Share links

    func insert(_ link: ShareLinkRecord, tokenHash: String) async throws {
        try await db.insert(into: "share_links")
            .columns(
                "id", "company_id", "token_hash", "permission", "created_by", "created_at", "expires_at", "max_uses",
                "uses"
            )
            .values(
                SQLBind(link.id), SQLBind(link.companyID), SQLBind(tokenHash), SQLBind(link.permission.rawValue),
                SQLBind(link.createdBy), SQLBind(link.createdAt.epochMilliseconds),
                SQLBind(link.expiresAt?.epochMilliseconds),
                SQLBind(link.maxUses.map(Int64.init)), SQLBind(Int64(0))
            )
            .run()
    }

    private static let shareColumns = [
        "id", "company_id", "permission", "created_by", "created_at", "expires_at", "max_uses", "uses", "revoked_at",
    ]

    func shares(_ companyID: String) async throws -> [ShareLinkRecord] {
        try await db.select().columns(Self.shareColumns).from("share_links").where("company_id", .equal, companyID)
            .orderBy("created_at", .descending).all().map(Self.decodeShare)
    }

    func share(tokenHash: String) async throws -> ShareLinkRecord? {
        try await db.select().columns(Self.shareColumns).from("share_links").where("token_hash", .equal, tokenHash)
            .first().map(Self.decodeShare)
    }

    /// Revokes a link of this company; a link of another company is not found.
    func revokeShare(_ companyID: String, shareID: String, now: Date) async throws -> Bool {
        try await !db.update("share_links").set("revoked_at", to: now.epochMilliseconds)
            .where("company_id", .equal, companyID).where("id", .equal, shareID)
            .where("revoked_at", .is, SQLLiteral.null).returning("id").all().isEmpty
    }

    /// Counts one use, only while the link is still usable (so concurrent acceptances cannot exceed max_uses).
    func useShare(_ companyID: String, shareID: String, now: Date) async throws -> Bool {
        try await !db.raw(
            """
            UPDATE share_links SET uses = uses + 1
            WHERE company_id = \(bind: companyID) AND id = \(bind: shareID) AND revoked_at IS NULL
              AND (expires_at IS NULL OR expires_at > \(bind: now.epochMilliseconds))
              AND (max_uses IS NULL OR uses < max_uses)
            RETURNING id
            """
        ).all().isEmpty
    }

    // MARK: Decoding

    private static func decodeCompany(_ row: any SQLRow) throws -> CompanyRecord {
        CompanyRecord(
            id: try row.decode(column: "id", as: String.self), name: try row.decode(column: "name", as: String.self),
            logoURL: try row.decode(column: "logo_url", as: String?.self),
            ownerID: try row.decode(column: "owner_id", as: String.self),
            tier: CompanyTier(rawValue: try row.decode(column: "tier", as: String.self)) ?? .free,
            policy: CompanyPolicy(
                requiresCredential: try row.decode(column: "requires_credential", as: Int.self) != 0,
                passwordMinLength: try row.decode(column: "password_min_length", as: Int.self),
                sessionIdleTimeout: TimeInterval(try row.decode(column: "session_idle_timeout", as: Int.self)),
                sessionLifetime: TimeInterval(try row.decode(column: "session_lifetime", as: Int.self)),
                managersCanShare: try row.decode(column: "managers_can_share", as: Int.self) != 0,
                requiresMFA: try row.decode(column: "requires_mfa", as: Int.self) != 0),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            updatedAt: Date(epochMilliseconds: try row.decode(column: "updated_at", as: Int64.self)),
            tierSource: try row.decode(column: "tier_source", as: String?.self).flatMap(TierSource.init(rawValue:)),
            tierReason: try row.decode(column: "tier_reason", as: String?.self),
            appAccountToken: try row.decode(column: "app_account_token", as: String.self))
    }

    private static func decodeMembership(_ row: any SQLRow) throws -> Membership {
        Membership(
            companyID: try row.decode(column: "company_id", as: String.self),
            accountID: try row.decode(column: "account_id", as: String.self),
            role: MemberRole(rawValue: try row.decode(column: "role", as: String.self)) ?? .readOnly,
            deptMask: try row.decode(column: "dept_mask", as: Int64.self),
            managerMask: try row.decode(column: "manager_mask", as: Int64.self),
            joinedEpoch: try row.decode(column: "joined_epoch", as: Int64.self))
    }

    private static func decodeShare(_ row: any SQLRow) throws -> ShareLinkRecord {
        ShareLinkRecord(
            id: try row.decode(column: "id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            permission: SharePermission(rawValue: try row.decode(column: "permission", as: String.self)) ?? .readOnly,
            createdBy: try row.decode(column: "created_by", as: String.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            expiresAt: try row.decode(column: "expires_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            maxUses: try row.decode(column: "max_uses", as: Int?.self),
            uses: try row.decode(column: "uses", as: Int.self),
            revokedAt: try row.decode(column: "revoked_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
    }
}
