import Foundation

/// The decisions of one session (the account's, or the company's it is signed in to), without I/O and without a
/// clock of its own: each input comes with the time, and the answer is the effects to carry out. `SessionManager`
/// carries them out (the store, the events, the refresh request, the timer); tests feed inputs and read effects.
///
/// - The access token is refreshed `refreshMargin` before it expires; one refresh at a time.
/// - A refresh that does not reach the server (or finds it busy) keeps the session and is tried again after
///   `retryBase`, doubling up to `retryMax` (or later, when a rate limit says so), for as long as the token is due:
///   the wait is bounded, the attempts are not (the session is the user's until the server ends it). New tokens
///   that are due at once (a device clock ahead of the server's) are paced the same way.
/// - Only the server's verdict ends the session: `sessionExpired` (a revoked, expired, reused or unknown refresh
///   token, a banned or deleted account) or `companyAccessRevoked`.
/// - `expiringSoon` is told once, `expiryWarning` before the session's absolute end (the server's
///   `session_expires_at`, `AuthSession.endsAt`). A session without one is never warned of: it ends when a refresh is
///   refused.
/// - While the app is locked nothing runs by itself (no timer, no warning); callers may still ask for tokens.
///   Unlocking catches up on what fell due.
struct SessionStateMachine: Sendable {
    /// Which session this is, which decides the events it tells.
    enum Kind: Sendable {
        /// The account session: its events as they are.
        case account
        /// The company session: told as `companyChanged`.
        case company
    }

    /// The times the machine keeps to.
    struct Policy: Sendable, Equatable {
        /// Refresh when the access token has less than this left, in seconds.
        var refreshMargin: TimeInterval = 60
        /// The wait after the first refresh that failed without a verdict, in seconds; it doubles with each failure.
        var retryBase: TimeInterval = 1
        /// The longest wait between refresh attempts, in seconds.
        var retryMax: TimeInterval = 60
        /// Tell `expiringSoon` this many seconds before the session's absolute end.
        var expiryWarning: TimeInterval = 300
    }

    /// Where the session stands.
    enum State: Sendable, Equatable {
        /// The store has not been read yet.
        case unknown
        /// No session.
        case signedOut
        /// A session whose next refresh is due `refreshMargin` before its access token expires.
        case active(AuthSession)
        /// One refresh in flight, sending this session's refresh token.
        case refreshing(AuthSession)
        /// The last refresh failed without a verdict; the next one is due at `retryAt`.
        case backingOff(AuthSession, retryAt: Date)
    }

    /// What happens to the session.
    enum Input: Sendable, Equatable {
        /// The store was read at launch.
        case restored(AuthSession?)
        /// A sign-in answered a new session.
        case signedIn(AuthSession)
        /// The same session with new tokens from a second factor (aal2).
        case raised(AuthSession)
        /// The refresh that sent `from`'s refresh token answered `to`.
        case refreshed(from: AuthSession, to: AuthSession)
        /// The refresh that sent `from`'s refresh token failed.
        case refreshFailed(from: AuthSession, GatehouseError)
        /// The timer the machine asked for went off.
        case tick
        /// The app signed out, or the server ended the session outside a refresh.
        case signedOut(SignOutReason)
        /// The app's lock screen went up.
        case lock
        /// The app's lock screen went away.
        case unlock
    }

    /// What the machine asks for.
    enum Effect: Sendable, Equatable {
        /// Tell the app.
        case announce(AuthEvent)
        /// Keep this session in the store.
        case persist(AuthSession)
        /// Forget the stored session.
        case removeStored
        /// Send one refresh request with this session's refresh token; answer `refreshed` or `refreshFailed`.
        case refresh(AuthSession)
        /// Send `tick` at this moment (replacing the timer asked for before).
        case wake(at: Date)
        /// No timer is needed.
        case cancelWake
    }

    /// What a caller that needs the session's tokens does.
    enum TokenAnswer: Sendable, Equatable {
        /// Use this session as it is.
        case use(AuthSession)
        /// Start the refresh of this session (the machine is `refreshing` now) and wait for it.
        case startRefresh(AuthSession)
        /// Wait for the refresh in flight.
        case awaitRefresh
        /// There is no session.
        case notSignedIn
    }

