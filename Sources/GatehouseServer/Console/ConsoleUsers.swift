import Hummingbird

/// The console's users page.
struct ConsoleUsers: Sendable {
    let kit: ConsoleKit

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/users") { _, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return kit.page(
                    "placeholder", title: kit.text("console_nav_users", console), [:], for: console, section: "users")
            }
        }
    }
}
