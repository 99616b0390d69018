/// Audit events waiting for the store, written together: whatever arrives while one batch is being written goes in
/// the next, as one statement (one turn at SQLite's write lock). A caller still waits until its event is written.
///
/// Written one transaction each, the events of a burst queued for the write lock behind each other: two refreshes of
/// one token at once (an app after a wake-up) answer the second from the grace window with an audit row of its own,
/// and under load those rows made a racing pair take 50 ms.
final class AuditQueue: Sendable {
    /// The most events in one transaction.
    static let batchLimit = 256

    private let batches: GroupCommit<AuditEvent, Void>

    init(store: Store, clock: any GatehouseClock, follower: (any AuditFollower)? = nil) {
        batches = GroupCommit(limit: Self.batchLimit) { events in
            await Self.write(events, to: store, clock: clock, follower: follower)
            return events.map { _ in () }
        }
    }

    /// Records `event` with whatever else is waiting; a failure is logged, never thrown (the trail must not turn a
    /// request into an error).
    func record(_ event: AuditEvent) async { await batches.submit(event) }

    /// One batch in one statement (atomic on its own: one trip to the store, where a transaction takes three); when
    /// the store refuses it, each event is tried on its own, so that one event the store refuses does not lose the
    /// others.
    static func write(
        _ events: [AuditEvent], to store: Store, clock: any GatehouseClock, follower: (any AuditFollower)? = nil
    ) async {
        do {
            try await insert(events, in: store, clock: clock, follower: follower)
        } catch {
            for event in events {
                do {
                    try await insert([event], in: store, clock: clock, follower: follower)
                } catch {
                    store.logger.warning(
                        "audit event not recorded", metadata: ["action": "\(event.action)", "error": "\(error)"])
                }
            }
        }
    }

    /// In one statement; in one transaction with what follows the events (webhook events) when something does.
    private static func insert(
        _ events: [AuditEvent], in store: Store, clock: any GatehouseClock, follower: (any AuditFollower)?
    ) async throws {
        guard let follower, follower.follows(events) else {
            try await store.autocommit { db in try await AuditRepository(db: db, clock: clock).record(events) }
            return
        }
        try await store.transaction { db in
            try await AuditRepository(db: db, clock: clock).record(events)
            try await follower.record(events, in: db)
        }
    }
}
