import Foundation
import GatehouseAPI
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle

/// What handlers share: configuration, the store and the logger. Built once per application and passed in.
public struct GatehouseServices: Sendable {
    public let configuration: GatehouseConfiguration
    public let store: Store
    public let logger: Logger
    public let metrics: PrometheusCollectorRegistry
    public let clock: any GatehouseClock
    public let keys: SigningKeys
    /// Seals what the store keeps secret (signing keys, server keys, queued mail).
    public let box: SecretBox
    let mailQueue: MailQueue
    let parts: SharedParts
    /// Live subscribers and the bus that reaches them on every instance.
    let bus: InstanceBus
    let sync: SyncService
    /// Company tiers bought in the app.
    let subscriptions: SubscriptionService
    /// Where company domains' TXT records are looked up, and the worker that looks at verified ones again.
    let domainLookup: any TXTLookup
    let domainRechecks: DomainRechecks
    /// The pages' and mails' templates, the operator's overrides included.
    public let templates: Templates
    /// This instance's counts for the console's overview, flushed to the store every minute.
    let series: ConsoleSeriesRecorder
    /// Webhook endpoints (the admin API's and the console's), and the worker that delivers their events.
    let webhooks: Webhooks
    let webhookDispatcher: WebhookDispatcher

    /// Opens the store named by `configuration`; nothing connects until the application runs. Tests pass their own
    /// clock, and may pass a mail transport (production picks SMTP or the outbox from configuration).
    public init(
        _ configuration: GatehouseConfiguration, logger: Logger? = nil, clock: any GatehouseClock = SystemClock(),
        mailTransport: (any MailTransport)? = nil
    ) throws {
        self.configuration = configuration
        let logger = logger ?? makeLogger(level: configuration.logLevel, format: configuration.logFormat)
        self.logger = logger
        self.metrics = GatehouseMetrics.registry
        self.clock = clock
        self.series = ConsoleSeriesRecorder(clock: clock)
        // The data folder holds the key file and the outbox even when the store is PostgreSQL: 0700.
        try DataFolder.prepare(configuration.dataDirectory)
        let box = try SecretBox.load(configuration)
        self.box = box
        let store = try Store(
            location: configuration.storeLocation, connectionsPerLoop: configuration.storeConnectionsPerLoop,
            logger: logger)
        self.store = store
        let settings = configuration.auth
        let templates = try Templates.load(overrides: configuration.templatesDirectory)
        self.templates = templates
        let keys = SigningKeys(store: store, box: box, clock: clock, tokenLifetime: settings.accessTokenLifetime)
        self.keys = keys
        let publicURL = configuration.effectivePublicURL
        let transport = try mailTransport ?? Self.mailTransport(configuration, logger: logger)
        let mailQueue = MailQueue(store: store, transport: transport, box: box, clock: clock, logger: logger)
        self.mailQueue = mailQueue
        let secrets = ServerSecrets(store: store, box: box)
        // Webhook events are written by the audit trail, in the transaction of the change each tells of.
        let outbox = WebhookOutbox(store: store, clock: clock)
        let trail = AuditTrail(store: store, clock: clock, follower: outbox)
        let hooks = AuthHooks(settings: settings, clock: clock)
        let sessions = SessionService(
            store: store, keys: keys, secrets: secrets, clock: clock, settings: settings,
            issuer: publicURL + "/auth/v1", trail: trail, hooks: hooks)
        let streams = LiveStreams(
            perSession: configuration.sync.liveStreamsPerSession, perInstance: configuration.sync.liveStreamsPerInstance
        )
        // Live streams hear of ended sessions and changed accounts as the caches do, from every instance.
        store.onCommit { streams.invalidated($0) }
        let bus = InstanceBus(store: store, streams: streams)
        self.bus = bus
        var sync = SyncService(
            store: store, clock: clock, secrets: secrets, sessions: sessions, bus: bus,
            liveCheckInterval: .milliseconds(Int64(configuration.sync.liveCheckInterval * 1000)))
        sync.recordsChanged = { changes, db in try await outbox.write([WebhookEvent.records(changes)], in: db) }
        self.sync = sync
        var mailer = Mailer(
            queue: mailQueue, from: configuration.mailFrom, templates: templates,
            expiresMinutes: settings.codeLifetimeMinutes)
        mailer.hooks = hooks
        mailer.siteURL = settings.siteURL ?? publicURL
        let targets = WebhookTargets(allowPrivate: configuration.webhooks.allowPrivateTargets)
        let dispatcher = WebhookDispatcher(
            store: store, box: box, clock: clock, logger: logger, mailer: mailer, trail: trail, targets: targets)
        outbox.onCommitted { dispatcher.wake() }
        self.webhookDispatcher = dispatcher
        self.webhooks = Webhooks(
            store: store, box: box, clock: clock, trail: trail, outbox: outbox, targets: targets,
            wake: { dispatcher.wake() })
        self.subscriptions = SubscriptionService(
            store: store, clock: clock, trail: trail, mailer: mailer,
            verifier: try Self.appStoreVerifier(configuration.appStore), products: configuration.appStore.products,
            logger: logger)
        let domainLookup = DNSResolver(
            server: configuration.dnsResolver.flatMap(DNSResolver.address) ?? DNSResolver.system())
        self.domainLookup = domainLookup
        self.domainRechecks = DomainRechecks(
            store: store, lookup: domainLookup, clock: clock, trail: trail, mailer: mailer, logger: logger)
        let appleKeys = JWKSCache(url: settings.appleJWKSURL)
        let appleRevocations = AppleSignInAPI(settings: settings.appleSignIn, audiences: settings.appleAudiences).map {
            AppleRevocations(store: store, api: $0, box: box, clock: clock, trail: trail, logger: logger)
        }
        self.parts = SharedParts(
            store: store, clock: clock, settings: settings,
            sessions: sessions, trail: trail, keys: keys,
            mailer: mailer,
            secrets: secrets,
            hasher: PasswordHasher(), limiter: RateLimiter(clock: clock),
            idTokens: IDTokenProviders(settings: settings, appleKeys: appleKeys, store: store), appleKeys: appleKeys,
            appleRevocations: appleRevocations,
            publicURL: publicURL, logger: logger,
            redirects: RedirectAllowList(settings.redirectAllowList, site: settings.siteURL ?? publicURL),
            hooks: hooks)
    }