    /// How a failed refresh is judged.
    enum Verdict: Sendable, Equatable {
        /// The server ended the session.
        case ends
        /// The session stays; try again, not before `notBefore` when the server said so.
        case retry(notBefore: Date?)
    }

    let kind: Kind
    let policy: Policy
    private(set) var state: State = .unknown
    /// Whether the app's lock screen is up.
    private(set) var isLocked = false
    /// Refreshes failed in a row without a verdict.
    private(set) var failures = 0
    /// The session end `expiringSoon` was told for.
    private(set) var warnedEnd: Date?
    /// The timer asked for last.
    private(set) var wakeAt: Date?

    init(_ kind: Kind, policy: Policy = Policy()) {
        self.kind = kind
        self.policy = policy
    }

    /// The session in use, whatever is happening to it.
    var session: AuthSession? {
        switch state {
        case .unknown, .signedOut: nil
        case .active(let session), .refreshing(let session), .backingOff(let session, _): session
        }
    }

    /// The failed refresh's verdict: the server's refusals that end a session end it; anything else (unreachable,
    /// busy, rate limited, a code this SDK does not know) keeps it.
    static func verdict(on error: GatehouseError) -> Verdict {
        switch error {
        case .sessionExpired, .companyAccessRevoked: .ends
        case .rateLimited(let retryAfter): .retry(notBefore: retryAfter.date)
        case .lockedOut(let until): .retry(notBefore: until)
        default: .retry(notBefore: nil)
        }
    }

    /// The wait before the next attempt after `failures` failures in a row: `retryBase` doubling, at most `retryMax`.
    func backoff(after failures: Int) -> TimeInterval {
        let doubled = policy.retryBase * pow(2, Double(max(failures - 1, 0)))
        return min(doubled, policy.retryMax)
    }

    /// Answers a caller that needs tokens at `now`: the session when its access token has more than `refreshMargin`
    /// left (or, with `forceRefresh`, never), else the refresh in flight, else a new one.
    mutating func token(forceRefresh: Bool, now: Date) -> TokenAnswer {
        guard let session else { return .notSignedIn }
        if !forceRefresh && !isDue(session, at: now) { return .use(session) }
        if case .refreshing = state { return .awaitRefresh }
        state = .refreshing(session)
        return .startRefresh(session)
    }

    /// Takes `input` at `now`.
    mutating func handle(_ input: Input, now: Date) -> [Effect] {
        switch input {
        case .restored(let session):
            state = session.map(State.active) ?? .signedOut
            failures = 0
            warnedEnd = nil
            return tell(.initialSession(session)) + settle(now)

        case .signedIn(let session):
            state = .active(session)
            failures = 0
            warnedEnd = nil
            return [.persist(session)] + tell(.signedIn(session)) + settle(now)

        case .raised(let session):
            state = .active(session)
            failures = 0
            return [.persist(session)] + tell(.refreshed(session)) + settle(now)

        case .refreshed(let from, let to):
            guard case .refreshing(let sent) = state, sent.refreshToken == from.refreshToken else { return [] }
            if isDue(to, at: now) {
                // New tokens already due: the device's clock is ahead of the server's. Refreshing again at once would
                // loop; the backoff paces it as it paces failures.
                failures += 1
                state = .backingOff(to, retryAt: now.addingTimeInterval(backoff(after: failures)))
            } else {
                failures = 0
                state = .active(to)
            }
            return [.persist(to)] + tell(.refreshed(to)) + settle(now)

        case .refreshFailed(let from, let error):
            guard case .refreshing(let sent) = state, sent.refreshToken == from.refreshToken else { return [] }
            switch Self.verdict(on: error) {
            case .ends:
                let revoked = error == .companyAccessRevoked ? sent.companyID : nil
                return end(.sessionEnded) + (revoked.map { [.announce(.companyAccessRevoked(companyID: $0))] } ?? [])
            case .retry(let notBefore):
                failures += 1
                if isDue(sent, at: now) {
                    let retryAt = max(now.addingTimeInterval(backoff(after: failures)), notBefore ?? now)
                    state = .backingOff(sent, retryAt: retryAt)
                } else {
                    state = .active(sent)  // an early refresh failed: the regular one is still to come
                }
                return settle(now)
            }

        case .tick:
            wakeAt = nil  // that timer went off; what comes next gets a new one (also when it went off early)
            return settle(now)

        case .signedOut(let reason):
            return end(reason)

        case .lock:
            guard !isLocked else { return [] }
            isLocked = true
            return (kind == .account ? [.announce(.locked)] : []) + settle(now)

        case .unlock:
            guard isLocked else { return [] }
            isLocked = false
            return (kind == .account ? [.announce(.unlocked)] : []) + settle(now)
        }
    }

