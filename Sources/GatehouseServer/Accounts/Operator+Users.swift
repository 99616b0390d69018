import Foundation
import GatehouseAPI

/// What `gatehouse users …` does (`Operator`), beside the accounts' repository.
extension Operator {
    /// One line per account: id, state, email.
    public func users(limit: Int = 1000) async throws -> [String] {
        try await AccountRepository(db: store.database).oldestFirst(limit: limit).map { account in
            let state =
                account.disabledAt != nil ? "disabled" : account.emailConfirmedAt != nil ? "confirmed" : "unconfirmed"
            return "\(account.id)  \(state)  \(account.email)"
        }
    }

    /// An account, found by id or email, with its companies and live sessions.
    public func user(_ idOrEmail: String) async throws -> String? {
        let accounts = AccountRepository(db: store.database)
        let found = try await accounts.find(idOrEmail: idOrEmail)
        guard let account = found else { return nil }
        let sessions = try await SessionChanges(db: store.database).countUnexpired(
            account.id, now: Date().epochMilliseconds)
        var text = """
            id:        \(account.id)
            email:     \(account.email)
            confirmed: \(account.emailConfirmedAt?.iso8601 ?? "no")
            disabled:  \(account.disabledAt?.iso8601 ?? "no")
            sessions:  \(sessions) live
            companies:
            """
        for company in try await CompanyDirectory(db: store.database).summaries(accountID: account.id) {
            text += "\n  \(company.id)  \(company.role)  \(company.name)"
        }
        return text
    }

    /// Ends every session of an account (every device, every company login) without disabling it; nil when there is
    /// no such account, else how many sessions ended.
    public func signOutUser(_ idOrEmail: String) async throws -> Int? {
        try await store.transaction { db in
            let accounts = AccountRepository(db: db)
            let found = try await accounts.find(idOrEmail: idOrEmail)
            guard let account = found else { return nil }
            let ended = try await SessionChanges(db: db).end(.account(account.id), now: Date()).count
            try await trail.within(db).record(
                AuditEvent(
                    .signedOutEverywhere, accountID: account.id, detail: ["by": "operator", "sessions": String(ended)]))
            return ended
        }
    }

    /// Disables an account and ends all its sessions; false when there is no such account. A disable has no end: it
    /// replaces a timed ban the account had, so neither the sweeper lifting that ban when it ends nor the admin API's
    /// `ban_duration` undoes it; only `enableUser` does (issue 35, finding 4).
    public func disableUser(_ idOrEmail: String) async throws -> Bool {
        try await store.transaction { db in
            let accounts = AccountRepository(db: db)
            let found = try await accounts.find(idOrEmail: idOrEmail)
            guard var account = found else { return false }
            let now = Date()
            account.disabledAt = now
            account.bannedUntil = nil
            account.updatedAt = now
            try await accounts.update(account)
            try await SessionChanges(db: db).end(.account(account.id), now: now)
            try await trail.within(db).record(
                AuditEvent(.accountDisabled, accountID: account.id, detail: ["by": "operator"]))
            return true
        }
    }

    /// Enables a disabled or banned account (its sessions stay ended: it signs in again); false when there is no
    /// such account.
    public func enableUser(_ idOrEmail: String) async throws -> Bool {
        try await store.transaction { db in
            let accounts = AccountRepository(db: db)
            guard var account = try await accounts.find(idOrEmail: idOrEmail) else { return false }
            let wasDisabled = account.disabledAt != nil
            account.disabledAt = nil
            account.bannedUntil = nil
            account.updatedAt = Date()
            try await accounts.update(account)
            try await trail.within(db).record(
                AuditEvent(
                    .accountEnabled, accountID: account.id,
                    detail: ["by": "operator", "was_disabled": String(wasDisabled)]))
            return true
        }
    }
}
