import Foundation
import GatehouseAPI
import OpenAPIRuntime
import OpenAPIURLSession

/// One Gatehouse server, as an app talks to it: the account and its session, its companies and the company logged
/// in to, and each company's synced records. Make one per server and keep it.
public final class GatehouseClient: Sendable {
    /// Sign-up, sign-in, the session and signing out.
    public let auth: Auth
    /// The account's companies, the company login, and the logged-in company's members, shares and credential.
    public let companies: Companies
    /// The server.
    public let url: URL
    let client: Client
    let live: LiveEvents
    /// The first wait after a failure to reach the server (it doubles up to `retryMax`), for refreshes and syncs.
    let retryBase: Duration
    let retryMax: Duration

    /// A client for the server at `url`, keeping its sessions in `sessionStore` (the company session in its
    /// `companion(named: "company")`).
    public convenience init(url: URL, sessionStore: any SessionStore) {
        self.init(url: url, sessionStore: sessionStore, refreshMargin: 60, middlewares: [])
    }

    /// `middlewares` run after the SDK's own (tests count requests with one); tests also shorten the margin and the
    /// retry backoff, and may hand the requests to the server's router in process instead of URLSession.
    init(
        url: URL, sessionStore: any SessionStore, refreshMargin: TimeInterval, middlewares: [any ClientMiddleware],
        retryBase: Duration = .seconds(1), retryMax: Duration = .seconds(60), expiryWarning: TimeInterval = 300,
        transport: (any ClientTransport)? = nil
    ) {
        self.url = url
        self.retryBase = retryBase
        self.retryMax = retryMax
        client = Client(
            serverURL: url,
            configuration: .init(dateTranscoder: .iso8601WithFractionalSeconds),
            transport: transport ?? URLSessionTransport(),
            middlewares: [GatehouseMiddleware()] + middlewares)
        let hub = AuthEventHub()
        let account = SessionManager(
            .account, store: sessionStore, client: client, hub: hub, margin: refreshMargin, retryBase: retryBase,
            retryMax: retryMax, expiryWarning: expiryWarning)
        let company = SessionManager(
            .company, store: sessionStore.companion(named: "company"), client: client, hub: hub, margin: refreshMargin,
            retryBase: retryBase, retryMax: retryMax, expiryWarning: expiryWarning)
        auth = Auth(client: client, sessions: account, companySessions: company, hub: hub, pkce: PKCEState())
        companies = Companies(client: client, sessions: account, companySessions: company, hub: hub)
        live = LiveEvents(url: url)
    }

    /// The local store of `companyID`'s records: its own database in `directory`, synced in the background while
    /// this client is logged in to the company. Open one per company and keep it while the company is in use.
    public func companyStore(companyID: String, directory: URL) async throws(GatehouseError) -> CompanyStore {
        try await CompanyStore(companyID: companyID, directory: directory, client: self)
    }
}
