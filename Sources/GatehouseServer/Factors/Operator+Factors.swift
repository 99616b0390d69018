import Foundation

/// What `gatehouse users factors …` and `gatehouse users reset-factors …` do (`Operator`), beside the factors'
/// repository.
extension Operator {
    /// An account's second factors, one line each (id, type, status, name, created), for the support case "lost phone
    /// and codes"; nil when there is no such account.
    public func factors(_ idOrEmail: String) async throws -> [String]? {
        guard let account = try await AccountDirectory(db: store.database).find(idOrEmail: idOrEmail) else {
            return nil
        }
        return try await FactorRepository(db: store.database).factors(accountID: account.id).map { factor in
            let created = Date(epochMilliseconds: factor.createdAt).iso8601
            return
                "\(factor.id)  \(factor.type.rawValue)  \(factor.status.rawValue)  \(created)  \(factor.friendlyName)"
        }
    }

    /// Removes every second factor of an account (its sessions raised by them fall back to aal1, and company sessions
    /// where a company requires one end), audited; nil when there is no such account, else how many went. The person
    /// then signs in with their password and enrolls again.
    public func resetFactors(_ idOrEmail: String) async throws -> Int? {
        try await store.transaction { db in
            guard let account = try await AccountDirectory(db: db).find(idOrEmail: idOrEmail) else { return nil }
            let ids = try await FactorRepository(db: db).factors(accountID: account.id).map(\.id)
            let removed = try await FactorService.remove(ids, accountID: account.id, now: Date(), db: db)
            try await trail.within(db).record(
                AuditEvent(
                    .factorsReset, accountID: account.id, detail: ["by": "operator", "factors": String(removed.count)]))
            return removed.count
        }
    }
}
