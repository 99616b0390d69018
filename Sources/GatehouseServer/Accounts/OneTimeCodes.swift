import Foundation
import SQLKit

/// What a mailed code or link is for. A code only verifies for its own purpose.
enum CodePurpose: String, Sendable, CaseIterable {
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

/// A code that verified.
struct ConsumedCode {
    let email: String
    let purpose: CodePurpose
    let accountID: String?
    let newEmail: String?
}

/// Mailed codes and magic links: stored as digests, single use, expiring, bounded wrong tries.
struct OneTimeCodes {
    let db: any SQLDatabase
    let clock: any GatehouseClock
    let settings: AuthSettings

    /// Issues a code and link for `email`, voiding that address's earlier codes of the same purpose.
    func issue(email: String, purpose: CodePurpose, accountID: String?, newEmail: String? = nil) async throws -> IssuedCode {
        let now = clock.now
        try await db.update("one_time_codes").set("consumed_at", to: now.epochMilliseconds)
            .where("email", .equal, email).where("purpose", .equal, purpose.rawValue)
            .where("consumed_at", .is, SQLLiteral.null).run()
        let issued = IssuedCode(id: Secrets.identifier(), code: Secrets.sixDigitCode(), linkToken: Secrets.token())
        try await db.insert(into: "one_time_codes")
            .columns(
                "id", "email", "purpose", "code_hash", "link_hash", "account_id", "new_email", "attempts", "created_at",
                "expires_at")
            .values(
                SQLBind(issued.id), SQLBind(email), SQLBind(purpose.rawValue),
                SQLBind(Self.codeDigest(id: issued.id, code: issued.code)), SQLBind(Secrets.digest(issued.linkToken)),
                SQLBind(accountID), SQLBind(newEmail), SQLBind(Int64(0)), SQLBind(now.epochMilliseconds),
                SQLBind(now.addingTimeInterval(settings.codeLifetime).epochMilliseconds)
            )
            .run()
        return issued
    }

    /// Removes a code whose mail could not be sent.
    func withdraw(id: String) async throws {
        try await db.delete(from: "one_time_codes").where("id", .equal, id).run()
    }

    /// Consumes the live code for `email` among `purposes` when `code` matches; a wrong code uses up one try.
    func consume(email: String, code: String, purposes: [CodePurpose]) async throws -> ConsumedCode? {
        let now = clock.now.epochMilliseconds
        let candidates = try await db.select()
            .columns("id", "code_hash", "purpose", "account_id", "new_email", "attempts")
            .from("one_time_codes")
            .where("email", .equal, email)
            .where("purpose", .in, purposes.map(\.rawValue))
            .where("consumed_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now)
            .where("attempts", .lessThan, Int64(settings.codeMaxAttempts))
            .all()
        var matched: (id: String, row: any SQLRow)?
        for row in candidates {
            let id = try row.decode(column: "id", as: String.self)
            if Secrets.constantTimeEquals(try row.decode(column: "code_hash", as: String.self), Self.codeDigest(id: id, code: code)) {
                matched = (id, row)
            }
        }
        guard let matched else {
            for row in candidates {
                try await db.update("one_time_codes").set(SQLIdentifier("attempts"), to: SQLRaw("attempts + 1"))
                    .where("id", .equal, try row.decode(column: "id", as: String.self)).run()
            }
            return nil
        }
        return try await markConsumed(id: matched.id, email: email, row: matched.row, now: now)
    }

    /// Consumes the live code whose magic-link token is `token`, among `purposes`.
    func consume(linkToken token: String, purposes: [CodePurpose]) async throws -> ConsumedCode? {
        let now = clock.now.epochMilliseconds
        guard
            let row = try await db.select()
                .columns("id", "email", "purpose", "account_id", "new_email", "attempts")
                .from("one_time_codes")
                .where("link_hash", .equal, Secrets.digest(token))
                .where("purpose", .in, purposes.map(\.rawValue))
                .where("consumed_at", .is, SQLLiteral.null)
                .where("expires_at", .greaterThan, now)
                .where("attempts", .lessThan, Int64(settings.codeMaxAttempts))
                .first()
        else { return nil }
        return try await markConsumed(
            id: try row.decode(column: "id", as: String.self), email: try row.decode(column: "email", as: String.self),
            row: row, now: now)
    }

    private func markConsumed(id: String, email: String, row: any SQLRow, now: Int64) async throws -> ConsumedCode? {
        // Single use even under concurrent verification: only the request that flips consumed_at wins.
        let won = try await db.update("one_time_codes").set("consumed_at", to: now)
            .where("id", .equal, id).where("consumed_at", .is, SQLLiteral.null)
            .returning("id").all()
        guard !won.isEmpty, let purpose = CodePurpose(rawValue: try row.decode(column: "purpose", as: String.self)) else {
            return nil
        }
        return ConsumedCode(
            email: email, purpose: purpose, accountID: try row.decode(column: "account_id", as: String?.self),
            newEmail: try row.decode(column: "new_email", as: String?.self))
    }

    /// The stored form of a code: salted with its row id so equal codes never share a digest.
    static func codeDigest(id: String, code: String) -> String {
        Secrets.digest("\(id):\(code)")
    }
}
