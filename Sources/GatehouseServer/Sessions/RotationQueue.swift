/// Refresh rotations waiting for the store, written together (group commit): whatever arrives while one batch is
/// being written goes in the next, as one statement and one turn at SQLite's write lock (one round trip on
/// PostgreSQL). A refresh's cost at the store was its turn at the lock, whose handoffs between threads took longer than
/// the statement itself, so under load the turns, not the work, set the rate.
///
/// A batch is first written as that one statement alone, with no transaction around it: the trigger checks each row,
/// and a refusal of any (another request rotated that token first, or its session was revoked meanwhile) undoes all
/// of it. Then the batch goes through the checked transaction, which finds the refusal, and its rotations are written
/// one at a time, so that each request gets its own verdict. Refusals are rare: revocations, and races with a request
/// of an earlier batch.
///
/// Client races inside one batch (an app that sends the same token twice at once, as after a wake-up) are not
/// refusals: the batch writes the first of them, and the others get its verdict, `rotatedByTwin` where it rotated (the
/// grace window's replay, answered without reading the token again). Written into the batch, they failed it and every
/// rotation in it went one at a time: racing pairs ran at 0.38 of plain refreshes, 50 ms a pair at the median.
final class RotationQueue: Sendable {
    /// The most rotations in one statement: 11 parameters each stays far below both stores' limits.
    static let batchLimit = 128

    private let batches: GroupCommit<PendingRotation, Result<SessionRepository.Rotation, any Error>>

    init(store: Store) {
        batches = GroupCommit(limit: Self.batchLimit) { rotations in await Self.writeBatch(rotations, to: store) }
    }

    /// Rotates one token with whatever else is waiting; answers as `SessionRepository.rotate` would for it alone.
    func rotate(_ rotation: PendingRotation) async throws -> SessionRepository.Rotation {
        try await batches.submit(rotation).get()
    }

    /// One batch: the first rotation of each token goes to the store; a later one of the same token shares its
    /// verdict.
    private static func writeBatch(
        _ batch: [PendingRotation], to store: Store
    ) async -> [Result<SessionRepository.Rotation, any Error>] {
        var first: [String: Int] = [:]
        var written: [PendingRotation] = []
        let slots = batch.map { rotation in
            if let slot = first[rotation.token] { return (slot: slot, repeated: true) }
            first[rotation.token] = written.count
            written.append(rotation)
            return (slot: written.count - 1, repeated: false)
        }
        let outcomes = await write(written, to: store)
        return slots.map { $0.repeated ? repeated(outcomes[$0.slot]) : outcomes[$0.slot] }
    }

    /// The verdict for a rotation of a token that the batch rotated for an earlier request.
    static func repeated(
        _ outcome: Result<SessionRepository.Rotation, any Error>
    ) -> Result<SessionRepository.Rotation, any Error> {
        if case .success(.rotated) = outcome { return .success(.rotatedByTwin) }
        return outcome
    }

    /// The verdict for each rotation of one batch, in order. First as one statement on its own, which the trigger
    /// checks row by row: one trip to the store. When the trigger refuses any row, nothing was written, and the
    /// checked transaction finds which.
    private static func write(
        _ rotations: [PendingRotation], to store: Store
    ) async -> [Result<SessionRepository.Rotation, any Error>] {
        do {
            try await store.autocommit { db in try await SessionRepository(db: db).insert(rotations) }
            return rotations.map { _ in .success(.rotated) }
        } catch  where StoreOutage.isUnavailable(error) {
            return rotations.map { _ in .failure(error) }
        } catch {}
        let together = await apply(rotations, to: store)
        guard rotations.count > 1, case .success(let outcome) = together, outcome != .rotated else {
            return rotations.map { _ in together }
        }
        var outcomes: [Result<SessionRepository.Rotation, any Error>] = []
        for rotation in rotations { outcomes.append(await apply([rotation], to: store)) }
        return outcomes
    }

    /// One transaction for `rotations`: the check, then one statement. When the statement fails after the check
    /// allowed it, a session was revoked in between (or, on SQLite, another process wrote): checked once more, the
    /// store answers with the verdict. An unreachable store is not asked twice.
    private static func apply(
        _ rotations: [PendingRotation], to store: Store
    ) async -> Result<SessionRepository.Rotation, any Error> {
        do {
            return .success(try await transaction(rotations, in: store))
        } catch let error where !StoreOutage.isUnavailable(error) {
            do {
                return .success(try await transaction(rotations, in: store))
            } catch {
                return .failure(error)
            }
        } catch {
            return .failure(error)
        }
    }

    private static func transaction(
        _ rotations: [PendingRotation], in store: Store
    ) async throws -> SessionRepository.Rotation {
        try await store.transaction { db in try await SessionRepository(db: db).rotate(rotations) }
    }
}
