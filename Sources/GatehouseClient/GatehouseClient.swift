import Foundation
import GatehouseClientAPI
import OpenAPIRuntime
import OpenAPIURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One Gatehouse server, as an app talks to it: the account and its session, its companies and the company signed
/// in to, and each company's synced records. Make one per server and keep it.
public final class GatehouseClient: Sendable {
    /// Sign-up, sign-in, the session and signing out.
    public let auth: Auth
    /// The account's companies, signing in to one, and the company's members, shares and credential.
    public let companies: Companies
    /// The server.
    public let url: URL
    let client: Client
    /// The same server, middlewares and transport, for answers read without the generated decoding.
    let raw: RawCaller
    let live: LiveEvents
    /// The first wait after a failure to reach the server (it doubles up to `retryMax`), for refreshes and syncs.
    let retryBase: Duration
    let retryMax: Duration

    /// A client for the server at `url` over URLSession, keeping its sessions in `sessionStore` (the company
    /// session in its `companion(named: "company")`).
    public convenience init(url: URL, sessionStore: any SessionStore) {
        self.init(url: url, sessionStore: sessionStore, refreshMargin: 60, middlewares: [])
    }

    /// A client whose requests go through `transport` instead of URLSession: an app's previews and tests run the
    /// SDK without a server by answering its requests themselves. `middlewares` run after the SDK's own (logging,
    /// counting); `clock` is the time the sessions refresh and warn by (a test moves its own).
    public convenience init(
        url: URL, sessionStore: any SessionStore, transport: any ClientTransport,
        middlewares: [any ClientMiddleware] = [], clock: any SessionClock = .system
    ) {
        self.init(
            url: url, sessionStore: sessionStore, refreshMargin: 60, middlewares: middlewares, transport: transport,
            clock: clock)
    }

    /// Tests also shorten the margin, the retry backoff and the expiry warning, and may hand the requests to the
    /// server's router in process instead of URLSession.
    init(
        url: URL, sessionStore: any SessionStore, refreshMargin: TimeInterval, middlewares: [any ClientMiddleware],
        retryBase: Duration = .seconds(1), retryMax: Duration = .seconds(60), expiryWarning: TimeInterval = 300,
        transport: (any ClientTransport)? = nil, clock: any SessionClock = .system
    ) {
        self.url = url
        self.retryBase = retryBase
        self.retryMax = retryMax
        let middlewares = [GatehouseMiddleware(clock: clock)] + middlewares
        // The live stream goes through the app's transport too; over URLSession it needs one that streams.
        if let transport {
            live = LiveEvents(
                caller: RawCaller(serverURL: url, transport: transport, middlewares: middlewares),
                firstEventOnly: false)
        } else {
            live = LiveEvents(
                caller: RawCaller(serverURL: url, transport: LiveStreamTransport(), middlewares: middlewares),
                firstEventOnly: LiveEvents.urlSessionReadsFirstEventOnly)
        }
        let transport = transport ?? URLSessionTransport(configuration: .init(session: .gatehouse))
        client = Client(
            serverURL: url, configuration: .init(dateTranscoder: WireDates()), transport: transport,
            middlewares: middlewares)
        raw = RawCaller(serverURL: url, transport: transport, middlewares: middlewares)
        let hub = AuthEventHub()
        let policy = SessionStateMachine.Policy(
            refreshMargin: refreshMargin, retryBase: retryBase.timeInterval, retryMax: retryMax.timeInterval,
            expiryWarning: expiryWarning)
        let account = SessionManager(
            .account, store: sessionStore, client: client, hub: hub, policy: policy, clock: clock)
        let company = SessionManager(
            .company, store: sessionStore.companion(named: "company"), client: client, hub: hub, policy: policy,
            clock: clock)
        auth = Auth(
            client: client, sessions: account, companySessions: company, hub: hub, pkce: PKCEState(),
            restoration: SessionRestore(), serverURL: url, raw: raw)
        companies = Companies(client: client, sessions: account, companySessions: company, hub: hub)
    }
}

extension URLSession {
    /// The session the SDK's requests go through. On Linux one without a URL cache: swift-corelibs-foundation hands a
    /// cached session's lookup to a background queue before the task's protocol exists, and a task cancelled in that
    /// window traps the process (`URLSession.behaviour(for:)`: the task already left the registry), as a live stream
    /// cancelled after its first event did once in a test run. Nothing the API answers is for a cache anyway.
    static let gatehouse: URLSession = {
        #if canImport(FoundationNetworking)
            URLSession(configuration: .uncached)
        #else
            URLSession.shared
        #endif
    }()
}

extension URLSessionConfiguration {
    /// Ephemeral, with no URL cache at all (see `URLSession.gatehouse`).
    static var uncached: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return configuration
    }
}
