import Foundation
import GatehouseAPI
import SQLKit

/// An account as stored.
struct AccountRecord: Sendable {
    let id: String
    var email: String
    var emailConfirmedAt: Date?
    var passwordHash: String?
    var userMetadata: [String: JSONValue]
    let createdAt: Date
    var updatedAt: Date
    var lastSignInAt: Date?
    var disabledAt: Date?
    /// The email change asked for and not yet confirmed, if any.
    var emailChange: PendingEmailChange? = nil
    /// What the admin API set (GoTrue's `app_metadata`, without the providers, which the identities give).
    var appMetadata: [String: JSONValue] = [:]
    /// When a ban of a set length ends (`disabledAt` holds since when); nil for none or one without an end.
    var bannedUntil: Date? = nil
    /// An anonymous user: `email` is a placeholder (`AccountRecord.anonymousEmail`) until it confirms one.
    var isAnonymous = false
    /// When the last sign-up code, recovery or sign-in link, and invitation were sent (`AccountRepository.stamp`).
    var confirmationSentAt: Date? = nil
    var recoverySentAt: Date? = nil
    var invitedAt: Date? = nil
    /// A single sign-on account (GoTrue's `is_sso_user`): its provider, and the address that provider gave, which
    /// the user sees as `email`; `email` itself holds a placeholder (`AccountRecord.ssoEmail(id:)`), so no email
    /// sign-in finds the account and the same address may have an account of its own.
    var ssoProviderID: String? = nil
    var ssoAddress: String? = nil

    var isSSOUser: Bool { ssoProviderID != nil }

    /// The address the user sees: the provider's for a single sign-on account, none for an anonymous one.
    var visibleEmail: String { ssoAddress ?? (isAnonymous ? "" : email) }

    /// The placeholder address of a single sign-on account, in the reserved `.invalid` domain no mail goes to.
    static func ssoEmail(id: String) -> String { "sso+\(id)@\(ssoDomain)" }
    static let ssoDomain = "sso.invalid"

    /// The placeholder address of an anonymous user: unique, and in the reserved `.invalid` domain (RFC 2606), which
    /// `AccountMail.deliverableEmail` refuses and the mailer never sends to.
    static func anonymousEmail(id: String) -> String { "anonymous+\(id)@\(anonymousDomain)" }
    static let anonymousDomain = "anonymous.invalid"
}

/// An email change waiting for its confirmations (GoTrue's `email_change` columns): the address asked for, when its
/// codes were mailed, and whether one of the two addresses has confirmed (with secure email change, the change
/// completes when the other does too).
struct PendingEmailChange: Sendable, Equatable {
    let newEmail: String
    let sentAt: Date
    /// Which address confirmed first: none yet, the current one, or the new one. The change completes when the
    /// other one does.
    var confirmedBy: Side = .none

    enum Side: Int64, Sendable {
        case none = 0
        case current = 1
        case new = 2
    }
}

/// The profile data an account carries (`user_metadata`) has a total size: it rides in every token answer and the
/// members list reads it.
enum UserMetadata {
    /// The most bytes the merged object may take, encoded as stored (sorted keys, compact JSON).
    static let maximumBytes = 16 * 1024

    static let tooLarge = APIError(
        .unprocessableContent, code: .metadataTooLarge,
        message: "user_metadata may take at most \(maximumBytes) bytes encoded, merged with what is stored")

    /// `current` with `changes` merged in: a null value removes its key.
    static func merged(_ current: [String: JSONValue], _ changes: [String: JSONValue]) -> [String: JSONValue] {
        var merged = current
        for (key, value) in changes {
            if value == .null { merged.removeValue(forKey: key) } else { merged[key] = value }
        }
        return merged
    }

    /// Refuses `metadata` over the limit, unless it is no larger than `before` (so data stored before the limit
    /// can still shrink).
    static func check(_ metadata: [String: JSONValue], before: [String: JSONValue] = [:]) throws {
        let size = AccountRepository.encode(metadata).utf8.count
        guard size <= maximumBytes || size <= AccountRepository.encode(before).utf8.count else { throw tooLarge }
    }
}

