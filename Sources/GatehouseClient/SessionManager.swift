import Foundation
import GatehouseAPI

/// Keeps one session of a client (the account's, or the company's it is logged in to): persisted through its store,
/// refreshed single-flight before it expires, kept through network failures, and ended only on the server's verdict.
actor SessionManager {
    /// Which session this is, which decides the events it sends.
    enum Kind {
        case account, company
    }

    private let kind: Kind
    private let store: any SessionStore
    private let client: Client
    private var session: Session?
    private var refreshing: Task<Session, any Error>?
    private let hub: AuthEventHub
    /// Refresh when the access token has less than this left, seconds.
    let margin: TimeInterval
    /// The first wait after a refresh that could not reach the server; it doubles up to `retryMax`.
    let retryBase: Duration
    let retryMax: Duration
    /// The background refresher, while there is a session.
    private var keeper: Task<Void, Never>?
    /// Warn this many seconds before the session's end (five minutes, as the README's SDK section says).
    let expiryWarning: TimeInterval
    /// The session end already warned of.
    private var warned: Date?

    init(
        _ kind: Kind, store: any SessionStore, client: Client, hub: AuthEventHub, margin: TimeInterval,
        retryBase: Duration = .seconds(1), retryMax: Duration = .seconds(60), expiryWarning: TimeInterval = 300
    ) {
        self.kind = kind
        self.expiryWarning = expiryWarning
        self.store = store
        self.client = client
        self.hub = hub
        self.margin = margin
        self.retryBase = retryBase
        self.retryMax = retryMax
    }

    /// Tells the app: the account session's events as they are; for the company session, which company is current.
    private func announce(_ event: AuthEvent) {
        switch (kind, event) {
        case (.account, _): hub.send(event)
        case (.company, .signedIn(let session)): hub.send(.companyChanged(companyID: session.companyID))
        case (.company, .signedOut), (.company, .initialSession(nil)): hub.send(.companyChanged(companyID: nil))
        case (.company, .initialSession(let session?)): hub.send(.companyChanged(companyID: session.companyID))
        case (.company, .expiringSoon): hub.send(event)
        case (.company, _): break
        }
    }

    /// Refreshes in the background `margin` seconds before each expiry, and while the network fails retries with
    /// backoff for as long as it takes. It stops when the session ends.
    private func keep() {
        guard keeper == nil, session != nil else { return }
        keeper = Task { await self.refreshBeforeExpiry() }
    }

    private func refreshBeforeExpiry() async {
        var delay = retryBase
        while !Task.isCancelled, let session {
            let warnIn = warnIfEnding(session)
            let due = session.expiresAt.timeIntervalSinceNow - margin
            if due > 0 {
                try? await Task.sleep(for: .milliseconds(Int64(max(min(due, warnIn), 0.01) * 1000)))
                continue
            }
            do throws(GatehouseError) {
                _ = try await refresh()
                delay = retryBase
            } catch .sessionExpired, .notSignedIn {
                return  // the session ended (and `end` let this task go)
            } catch {
                // Unreachable, a store that failed, a server error: none ends the session; try again later.
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, retryMax)
            }
        }
    }

    /// Tells the app once when the session's end is `expiryWarning` away; answers the seconds until that moment.
    private func warnIfEnding(_ session: Session) -> TimeInterval {
        guard let endsAt = session.endsAt, warned != endsAt else { return .infinity }
        let warnIn = endsAt.timeIntervalSinceNow - expiryWarning
        guard warnIn <= 0 else { return warnIn }
        warned = endsAt
        announce(.expiringSoon(companyID: session.companyID, endsAt: endsAt))
        return .infinity
    }

    var current: Session? { session }

    /// Loads the stored session at launch; offline or not, it is kept until the server says otherwise.
    func restore() throws(GatehouseError) -> Session? {
        do {
            session = try store.load()
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .sessionStore(String(describing: error))
        }
        announce(.initialSession(session))
        keep()
        return session
    }

    /// Takes a new session from a sign-in; a store failure is thrown after the session is in use.
    func adopt(_ new: Session) throws(GatehouseError) {
        session = new
        announce(.signedIn(new))
        keeper?.cancel()  // it may be sleeping toward the previous session's times
        keeper = nil
        keep()
        try persist(new)
    }

    /// Takes the same session raised by a second factor (new tokens, aal2): told as `refreshed`, as a refresh is.
    func replace(_ raised: Session) throws(GatehouseError) {
        session = raised
        announce(.refreshed(raised))
        try persist(raised)
    }

    /// A session whose access token is good for at least `margin` more seconds, refreshing when needed.
    func valid() async throws(GatehouseError) -> Session {
        guard let session else { throw .notSignedIn }
        guard session.expires(within: margin) else { return session }
        return try await refresh()
    }

    /// Renews the tokens. Concurrent callers share one request. A network failure keeps the session; the server's
    /// verdict (revoked, expired, reused) ends it.
    func refresh() async throws(GatehouseError) -> Session {
        if let refreshing { return try await Self.value(of: refreshing) }
        guard let current = session else { throw .notSignedIn }
        let task = Task { try await self.exchange(current) }
        refreshing = task
        defer { refreshing = nil }
        return try await Self.value(of: task)
    }

    private static func value(of task: Task<Session, any Error>) async throws(GatehouseError) -> Session {
        do {
            return try await task.value
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .network(String(describing: error))
        }
    }

    private func exchange(_ current: Session) async throws -> Session {
        let client = self.client
        do {
            let answer = try await call {
                try await client.token(
                    query: .init(grantType: .refreshToken),
                    body: .json(.RefreshGrant(.init(refreshToken: current.refreshToken)))
                ).ok.body.json
            }
            let renewed = Session(answer, companyID: current.companyID)
            session = renewed
            announce(.refreshed(renewed))
            try persist(renewed)
            return renewed
        } catch .sessionExpired {
            // A second factor verified meanwhile retired the token this refresh sent: the session lives on.
            if let raised = session, raised.refreshToken != current.refreshToken { return raised }
            try end(.sessionEnded)
            throw GatehouseError.sessionExpired
        }
    }

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

    /// Ends the session locally, and says why.
    func end(_ reason: SignOutReason) throws(GatehouseError) {
        guard session != nil || kind == .account else { return }
        session = nil
        keeper?.cancel()
        keeper = nil
        announce(.signedOut(reason))
        do {
            try store.remove()
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .sessionStore(String(describing: error))
        }
    }

    private func persist(_ session: Session) throws(GatehouseError) {
        do {
            try store.save(session)
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .sessionStore(String(describing: error))
        }
    }
}

extension Session {
    init(_ wire: Components.Schemas.Session, companyID: String? = nil) {
        self.init(
            accessToken: wire.accessToken, refreshToken: wire.refreshToken,
            expiresAt: Date(timeIntervalSince1970: TimeInterval(wire.expiresAt)), userID: wire.user.id,
            email: wire.user.email.isEmpty ? nil : wire.user.email, companyID: companyID,
            endsAt: wire.sessionExpiresAt.map { Date(timeIntervalSince1970: TimeInterval($0)) })
    }
}
