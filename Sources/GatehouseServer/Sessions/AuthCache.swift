import Foundation
import GatehouseAPI
import NIOConcurrencyHelpers

/// What every protected request would otherwise read from the store: session rows (with their account's disabled
/// state and their parent's times) and users as their owners see them.
///
/// An entry is kept for `lifetime` at most, and goes at once when a commit here says its session ended or its account
/// changed (`Store.onCommit`), or another instance announces so through the bus. A read that started before such a
/// change never puts back what it read (`ticket`). So a revoked session fails at once on the instance that revoked
/// it, within milliseconds on the others while the bus is up, and within `lifetime` whatever happens to the bus.
final class AuthCache: Sendable {
    /// The longest an entry is trusted: the bound on how late another instance, or another process on the same
    /// SQLite file, can learn of a change it missed.
    static let lifetime: Duration = .seconds(1)
    /// Entries per map; past it, the stale ones go, and all of them if none is stale.
    let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    private struct Entry<Value: Sendable>: Sendable {
        let value: Value
        let readAt: ContinuousClock.Instant
    }

    private struct State {
        var sessions: [String: Entry<SessionRow>] = [:]
        var users: [String: Entry<CachedUser>] = [:]
        /// Counts invalidations; a ticket is the count when a read started.
        var generation: UInt64 = 0
        /// When (in `generation`) each key was last invalidated: a read of that key that started earlier is not
        /// kept. Only keys invalidated lately are remembered; `forgottenThrough` voids reads older than that.
        var endedSessions: [String: UInt64] = [:]
        var changedAccounts: [String: UInt64] = [:]
        var forgottenThrough: UInt64 = 0

        /// Whether a read of `key` that started at `ticket` may be kept.
        func current(_ ticket: UInt64, _ key: String, in invalidated: [String: UInt64]) -> Bool {
            ticket >= forgottenThrough && (invalidated[key] ?? 0) <= ticket
        }
    }

    private let state = NIOLockedValueBox(State())

    /// A user and its JSON as the API writes it: encoded once per read from the store, not once per request.
    struct CachedUser: Sendable {
        let user: Schemas.User
        let json: [UInt8]
        /// The metadata its access tokens carry (`SessionService.metadataClaims`), sized once.
        let metadataClaims: (app: JSONFields?, user: JSONFields?)

        init(_ user: Schemas.User) throws {
            self.user = user
            json = try WireJSON.encode(user)
            metadataClaims = SessionService.metadataClaims(app: user.appMetadata, user: user.userMetadata)
        }
    }

    /// Taken before reading the store; `keep` ignores the read if anything was invalidated meanwhile.
    func ticket() -> UInt64 { state.withLockedValue { $0.generation } }

    func session(_ id: String, now: ContinuousClock.Instant = .now) -> SessionRow? {
        state.withLockedValue { Self.fresh($0.sessions[id], now: now) }
    }

    func keep(session row: SessionRow, id: String, ticket: UInt64, now: ContinuousClock.Instant = .now) {
        let entry = Entry(value: row, readAt: now)
        state.withLockedValue { [capacity] state in
            guard state.current(ticket, id, in: state.endedSessions) else { return }
            Self.insert(entry, for: id, into: &state.sessions, capacity: capacity)
        }
    }

    /// The user, with its JSON as `GET /auth/v1/user` answers it, already encoded.
    func user(_ accountID: String, now: ContinuousClock.Instant = .now) -> CachedUser? {
        state.withLockedValue { Self.fresh($0.users[accountID], now: now) }
    }

    func keep(user: CachedUser, accountID: String, ticket: UInt64, now: ContinuousClock.Instant = .now) {
        let entry = Entry(value: user, readAt: now)
        state.withLockedValue { [capacity] state in
            guard state.current(ticket, accountID, in: state.changedAccounts) else { return }
            Self.insert(entry, for: accountID, into: &state.users, capacity: capacity)
        }
    }

    /// Drops what `changes` names (everything, for `.all`), and voids the reads of those keys in flight.
    func forget(_ changes: CacheInvalidation) {
        state.withLockedValue { [capacity] state in
            state.generation += 1
            let now = state.generation
            if changes.everything || state.endedSessions.count + state.changedAccounts.count > capacity {
                state.endedSessions.removeAll()
                state.changedAccounts.removeAll()
                state.forgottenThrough = now
            }
            if changes.everything {
                state.sessions.removeAll()
                state.users.removeAll()
                return
            }
            for id in changes.endedSessions {
                state.sessions[id] = nil
                state.endedSessions[id] = now
            }
            for id in changes.changedAccounts {
                state.users[id] = nil
                state.changedAccounts[id] = now
            }
        }
    }

    /// How many entries are held, for tests and metrics.
    var count: (sessions: Int, users: Int) { state.withLockedValue { ($0.sessions.count, $0.users.count) } }

    private static func fresh<Value>(_ entry: Entry<Value>?, now: ContinuousClock.Instant) -> Value? {
        guard let entry, now - entry.readAt < lifetime else { return nil }
        return entry.value
    }

    private static func insert<Value>(
        _ entry: Entry<Value>, for key: String, into map: inout [String: Entry<Value>], capacity: Int
    ) {
        if map.count >= capacity, map[key] == nil {
            map = map.filter { entry.readAt - $0.value.readAt < lifetime }
            if map.count >= capacity { map.removeAll(keepingCapacity: true) }
        }
        map[key] = entry
    }
}
