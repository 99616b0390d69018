import Foundation
import SQLKit

/// A mailed code as stored: its digest, what it is for, and what its sign-up left pending.
struct StoredCode: Decodable, Sendable {
    let id: String
    let email: String
    let codeHash: String
    let purpose: String
    let accountID: String?
    let newEmail: String?
    let pendingPasswordHash: String?
    let pendingMetadata: String?
    let codeChallenge: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, email, purpose
        case codeHash = "code_hash"
        case accountID = "account_id"
        case newEmail = "new_email"
        case pendingPasswordHash = "pending_password_hash"
        case pendingMetadata = "pending_metadata"
        case codeChallenge = "code_challenge"
    }
}

/// When a link was used (nil when it was not) and when it expires.
struct CodeTimes: Decodable {
    let consumedAt: Int64?
    let expiresAt: Int64

    enum CodingKeys: String, CodingKey {
        case consumedAt = "consumed_at"
        case expiresAt = "expires_at"
    }
}

/// The SQL of mailed codes and magic links (`one_time_codes`). A code is usable while it is not consumed, not
/// expired and has tries left.
struct OneTimeCodeRepository {
    let db: any SQLDatabase

    private static let columns = StoredCode.CodingKeys.allCases.map { SQLColumn($0.rawValue) as any SQLExpression }

    func insert(_ code: StoredCode, linkHash: String, createdAt: Date, expiresAt: Date) async throws {
        try await db.insert(into: "one_time_codes")
            .columns(
                "id", "email", "purpose", "code_hash", "link_hash", "account_id", "new_email", "attempts", "created_at",
                "expires_at", "pending_password_hash", "pending_metadata", "code_challenge"
            )
            .values(
                SQLBind(code.id), SQLBind(code.email), SQLBind(code.purpose), SQLBind(code.codeHash),
                SQLBind(linkHash), SQLBind(code.accountID), SQLBind(code.newEmail), SQLBind(Int64(0)),
                SQLBind(createdAt.epochMilliseconds), SQLBind(expiresAt.epochMilliseconds),
                SQLBind(code.pendingPasswordHash), SQLBind(code.pendingMetadata), SQLBind(code.codeChallenge)
            )
            .run()
    }

    /// Voids the unconsumed codes of `email` for `purpose`. For an email change, only `accountID`'s: another
    /// account's change to the same address is not this request's to cancel.
    func voidEarlier(email: String, purpose: CodePurpose, accountID: String?, at now: Date) async throws {
        var earlier = db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
            .where("email", .equal, email).where("purpose", .equal, purpose.rawValue)
            .where("consumed_at", .is, SQLLiteral.null)
        if purpose == .emailChange { earlier = earlier.where("account_id", .equal, SQLBind(accountID)) }
        try await earlier.run()
    }

    /// Voids every unconsumed email-change code of the account, to either address: a new request replaces the old.
    func voidEmailChanges(accountID: String, at now: Date) async throws {
        try await db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
            .where("account_id", .equal, accountID).where("purpose", .equal, CodePurpose.emailChange.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).run()
    }

    /// Voids every unconsumed sign-up code of `email`.
    func voidSignups(email: String, at now: Date) async throws {
        try await db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
            .where("email", .equal, email).where("purpose", .equal, CodePurpose.signup.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).run()
    }

    /// Counts a try on every usable code of `email` among `purposes` and returns them, in one statement.
    func countTry(email: String, purposes: [CodePurpose], now: Date, maxAttempts: Int) async throws -> [StoredCode] {
        try await db.update("one_time_codes")
            .set(SQLIdentifier("attempts"), to: SQLRaw("attempts + 1"))
            .where("email", .equal, email)
            .where("purpose", .in, purposes.map(\.rawValue))
            .where("consumed_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now.epochMilliseconds)
            .where("attempts", .lessThan, Int64(maxAttempts))
            .returning(Self.columns)
            .all(decoding: StoredCode.self)
    }

    /// The usable code whose link has the digest `linkHash`, among `purposes`.
    func usable(linkHash: String, purposes: [CodePurpose], now: Date, maxAttempts: Int) async throws -> StoredCode? {
        try await db.select()
            .columns(Self.columns)
            .from("one_time_codes")
            .where("link_hash", .equal, linkHash)
            .where("purpose", .in, purposes.map(\.rawValue))
            .where("consumed_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now.epochMilliseconds)
            .where("attempts", .lessThan, Int64(maxAttempts))
            .first(decoding: StoredCode.self)
    }

    /// When the link with the digest `linkHash` was used and expires; nil when there is none.
    func times(linkHash: String) async throws -> CodeTimes? {
        try await db.select().columns("consumed_at", "expires_at").from("one_time_codes")
            .where("link_hash", .equal, linkHash).first(decoding: CodeTimes.self)
    }

    /// The pending password digests of `email`'s usable sign-up codes, the newest three first.
    func pendingPasswordHashes(email: String, now: Date) async throws -> [String] {
        try await db.select().column("pending_password_hash").from("one_time_codes")
            .where("email", .equal, email).where("purpose", .equal, CodePurpose.signup.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).where("expires_at", .greaterThan, now.epochMilliseconds)
            .where("pending_password_hash", .isNot, SQLLiteral.null)
            .orderBy("created_at", .descending).limit(3)
            .all(decodingColumn: "pending_password_hash", as: String.self)
    }

    /// Consumes the code; false when another request consumed it first.
    func markConsumed(_ id: String, at now: Date) async throws -> Bool {
        try await !db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
            .where("id", .equal, id).where("consumed_at", .is, SQLLiteral.null)
            .returning("id").all().isEmpty
    }
}
