import Foundation
import SQLKit

/// What kind of second factor a row is.
enum FactorType: String, Sendable, Codable {
    case totp
    /// A set of single-use recovery codes (GoTrue's experimental `recovery_code` factor).
    case recoveryCode = "recovery_code"
}

/// Whether a factor has been proven: a TOTP factor is `unverified` until its first code verifies.
enum FactorStatus: String, Sendable, Codable {
    case verified, unverified
}

/// A factor row. `secret` is sealed (`SecretBox`, bound to the factor's id); recovery codes have none.
struct FactorRecord: Sendable, Decodable {
    let id: String
    let accountID: String
    let type: FactorType
    let friendlyName: String
    let status: FactorStatus
    let secret: String?
    let lastUsedStep: Int64?
    let createdAt: Int64
    let updatedAt: Int64
    let lastChallengedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case id, secret, status
        case accountID = "account_id"
        case type = "factor_type"
        case friendlyName = "friendly_name"
        case lastUsedStep = "last_used_step"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case lastChallengedAt = "last_challenged_at"
    }
}

/// A challenge row: made for one factor, from one client address, answered at most once.
struct ChallengeRecord: Sendable, Decodable {
    let id: String
    let factorID: String
    let createdAt: Int64
    let ip: String?
    let verifiedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case id, ip
        case factorID = "factor_id"
        case createdAt = "created_at"
        case verifiedAt = "verified_at"
    }
}

/// All SQL on second factors, their challenges and recovery codes. Every write to a factor notes its account as
/// changed, since the user object lists its factors.
struct FactorRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "account_id", "factor_type", "friendly_name", "status", "secret", "last_used_step", "created_at",
        "updated_at", "last_challenged_at",
    ]

    // MARK: Factors

    /// The account's factors, oldest first.
    func factors(accountID: String) async throws -> [FactorRecord] {
        try await db.select().columns(Self.columns).from("mfa_factors").where("account_id", .equal, accountID)
            .orderBy("created_at").orderBy("id").all(decoding: FactorRecord.self)
    }

    /// One factor, only when it is the account's.
    func factor(_ id: String, accountID: String) async throws -> FactorRecord? {
        try await db.select().columns(Self.columns).from("mfa_factors").where("id", .equal, id)
            .where("account_id", .equal, accountID).first(decoding: FactorRecord.self)
    }

    func insert(_ factor: FactorRecord) async throws {
        try await db.insert(into: "mfa_factors").columns(Self.columns)
            .values(
                SQLBind(factor.id), SQLBind(factor.accountID), SQLBind(factor.type.rawValue),
                SQLBind(factor.friendlyName), SQLBind(factor.status.rawValue), SQLBind(factor.secret),
                SQLBind(factor.lastUsedStep), SQLBind(factor.createdAt), SQLBind(factor.updatedAt),
                SQLBind(factor.lastChallengedAt)
            )
            .run()
        TransactionChanges.accountChanged(factor.accountID)
    }

    /// Records that `step`'s code verified the factor (which is verified from now on), unless a code of that step or
    /// a later one was accepted first: one conditional write, so two requests racing with the same code cannot both
    /// pass. False when it lost.
    func acceptStep(_ step: Int64, factorID: String, accountID: String, now: Date) async throws -> Bool {
        let updated = try await db.update("mfa_factors")
            .set("last_used_step", to: step).set("status", to: FactorStatus.verified.rawValue)
            .set("updated_at", to: now.epochMilliseconds)
            .where("id", .equal, factorID)
            .where { $0.where("last_used_step", .is, SQLLiteral.null).orWhere("last_used_step", .lessThan, step) }
            .returning("id").all()
        TransactionChanges.accountChanged(accountID)
        return !updated.isEmpty
    }

    /// Deletes the factors named and returns those that existed.
    @discardableResult
    func delete(_ ids: [String], accountID: String) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        let deleted = try await db.delete(from: "mfa_factors").where("id", .in, ids)
            .where("account_id", .equal, accountID).returning("id").all(decodingColumn: "id", as: String.self)
        TransactionChanges.accountChanged(accountID)
        return deleted
    }

    /// The account's unverified TOTP factors nobody finished: those never challenged and older than `before`, or,
    /// with `all`, every one (after a factor verified, as GoTrue does).
    func unfinished(accountID: String, before: Int64?) async throws -> [String] {
        var query = db.select().column("id").from("mfa_factors").where("account_id", .equal, accountID)
            .where("status", .equal, FactorStatus.unverified.rawValue)
        if let before {
            query = query.where("created_at", .lessThan, before).where("last_challenged_at", .is, SQLLiteral.null)
        }
        return try await query.all(decodingColumn: "id", as: String.self)
    }

    // MARK: Challenges

    func insertChallenge(_ challenge: ChallengeRecord, accountID: String) async throws {
        try await db.insert(into: "mfa_challenges").columns("id", "factor_id", "created_at", "ip")
            .values(
                SQLBind(challenge.id), SQLBind(challenge.factorID), SQLBind(challenge.createdAt),
                SQLBind(challenge.ip)
            )
            .run()
        try await db.update("mfa_factors").set("last_challenged_at", to: challenge.createdAt)
            .where("id", .equal, challenge.factorID).run()
        TransactionChanges.accountChanged(accountID)
    }

    /// A challenge of `factorID`.
    func challenge(_ id: String, factorID: String) async throws -> ChallengeRecord? {
        try await db.select().columns("id", "factor_id", "created_at", "ip", "verified_at").from("mfa_challenges")
            .where("id", .equal, id).where("factor_id", .equal, factorID).first(decoding: ChallengeRecord.self)
    }

    /// Marks the challenge answered unless it was already: false when another request answered it first.
    func answer(_ challengeID: String, now: Date) async throws -> Bool {
        try await !db.update("mfa_challenges").set("verified_at", to: now.epochMilliseconds)
            .where("id", .equal, challengeID).where("verified_at", .is, SQLLiteral.null)
            .returning("id").all().isEmpty
    }

    func deleteChallenge(_ id: String) async throws {
        try await db.delete(from: "mfa_challenges").where("id", .equal, id).run()
    }

    // MARK: Recovery codes

    /// Replaces the set's codes with `digests`.
    func replaceCodes(factorID: String, digests: [String]) async throws {
        try await db.delete(from: "mfa_recovery_codes").where("factor_id", .equal, factorID).run()
        var insert = db.insert(into: "mfa_recovery_codes").columns("factor_id", "digest")
        for digest in digests { insert = insert.values(SQLBind(factorID), SQLBind(digest)) }
        try await insert.run()
    }

    /// How many codes the set has, and how many are unused.
    func codeCounts(factorID: String) async throws -> (total: Int, remaining: Int) {
        let row = try await db.raw(
            """
            SELECT COUNT(*) AS total, COALESCE(SUM(CASE WHEN used_at IS NULL THEN 1 ELSE 0 END), 0) AS remaining
            FROM mfa_recovery_codes WHERE factor_id = \(bind: factorID)
            """
        ).first()
        return (
            try row?.decode(column: "total", as: Int.self) ?? 0, try row?.decode(column: "remaining", as: Int.self) ?? 0
        )
    }

    /// Spends the unused code whose digest is one of `digests` (one per digest key): false when none is, or another
    /// request spent it first.
    func spendCode(factorID: String, digests: [String], now: Date) async throws -> Bool {
        try await !db.update("mfa_recovery_codes").set("used_at", to: now.epochMilliseconds)
            .where("factor_id", .equal, factorID).where("digest", .in, digests).where("used_at", .is, SQLLiteral.null)
            .returning("digest").all().isEmpty
    }
}
