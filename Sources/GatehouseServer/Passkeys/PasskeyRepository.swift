import Foundation
import SQLKit

/// A registered passkey. `companyID` nil is an account passkey; otherwise it logs its member in to that company.
struct PasskeyRecord: Sendable, Decodable {
    let id: String
    let accountID: String
    let companyID: String?
    /// The authenticator's credential id, base64url.
    let credentialID: String
    /// The COSE public key as the authenticator sent it, base64url.
    let publicKey: String
    let algorithm: Int
    let signCount: Int64
    /// The authenticator model's id, 32 hex digits (all zero for most passkeys).
    let aaguid: String
    let backupEligible: Bool
    let backedUp: Bool
    /// Comma-separated transports the authenticator reported (`internal`, `hybrid`, `usb`…).
    let transports: String
    let friendlyName: String
    let createdAt: Int64
    let updatedAt: Int64
    let lastUsedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case id, algorithm, aaguid, transports
        case accountID = "account_id"
        case companyID = "company_id"
        case credentialID = "credential_id"
        case publicKey = "public_key"
        case signCount = "sign_count"
        case backupEligible = "backup_eligible"
        case backedUp = "backed_up"
        case friendlyName = "friendly_name"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case lastUsedAt = "last_used_at"
    }

    init(
        id: String, accountID: String, companyID: String?, credentialID: String, publicKey: String, algorithm: Int,
        signCount: Int64, aaguid: String, backupEligible: Bool, backedUp: Bool, transports: String,
        friendlyName: String, createdAt: Int64, updatedAt: Int64, lastUsedAt: Int64?
    ) {
        self.id = id
        self.accountID = accountID
        self.companyID = companyID
        self.credentialID = credentialID
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.aaguid = aaguid
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.transports = transports
        self.friendlyName = friendlyName
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastUsedAt = lastUsedAt
    }

    /// Flags are stored as 0 and 1 (a bigint in both stores), which PostgreSQL does not decode as a Bool.
    init(from decoder: any Decoder) throws {
        let row = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try row.decode(String.self, forKey: .id), accountID: try row.decode(String.self, forKey: .accountID),
            companyID: try row.decodeIfPresent(String.self, forKey: .companyID),
            credentialID: try row.decode(String.self, forKey: .credentialID),
            publicKey: try row.decode(String.self, forKey: .publicKey),
            algorithm: Int(try row.decode(Int64.self, forKey: .algorithm)),
            signCount: try row.decode(Int64.self, forKey: .signCount),
            aaguid: try row.decode(String.self, forKey: .aaguid),
            backupEligible: try row.decode(Int64.self, forKey: .backupEligible) != 0,
            backedUp: try row.decode(Int64.self, forKey: .backedUp) != 0,
            transports: try row.decode(String.self, forKey: .transports),
            friendlyName: try row.decode(String.self, forKey: .friendlyName),
            createdAt: try row.decode(Int64.self, forKey: .createdAt),
            updatedAt: try row.decode(Int64.self, forKey: .updatedAt),
            lastUsedAt: try row.decodeIfPresent(Int64.self, forKey: .lastUsedAt))
    }
}

/// The four ceremonies a challenge can be for; a challenge answers only its own.
enum PasskeyCeremony: String, Sendable, Codable {
    case registration, authentication
    case companyRegistration = "company_registration"
    case companyLogin = "company_login"
}

/// A challenge row: random bytes (base64url) for one ceremony, and the account and company it was made for.
struct PasskeyChallengeRecord: Sendable, Decodable {
    let id: String
    let ceremony: PasskeyCeremony
    let accountID: String?
    let companyID: String?
    let challenge: String
    let createdAt: Int64

    enum CodingKeys: String, CodingKey {
        case id, ceremony, challenge
        case accountID = "account_id"
        case companyID = "company_id"
        case createdAt = "created_at"
    }
}

