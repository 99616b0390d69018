import Hummingbird

/// The console's routes (`/console…`), router routes beside the pages': one group per area, each in its own file
/// with its page code. `ConsoleKit` is what they share.
struct ConsoleRoutes: Sendable {
    let kit: ConsoleKit
    let overview: ConsoleOverview
    let users: ConsoleUsers
    let companies: ConsoleCompanies
    let audit: ConsoleAudit
    let settings: ConsoleSettings
    let webhooks: ConsoleWebhooks
    let oauthClients: ConsoleOAuthClients

    init(_ api: API, _ services: GatehouseServices, pages: PageKit) {
        let env = services.parts
        let kit = ConsoleKit(
            pages: pages, store: env.store, clock: env.clock, box: services.box, trail: env.trail,
            accountSessions: api.accountSessions, factors: api.factors)
        self.kit = kit
        overview = ConsoleOverview(kit: kit, api: api, services: services)
        users = ConsoleUsers(kit: kit, api: api, services: services)
        companies = ConsoleCompanies(kit: kit, api: api, services: services)
        audit = ConsoleAudit(kit: kit, api: api, services: services)
        settings = ConsoleSettings(kit: kit, api: api, services: services)
        webhooks = ConsoleWebhooks(kit: kit, api: api, services: services)
        oauthClients = ConsoleOAuthClients(kit: kit, api: api, services: services)
    }

    func register(on router: Router<AppRequestContext>) {
        overview.register(on: router)
        users.register(on: router)
        companies.register(on: router)
        audit.register(on: router)
        settings.register(on: router)
        webhooks.register(on: router)
        oauthClients.register(on: router)
    }
}