/// An identity row: the email identity, or a linked Apple ID.
struct IdentityRecord: Sendable {
    let id: String
    let accountID: String
    let provider: String
    let providerID: String
    let email: String?
    let createdAt: Date
    var lastSignInAt: Date?
}

/// SQL for accounts and their identities. Every write notes its account as changed (`TransactionChanges`), so the
/// cached user goes when the transaction commits.
struct AccountRepository {
    let db: any SQLDatabase

    /// Every column of an account row, in the order `insert` writes them (`UserSearchRepository` reads them too).
    static let columns = [
        "id", "email", "email_confirmed_at", "password_hash", "user_metadata", "created_at", "updated_at",
        "last_sign_in_at", "disabled_at", "email_change", "email_change_sent_at", "email_change_confirmed",
        "app_metadata", "banned_until", "is_anonymous", "confirmation_sent_at", "recovery_sent_at", "invited_at",
        "sso_provider_id", "sso_email",
    ]

    func find(email: String) async throws -> AccountRecord? {
        try await db.select().columns(Self.columns).from("accounts").where("email", .equal, email).first()
            .map(Self.decode)
    }

    func find(id: String) async throws -> AccountRecord? {
        try await db.select().columns(Self.columns).from("accounts").where("id", .equal, id).first().map(Self.decode)
    }

    /// The accounts with any of `ids` or `emails`, read 500 at a time (an import's check of its rows), as id → email.
    func existing(ids: [String], emails: [String]) async throws -> (byID: [String: String], byEmail: [String: String]) {
        var byID: [String: String] = [:]
        var byEmail: [String: String] = [:]
        for (column, values) in [("id", ids), ("email", emails)] {
            for chunk in values.chunks(of: 500) {
                let rows = try await db.select().columns("id", "email").from("accounts")
                    .where(SQLIdentifier(column), .in, Array(chunk)).all()
                for row in rows {
                    let id = try row.decode(column: "id", as: String.self)
                    let email = try row.decode(column: "email", as: String.self)
                    byID[id] = email
                    byEmail[email] = id
                }
            }
        }
        return (byID, byEmail)
    }

    /// The account, its row locked until the transaction ends, for a read-modify-write that must not write back
    /// columns another transaction changed meanwhile (`update` writes them all). PostgreSQL takes the row lock;
    /// SQLite's write transactions run one at a time already.
    func findLocked(id: String) async throws -> AccountRecord? {
        guard db.dialect.name == "postgresql" else { return try await find(id: id) }
        return try await db.raw(
            "SELECT \(unsafeRaw: Self.columns.joined(separator: ", ")) FROM accounts WHERE id = \(bind: id) FOR UPDATE"
        ).first().map(Self.decode)
    }

    /// The account an operator names, by id or by email.
    func find(idOrEmail: String) async throws -> AccountRecord? {
        if let account = try await find(id: idOrEmail) { return account }
        return try await find(email: idOrEmail.lowercased())
    }

    /// A page of accounts for the admin API: `limit` after skipping `offset`, by creation time (newest first unless
    /// `oldestFirst`), those whose email holds `filter` when given.
    func page(offset: Int, limit: Int, oldestFirst: Bool, filter: String?) async throws -> [AccountRecord] {
        var query = db.select().columns(Self.columns).from("accounts")
        if let filter { query = query.where("email", .like, Self.containing(filter)) }
        let direction: SQLDirection = oldestFirst ? .ascending : .descending
        return try await query.orderBy("created_at", direction).orderBy("id", direction).limit(limit).offset(offset)
            .all().map(Self.decode)
    }

