import Foundation
import SQLKit

/// What another feature asks of accounts: find one (by id, address, or either), hold its row for the rest of the
/// transaction, record a sign-in another feature checked. The small interface Accounts exports, so that no feature
/// reaches into `AccountRepository` (docs/architecture.md, "Who may use whom").
struct AccountDirectory {
    private let accounts: AccountRepository
    private let db: any SQLDatabase

    init(db: any SQLDatabase) {
        accounts = AccountRepository(db: db)
        self.db = db
    }

    /// Apple's private relay domain: mail to it reaches the person only while they let Apple forward it.
    static let appleRelayDomain = "privaterelay.appleid.com"

    /// Whether mail to `email` must not be sent: an Apple relay address whose forwarding the person turned off
    /// (Sign in with Apple's `email-disabled` notification).
    func mailDisabled(email: String) async throws -> Bool {
        guard email.hasSuffix("@" + Self.appleRelayDomain) else { return false }
        return try await ProviderRepository(db: db).mailDisabled(email: email)
    }

    func find(id: String) async throws -> AccountRecord? { try await accounts.find(id: id) }

    func find(email: String) async throws -> AccountRecord? { try await accounts.find(email: email) }

    /// By id, or by address when `idOrEmail` holds an `@`.
    func find(idOrEmail: String) async throws -> AccountRecord? { try await accounts.find(idOrEmail: idOrEmail) }

    /// The account, its row locked until the transaction ends (`AccountRepository.findLocked`).
    func findLocked(id: String) async throws -> AccountRecord? { try await accounts.findLocked(id: id) }

    /// Records a sign-in by a method another feature checked (a passkey).
    func recordSignIn(_ id: String, at time: Date) async throws {
        try await accounts.recordSignIn(id, at: time, rehashed: nil, replacing: nil)
    }
}
