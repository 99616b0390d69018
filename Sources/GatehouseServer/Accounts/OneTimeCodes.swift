import Foundation
import GatehouseAPI
import SQLKit

/// What a mailed code or link is for. A code only verifies for its own purpose.
enum CodePurpose: String, Sendable, CaseIterable, Codable {
    case signup, magiclink, recovery
    case emailChange = "email_change"
    case reauthentication

    /// The purposes a `type` given to `/verify` accepts.
    static func accepted(byVerifyType type: String) -> [CodePurpose]? {
        switch type {
        case "signup": [.signup]
        case "email": [.magiclink, .signup]
        case "magiclink": [.magiclink]
        case "recovery": [.recovery]
        case "email_change": [.emailChange]
        default: nil
        }
    }
}

/// A code just issued: the six digits and the link token go into one mail and nowhere else.
struct IssuedCode {
    let id: String
    let code: String
    let linkToken: String
}

/// What a sign-up chose, held on its own code until that code is verified (no pre-hijacking: DESIGN §10).
struct PendingSignup: Codable, Sendable, Equatable {
    var passwordHash: String?
    var metadata: [String: JSONValue]
}

/// A code that verified: what it proves, and what its sign-up left pending.
struct ConsumedCode: Codable, Sendable {
    let email: String
    let purpose: CodePurpose
    let accountID: String?
    let newEmail: String?
    var pending: PendingSignup?
    /// Set when the code was asked for with PKCE: a link then yields an authorization code, not a session.
    var codeChallenge: String?
}

/// What became of a link that no longer works.
enum LinkState: Sendable { case used, expired }

/// Mailed codes and magic links: stored as digests, single use, expiring, bounded wrong tries.
struct OneTimeCodes {
    let db: any SQLDatabase
    let clock: any GatehouseClock
    let settings: AuthSettings

    /// Issues a code and link for `email`. Earlier codes of the address and purpose are void, except sign-up codes:
    /// each sign-up's code carries that sign-up's own choices, so a later sign-up by someone else cannot replace them.
    func issue(
        email: String, purpose: CodePurpose, accountID: String?, newEmail: String? = nil,
        pending: PendingSignup? = nil, codeChallenge: String? = nil
    ) async throws -> IssuedCode {
        let now = clock.now
        if purpose != .signup {
            var earlier = db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
                .where("email", .equal, email).where("purpose", .equal, purpose.rawValue)
                .where("consumed_at", .is, SQLLiteral.null)
            // Another account's change to the same address is not this request's to cancel.
            if purpose == .emailChange { earlier = earlier.where("account_id", .equal, SQLBind(accountID)) }
            try await earlier.run()
        }
        let linkToken = Secrets.token()
        let issued = IssuedCode(
            id: Secrets.identifier(), code: Secrets.sixDigitCode(linkedTo: linkToken), linkToken: linkToken)
        let pendingJSON = try pending.map {
            String(decoding: try JSONEncoder.sortedKeys.encode($0.metadata), as: UTF8.self)
        }
        try await db.insert(into: "one_time_codes")
            .columns(
                "id", "email", "purpose", "code_hash", "link_hash", "account_id", "new_email", "attempts", "created_at",
                "expires_at", "pending_password_hash", "pending_metadata", "code_challenge"
            )
            .values(
                SQLBind(issued.id), SQLBind(email), SQLBind(purpose.rawValue),
                SQLBind(Self.codeDigest(id: issued.id, code: issued.code)), SQLBind(Secrets.digest(issued.linkToken)),
                SQLBind(accountID), SQLBind(newEmail), SQLBind(Int64(0)), SQLBind(now.epochMilliseconds),
                SQLBind(now.addingTimeInterval(settings.codeLifetime).epochMilliseconds),
                SQLBind(pending?.passwordHash), SQLBind(pendingJSON), SQLBind(codeChallenge)
            )
            .run()
        return issued
    }

    /// Voids every other live code of `email`'s sign-ups once the address is confirmed.
    func voidSignups(email: String) async throws {
        try await db.update("one_time_codes").set("consumed_at", to: clock.now.epochMilliseconds)
            .where("email", .equal, email).where("purpose", .equal, CodePurpose.signup.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).run()
    }

    private static let columns = [
        "id", "email", "code_hash", "purpose", "account_id", "new_email", "pending_password_hash", "pending_metadata",
        "code_challenge",
    ]