    /// How many accounts `page` would go through.
    func count(filter: String?) async throws -> Int {
        var query = db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "count").from("accounts")
        if let filter { query = query.where("email", .like, Self.containing(filter)) }
        return try await query.first(decodingColumn: "count", as: Int.self) ?? 0
    }

    /// A LIKE pattern for addresses holding `text`: its own `%` and `_` are dropped (an address filter has no use for
    /// them), so they match nothing more.
    private static func containing(_ text: String) -> String {
        "%" + text.lowercased().filter { $0 != "%" && $0 != "_" && $0 != "\\" } + "%"
    }

    /// The first `limit` accounts, oldest first (an operator's listing).
    func oldestFirst(limit: Int) async throws -> [AccountRecord] {
        try await db.select().columns(Self.columns).from("accounts").orderBy("created_at").limit(limit).all()
            .map(Self.decode)
    }

    func insert(_ account: AccountRecord) async throws {
        TransactionChanges.accountChanged(account.id)
        try await db.insert(into: "accounts").columns(Self.columns)
            .values(
                SQLBind(account.id), SQLBind(account.email), SQLBind(account.emailConfirmedAt?.epochMilliseconds),
                SQLBind(account.passwordHash), SQLBind(Self.encode(account.userMetadata)),
                SQLBind(account.createdAt.epochMilliseconds), SQLBind(account.updatedAt.epochMilliseconds),
                SQLBind(account.lastSignInAt?.epochMilliseconds), SQLBind(account.disabledAt?.epochMilliseconds),
                SQLBind(account.emailChange?.newEmail), SQLBind(account.emailChange?.sentAt.epochMilliseconds),
                SQLBind(account.emailChange?.confirmedBy.rawValue ?? 0),
                SQLBind(account.appMetadata.isEmpty ? nil : Self.encode(account.appMetadata)),
                SQLBind(account.bannedUntil?.epochMilliseconds), SQLBind(account.isAnonymous ? 1 : 0),
                SQLBind(account.confirmationSentAt?.epochMilliseconds),
                SQLBind(account.recoverySentAt?.epochMilliseconds),
                SQLBind(account.invitedAt?.epochMilliseconds), SQLBind(account.ssoProviderID),
                SQLBind(account.ssoAddress)
            )
            .run()
    }

    /// Writes every mutable field of `account`.
    /// Creates an account with its email identity.
    /// `id` is chosen beforehand when a before user created hook was shown the account first.
    func create(
        email: String, passwordHash: String?, metadata: [String: JSONValue], confirmedAt: Date?, now: Date,
        id: String = Secrets.identifier()
    ) async throws -> AccountRecord {
        let account = AccountRecord(
            id: id, email: email, emailConfirmedAt: confirmedAt, passwordHash: passwordHash,
            userMetadata: metadata, createdAt: now, updatedAt: now, lastSignInAt: nil, disabledAt: nil)
        try await insert(account)
        try await insert(
            IdentityRecord(
                id: Secrets.identifier(), accountID: account.id, provider: "email", providerID: account.id,
                email: email,
                createdAt: now, lastSignInAt: nil))
        return account
    }

    func update(_ account: AccountRecord) async throws {
        TransactionChanges.accountChanged(account.id)
        try await db.update("accounts")
            .set("email", to: account.email)
            .set("email_confirmed_at", to: account.emailConfirmedAt?.epochMilliseconds)
            .set("password_hash", to: account.passwordHash)
            .set("user_metadata", to: Self.encode(account.userMetadata))
            .set("updated_at", to: account.updatedAt.epochMilliseconds)
            .set("last_sign_in_at", to: account.lastSignInAt?.epochMilliseconds)
            .set("disabled_at", to: account.disabledAt?.epochMilliseconds)
            .set("email_change", to: account.emailChange?.newEmail)
            .set("email_change_sent_at", to: account.emailChange?.sentAt.epochMilliseconds)
            .set("email_change_confirmed", to: account.emailChange?.confirmedBy.rawValue ?? 0)
            .set("app_metadata", to: account.appMetadata.isEmpty ? nil : Self.encode(account.appMetadata))
            .set("banned_until", to: account.bannedUntil?.epochMilliseconds)
            .set("is_anonymous", to: account.isAnonymous ? 1 : 0)
            .set("sso_email", to: account.ssoAddress)
            .where("id", .equal, account.id)
            .run()
    }

    /// Marks the account's change to `newEmail` confirmed by one of its two addresses; true when this call did (it
    /// was not yet), false when the other address already had, so this confirmation completes it. One statement, so
    /// two confirmations at once cannot both be the first.
    func confirmEmailChangeOnce(accountID: String, newEmail: String, by side: PendingEmailChange.Side) async throws
        -> Bool
    {
        TransactionChanges.accountChanged(accountID)
        return try await !db.update("accounts").set("email_change_confirmed", to: side.rawValue)
            .where("id", .equal, accountID).where("email_change", .equal, newEmail)
            .where("email_change_confirmed", .equal, 0)
            .returning("id").all().isEmpty
    }

    /// When something went out to the account, as GoTrue stamps its user. Written only here (never by `update`), so
    /// a record read earlier in the same transaction cannot undo it.
    enum Stamp: String {
        case confirmationSent = "confirmation_sent_at"
        case recoverySent = "recovery_sent_at"
        case invited = "invited_at"
    }

    func stamp(_ stamp: Stamp, accountID: String, at time: Date) async throws {
        TransactionChanges.accountChanged(accountID)
        try await db.update("accounts").set(SQLIdentifier(stamp.rawValue), to: SQLBind(time.epochMilliseconds))
            .where("id", .equal, accountID).run()
    }

    /// Sets the last sign-in time and, when given, a fresh hash of the same password (only over `replacing`, the hash
    /// that was checked, so a password changed meanwhile is never overwritten).
    func recordSignIn(_ id: String, at time: Date, rehashed: String?, replacing old: String?) async throws {
        TransactionChanges.accountChanged(id)
        try await db.update("accounts").set("last_sign_in_at", to: time.epochMilliseconds)
            .where("id", .equal, id).run()
        if let rehashed {
            try await db.update("accounts").set("password_hash", to: rehashed)
                .where("id", .equal, id).where("password_hash", .equal, SQLBind(old)).run()
        }
    }

    func delete(id: String) async throws {
        TransactionChanges.accountChanged(id)
        try await db.delete(from: "accounts").where("id", .equal, id).run()
    }

    func identities(accountID: String) async throws -> [IdentityRecord] {
        try await db.select().columns(
            "id", "account_id", "provider", "provider_id", "email", "created_at", "last_sign_in_at"
        )
        .from("identities").where("account_id", .equal, accountID).orderBy("created_at").all()
        .map(Self.decodeIdentity)
    }

    func identity(provider: String, providerID: String) async throws -> IdentityRecord? {
        try await db.select().columns(
            "id", "account_id", "provider", "provider_id", "email", "created_at", "last_sign_in_at"
        )
        .from("identities").where("provider", .equal, provider).where("provider_id", .equal, providerID).first()
        .map(Self.decodeIdentity)
    }

    func insert(_ identity: IdentityRecord) async throws {
        TransactionChanges.accountChanged(identity.accountID)
        try await db.insert(into: "identities")
            .columns("id", "account_id", "provider", "provider_id", "email", "created_at", "last_sign_in_at")
            .values(
                SQLBind(identity.id), SQLBind(identity.accountID), SQLBind(identity.provider),
                SQLBind(identity.providerID),
                SQLBind(identity.email), SQLBind(identity.createdAt.epochMilliseconds),
                SQLBind(identity.lastSignInAt?.epochMilliseconds)
            )
            .run()
    }

    func touchIdentity(provider: String, accountID: String, at time: Date) async throws {
        TransactionChanges.accountChanged(accountID)
        try await db.update("identities").set("last_sign_in_at", to: time.epochMilliseconds)
            .where("provider", .equal, provider).where("account_id", .equal, accountID).run()
    }

    func updateEmailIdentity(accountID: String, email: String) async throws {
        TransactionChanges.accountChanged(accountID)
        try await db.update("identities").set("email", to: email)
            .where("provider", .equal, "email").where("account_id", .equal, accountID).run()
    }

    static func decode(_ row: any SQLRow) throws -> AccountRecord {
        func date(_ column: String) throws -> Date? {
            try row.decode(column: column, as: Int64?.self).map(Date.init(epochMilliseconds:))
        }
        let metadata = try row.decode(column: "user_metadata", as: String.self)
        let appMetadata = try row.decode(column: "app_metadata", as: String?.self)
        var emailChange: PendingEmailChange?
        if let newEmail = try row.decode(column: "email_change", as: String?.self) {
            emailChange = PendingEmailChange(
                newEmail: newEmail, sentAt: try date("email_change_sent_at") ?? Date(timeIntervalSince1970: 0),
                confirmedBy: PendingEmailChange.Side(
                    rawValue: try row.decode(column: "email_change_confirmed", as: Int64.self)) ?? .none)
        }
        return AccountRecord(
            id: try row.decode(column: "id", as: String.self),
            email: try row.decode(column: "email", as: String.self),
            emailConfirmedAt: try date("email_confirmed_at"),
            passwordHash: try row.decode(column: "password_hash", as: String?.self),
            userMetadata: (try? JSONDecoder().decode([String: JSONValue].self, from: Data(metadata.utf8))) ?? [:],
            createdAt: try date("created_at") ?? Date(timeIntervalSince1970: 0),
            updatedAt: try date("updated_at") ?? Date(timeIntervalSince1970: 0),
            lastSignInAt: try date("last_sign_in_at"),
            disabledAt: try date("disabled_at"), emailChange: emailChange,
            appMetadata: appMetadata.flatMap {
                try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8))
            }
                ?? [:],
            bannedUntil: try date("banned_until"),
            isAnonymous: try row.decode(column: "is_anonymous", as: Int64.self) != 0,
            confirmationSentAt: try date("confirmation_sent_at"), recoverySentAt: try date("recovery_sent_at"),
            invitedAt: try date("invited_at"),
            ssoProviderID: try row.decode(column: "sso_provider_id", as: String?.self),
            ssoAddress: try row.decode(column: "sso_email", as: String?.self))
    }

    private static func decodeIdentity(_ row: any SQLRow) throws -> IdentityRecord {
        IdentityRecord(
            id: try row.decode(column: "id", as: String.self),
            accountID: try row.decode(column: "account_id", as: String.self),
            provider: try row.decode(column: "provider", as: String.self),
            providerID: try row.decode(column: "provider_id", as: String.self),
            email: try row.decode(column: "email", as: String?.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            lastSignInAt: try row.decode(column: "last_sign_in_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
    }

    /// Records an identity token (by digest) as spent until it expires; false when it was spent already. Spent
    /// tokens past their expiry are forgotten first.
    func claimIdentityToken(_ digest: String, expiresAt: Date, now: Date) async throws -> Bool {
        try await db.delete(from: "used_identity_tokens").where("expires_at", .lessThan, now.epochMilliseconds).run()
        let fresh = try await db.insert(into: "used_identity_tokens").columns("token_hash", "expires_at")
            .values(SQLBind(digest), SQLBind(expiresAt.epochMilliseconds))
            .ignoringConflicts(with: "token_hash").returning("token_hash").all()
        return !fresh.isEmpty
    }

    static func encode(_ metadata: [String: JSONValue]) -> String {
        String(decoding: (try? JSONEncoder.sortedKeys.encode(metadata)) ?? Data("{}".utf8), as: UTF8.self)
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}

/// Email address rules: trimmed, lower-cased, one `@`, a dotted domain, no spaces or control characters.
enum EmailAddress {
    static func normalize(_ raw: String) -> String? {
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard email.count <= 254, email.unicodeScalars.allSatisfy({ $0.value > 32 && $0.value != 127 }) else {
            return nil
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 64 else { return nil }
        let domain = parts[1]
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && $0.count <= 63 }),
            !email.contains(where: { "<>()[]\\,;:\"".contains($0) })
        else { return nil }
        return email
    }

    /// The part before the `@`, which a password must not equal either.
    static func localPart(_ email: String) -> String {
        String(email.split(separator: "@").first ?? "")
    }
}

extension Caller {
    /// The account's address as stored now: the token's `email` claim is the one it had when the token was issued,
    /// and a mail, an authenticator's label or a passkey's user name must follow an email change at once.
    func currentEmail(db: any SQLDatabase) async throws -> String {
        try await AccountRepository(db: db).find(id: accountID)?.email ?? identity.email
    }
}
