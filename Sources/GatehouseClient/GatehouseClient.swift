import Foundation
import GatehouseAPI
import OpenAPIRuntime
import OpenAPIURLSession

/// One Gatehouse server, as an app talks to it: accounts and their session. Make one per server and keep it.
public final class GatehouseClient: Sendable {
    /// Sign-up, sign-in, the session and signing out.
    public let auth: Auth

    /// A client for the server at `url`, keeping its session in `sessionStore`.
    public convenience init(url: URL, sessionStore: any SessionStore) {
        self.init(url: url, sessionStore: sessionStore, refreshMargin: 60, middlewares: [])
    }

    /// `middlewares` run after the SDK's own (tests count requests with one); tests also shorten the margin and the
    /// retry backoff.
    init(
        url: URL, sessionStore: any SessionStore, refreshMargin: TimeInterval, middlewares: [any ClientMiddleware],
        retryBase: Duration = .seconds(1), retryMax: Duration = .seconds(60)
    ) {
        let client = Client(
            serverURL: url,
            configuration: .init(dateTranscoder: .iso8601WithFractionalSeconds),
            transport: URLSessionTransport(),
            middlewares: [GatehouseMiddleware()] + middlewares)
        auth = Auth(
            client: client,
            sessions: SessionManager(
                store: sessionStore, client: client, margin: refreshMargin, retryBase: retryBase, retryMax: retryMax))
    }
}

/// Accounts: sign-up by code, password sign-in, the session and its events, and signing out.
public struct Auth: Sendable {
    let client: Client
    let sessions: SessionManager

    /// What happens to the session: the one found at launch, sign-ins, refreshes, and sign-outs with their reason.
    public var events: AsyncStream<AuthEvent> { sessions.events }

    /// Loads the session kept from an earlier launch. Offline, it is kept; the server decides when it ends.
    @discardableResult
    public func restoreSession() async throws(GatehouseError) -> Session? { try await sessions.restore() }

    /// The session in use, if any, as it stands (it may need a refresh).
    public var currentSession: Session? { get async { await sessions.current } }

    /// A session good for at least another minute, refreshed first when needed.
    public func session() async throws(GatehouseError) -> Session { try await sessions.valid() }

    /// Renews the session's tokens now; concurrent calls share one request.
    @discardableResult
    public func refreshSession() async throws(GatehouseError) -> Session { try await sessions.refresh() }

    /// Starts a sign-up: the server mails a code (see `verify(email:code:)`). Answers alike for taken addresses.
    public func signUp(email: String, password: String? = nil) async throws(GatehouseError) {
        let client = self.client
        _ = try await call {
            try await client.signUp(body: .json(.init(email: email, password: password))).ok
        }
    }

    /// Mails a sign-in code (creating the account when `createUser`).
    public func sendCode(email: String, createUser: Bool = true) async throws(GatehouseError) {
        let client = self.client
        _ = try await call {
            try await client.sendOTP(body: .json(.init(email: email, createUser: createUser))).ok
        }
    }

    /// What a mailed code is for.
    public enum CodeType: String, Sendable {
        case signup, magiclink, recovery, email
    }

    /// Verifies a mailed code and signs in.
    @discardableResult
    public func verify(email: String, code: String, type: CodeType = .email) async throws(GatehouseError) -> Session {
        let client = self.client
        let wire = try await call {
            try await client.verify(
                body: .json(.init(_type: .init(rawValue: type.rawValue) ?? .email, email: email, token: code))
            ).ok.body.json
        }
        let signedIn = Session(wire)
        try await sessions.adopt(signedIn)
        return signedIn
    }

    /// Signs in with email and password.
    @discardableResult
    public func signIn(email: String, password: String) async throws(GatehouseError) -> Session {
        let client = self.client
        let wire = try await call {
            try await client.token(
                query: .init(grantType: .password), body: .json(.PasswordGrant(.init(email: email, password: password)))
            ).ok.body.json
        }
        let signedIn = Session(wire)
        try await sessions.adopt(signedIn)
        return signedIn
    }

    /// Which sessions a sign-out ends.
    public enum SignOutScope: String, Sendable {
        /// This session.
        case local
        /// Every session of the account.
        case global
        /// Every other session.
        case others
    }

    /// Signs out. The local session ends even when the server cannot be reached.
    public func signOut(scope: SignOutScope = .local) async throws(GatehouseError) {
        let client = self.client
        if let current = await sessions.current {
            _ = try? await call(bearer: current.accessToken) {
                try await client.logout(query: .init(scope: .init(rawValue: scope.rawValue))).noContent
            }
        }
        if scope != .others { try await sessions.end(.requested) }
    }
}