    /// Consumes the live code for `email` among `purposes` when `code` matches. Every live candidate's try is
    /// counted before the code is compared (one UPDATE … RETURNING), so parallel guesses all use up tries.
    func consume(email: String, code: String, purposes: [CodePurpose]) async throws -> ConsumedCode? {
        let now = clock.now.epochMilliseconds
        let candidates = try await db.update("one_time_codes")
            .set(SQLIdentifier("attempts"), to: SQLRaw("attempts + 1"))
            .where("email", .equal, email)
            .where("purpose", .in, purposes.map(\.rawValue))
            .where("consumed_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now)
            .where("attempts", .lessThan, Int64(settings.codeMaxAttempts))
            .returning(Self.columns.map { SQLColumn($0) as any SQLExpression })
            .all()
        var matched: (any SQLRow)?
        for row in candidates {
            let id = try row.decode(column: "id", as: String.self)
            if Secrets.constantTimeEquals(
                try row.decode(column: "code_hash", as: String.self), Self.codeDigest(id: id, code: code))
            {
                matched = row
            }
        }
        guard let matched else { return nil }
        return try await markConsumed(matched, now: now)
    }

    /// Consumes the live code whose magic-link token is `token`, among `purposes`.
    func consume(linkToken token: String, purposes: [CodePurpose]) async throws -> ConsumedCode? {
        guard let row = try await live(linkToken: token, purposes: purposes) else { return nil }
        return try await markConsumed(row, now: clock.now.epochMilliseconds)
    }

    /// Whether a live link with this token exists (the landing page asks before showing its button).
    func isLive(linkToken token: String, purposes: [CodePurpose]) async throws -> Bool {
        try await live(linkToken: token, purposes: purposes) != nil
    }

    /// Why a link that is not live is not: it was used (or replaced by a newer one), or it expired or never existed.
    func spentState(linkToken token: String) async throws -> LinkState {
        guard
            let row = try await db.select().columns("consumed_at", "expires_at").from("one_time_codes")
                .where("link_hash", .equal, Secrets.digest(token)).first()
        else { return .expired }
        guard let consumed = try row.decode(column: "consumed_at", as: Int64?.self) else { return .expired }
        return consumed < (try row.decode(column: "expires_at", as: Int64.self)) ? .used : .expired
    }

    private func live(linkToken token: String, purposes: [CodePurpose]) async throws -> (any SQLRow)? {
        try await db.select()
            .columns(Self.columns)
            .from("one_time_codes")
            .where("link_hash", .equal, Secrets.digest(token))
            .where("purpose", .in, purposes.map(\.rawValue))
            .where("consumed_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, clock.now.epochMilliseconds)
            .where("attempts", .lessThan, Int64(settings.codeMaxAttempts))
            .first()
    }

    /// The pending sign-up password digests of `email`'s live sign-up codes, newest first.
    func pendingPasswordHashes(email: String) async throws -> [String] {
        try await db.select().column("pending_password_hash").from("one_time_codes")
            .where("email", .equal, email).where("purpose", .equal, CodePurpose.signup.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).where("expires_at", .greaterThan, clock.now.epochMilliseconds)
            .where("pending_password_hash", .isNot, SQLLiteral.null)
            .orderBy("created_at", .descending).limit(3)
            .all(decodingColumn: "pending_password_hash", as: String.self)
    }

    private func markConsumed(_ row: any SQLRow, now: Int64) async throws -> ConsumedCode? {
        let id = try row.decode(column: "id", as: String.self)
        // Single use even under concurrent verification: only the request that flips consumed_at wins.
        let won = try await db.update("one_time_codes").set("consumed_at", to: now)
            .where("id", .equal, id).where("consumed_at", .is, SQLLiteral.null)
            .returning("id").all()
        guard !won.isEmpty, let purpose = CodePurpose(rawValue: try row.decode(column: "purpose", as: String.self))
        else {
            return nil
        }
        let metadata = try row.decode(column: "pending_metadata", as: String?.self)
            .flatMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
        let passwordHash = try row.decode(column: "pending_password_hash", as: String?.self)
        return ConsumedCode(
            email: try row.decode(column: "email", as: String.self), purpose: purpose,
            accountID: try row.decode(column: "account_id", as: String?.self),
            newEmail: try row.decode(column: "new_email", as: String?.self),
            pending: metadata != nil || passwordHash != nil
                ? PendingSignup(passwordHash: passwordHash, metadata: metadata ?? [:]) : nil,
            codeChallenge: try row.decode(column: "code_challenge", as: String?.self))
    }

    /// The stored form of a code: salted with its row id so equal codes never share a digest.
    static func codeDigest(id: String, code: String) -> String {
        Secrets.digest("\(id):\(code)")
    }
}
