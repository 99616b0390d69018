import Foundation
import GatehouseAPI
import Hummingbird
import OpenAPIHummingbird
import OpenAPIRuntime

/// Every operation of `openapi.yaml`, generated as `APIProtocol` and mounted on the router by
/// swift-openapi-hummingbird. Each handler maps its typed input to a service and the answer back: who is asking comes
/// from `Access` (a company handler cannot get a `CompanyCaller` without the company check), the rules and
/// transactions live in the services, the SQL in the repositories. The handlers are in each feature's `…API.swift`.
///
/// A class: the generated server copies its handler for every request, and a struct of this many services would be
/// copied field by field (a retain and a release each, a fifth of a no-op request's time); a class is one retain.
final class API: APIProtocol {
    let access: Access
    let operations: OperationsService
    let signUps: SignUpService
    let verification: VerificationService
    let tokens: TokenService
    let profiles: ProfileService
    let accountSessions: AccountSessions
    let accountDeletion: AccountDeletion
    /// Identities: id tokens, linking and unlinking, Apple's notifications.
    let external: ExternalSignIn
    let appleNotifications: AppleNotifications
    let customProviders: CustomProviders
    /// The browser's trip through an upstream provider (`/auth/v1/authorize`, `/callback`).
    let oauthFlow: OAuthFlow
    /// Single sign-on per company: the trip (`/auth/v1/sso`, the SAML assertion consumer service), the operator's
    /// providers, and each company's requirement.
    let sso: SSOSignIn
    let ssoProviders: SSOProviders
    let companySSO: CompanySSO
    /// Whether cookies are set `Secure` (the public URL is https).
    let secureCookies: Bool
    let admin: AdminService
    let companies: CompanyService
    let shares: ShareService
    /// Company domains and their DNS proof, and joining a company by one.
    let domains: DomainService
    let domainJoins: DomainJoinService
    let invitations: InvitationService
    let subscriptions: SubscriptionService
    let credentials: CredentialService
    let factors: FactorService
    let passkeys: PasskeyService
    /// Apple's app-site association, nil when no app is set.
    let appSiteAssociation: Schemas.AppSiteAssociation?
    let sync: SyncService
    /// The keys `/.well-known/jwks.json` publishes.
    let keys: SigningKeys
    let users: UserReader
    /// The operator's webhook endpoints and their delivery logs.
    let webhooks: Webhooks
    /// The OAuth 2.1 / OpenID Connect provider: its clients, and the authorizations users give them.
    let oauthClients: OAuthClients
    let oauth: OAuthAuthorizations

