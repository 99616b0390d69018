import Hummingbird

/// The console's overview page.
struct ConsoleOverview: Sendable {
    let kit: ConsoleKit

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console") { _, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return kit.page(
                    "placeholder", title: kit.text("console_nav_overview", console), [:], for: console,
                    section: "overview")
            }
        }
    }
}
