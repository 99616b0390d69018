import Foundation
import GatehouseAPI
import SQLKit

/// What an import did, or (a dry run) would do.
public struct ImportReport: Sendable {
    public var imported = 0
    /// Users already here with the same id and address (a second run of the same import).
    public var unchanged = 0
    public var problems: [ImportNote] = []
    public var notes: [ImportNote] = []
    public var written: Bool = false
}

/// Writes imported users (`ImportFormats`) into the store, idempotently. Every row is checked first, against the
/// others and the store; if any is refused, nothing is written and the report lists each refusal by line. Then the
/// users go in batches, each one transaction: a batch is whole or absent, and a second run of the same file finds
/// the written users unchanged and goes on from there.
public struct UserImporter: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    public var batchSize = 500

    public init(store: Store, clock: any GatehouseClock = SystemClock()) {
        self.store = store
        self.clock = clock
        trail = AuditTrail(store: store, clock: clock, follower: WebhookOutbox(store: store, clock: clock))
    }

    public func run(_ read: ImportRead, source: String, dryRun: Bool) async throws -> ImportReport {
        var report = ImportReport(problems: read.problems, notes: read.notes)
        var fresh: [ImportedUser] = []
        var ids: [String: Int] = [:]
        var emails: [String: Int] = [:]
        var subjects: [String: Int] = [:]
        let accounts = AccountRepository(db: store.database)
        let existing = try await accounts.existing(ids: read.users.map(\.id), emails: read.users.map(\.email))
        for user in read.users {
            if let refusal = Self.refusal(of: user) {
                report.problems.append(.init(line: user.line, reason: refusal))
                continue
            }
            if let first = ids[user.id] {
                report.problems.append(.init(line: user.line, reason: "id \(user.id) is also on line \(first)"))
                continue
            }
            if let first = emails[user.email] {
                report.problems.append(.init(line: user.line, reason: "its email is also on line \(first)"))
                continue
            }
            ids[user.id] = user.line
            emails[user.email] = user.line
            if let email = existing.byID[user.id] {
                if email == user.email {
                    report.unchanged += 1
                } else {
                    report.problems.append(
                        .init(line: user.line, reason: "id \(user.id) is already an account with another email"))
                }
                continue
            }
            if existing.byEmail[user.email] != nil {
                report.problems.append(.init(line: user.line, reason: "its email already has an account here"))
                continue
            }
            var clash = false
            for identity in user.identities {
                let subject = identity.provider + ":" + identity.subject
                let name = identity.provider == "apple" ? "Apple" : "Google"
                if let first = subjects[subject] {
                    report.problems.append(
                        .init(line: user.line, reason: "its \(name) identity is also on line \(first)"))
                    clash = true
                } else if try await accounts.identity(provider: identity.provider, providerID: identity.subject) != nil
                {
                    report.problems.append(
                        .init(line: user.line, reason: "its \(name) identity is linked to another account here"))
                    clash = true
                }
                subjects[subject] = user.line
            }
            if !clash { fresh.append(user) }
        }
        report.problems.sort { $0.line < $1.line }
        guard report.problems.isEmpty else { return report }
        report.imported = fresh.count
        guard !dryRun else { return report }
        let now = clock.now
        for start in stride(from: 0, to: fresh.count, by: max(1, batchSize)) {
            let batch = Array(fresh[start..<min(start + max(1, batchSize), fresh.count)])
            try await store.transaction { [clock] db in
                let accounts = AccountRepository(db: db)
                let audit = trail.within(db)
                for user in batch {
                    try await accounts.insert(
                        AccountRecord(
                            id: user.id, email: user.email, emailConfirmedAt: user.emailConfirmedAt,
                            passwordHash: user.passwordHash, userMetadata: user.userMetadata,
                            createdAt: user.createdAt, updatedAt: user.updatedAt, lastSignInAt: user.lastSignInAt,
                            disabledAt: user.disabled ? now : nil, appMetadata: user.appMetadata,
                            bannedUntil: user.bannedUntil))
                    try await accounts.insert(
                        IdentityRecord(
                            id: Secrets.identifier(), accountID: user.id, provider: "email", providerID: user.id,
                            email: user.email, createdAt: user.createdAt, lastSignInAt: user.lastSignInAt))
                    for identity in user.identities {
                        try await accounts.insert(
                            IdentityRecord(
                                id: Secrets.identifier(), accountID: user.id, provider: identity.provider,
                                providerID: identity.subject,
                                email: user.email, createdAt: user.createdAt, lastSignInAt: nil))
                    }
                    try await audit.record(
                        AuditEvent(
                            .userImported, accountID: user.id,
                            detail: ["source": source, "password": user.passwordHash == nil ? "none" : "imported"]))
                }
            }
        }
        report.written = true
        return report
    }

    /// Why `user` cannot be stored whatever the store holds, or nil: the limits the admin API holds a user to, for
    /// users read by `ImportFormats` or made any other way. A hash must be one an import may store
    /// (`PasswordHasher.importRefusal(of:)`: every sign-in pays for it), and each metadata object at most
    /// `UserMetadata.maximumBytes` encoded as stored (it rides in every token answer).
    static func refusal(of user: ImportedUser) -> String? {
        if let hash = user.passwordHash, let refusal = PasswordHasher.importRefusal(of: hash) {
            return "the password hash is \(refusal)"
        }
        for (name, metadata) in [("user_metadata", user.userMetadata), ("app_metadata", user.appMetadata)] {
            let size = AccountRepository.encode(metadata).utf8.count
            if size > UserMetadata.maximumBytes {
                return
                    "\(name) takes \(size) bytes encoded, more than the \(UserMetadata.maximumBytes) a user may carry"
            }
        }
        return nil
    }
}
