import Foundation
import NIOConcurrencyHelpers

/// What a live stream is told.
enum LiveEvent: Sendable, Equatable {
    /// The company's log reached this seq: pull if it is past your token.
    case seq(Int64)
    /// The stream ends, and why (`company_access_revoked`, `session_not_found`).
    case closed(ErrorCode)
}

/// This instance's live subscribers, by company, and the fan-out of commits, access changes and ended sessions to
/// them. Each subscriber's stream keeps only its newest event, so a burst of commits reaches a slow reader as one poke.
/// Streams are capped per session and per instance.
final class LiveStreams: Sendable {
    private struct Subscriber {
        let accountID: String
        let sessionID: String
        let continuation: AsyncStream<LiveEvent>.Continuation
        /// Asks the stream to check its session and membership now, not at its next interval.
        let recheck: @Sendable () -> Void
    }

    /// Why a stream was not opened.
    enum Refusal: Error, Equatable {
        /// The session holds `perSession` streams already.
        case sessionFull
        /// This instance holds `perInstance` streams already.
        case instanceFull
    }

    /// Streams one session may hold open at once.
    let perSession: Int
    /// Streams this instance holds open at once.
    let perInstance: Int
    /// Streams one account holds open at once, over all its sessions: four sessions' worth.
    var perAccount: Int { 4 * perSession }

    init(perSession: Int = 4, perInstance: Int = 10_000) {
        self.perSession = perSession
        self.perInstance = perInstance
    }

    private struct State {
        var companies: [String: [UUID: Subscriber]] = [:]
        /// The newest seq seen per company with subscribers: pokes never go backwards.
        var latest: [String: Int64] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// How many streams are open on this instance.
    var subscriberCount: Int { state.withLockedValue { $0.companies.values.reduce(0) { $0 + $1.count } } }

    /// Companies with at least one subscriber here.
    var companies: [String] { state.withLockedValue { Array($0.companies.keys) } }

    /// A stream of `companyID`'s events for one session; it ends when `unsubscribe` or a close is called, or when
    /// its reader goes away, and then calls `onEnd`. `recheck` is called when the session's account changed (here or
    /// on another instance), so the stream checks at once whether it may go on. Refused past the caps.
    func subscribe(
        companyID: String, accountID: String, sessionID: String, recheck: @escaping @Sendable () -> Void = {},
        onEnd: @escaping @Sendable () -> Void = {}
    ) throws(Refusal) -> (UUID, AsyncStream<LiveEvent>) {
        let (stream, continuation) = AsyncStream.makeStream(of: LiveEvent.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let subscriber = Subscriber(
            accountID: accountID, sessionID: sessionID, continuation: continuation, recheck: recheck)
        // Set before the stream can be closed by anyone, so its end always reaches `onEnd`.
        continuation.onTermination = { [weak self] _ in
            self?.remove(companyID: companyID, id: id)
            onEnd()
        }
        let refusal = state.withLockedValue { state -> Refusal? in
            let all = state.companies.values.lazy.flatMap(\.values)
            if all.count >= perInstance { return .instanceFull }
            if all.count(where: { $0.sessionID == sessionID }) >= perSession { return .sessionFull }
            // Every company login is a new session: an account may not fill the instance through many of them.
            if all.count(where: { $0.accountID == accountID }) >= perAccount { return .sessionFull }
            state.companies[companyID, default: [:]][id] = subscriber
            return nil
        }
        if let refusal {
            continuation.finish()
            throw refusal
        }
        return (id, stream)
    }

    /// Sends one subscriber the company's newest seq (at least `seq`): the first event, and the keep-alive.
    func poke(companyID: String, id: UUID, atLeast seq: Int64) {
        let target = state.withLockedValue { state -> (Subscriber, Int64)? in
            guard let subscriber = state.companies[companyID]?[id] else { return nil }
            let newest = max(seq, state.latest[companyID] ?? 0)
            state.latest[companyID] = newest
            return (subscriber, newest)
        }
        if let (subscriber, newest) = target { subscriber.continuation.yield(.seq(newest)) }
    }

    private func remove(companyID: String, id: UUID) {
        state.withLockedValue { state in
            state.companies[companyID]?[id] = nil
            if state.companies[companyID]?.isEmpty == true {
                state.companies[companyID] = nil
                state.latest[companyID] = nil
            }
        }
    }

    func unsubscribe(companyID: String, id: UUID) {
        let removed = state.withLockedValue { $0.companies[companyID]?[id] }
        removed?.continuation.finish()
    }

    /// A transaction of `companyID` committed at `seq` (here or, through the bus, on another instance).
    func committed(companyID: String, seq: Int64) {
        let (targets, newest) = state.withLockedValue { state -> ([Subscriber], Int64) in
            guard let subscribers = state.companies[companyID] else { return ([], seq) }
            let newest = max(seq, state.latest[companyID] ?? 0)
            state.latest[companyID] = newest
            return (Array(subscribers.values), newest)
        }
        for subscriber in targets { subscriber.continuation.yield(.seq(newest)) }
    }

    /// Closes the streams of one member of a company (their access changed or ended).
    func accessChanged(companyID: String, accountID: String) {
        close(companyID: companyID, code: .companyAccessRevoked) { $0.accountID == accountID }
    }

    /// Closes every stream of a company (it was deleted).
    func companyEnded(companyID: String) {
        close(companyID: companyID, code: .companyAccessRevoked) { _ in true }
    }

    /// What a committed transaction (here, or announced by another instance) changed: the streams of sessions that
    /// ended, and of accounts that changed (disabled, deleted), check at once whether they may go on, so each closes
    /// with its reason (a removal ends the member's sessions too, and the device must hear it lost the company). After
    /// a reconnect of the bus (`everything`), the streams wait for their periodic check rather than all asking the
    /// store at once.
    func invalidated(_ changes: CacheInvalidation) {
        guard !changes.endedSessions.isEmpty || !changes.changedAccounts.isEmpty else { return }
        let checking = state.withLockedValue { state in
            state.companies.values.flatMap(\.values).filter {
                changes.endedSessions.contains($0.sessionID) || changes.changedAccounts.contains($0.accountID)
            }
        }
        for subscriber in checking { subscriber.recheck() }
    }

    /// Closes one stream, saying why.
    func close(companyID: String, id: UUID, code: ErrorCode) {
        let closing = state.withLockedValue { state -> Subscriber? in
            let subscriber = state.companies[companyID]?.removeValue(forKey: id)
            if state.companies[companyID]?.isEmpty == true { state.companies[companyID] = nil }
            return subscriber
        }
        closing?.continuation.yield(.closed(code))
        closing?.continuation.finish()
    }

    private func close(companyID: String, code: ErrorCode, where matches: (Subscriber) -> Bool) {
        let closing = state.withLockedValue { state -> [Subscriber] in
            guard let subscribers = state.companies[companyID] else { return [] }
            let closing = subscribers.filter { matches($0.value) }
            for id in closing.keys { state.companies[companyID]?[id] = nil }
            if state.companies[companyID]?.isEmpty == true { state.companies[companyID] = nil }
            return Array(closing.values)
        }
        for subscriber in closing {
            subscriber.continuation.yield(.closed(code))
            subscriber.continuation.finish()
        }
    }
}
