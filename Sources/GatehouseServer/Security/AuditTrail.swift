import Foundation
import SQLKit

/// What else an audited change writes in its transaction: the webhooks' outbox turns events into deliveries there, so
/// that a webhook event exists exactly when its change is committed. Security/ knows nothing else of it.
protocol AuditFollower: Sendable {
    /// Whether any of `events` would write something (so the queue opens a transaction only then); no I/O.
    func follows(_ events: [AuditEvent]) -> Bool
    /// Writes what follows `events`, in the transaction of `db`.
    func record(_ events: [AuditEvent], in db: any SQLDatabase) async throws
}

/// The audit trail every feature writes through and reads from: events in batches (`AuditQueue`), events inside the
/// caller's transaction (`within`), refusals capped per client address, and the pages of it people and operators
/// read. Built once in `GatehouseServices` and handed to each service that records, so none holds the session
/// service only to audit; `AuditRepository` is its own, used from nowhere else but `Storage/`.
final class AuditTrail: Sendable {
    private let store: Store
    private let clock: any GatehouseClock
    private let queue: AuditQueue
    /// What else each recorded event writes in its transaction (webhooks' outbox), if anything.
    private let follower: (any AuditFollower)?
    /// How many refusals each client address may add (`recordRefusal`).
    private let refusals: RateLimiter

    init(store: Store, clock: any GatehouseClock, follower: (any AuditFollower)? = nil) {
        self.store = store
        self.clock = clock
        self.follower = follower
        queue = AuditQueue(store: store, clock: clock, follower: follower)
        refusals = RateLimiter(clock: clock)
    }

    /// The trail inside the caller's transaction `db`: what is recorded through it commits, or not, with the rest.
    func within(_ db: any SQLDatabase) -> Within {
        Within(repository: AuditRepository(db: db, clock: clock), follower: follower)
    }

    /// The trail inside one transaction.
    struct Within {
        fileprivate let repository: AuditRepository
        fileprivate let follower: (any AuditFollower)?

        func record(_ event: AuditEvent) async throws { try await record([event]) }

        /// The events in one statement, all of them or none, and what follows them in the same transaction.
        func record(_ events: [AuditEvent]) async throws {
            try await repository.record(events)
            if let follower, follower.follows(events) { try await follower.record(events, in: repository.db) }
        }

        /// Forgets the person (`AuditRepository.forget`): what happened, and when, stays.
        func forget(accountID: String, emailDigest: String) async throws {
            try await repository.forget(accountID: accountID, emailDigest: emailDigest)
        }
    }

    /// The account's own events, newest first, `limit` at a time, before the event id `before`.
    func page(accountID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await AuditRepository(db: store.database, clock: clock).page(
            accountID: accountID, before: before, limit: limit)
    }

    /// Events of one company (all of them, or one account's), or of one account anywhere, newest first.
    func page(companyID: String?, accountID: String?, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await AuditRepository(db: store.database, clock: clock).page(
            companyID: companyID, accountID: accountID, before: before, limit: limit)
    }

    /// Every event, newest first, of one action or one account when given (the admin API's trail), with the total.
    func all(offset: Int, limit: Int, action: String?, accountID: String?) async throws -> (
        records: [(accountID: String?, record: AuditRecord)], total: Int
    ) {
        try await AuditRepository(db: store.database, clock: clock).all(
            offset: offset, limit: limit, action: action, accountID: accountID)
    }

    /// Events matching `filter`, newest first, `limit` at a time, before the event id `before` (the console's audit
    /// explorer).
    func explore(_ filter: AuditFilter, before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await AuditRepository(db: store.database, clock: clock).explore(filter, before: before, limit: limit)
    }

    /// Records an event, in one transaction with whatever other events wait (`AuditQueue`); a failure to record is
    /// logged, never the request's failure.
    func record(_ event: AuditEvent) async { await queue.record(event) }

    /// Records a refusal (a rejected token, a refused authorization, a rate limit, a cross-site post) unless its
    /// client address (its /64 for IPv6, `ClientAddress.limitKey`) has already had `refusalsPerAddress` of this kind
    /// recorded recently: whoever sends garbage cannot grow the trail a row per request. The first refusal held back
    /// in a window is recorded as `audit_suppressed`, so the trail says it stopped counting.
    func recordRefusal(_ event: AuditEvent) async {
        let address = ClientAddress.limitKey(event.ip)
        guard refusals.check("\(event.action):\(address)", Self.refusalsPerAddress) != nil else {
            await record(event)
            return
        }
        guard refusals.check("suppressed:\(address)", Self.suppressionNotices) == nil else { return }
        await record(
            AuditEvent(
                .auditSuppressed, accountID: nil, ip: event.ip, userAgent: event.userAgent,
                detail: ["action": event.action, "for_seconds": "\(Int(Self.refusalsPerAddress.window))"]))
    }

    /// Refusals of one kind recorded per client address: 20 at once, then one every 3 seconds.
    static let refusalsPerAddress = RateLimit(limit: 20, per: 60)
    /// `audit_suppressed` notices per client address: one a minute.
    static let suppressionNotices = RateLimit(limit: 1, per: 60)
}
