import Foundation
import SQLKit

/// SQL for invitations by email. Every company-scoped method takes the company id and filters by it in the query.
struct InvitationRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "company_id", "email", "role", "dept_mask", "manager_mask", "invited_by", "created_at", "sent_at",
        "expires_at", "used_at", "declined_at", "revoked_at",
    ]

    /// Stores a new invitation, first revoking any invitation to the same address in the company that is not used
    /// yet: one open invitation per company and address, the newest. Returns the ids it revoked.
    func insert(_ invitation: InvitationRecord, tokenHash: String, codeHash: String) async throws -> [String] {
        let replaced = try await db.update("invitations").set("revoked_at", to: invitation.createdAt.epochMilliseconds)
            .where("company_id", .equal, invitation.companyID).where("email", .equal, invitation.email)
            .where("used_at", .is, SQLLiteral.null).where("declined_at", .is, SQLLiteral.null)
            .where("revoked_at", .is, SQLLiteral.null)
            .returning("id").all(decodingColumn: "id", as: String.self)
        try await db.insert(into: "invitations")
            .columns(
                "id", "company_id", "email", "role", "dept_mask", "manager_mask", "token_hash", "code_hash",
                "invited_by", "created_at", "sent_at", "expires_at"
            )
            .values(
                SQLBind(invitation.id), SQLBind(invitation.companyID), SQLBind(invitation.email),
                SQLBind(invitation.role.rawValue), SQLBind(invitation.deptMask), SQLBind(invitation.managerMask),
                SQLBind(tokenHash), SQLBind(codeHash), SQLBind(invitation.invitedBy),
                SQLBind(invitation.createdAt.epochMilliseconds), SQLBind(invitation.sentAt.epochMilliseconds),
                SQLBind(invitation.expiresAt.epochMilliseconds)
            )
            .run()
        return replaced
    }

    /// The company's invitations, newest first.
    func invitations(_ companyID: String, limit: Int = 500) async throws -> [InvitationRecord] {
        try await db.select().columns(Self.columns).from("invitations").where("company_id", .equal, companyID)
            .orderBy("created_at", .descending).orderBy("id").limit(limit).all().map(Self.decode)
    }

    /// One invitation of this company; another company's is not found.
    func invitation(_ companyID: String, id: String) async throws -> InvitationRecord? {
        try await db.select().columns(Self.columns).from("invitations").where("company_id", .equal, companyID)
            .where("id", .equal, id).first().map(Self.decode)
    }

    /// An invitation by id, whichever company it is of (the invitee's side).
    func invitation(id: String) async throws -> InvitationRecord? {
        try await db.select().columns(Self.columns).from("invitations").where("id", .equal, id).first()
            .map(Self.decode)
    }

    /// The invitation whose link carries the token with this digest.
    func invitation(tokenHash: String) async throws -> InvitationRecord? {
        try await db.select().columns(Self.columns).from("invitations").where("token_hash", .equal, tokenHash)
            .first().map(Self.decode)
    }

    /// The newest invitation to `email` whose mailed code has this digest.
    func invitation(email: String, codeHash: String) async throws -> InvitationRecord? {
        try await db.select().columns(Self.columns).from("invitations").where("email", .equal, email)
            .where("code_hash", .equal, codeHash).orderBy("sent_at", .descending).first().map(Self.decode)
    }

    /// Gives an invitation not used yet a new token and code, `sentAt` and expiry; only while it is still the one
    /// last sent at `previousSent` (so two resends at once mail once).
    func resend(
        _ companyID: String, id: String, previousSent: Date, tokenHash: String, codeHash: String, now: Date,
        expiresAt: Date
    ) async throws -> Bool {
        try await !db.update("invitations").set("token_hash", to: tokenHash).set("code_hash", to: codeHash)
            .set("sent_at", to: now.epochMilliseconds).set("expires_at", to: expiresAt.epochMilliseconds)
            .where("company_id", .equal, companyID).where("id", .equal, id)
            .where("sent_at", .equal, previousSent.epochMilliseconds)
            .where("used_at", .is, SQLLiteral.null).where("declined_at", .is, SQLLiteral.null)
            .where("revoked_at", .is, SQLLiteral.null)
            .returning("id").all().isEmpty
    }

    /// Revokes an invitation of this company that is not used yet.
    func revoke(_ companyID: String, id: String, now: Date) async throws -> Bool {
        try await !db.update("invitations").set("revoked_at", to: now.epochMilliseconds)
            .where("company_id", .equal, companyID).where("id", .equal, id)
            .where("used_at", .is, SQLLiteral.null).where("declined_at", .is, SQLLiteral.null)
            .where("revoked_at", .is, SQLLiteral.null)
            .returning("id").all().isEmpty
    }

    /// Marks an open invitation accepted by `accountID`, only while it is still open at `now`: of two acceptances
    /// at once, one wins.
    func use(_ id: String, by accountID: String, now: Date) async throws -> Bool {
        try await !db.raw(
            """
            UPDATE invitations SET used_at = \(bind: now.epochMilliseconds), used_by = \(bind: accountID)
            WHERE id = \(bind: id) AND used_at IS NULL AND declined_at IS NULL AND revoked_at IS NULL
              AND expires_at > \(bind: now.epochMilliseconds)
            RETURNING id
            """
        ).all().isEmpty
    }

    /// Marks an open invitation declined, only while it is still open at `now`.
    func decline(_ id: String, now: Date) async throws -> Bool {
        try await !db.raw(
            """
            UPDATE invitations SET declined_at = \(bind: now.epochMilliseconds)
            WHERE id = \(bind: id) AND used_at IS NULL AND declined_at IS NULL AND revoked_at IS NULL
              AND expires_at > \(bind: now.epochMilliseconds)
            RETURNING id
            """
        ).all().isEmpty
    }

    /// The open invitations to `email`, with their company and the inviter's display metadata, newest first.
    func received(email: String, now: Date) async throws -> [(InvitationRecord, ReceivedRow)] {
        let rows = try await db.raw(
            """
            SELECT i.id, i.company_id, i.email, i.role, i.dept_mask, i.manager_mask, i.invited_by, i.created_at,
                   i.sent_at, i.expires_at, i.used_at, i.declined_at, i.revoked_at,
                   c.name AS company_name, c.logo_url, a.user_metadata AS inviter_metadata
            FROM invitations i JOIN companies c ON c.id = i.company_id
                 LEFT JOIN accounts a ON a.id = i.invited_by
            WHERE i.email = \(bind: email) AND i.used_at IS NULL AND i.declined_at IS NULL AND i.revoked_at IS NULL
              AND i.expires_at > \(bind: now.epochMilliseconds)
            ORDER BY i.sent_at DESC, i.id
            """
        ).all()
        return try rows.map { row in (try Self.decode(row), try row.decode(model: ReceivedRow.self)) }
    }

    /// What the invitee's list shows beside the invitation.
    struct ReceivedRow: Decodable {
        let companyName: String
        let logoURL: String?
        let inviterMetadata: String?

        enum CodingKeys: String, CodingKey {
            case companyName = "company_name"
            case logoURL = "logo_url"
            case inviterMetadata = "inviter_metadata"
        }
    }

    private static func decode(_ row: any SQLRow) throws -> InvitationRecord {
        InvitationRecord(
            id: try row.decode(column: "id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            email: try row.decode(column: "email", as: String.self),
            role: MemberRole(rawValue: try row.decode(column: "role", as: String.self)) ?? .readOnly,
            deptMask: try row.decode(column: "dept_mask", as: Int64.self),
            managerMask: try row.decode(column: "manager_mask", as: Int64.self),
            invitedBy: try row.decode(column: "invited_by", as: String.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            sentAt: Date(epochMilliseconds: try row.decode(column: "sent_at", as: Int64.self)),
            expiresAt: Date(epochMilliseconds: try row.decode(column: "expires_at", as: Int64.self)),
            usedAt: try row.decode(column: "used_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            declinedAt: try row.decode(column: "declined_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            revokedAt: try row.decode(column: "revoked_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
    }
}