    init(_ services: GatehouseServices) throws {
        let env = services.parts
        access = Access(
            sessions: env.sessions, trail: env.trail, store: env.store,
            serviceKeys: ServiceKeys(
                store: env.store, secrets: env.secrets, clock: env.clock, issuer: env.publicURL + "/auth/v1"))
        operations = OperationsService(
            store: services.store, metrics: services.metrics, metricsToken: services.configuration.metricsToken,
            openAPIDocument: try GatehouseAPIDocument.yaml())
        let (mail, throttling, passwords, users) = (env.mail, env.throttling, env.passwords, env.users)
        self.users = users
        webhooks = services.webhooks
        signUps = SignUpService(
            store: env.store, clock: env.clock, settings: env.settings, trail: env.trail, hasher: env.hasher,
            mailer: env.mailer,
            mail: mail, throttling: throttling, passwords: passwords, users: users, sessions: env.sessions)
        verification = VerificationService(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            throttling: throttling, users: users, mail: mail)
        let external = ExternalSignIn(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            users: users, providers: env.idTokens, apple: env.appleRevocations?.api, revocations: env.appleRevocations,
            box: env.secrets.box, logger: env.logger)
        self.external = external
        tokens = TokenService(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            hasher: env.hasher,
            external: external, throttling: throttling, users: users, verification: verification)
        profiles = ProfileService(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            hasher: env.hasher,
            mailer: env.mailer, mail: mail, throttling: throttling, passwords: passwords, users: users)
        accountDeletion = AccountDeletion(
            store: env.store, clock: env.clock, trail: env.trail, mailer: env.mailer, mail: mail,
            profiles: profiles, revocations: env.appleRevocations)
        customProviders = CustomProviders(store: env.store, clock: env.clock, trail: env.trail, box: env.secrets.box)
        let connections = SSOConnections(
            store: env.store, clock: env.clock, box: env.secrets.box, keys: env.idTokens.custom, external: external)
        var oauthFlow = OAuthFlow(
            store: env.store, clock: env.clock, settings: env.settings, box: env.secrets.box,
            keys: env.idTokens.custom, external: external, sessions: env.sessions, users: users, trail: env.trail,
            throttling: throttling, mail: mail)
        oauthFlow.companyProviders = connections
        self.oauthFlow = oauthFlow
        sso = SSOSignIn(
            store: env.store, clock: env.clock, settings: env.settings,
            serviceProvider: SAMLServiceProvider(publicURL: env.publicURL, secrets: env.secrets),
            connections: connections, flow: oauthFlow, sessions: env.sessions, users: users, trail: env.trail,
            throttling: throttling, mail: mail)
        ssoProviders = SSOProviders(store: env.store, clock: env.clock, trail: env.trail, box: env.secrets.box)
        companySSO = CompanySSO(store: env.store, clock: env.clock, trail: env.trail)
        secureCookies = env.publicURL.lowercased().hasPrefix("https://")
        appleNotifications = AppleNotifications(
            store: env.store, clock: env.clock, settings: env.settings, trail: env.trail, keys: env.appleKeys,
            deletion: accountDeletion)
        admin = AdminService(
            store: env.store, clock: env.clock, settings: env.settings, trail: env.trail, sessions: env.sessions,
            hasher: env.hasher,
            mailer: env.mailer, mail: mail, passwords: passwords, users: users, deletion: accountDeletion)
        accountSessions = AccountSessions(
            store: env.store, clock: env.clock, sessions: env.sessions, trail: env.trail)
        companies = CompanyService(
            store: env.store, clock: env.clock, trail: env.trail, publicURL: env.publicURL, bus: services.bus)
        shares = ShareService(
            store: env.store, clock: env.clock, settings: env.settings, trail: env.trail,
            publicURL: env.publicURL, throttling: throttling)
        invitations = InvitationService(
            store: env.store, clock: env.clock, settings: env.settings, trail: env.trail, mail: mail,
            publicURL: env.publicURL, throttling: throttling)
        subscriptions = services.subscriptions
        domains = DomainService(
            store: env.store, clock: env.clock, trail: env.trail, lookup: services.domainLookup)
        domainJoins = DomainJoinService(store: env.store, clock: env.clock, trail: env.trail)
        credentials = CredentialService(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            hasher: env.hasher,
            throttling: throttling, passwords: passwords, users: users)
        factors = FactorService(
            store: env.store, clock: env.clock, sessions: env.sessions, trail: env.trail, box: env.secrets.box,
            mail: mail, throttling: throttling, users: users, profiles: profiles, publicURL: env.publicURL)
        passkeys = PasskeyService(
            store: env.store, clock: env.clock, configuration: services.configuration, sessions: env.sessions,
            trail: env.trail, throttling: throttling, users: users, credentials: credentials, profiles: profiles)
        appSiteAssociation = Schemas.AppSiteAssociation(appIDs: services.configuration.appleAppIDs)
        oauthClients = OAuthClients(
            store: env.store, clock: env.clock, trail: env.trail, settings: env.settings.oauthServer,
            throttling: throttling)
        oauth = OAuthAuthorizations(
            store: env.store, clock: env.clock, settings: env.settings, sessions: env.sessions, trail: env.trail,
            clients: oauthClients, users: users, publicURL: env.publicURL, throttling: throttling)
        sync = services.sync
        keys = env.keys
    }

    /// The wire settings: dates with fractional seconds (as the store keeps milliseconds), compact sorted JSON.
    static let configuration = Configuration(
        dateTranscoder: MillisecondDateTranscoder(), jsonEncodingOptions: [.sortedKeys, .withoutEscapingSlashes])

    /// Mounts every operation on `router`.
    func register(on router: Router<AppRequestContext>) throws {
        try registerHandlers(on: router, serverURL: URL(string: "/")!, configuration: Self.configuration)
    }
}