    /// `gatehouse app-store reconcile`: asks the App Store Server API about every subscribed company and repairs what
    /// missed notifications left wrong; one line per subscription.
    public func reconcileAppStore() async throws -> [String] {
        let api = try await AppStoreServerAPI(settings: configuration.appStore)
        return try await subscriptions.reconcile(api: api)
    }

    /// The App Store's signature checks, when purchases are on. Production needs the App Apple ID, which its
    /// notifications must name.
    static func appStoreVerifier(_ settings: AppStoreSettings) throws -> AppStoreVerifier? {
        guard settings.enabled else { return nil }
        if settings.environments.contains(AppStoreEnvironment.production.rawValue), settings.appAppleID == nil {
            throw ConfigurationError(
                "--app-store-app-id is required when --app-store-environments accepts Production (its default)")
        }
        return try AppStoreVerifier(
            settings: settings, addedRoots: try AppStoreVerifier.certificates(files: settings.rootCertificateFiles))
    }

    /// SMTP when a URL is configured, else the development outbox under the data directory.
    static func mailTransport(_ configuration: GatehouseConfiguration, logger: Logger) throws -> any MailTransport {
        guard let smtpURL = configuration.smtpURL, let url = URLComponents(string: smtpURL), let host = url.host else {
            let folder = (configuration.dataDirectory as NSString).appendingPathComponent("outbox")
            return OutboxTransport(directory: folder, logger: logger)
        }
        var smtp = SMTPConfiguration(host: host)
        switch url.scheme {
        case "smtp+insecure":
            smtp.security = .none
            smtp.port = url.port ?? 25
        case "smtps":
            smtp.security = .implicitTLS
            smtp.port = url.port ?? 465
        case "smtp+starttls":
            smtp.security = .startTLS
            smtp.port = url.port ?? 587
        default:
            // TLS is required, except with a relay on this machine (the transport checks the peer it reached).
            smtp.security = .startTLSIfOffered
            smtp.port = url.port ?? 587
        }
        smtp.username = url.user?.removingPercentEncoding
        smtp.password = url.password?.removingPercentEncoding
        return SMTPTransport(configuration: smtp)
    }

