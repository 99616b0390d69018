import Hummingbird

/// The console's settings page.
struct ConsoleSettings: Sendable {
    let kit: ConsoleKit

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/settings") { _, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return kit.page(
                    "placeholder", title: kit.text("console_nav_settings", console), [:], for: console,
                    section: "settings")
            }
        }
    }
}
