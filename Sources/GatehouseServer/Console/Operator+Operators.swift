import Foundation

extension Operator {
    /// What `gatehouse operators add|remove` did.
    public enum OperatorChange: Sendable, Equatable {
        case changed(accountID: String)
        case unchanged(accountID: String)
        case noAccount
    }

    /// Grants the account of `email` the operator role: it may open the console (`/console`) once signed in with a
    /// second factor. Audited `operator_granted`.
    public func addOperator(email: String) async throws -> OperatorChange {
        try await store.transaction { db in
            guard let account = try await AccountDirectory(db: db).find(email: email.lowercased()) else {
                return .noAccount
            }
            guard try await ConsoleRepository(db: db).grant(account.id, at: Date()) else {
                return .unchanged(accountID: account.id)
            }
            try await trail.within(db).record(
                AuditEvent(.operatorGranted, accountID: account.id, detail: ["by": "command_line"]))
            return .changed(accountID: account.id)
        }
    }

    /// Takes the role away, and ends the account's console sessions. Audited `operator_revoked`.
    public func removeOperator(email: String) async throws -> OperatorChange {
        try await store.transaction { db in
            guard let account = try await AccountDirectory(db: db).find(email: email.lowercased()) else {
                return .noAccount
            }
            guard try await ConsoleRepository(db: db).revoke(account.id) else {
                return .unchanged(accountID: account.id)
            }
            try await trail.within(db).record(
                AuditEvent(.operatorRevoked, accountID: account.id, detail: ["by": "command_line"]))
            return .changed(accountID: account.id)
        }
    }

    /// Every operator, one line each: `<account id>  <email>  since <date>`.
    public func operators() async throws -> [String] {
        try await ConsoleRepository(db: store.database).operators().map {
            "\($0.accountID)  \($0.email)  since \($0.grantedAt.iso8601)"
        }
    }
}
