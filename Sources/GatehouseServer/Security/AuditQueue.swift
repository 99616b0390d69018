/// Audit events waiting for the store, written together: whatever arrives while one batch is being written goes in
/// the next, in one transaction (one turn at SQLite's write lock). A caller still waits until its event is written.
///
/// Written one transaction each, the events of a burst queued for the write lock behind each other: two refreshes of
/// one token at once (an app after a wake-up) answer the second from the grace window with an audit row of its own,
/// and under load those rows made a racing pair take 50 ms.
final class AuditQueue: Sendable {
    /// The most events in one transaction.
    static let batchLimit = 256

    private let batches: GroupCommit<AuditEvent, Void>

    init(store: Store, clock: any GatehouseClock) {
        batches = GroupCommit(limit: Self.batchLimit) { events in
            await Self.write(events, to: store, clock: clock)
            return events.map { _ in () }
        }
    }

    /// Records `event` with whatever else is waiting; a failure is logged, never thrown (the trail must not turn a
    /// request into an error).
    func record(_ event: AuditEvent) async { await batches.submit(event) }

    /// One batch in one transaction; when the store refuses it, each event is tried on its own, so that one event the
    /// store refuses does not lose the others.
    private static func write(_ events: [AuditEvent], to store: Store, clock: any GatehouseClock) async {
        do {
            try await transaction(events, in: store, clock: clock)
        } catch {
            for event in events {
                do {
                    try await transaction([event], in: store, clock: clock)
                } catch {
                    store.logger.warning(
                        "audit event not recorded", metadata: ["action": "\(event.action)", "error": "\(error)"])
                }
            }
        }
    }

    private static func transaction(_ events: [AuditEvent], in store: Store, clock: any GatehouseClock) async throws {
        try await store.transaction { db in
            let audits = AuditRepository(db: db, clock: clock)
            for event in events { try await audits.record(event) }
        }
    }
}
