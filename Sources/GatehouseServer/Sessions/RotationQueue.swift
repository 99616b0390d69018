import NIOConcurrencyHelpers

/// Refresh rotations waiting for the store, written together (group commit): whatever arrives while one batch is
/// being written goes in the next, as one statement and one turn at SQLite's write lock (one round trip on
/// PostgreSQL). A refresh's cost at the store was its turn at the lock, whose handoffs between threads took longer than
/// the statement itself, so under load the turns, not the work, set the rate.
///
/// A batch is first written as that one statement alone, with no transaction around it: the trigger checks each row,
/// and a refusal of any (another request rotated that token first, or its session was revoked meanwhile) undoes all
/// of it. Then the batch goes through the checked transaction: it reads each token's verdict and writes the rotations
/// it allows, still one statement, so each request gets its own verdict and a refusal costs the batch one more trip,
/// not one trip per rotation. Refusals come from revocations, and from races with a request of an earlier batch.
///
/// Client races inside one batch (an app that sends the same token twice at once, as after a wake-up) are not
/// refusals: the batch writes the first of them, and the others get its verdict, `rotatedByTwin` where it rotated (the
/// grace window's replay, answered without reading the token again). Written into the batch, they failed it and every
/// rotation in it went one at a time: racing pairs ran at 0.38 of plain refreshes, 50 ms a pair at the median.
final class RotationQueue: Sendable {
    /// The most rotations in one statement: 11 parameters each stays far below both stores' limits.
    static let batchLimit = 128

    private let batches: GroupCommit<PendingRotation, Result<SessionRepository.Rotation, any Error>>
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
    func rotate(_ rotation: PendingRotation) async throws -> SessionRepository.Rotation {
        try await batches.submit(rotation).get()
    }

    /// One batch: the first rotation of each token goes to the store; a later one of the same token shares its
    /// verdict, and where that is `rotatedByTwin` its audit row is written by the batch too, in one more statement,
    /// before it is answered (waiting for the audit queue's own turn at the write lock made a racing pair take three
    /// times a refresh's time). A rotation of a token an earlier batch rotated is refused as rotated already, where it
    /// would otherwise fail the batch's one statement and send the whole batch through the checked transaction.
    private static func writeBatch(
        _ batch: [PendingRotation], to store: Store, recent: RecentRotations, clock: any GatehouseClock
    ) async -> [Result<SessionRepository.Rotation, any Error>] {
        enum Slot {
            case written(Int)
            case repeated(Int)
            case rotatedBefore
        }
        var first: [String: Int] = [:]
        var written: [PendingRotation] = []
        let known = recent.rotated(batch.map(\.token))
        let slots = batch.map { rotation -> Slot in
            if let slot = first[rotation.token] { return .repeated(slot) }
            if known.contains(rotation.token) { return .rotatedBefore }
            first[rotation.token] = written.count
            written.append(rotation)
            return .written(written.count - 1)
        }
        let outcomes = written.isEmpty ? [] : await write(written, to: store)
        recent.add(
            zip(written, outcomes).compactMap { rotation, outcome in
                if case .success(.rotated) = outcome { return rotation.token }
                return nil
            })
        let twins = zip(batch, slots).compactMap { rotation, slot -> AuditEvent? in
            guard case .repeated(let index) = slot, case .success(.rotated) = outcomes[index] else { return nil }
            return rotation.audit
        }
        if !twins.isEmpty { await AuditQueue.write(twins, to: store, clock: clock) }
        return slots.map { slot in
            switch slot {
            case .written(let index): outcomes[index]
            case .repeated(let index): repeated(outcomes[index])
            case .rotatedBefore: .success(.alreadyRotated)
            }
        }
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
    /// checked transaction gives each rotation its verdict and writes those it allows.
    private static func write(
        _ rotations: [PendingRotation], to store: Store
    ) async -> [Result<SessionRepository.Rotation, any Error>] {
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
    /// once more, the store answers with the verdicts. An unreachable store is not asked twice.
    private static func checked(
        _ rotations: [PendingRotation], in store: Store
    ) async -> [Result<SessionRepository.Rotation, any Error>] {
        func transaction() async throws -> [SessionRepository.Rotation] {
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

/// The first reads of refreshes, made together: the tokens asked for while one read runs are read by the next, in one
/// statement (`SessionRepository.findByRefreshTokens`). Each refresh read its token alone before: a trip to SQLite's
/// threads and the statement prepared again, per request, which under load cost more than the rows.
final class RefreshReads: Sendable {
    /// The most tokens in one statement.
    static let batchLimit = 128

    typealias Found = (token: RefreshTokenRow, session: SessionRow)

    private let batches: GroupCommit<String, Result<Found?, any Error>>

    init(store: Store) {
        batches = GroupCommit(limit: Self.batchLimit) { tokens in
            do {
                let found = try await SessionRepository(db: store.database).findByRefreshTokens(tokens)
                return tokens.map { .success(found[$0]) }
            } catch {
                return tokens.map { _ in .failure(error) }
            }
        }
    }

    /// `token`'s row and its session's, read with whatever else is asked for meanwhile.
    func find(_ token: String) async throws -> Found? {
        switch await batches.submit(token) {
        case .success(let found): return found
        case .failure(let error):
            // Read in the batch's own task: this request's witness hears of an outage here.
            StoreOutage.witness?.saw(error)
            throw error
        }
    }
}
