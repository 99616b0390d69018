import NIOConcurrencyHelpers

/// Refresh rotations waiting for the store, written together (group commit): whatever arrives while one batch is
/// being written goes in the next, as one statement and one turn at SQLite's write lock (one round trip on
/// PostgreSQL). A refresh's cost at the store was its turn at the lock, whose handoffs between threads took longer than
/// the statement itself, so under load the turns, not the work, set the rate.
///
/// It carries out what `RefreshRotation` decides for a batch: the slot of each rotation (`plan`: written, a twin of
/// one written, or rotated here lately), and then its outcome. A batch is first written as its one statement alone,
/// with no transaction around it: the trigger checks each row, and its refusal of any (another request rotated that
/// token first, or its session was revoked meanwhile) undoes all of it. Then the batch goes through the checked
/// transaction (`SessionRepository.rotate`), still one statement, so each request gets its own outcome and a refusal
/// costs the batch one more trip, not one trip per rotation. Refusals come from revocations, and from races with a
/// request of an earlier batch; client races inside one batch are twins, never written twice (written into the batch,
/// they failed it and every rotation in it went one at a time: racing pairs ran at 0.38 of plain refreshes).
final class RotationQueue: Sendable {
    /// The most rotations in one statement: 11 parameters each stays far below both stores' limits.
    static let batchLimit = 128

    private let batches: GroupCommit<PendingRotation, Result<RefreshRotation.Outcome, any Error>>
    /// Tokens this queue rotated lately: a late twin of one is `alreadyRotated` without asking the store.
    private let recent: RecentRotations

    init(store: Store, clock: any GatehouseClock) {
        let recent = RecentRotations()
        self.recent = recent
        batches = GroupCommit(limit: Self.batchLimit) { rotations in
            await Self.writeBatch(rotations, to: store, recent: recent, clock: clock)
        }
    }

    /// Rotates one token with whatever else is waiting; answers as `SessionRepository.rotate` would for it alone.
    func rotate(_ rotation: PendingRotation) async throws -> RefreshRotation.Outcome {
        try await batches.submit(rotation).get()
    }

    /// One batch, as `RefreshRotation.plan` places it. Where a twin's first rotated, the twin's audit row is written
    /// by the batch too, in one more statement, before it is answered (waiting for the audit queue's own turn at the
    /// write lock made a racing pair take three times a refresh's time).
    private static func writeBatch(
        _ batch: [PendingRotation], to store: Store, recent: RecentRotations, clock: any GatehouseClock
    ) async -> [Result<RefreshRotation.Outcome, any Error>] {
        let plan = RefreshRotation.plan(batch.map(\.token), rotatedLately: recent.rotated(batch.map(\.token)))
        let written = plan.written.map { batch[$0] }
        let outcomes = written.isEmpty ? [] : await write(written, to: store)
        recent.add(
            zip(written, outcomes).compactMap { rotation, outcome in
                if case .success(.rotated) = outcome { return rotation.token }
                return nil
            })
        let answers = plan.slots.map { slot -> Result<RefreshRotation.Outcome, any Error> in
            switch slot {
            case .written(let row): outcomes[row]
            case .twin(let row): RefreshRotation.twin(of: outcomes[row])
            case .rotatedLately: .success(.alreadyRotated)
            }
        }
        let twins = zip(batch, zip(plan.slots, answers)).compactMap { rotation, placed -> AuditEvent? in
            guard case .twin = placed.0, case .success(.rotatedByTwin) = placed.1 else { return nil }
            return rotation.audit
        }
        if !twins.isEmpty { await AuditQueue.write(twins, to: store, clock: clock) }
        return answers
    }

    /// The outcome of each rotation of one batch, in order. First as one statement on its own, which the trigger
    /// checks row by row: one trip to the store. When the trigger refuses any row, nothing was written, and the
    /// checked transaction gives each rotation its outcome and writes those it allows.
    private static func write(
        _ rotations: [PendingRotation], to store: Store
    ) async -> [Result<RefreshRotation.Outcome, any Error>] {
        do {
            try await store.autocommit { db in try await SessionRepository(db: db).insert(rotations) }
            return rotations.map { _ in .success(.rotated) }
        } catch  where StoreOutage.isUnavailable(error) {
            return rotations.map { _ in .failure(error) }
        } catch {}
        return await checked(rotations, in: store)
    }

    /// One transaction for `rotations`: the check, then one statement for those it allows. When the statement fails
    /// after the check allowed it, a session was revoked in between (or, on SQLite, another process wrote): checked
    /// once more, the store answers with the outcomes. An unreachable store is not asked twice.
    private static func checked(
        _ rotations: [PendingRotation], in store: Store
    ) async -> [Result<RefreshRotation.Outcome, any Error>] {
        func transaction() async throws -> [RefreshRotation.Outcome] {
            try await store.transaction { db in try await SessionRepository(db: db).rotate(rotations) }
        }
        do {
            return try await transaction().map { .success($0) }
        } catch let error where !StoreOutage.isUnavailable(error) {
            do {
                return try await transaction().map { .success($0) }
            } catch {
                return rotations.map { _ in .failure(error) }
            }
        } catch {
            return rotations.map { _ in .failure(error) }
        }
    }
}

/// Refresh tokens rotated here in the last few seconds. Rotation only goes one way (a token rotated stays rotated
/// until it is deleted, and a deleted one reads as gone), so a token found here is `alreadyRotated` whatever the store
/// says now; the caller then reads it, as after any such verdict. The store stays the judge of everything else.
final class RecentRotations: Sendable {
    /// How long a token is remembered: client races arrive within milliseconds of each other.
    static let lifetime: Duration = .seconds(2)
    /// Tokens held at most; past it, the old ones go, and all of them if none is old.
    static let capacity = 100_000

    private let tokens = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])

    /// Those of `candidates` rotated within `lifetime`.
    func rotated(_ candidates: [String], now: ContinuousClock.Instant = .now) -> Set<String> {
        tokens.withLockedValue { tokens in
            Set(candidates.filter { token in tokens[token].map { now - $0 < Self.lifetime } ?? false })
        }
    }

    func add(_ rotated: [String], now: ContinuousClock.Instant = .now) {
        guard !rotated.isEmpty else { return }
        tokens.withLockedValue { tokens in
            if tokens.count + rotated.count > Self.capacity {
                tokens = tokens.filter { now - $0.value < Self.lifetime }
                if tokens.count + rotated.count > Self.capacity { tokens.removeAll(keepingCapacity: true) }
            }
            for token in rotated { tokens[token] = now }
        }
    }
}
