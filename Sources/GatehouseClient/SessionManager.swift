import Foundation
import GatehouseClientAPI

/// Keeps one session of a client (the account's, or the company's it is signed in to): carries out what its
/// `SessionStateMachine` decides — the store, the events, one refresh request at a time that concurrent callers
/// share, and the timer, on the client's `SessionClock`.
actor SessionManager {
    /// Which session this is, which decides the events it sends.
    typealias Kind = SessionStateMachine.Kind

    private var machine: SessionStateMachine
    private let store: any SessionStore
    private let client: Client
    private let hub: AuthEventHub
    private let clock: any SessionClock
    /// The refresh in flight and the refresh token it sent.
    private var inflight: (token: String, task: Task<AuthSession, any Error>)?
    /// The timer the machine asked for.
    private var timer: Task<Void, Never>?

    init(
        _ kind: Kind, store: any SessionStore, client: Client, hub: AuthEventHub,
        policy: SessionStateMachine.Policy = .init(), clock: any SessionClock = .system
    ) {
        machine = SessionStateMachine(kind, policy: policy)
        self.store = store
        self.client = client
        self.hub = hub
        self.clock = clock
    }

    deinit { timer?.cancel() }

    /// The session in use, if any, as it stands (it may need a refresh).
    var current: AuthSession? { machine.session }

    /// Whether the app's lock screen is up.
    var isLocked: Bool { machine.isLocked }

    /// Loads the stored session at launch, unless it was read already or a sign-in came first; answers the session
    /// in use. Offline or not, it is kept until the server says otherwise.
    func restoreIfUnread() throws(GatehouseError) -> AuthSession? {
        guard machine.state == .unknown else { return machine.session }
        return try restore()
    }

    /// Loads the stored session.
    private func restore() throws(GatehouseError) -> AuthSession? {
        let stored: AuthSession?
        do {
            stored = try store.load()
        } catch {
            throw GatehouseError(storeFailure: error)
        }
        try apply(.restored(stored))
        return stored
    }

    /// Takes a new session from a sign-in; a store failure is thrown after the session is in use.
    func adopt(_ new: AuthSession) throws(GatehouseError) { try apply(.signedIn(new)) }

    /// Takes the same session raised by a second factor (new tokens, aal2): told as `refreshed`, as a refresh is.
    func replace(_ raised: AuthSession) throws(GatehouseError) { try apply(.raised(raised)) }

    /// Ends the session locally, and says why.
    func end(_ reason: SignOutReason) throws(GatehouseError) { try apply(.signedOut(reason)) }

    /// The app's lock screen went up: nothing runs by itself until `unlock`.
    func lock() { try? apply(.lock) }

    /// The app's lock screen went away: what fell due meanwhile happens now.
    func unlock() { try? apply(.unlock) }

    /// A session whose access token is good for at least the refresh margin, refreshing when needed.
    func valid() async throws(GatehouseError) -> AuthSession { try await tokens(forceRefresh: false) }

    /// Renews the tokens. Concurrent callers share one request. A network failure keeps the session; the server's
    /// verdict (revoked, expired, reused) ends it.
    func refresh() async throws(GatehouseError) -> AuthSession { try await tokens(forceRefresh: true) }

    private func tokens(forceRefresh: Bool) async throws(GatehouseError) -> AuthSession {
        switch machine.token(forceRefresh: forceRefresh, now: clock.now) {
        case .use(let session): return session
        case .notSignedIn: throw .notSignedIn
        case .startRefresh(let session): return try await Self.value(of: start(session))
        case .awaitRefresh:
            guard let inflight else { throw .notSignedIn }  // never: the machine refreshes only with a task
            return try await Self.value(of: inflight.task)
        }
    }

    /// Starts the one refresh request of `session`.
    private func start(_ session: AuthSession) -> Task<AuthSession, any Error> {
        let task = Task { try await self.exchange(session) }
        inflight = (session.refreshToken, task)
        return task
    }

    private static func value(of task: Task<AuthSession, any Error>) async throws(GatehouseError) -> AuthSession {
        do {
            return try await task.value
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .network(String(describing: error))
        }
    }

    /// Sends `sent`'s refresh token and tells the machine the answer. A session that changed meanwhile (raised by a
    /// second factor, or signed in again) is the answer then, whatever the request's fate.
    private func exchange(_ sent: AuthSession) async throws -> AuthSession {
        defer { if inflight?.token == sent.refreshToken { inflight = nil } }
        let client = self.client
        let renewed: AuthSession
        do throws(GatehouseError) {
            let answer = try await call {
                try await client.token(
                    query: .init(grantType: .refreshToken),
                    body: .json(.RefreshGrant(.init(refreshToken: sent.refreshToken)))
                ).ok.body.json
            }
            renewed = AuthSession(answer, companyID: sent.companyID)
        } catch {
            try? apply(.refreshFailed(from: sent, error))
            if let newer = machine.session, newer.refreshToken != sent.refreshToken { return newer }
            throw error
        }
        try apply(.refreshed(from: sent, to: renewed))
        guard let current = machine.session else { throw GatehouseError.notSignedIn }
        return current
    }

    /// The timer went off.
    private func tick() { try? apply(.tick) }

    /// Runs one call with a valid access token of this session. An access token the server finds expired (the
    /// device's clock behind the server's) is refreshed and the call made once more. When the server answers that
    /// the session has ended, it ends here too (and the caller sees `sessionExpired`).
    nonisolated func authorized<T: Sendable>(
        _ body: @Sendable (Client) async throws -> T
    ) async throws(GatehouseError) -> T {
        do {
            do {
                return try await call(bearer: try await valid().accessToken) { try await body(client) }
            } catch .server(_, "bad_jwt", _) {
                return try await call(bearer: try await refresh().accessToken) { try await body(client) }
            }
        } catch .sessionExpired {
            try? await end(.sessionEnded)
            throw .sessionExpired
        }
    }

    /// Hands `input` to the machine at the clock's time and carries out its effects; the first store failure is
    /// thrown once they all ran.
    private func apply(_ input: SessionStateMachine.Input) throws(GatehouseError) {
        var failure: GatehouseError?
        for effect in machine.handle(input, now: clock.now) {
            switch effect {
            case .announce(let event): hub.send(event)
            case .persist(let session): failure = failure ?? storing { try store.save(session) }
            case .removeStored: failure = failure ?? storing { try store.remove() }
            case .refresh(let session): _ = start(session)
            case .wake(let at): wake(at: at)
            case .cancelWake:
                timer?.cancel()
                timer = nil
            }
        }
        if let failure { throw failure }
    }

    /// Replaces the timer with one that ticks at `deadline`.
    private func wake(at deadline: Date) {
        timer?.cancel()
        let clock = self.clock
        timer = Task { [weak self] in
            do {
                try await clock.sleep(until: deadline)
            } catch {
                return
            }
            guard !Task.isCancelled else { return }
            await self?.tick()
        }
    }

    /// Runs a store call; its failure as a `GatehouseError`, nil when it worked.
    private func storing(_ body: () throws -> Void) -> GatehouseError? {
        do {
            try body()
            return nil
        } catch {
            return GatehouseError(storeFailure: error)
        }
    }
}

extension AuthSession {
    init(_ wire: Components.Schemas.Session, companyID: String? = nil) {
        self.init(
            accessToken: wire.accessToken, refreshToken: wire.refreshToken,
            expiresAt: Date(timeIntervalSince1970: TimeInterval(wire.expiresAt)), userID: wire.user.id,
            email: wire.user.email.isEmpty ? nil : wire.user.email, companyID: companyID,
            endsAt: wire.sessionExpiresAt.map { Date(timeIntervalSince1970: TimeInterval($0)) })
    }
}

extension GatehouseError {
    /// A session store's failure: its own `GatehouseError` (`sessionLocked`), the Keychain's reason, or any other
    /// store's words for logs.
    init(storeFailure error: any Error) {
        switch error {
        case let error as GatehouseError: self = error
        case let error as KeychainStoreError: self = .keychain(error)
        default: self = .sessionStore(String(describing: error))
        }
    }
}
