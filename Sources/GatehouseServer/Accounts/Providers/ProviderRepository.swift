import Foundation
import SQLKit

/// An Apple refresh token waiting to be revoked.
struct PendingRevocation: Sendable {
    let id: String
    let sealedToken: String
    let clientID: String
    let attempts: Int64
    let nextAttemptAt: Int64
    let createdAt: Int64
}

/// SQL for what providers add to identities: their tokens, Apple's marks on them, the queue of Apple tokens to
/// revoke, and the Sign in with Apple notifications already applied.
struct ProviderRepository {
    let db: any SQLDatabase

    /// The sealed provider token of an identity, if it keeps one.
    func providerToken(identityID: String) async throws -> String? {
        try await db.select().column("provider_token").from("identities").where("id", .equal, identityID).first()?
            .decode(column: "provider_token", as: String?.self)
    }

    /// Every identity of `accountID` that keeps a provider token, as (identity id, sealed token).
    func providerTokens(accountID: String) async throws -> [(identityID: String, sealed: String)] {
        try await db.select().columns("id", "provider_token").from("identities")
            .where("account_id", .equal, accountID).where("provider_token", .isNot, SQLLiteral.null).all()
            .map {
                (try $0.decode(column: "id", as: String.self), try $0.decode(column: "provider_token", as: String.self))
            }
    }

    func setProviderToken(identityID: String, accountID: String, sealed: String?) async throws {
        TransactionChanges.accountChanged(accountID)
        try await db.update("identities").set("provider_token", to: sealed).where("id", .equal, identityID).run()
    }

    /// Removes one identity of `accountID`; false when it has none with that id.
    func deleteIdentity(id: String, accountID: String) async throws -> Bool {
        TransactionChanges.accountChanged(accountID)
        let gone = try await db.delete(from: "identities").where("id", .equal, id).where(
            "account_id", .equal, accountID
        )
        .returning("id").all()
        return !gone.isEmpty
    }

    /// Marks the Apple identity `providerID` as having had its consent revoked; its token is dropped (Apple voided
    /// it). Answers the account it belongs to.
    func revokeConsent(provider: String, providerID: String, at time: Date) async throws -> String? {
        guard let accountID = try await accountID(provider: provider, providerID: providerID) else { return nil }
        TransactionChanges.accountChanged(accountID)
        try await db.update("identities").set("consent_revoked_at", to: time.epochMilliseconds)
            .set("provider_token", to: SQLLiteral.null)
            .where("provider", .equal, provider).where("provider_id", .equal, providerID).run()
        return accountID
    }

    /// Sets or clears the mark that Apple no longer forwards mail to the identity's relay address.
    func setMailDisabled(provider: String, providerID: String, at time: Date?) async throws -> String? {
        guard let accountID = try await accountID(provider: provider, providerID: providerID) else { return nil }
        TransactionChanges.accountChanged(accountID)
        try await db.update("identities").set("mail_disabled_at", to: time?.epochMilliseconds)
            .where("provider", .equal, provider).where("provider_id", .equal, providerID).run()
        return accountID
    }

    /// Clears the consent mark when the person signs in with Apple again.
    func clearConsentRevoked(identityID: String) async throws {
        try await db.update("identities").set("consent_revoked_at", to: SQLLiteral.null)
            .where("id", .equal, identityID).run()
    }

    /// Whether mail to `email` would go to an Apple relay address whose forwarding the person turned off.
    func mailDisabled(email: String) async throws -> Bool {
        try await db.select().column("id").from("identities").where("email", .equal, email)
            .where("mail_disabled_at", .isNot, SQLLiteral.null).first() != nil
    }

    private func accountID(provider: String, providerID: String) async throws -> String? {
        try await db.select().column("account_id").from("identities").where("provider", .equal, provider)
            .where("provider_id", .equal, providerID).first()?.decode(column: "account_id", as: String.self)
    }

    // MARK: Revocations

    func enqueueRevocation(id: String, sealedToken: String, clientID: String, now: Date) async throws {
        try await db.insert(into: "apple_revocations")
            .columns("id", "sealed_token", "client_id", "attempts", "next_attempt_at", "created_at")
            .values(
                SQLBind(id), SQLBind(sealedToken), SQLBind(clientID), SQLBind(Int64(0)),
                SQLBind(now.epochMilliseconds), SQLBind(now.epochMilliseconds)
            )
            .run()
    }

    func nextDueRevocation(now: Int64) async throws -> PendingRevocation? {
        try await db.select()
            .columns("id", "sealed_token", "client_id", "attempts", "next_attempt_at", "created_at")
            .from("apple_revocations").where("next_attempt_at", .lessThanOrEqual, now).orderBy("next_attempt_at")
            .limit(1).first()
            .map {
                PendingRevocation(
                    id: try $0.decode(column: "id", as: String.self),
                    sealedToken: try $0.decode(column: "sealed_token", as: String.self),
                    clientID: try $0.decode(column: "client_id", as: String.self),
                    attempts: try $0.decode(column: "attempts", as: Int64.self),
                    nextAttemptAt: try $0.decode(column: "next_attempt_at", as: Int64.self),
                    createdAt: try $0.decode(column: "created_at", as: Int64.self))
            }
    }

    /// Takes the row for one attempt (moving its next attempt to `until`) unless another worker took it first.
    func lease(_ revocation: PendingRevocation, until: Int64) async throws -> Bool {
        let taken = try await db.update("apple_revocations").set("next_attempt_at", to: until)
            .set("attempts", to: revocation.attempts + 1)
            .where("id", .equal, revocation.id).where("next_attempt_at", .equal, revocation.nextAttemptAt)
            .returning("id").all()
        return !taken.isEmpty
    }

    func reschedule(id: String, next: Int64) async throws {
        try await db.update("apple_revocations").set("next_attempt_at", to: next).where("id", .equal, id).run()
    }

    func deleteRevocation(id: String) async throws {
        try await db.delete(from: "apple_revocations").where("id", .equal, id).run()
    }

    func pendingRevocations() async throws -> Int {
        try await db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("apple_revocations")
            .first()?.decode(column: "n", as: Int.self) ?? 0
    }

    // MARK: Notifications

    /// Records a notification's `jti` as applied; false when it was applied before.
    func claimNotification(jti: String, now: Date) async throws -> Bool {
        let fresh = try await db.insert(into: "apple_notifications").columns("jti", "received_at")
            .values(SQLBind(jti), SQLBind(now.epochMilliseconds))
            .ignoringConflicts(with: "jti").returning("jti").all()
        return !fresh.isEmpty
    }
}
