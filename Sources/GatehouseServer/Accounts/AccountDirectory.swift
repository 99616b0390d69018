import Foundation
import SQLKit

/// What another feature asks of accounts: find one (by id, address, or either), hold its row for the rest of the
/// transaction, record a sign-in another feature checked. The small interface Accounts exports, so that no feature
/// reaches into `AccountRepository` (docs/architecture.md, "Who may use whom").
struct AccountDirectory {
    private let accounts: AccountRepository

    init(db: any SQLDatabase) { accounts = AccountRepository(db: db) }

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