/// All SQL on passkeys and their challenges. Account passkeys appear in nothing cached, so no write notes a change.
struct PasskeyRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "account_id", "company_id", "credential_id", "public_key", "algorithm", "sign_count", "aaguid",
        "backup_eligible", "backed_up", "transports", "friendly_name", "created_at", "updated_at", "last_used_at",
    ]

    /// The account's passkeys of one kind (`companyID` nil: account passkeys), oldest first.
    func passkeys(accountID: String, companyID: String?) async throws -> [PasskeyRecord] {
        try await db.select().columns(Self.columns).from("passkeys").where("account_id", .equal, accountID)
            .where(Self.company(companyID)).orderBy("created_at").orderBy("id").all(decoding: PasskeyRecord.self)
    }

    /// Every passkey of the account, account and company ones (the admin API removes either).
    func all(accountID: String) async throws -> [PasskeyRecord] {
        try await db.select().columns(Self.columns).from("passkeys").where("account_id", .equal, accountID)
            .orderBy("created_at").orderBy("id").all(decoding: PasskeyRecord.self)
    }

    /// One passkey of the account, of the kind asked for.
    func passkey(_ id: String, accountID: String, companyID: String?) async throws -> PasskeyRecord? {
        try await db.select().columns(Self.columns).from("passkeys").where("id", .equal, id)
            .where("account_id", .equal, accountID).where(Self.company(companyID)).first(decoding: PasskeyRecord.self)
    }

    /// The passkey of a credential id, whoever's.
    func passkey(credentialID: String) async throws -> PasskeyRecord? {
        try await db.select().columns(Self.columns).from("passkeys").where("credential_id", .equal, credentialID)
            .first(decoding: PasskeyRecord.self)
    }

    /// Inserts the passkey; false when its credential id is registered already (to anyone).
    func insert(_ passkey: PasskeyRecord) async throws -> Bool {
        let inserted = try await db.insert(into: "passkeys").columns(Self.columns)
            .values(
                SQLBind(passkey.id), SQLBind(passkey.accountID), SQLBind(passkey.companyID),
                SQLBind(passkey.credentialID), SQLBind(passkey.publicKey), SQLBind(Int64(passkey.algorithm)),
                SQLBind(passkey.signCount), SQLBind(passkey.aaguid), SQLBind(Int64(passkey.backupEligible ? 1 : 0)),
                SQLBind(Int64(passkey.backedUp ? 1 : 0)), SQLBind(passkey.transports), SQLBind(passkey.friendlyName),
                SQLBind(passkey.createdAt), SQLBind(passkey.updatedAt), SQLBind(passkey.lastUsedAt)
            )
            .ignoringConflicts(with: ["credential_id"]).returning("id").all()
        return !inserted.isEmpty
    }

    /// Records a sign-in by the passkey: its new counter, backup state and the time. Conditional on the counter it
    /// was checked against, so two assertions racing with one counter value cannot both pass; false when it lost.
    func recordUse(_ id: String, checkedCount: Int64, newCount: Int64, backedUp: Bool, now: Date) async throws -> Bool {
        try await !db.update("passkeys").set("sign_count", to: newCount).set("backed_up", to: Int64(backedUp ? 1 : 0))
            .set("last_used_at", to: now.epochMilliseconds).set("updated_at", to: now.epochMilliseconds)
            .where("id", .equal, id).where("sign_count", .equal, checkedCount).returning("id").all().isEmpty
    }

    func rename(_ id: String, to name: String, now: Date) async throws {
        try await db.update("passkeys").set("friendly_name", to: name).set("updated_at", to: now.epochMilliseconds)
            .where("id", .equal, id).run()
    }

    /// Deletes one of the account's passkeys; false when there was none.
    func delete(_ id: String, accountID: String) async throws -> Bool {
        try await !db.delete(from: "passkeys").where("id", .equal, id).where("account_id", .equal, accountID)
            .returning("id").all().isEmpty
    }

    // MARK: Challenges

    func insertChallenge(_ challenge: PasskeyChallengeRecord) async throws {
        try await db.insert(into: "passkey_challenges")
            .columns("id", "ceremony", "account_id", "company_id", "challenge", "created_at")
            .values(
                SQLBind(challenge.id), SQLBind(challenge.ceremony.rawValue), SQLBind(challenge.accountID),
                SQLBind(challenge.companyID), SQLBind(challenge.challenge), SQLBind(challenge.createdAt)
            )
            .run()
    }

    /// Takes the challenge out of the store if it is for this ceremony, account and company: one conditional delete,
    /// so a challenge is answered once even by two racing requests. Nil when there was no such challenge.
    func consumeChallenge(
        _ id: String, ceremony: PasskeyCeremony, accountID: String?, companyID: String?
    ) async throws -> PasskeyChallengeRecord? {
        try await db.delete(from: "passkey_challenges").where("id", .equal, id)
            .where("ceremony", .equal, ceremony.rawValue)
            .where(Self.equalOrNull("account_id", accountID)).where(Self.equalOrNull("company_id", companyID))
            .returning("id", "ceremony", "account_id", "company_id", "challenge", "created_at")
            .first(decoding: PasskeyChallengeRecord.self)
    }

    private static func company(_ companyID: String?) -> any SQLExpression { equalOrNull("company_id", companyID) }

    /// `column = value`, or `column IS NULL` for no value.
    private static func equalOrNull(_ column: String, _ value: String?) -> any SQLExpression {
        guard let value else { return SQLBinaryExpression(SQLIdentifier(column), .is, SQLLiteral.null) }
        return SQLBinaryExpression(SQLIdentifier(column), .equal, SQLBind(value))
    }
}
