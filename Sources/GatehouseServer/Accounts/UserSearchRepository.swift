import Foundation
import SQLKit

/// The SQL of the console's user search (`UserSearch`). Pages are keyset pages: each continues after the last row of
/// the one before, `(column, id) < (value, id)` along the sort's index, never an offset, so the millionth account's
/// page costs what the first does. The filters are conditions on that walk; the text in metadata is a scan.
struct UserSearchRepository {
    let db: any SQLDatabase

    /// Up to `limit` accounts matching `query`, in its order, after its cursor.
    func accounts(_ query: UserQuery, now: Date, limit: Int) async throws -> [AccountRecord] {
        let select = filtered(query, now: now)
        switch query.sort {
        case .newest, .oldest:
            let newest = query.sort == .newest
            if let after = query.after, let value = after.value.flatMap(Int64.init) {
                select.where(
                    SQLGroupExpression([SQLColumn("created_at"), SQLColumn("id")]),
                    newest ? .lessThan : .greaterThan, SQLGroupExpression([SQLBind(value), SQLBind(after.id)]))
            }
            let direction: SQLDirection = newest ? .descending : .ascending
            select.orderBy("created_at", direction).orderBy("id", direction)
        case .email:
            if let value = query.after?.value { select.where("email", .greaterThan, value) }
            select.orderBy("email", .ascending)
        case .lastSignIn:
            return try await bySignIn(query, now: now, limit: limit)
        }
        return try await select.limit(limit).all().map(AccountRepository.decode)
    }

    /// The latest sign-in first, then the accounts that never signed in (newest id first). Two walks, since the
    /// stores put a null first or last in a descending order as each sees fit.
    private func bySignIn(_ query: UserQuery, now: Date, limit: Int) async throws -> [AccountRecord] {
        var found: [AccountRecord] = []
        if query.after == nil || query.after?.value != nil {
            let signedIn = filtered(query, now: now).where("last_sign_in_at", .isNot, SQLLiteral.null)
            if let after = query.after, let value = after.value.flatMap(Int64.init) {
                signedIn.where(
                    SQLGroupExpression([SQLColumn("last_sign_in_at"), SQLColumn("id")]), .lessThan,
                    SQLGroupExpression([SQLBind(value), SQLBind(after.id)]))
            }
            found = try await signedIn.orderBy("last_sign_in_at", .descending).orderBy("id", .descending)
                .limit(limit).all().map(AccountRepository.decode)
        }
        guard found.count < limit else { return found }
        let never = filtered(query, now: now).where("last_sign_in_at", .is, SQLLiteral.null)
        if let after = query.after, after.value == nil { never.where("id", .lessThan, after.id) }
        // Ordered as the index is, all of them null: a walk back along `last_sign_in_at, id`.
        return try await found
            + never.orderBy("last_sign_in_at", .descending).orderBy("id", .descending).limit(limit - found.count)
            .all().map(AccountRepository.decode)
    }

    /// The accounts matching `query`'s text and filters, unordered.
    private func filtered(_ query: UserQuery, now: Date) -> SQLSelectBuilder {
        let select = db.select().columns(AccountRepository.columns).from("accounts")
        switch query.text {
        case nil: break
        case .id(let id): select.where("id", .equal, id)
        case .emailPrefix(let prefix):
            select.where { group in
                group.where { Self.startsWith($0, "email", prefix) }.orWhere {
                    Self.startsWith($0, "sso_email", prefix)
                }
            }
        case .metadata(let text):
            let pattern = "%" + Self.literal(text) + "%"
            select.where { group in
                group.where(SQLFunction("LOWER", args: SQLColumn("user_metadata")), .like, SQLBind(pattern))
                    .orWhere(SQLFunction("LOWER", args: SQLColumn("app_metadata")), .like, SQLBind(pattern))
            }
        }
        if let confirmed = query.confirmed {
            select.where("email_confirmed_at", confirmed ? .isNot : .is, SQLLiteral.null)
        }
        if let banned = query.banned {
            // Disabled, and not by a ban that has ended (the sweeper lifts those a little later).
            let time = now.epochMilliseconds
            if banned {
                select.where("disabled_at", .isNot, SQLLiteral.null).where { group in
                    group.where("banned_until", .is, SQLLiteral.null).orWhere("banned_until", .greaterThan, time)
                }
            } else {
                select.where { group in
                    group.where("disabled_at", .is, SQLLiteral.null).orWhere("banned_until", .lessThanOrEqual, time)
                }
            }
        }
        if let anonymous = query.anonymous { select.where("is_anonymous", .equal, anonymous ? 1 : 0) }
        if let hasFactor = query.hasFactor {
            let factor = db.select().column(SQLLiteral.numeric("1")).from("mfa_factors")
                .where(SQLColumn("account_id", table: "mfa_factors"), .equal, SQLColumn("id", table: "accounts"))
                .where(SQLColumn("status", table: "mfa_factors"), .equal, SQLBind("verified"))
            select.where(SQLFunction(hasFactor ? "EXISTS" : "NOT EXISTS", args: factor.query))
        }
        if let provider = query.provider {
            let identity = db.select().column(SQLLiteral.numeric("1")).from("identities")
                .where(SQLColumn("account_id", table: "identities"), .equal, SQLColumn("id", table: "accounts"))
                .where(SQLColumn("provider", table: "identities"), .equal, SQLBind(provider))
            select.where(SQLFunction("EXISTS", args: identity.query))
        }
        if let from = query.createdFrom { select.where("created_at", .greaterThanOrEqual, from.epochMilliseconds) }
        if let before = query.createdBefore { select.where("created_at", .lessThan, before.epochMilliseconds) }
        return select
    }

    /// `column` starts with `prefix`: a range the column's index answers (exact under the byte-wise collation the
    /// stores use: SQLite's, and PostgreSQL's `C`), and a LIKE that keeps it exact under any other collation.
    private static func startsWith(
        _ group: SQLPredicateGroupBuilder, _ column: String, _ prefix: String
    ) -> SQLPredicateGroupBuilder {
        group.where(column, .greaterThanOrEqual, prefix).where(column, .lessThan, prefix + "\u{10FFFF}")
            .where(column, .like, literal(prefix) + "%")
    }

    /// `text` for a LIKE pattern: its wildcards and escape characters become `_`, which matches them (and any
    /// other character: a search for `a_b` finds `a%b` too, never fewer).
    private static func literal(_ text: String) -> String {
        String(text.map { $0 == "%" || $0 == "_" || $0 == "\\" ? "_" : $0 })
    }

    /// The providers of each account's identities, by account id, sorted.
    func providers(accountIDs: [String]) async throws -> [String: [String]] {
        guard !accountIDs.isEmpty else { return [:] }
        var providers: [String: [String]] = [:]
        for row in try await db.select().columns("account_id", "provider").from("identities")
            .where("account_id", .in, accountIDs).orderBy("provider").all()
        {
            let provider = try row.decode(column: "provider", as: String.self)
            let accountID = try row.decode(column: "account_id", as: String.self)
            if providers[accountID]?.contains(provider) != true { providers[accountID, default: []].append(provider) }
        }
        return providers
    }

    /// Those of the accounts with a verified second factor.
    func withVerifiedFactor(accountIDs: [String]) async throws -> Set<String> {
        guard !accountIDs.isEmpty else { return [] }
        return Set(
            try await db.select().column("account_id").from("mfa_factors").where("account_id", .in, accountIDs)
                .where("status", .equal, "verified").all(decodingColumn: "account_id", as: String.self))
    }
}