    /// Once the store is migrated, gives back the code pages only starting ran (`StartupCodePages`): `gatehouse serve`
    /// calls it when it listens. Answers how many mappings were advised out (0 when the store closed first).
    @discardableResult
    public func releaseStartupCodePages() async -> Int {
        await store.migrated()
        guard !store.isClosed else { return 0 }
        let advised = StartupCodePages.release()
        logger.debug("startup pages released", metadata: ["mappings": "\(advised)"])
        return advised
    }
}

/// The metrics registry. swift-metrics has one backend per process, so this is bootstrapped once, on first use.
public enum GatehouseMetrics {
    public static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()
}

/// Every route, with the middleware that shapes errors, counts requests and bounds bodies.
public func buildRouter(_ services: GatehouseServices) throws -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    router.add(middleware: RequestIDMiddleware(trustedProxies: services.configuration.auth.trustedProxies))
    router.add(middleware: SecurityHeadersMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ConsoleSeriesMiddleware(recorder: services.series))
    let api = try API(services)
    let pages = PageRoutes(api, services)
    router.add(middleware: ErrorMiddleware(page: pages.kit.failure))
    let routes = RouteTable()
    router.add(middleware: MethodNotAllowedMiddleware(table: routes))
    router.add(middleware: BodyLimitMiddleware(limit: services.configuration.maxBodySize))
    router.add(middleware: RequestScopeMiddleware())
    // Answers written from what is already encoded, not by the generated serializer; each declared by its feature.
    router.add(
        middleware: FastPaths([
            .user(access: api.access, users: api.users),
            .refresh(access: api.access, tokens: api.tokens),
            .pullPage(access: api.access, sync: api.sync),
            .recordList(access: api.access, sync: api.sync),
        ]))
    try api.register(on: router)
    pages.register(on: router)
    routes.record(router.routes.map { (method: $0.method.rawValue, path: "\($0.path)") })
    return router
}

/// The application `gatehouse serve` runs, and tests start the same way.
public func buildApplication(
    _ configuration: GatehouseConfiguration,
    logger: Logger? = nil,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let services = try GatehouseServices(configuration, logger: logger)
    return buildApplication(services, router: try buildRouter(services), onServerRunning: onServerRunning)
}

/// Assembles an application from services and a router (tests add routes of their own before this).
public func buildApplication(
    _ services: GatehouseServices,
    router: Router<AppRequestContext>,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> Application<HeadAsGet<RouterResponder<AppRequestContext>>> {
    let configuration = services.configuration
    let logger = services.logger
    // Hummingbird announces itself at info; our one start line below says more, so quiet its own.
    var serverLogger = logger
    if serverLogger.logLevel == .info { serverLogger.logLevel = .notice }
    return Application(
        responder: HeadAsGet(wrapped: router.buildResponder()),
        // A connection that sends no request, or trickles its headers, is closed after the idle timeout; one with a
        // response in flight (a live stream) is not.
        server: .http1(configuration: .init(idleTimeout: .milliseconds(Int64(configuration.idleTimeout * 1000)))),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "Gatehouse"),
        services: [
            services.store, ConsoleSeriesFlusher(recorder: services.series, store: services.store, logger: logger),
            services.mailQueue, InstanceBusListener(bus: services.bus, logger: logger),
            SyncCompactor(sync: services.sync, retention: configuration.sync.retention, logger: logger),
            Sweeper(
                store: services.store, settings: configuration.sweep, auth: configuration.auth, clock: services.clock,
                logger: logger),
            services.domainRechecks, services.webhookDispatcher,
        ] + [services.parts.appleRevocations].compactMap { $0 },
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            logger.info(
                "gatehouse listening on http://\(configuration.host):\(port) using \(services.store.location)",
                metadata: [
                    "host": "\(configuration.host)", "port": "\(port)", "store": "\(services.store.location.kind)",
                ])
            if let warning = issuerWarning(configuration) { logger.warning("\(warning)") }
            await onServerRunning(port)
        },
        logger: serverLogger
    )
}

/// On PostgreSQL, the warning for an issuer this instance made up from its own host and port (no --public-url):
/// instances that share the database verify each other's tokens, and would refuse these with bad_jwt.
func issuerWarning(_ configuration: GatehouseConfiguration) -> String? {
    guard case .postgres = configuration.storeLocation, configuration.publicURL == nil else { return nil }
    return "no --public-url: tokens are issued by \(configuration.effectivePublicURL)/auth/v1, made up from this "
        + "instance's host and port; other instances on this database started with another host or port refuse them "
        + "with bad_jwt: start every instance with the same --public-url"
}
