import Hummingbird

/// The console's companies page.
struct ConsoleCompanies: Sendable {
    let kit: ConsoleKit

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/companies") { _, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return kit.page(
                    "placeholder", title: kit.text("console_nav_companies", console), [:], for: console,
                    section: "companies")
            }
        }
    }
}