    /// Whether `session`'s access token has `refreshMargin` or less left at `now`.
    private func isDue(_ session: AuthSession, at now: Date) -> Bool {
        session.expires(within: policy.refreshMargin, of: now)
    }

    /// When `expiringSoon` is due for `session`, if it has an end not yet warned of.
    private func warningAt(_ session: AuthSession) -> Date? {
        guard let endsAt = session.endsAt, warnedEnd != endsAt else { return nil }
        return endsAt.addingTimeInterval(-policy.expiryWarning)
    }

    /// Does what fell due by `now` (the warning, a refresh), then asks for the timer of what comes next.
    private mutating func settle(_ now: Date) -> [Effect] {
        var effects: [Effect] = []
        guard let session, !isLocked else { return effects + schedule(nil) }
        if let warnAt = warningAt(session), warnAt <= now, let endsAt = session.endsAt {
            warnedEnd = endsAt
            effects += [.announce(.expiringSoon(companyID: session.companyID, endsAt: endsAt))]
        }
        switch state {
        case .active(let session) where isDue(session, at: now):
            state = .refreshing(session)
            effects += [.refresh(session)]
        case .backingOff(let session, let retryAt) where retryAt <= now:
            if isDue(session, at: now) {
                state = .refreshing(session)
                effects += [.refresh(session)]
            } else {
                state = .active(session)  // not due any more (the device's clock went back): the regular schedule
            }
        default: break
        }
        let next = [nextAttempt(of: session), warningAt(session)].compactMap { $0 }.min()
        return effects + schedule(next)
    }

    /// When the next refresh of `session` is due, if one is to come by itself.
    private func nextAttempt(of session: AuthSession) -> Date? {
        switch state {
        case .active: session.expiresAt.addingTimeInterval(-policy.refreshMargin)
        case .backingOff(_, let retryAt): retryAt
        case .unknown, .signedOut, .refreshing: nil
        }
    }

    /// The timer for `next`, when it differs from the one asked for.
    private mutating func schedule(_ next: Date?) -> [Effect] {
        guard next != wakeAt else { return [] }
        wakeAt = next
        return [next.map(Effect.wake(at:)) ?? .cancelWake]
    }

    /// Ends the session: an account always tells why (a sign-out with no session still answers the app); a company
    /// session only when there was one. The store changes before the app is told, so what it reads agrees.
    private mutating func end(_ reason: SignOutReason) -> [Effect] {
        let had = session != nil
        state = .signedOut
        failures = 0
        warnedEnd = nil
        guard had || kind == .account else { return schedule(nil) }
        return [.removeStored] + tell(.signedOut(reason)) + schedule(nil)
    }

    /// `event` as this kind of session tells it: the account's as it is; the company's as the company it is
    /// signed in to.
    private func tell(_ event: AuthEvent) -> [Effect] {
        switch (kind, event) {
        case (.account, _): [.announce(event)]
        case (.company, .signedIn(let session)): [.announce(.companyChanged(companyID: session.companyID))]
        case (.company, .signedOut), (.company, .initialSession(nil)): [.announce(.companyChanged(companyID: nil))]
        case (.company, .initialSession(let session?)): [.announce(.companyChanged(companyID: session.companyID))]
        case (.company, .expiringSoon): [.announce(event)]
        case (.company, _): []
        }
    }
}
