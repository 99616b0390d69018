import Foundation
import Hummingbird

/// The operator's tier override in the console: a tier (or `app-store`, handing the tier back to the company's
/// subscriptions) and a reason, asked once more on a confirmation page, then set by the same code as
/// `gatehouse companies set-tier` (`Operator.setTier`, `Operator.releaseTier`), audited `tier_changed` with
/// `by: console`, the operator's id and the reason.
struct ConsoleCompanyTier: Sendable {
    let companies: ConsoleCompanies

    /// The choice that ends an override.
    static let appStore = "app-store"
    /// The longest reason kept.
    static let reasonLength = 500

    /// The form on a company's page, and its confirmation's.
    struct Form: Decodable {
        let tier: String?
        let reason: String?
        let confirm: String?
        let csrfToken: String?

        enum CodingKeys: String, CodingKey {
            case tier, reason, confirm
            case csrfToken = "csrf_token"
        }
    }

    func register(on router: Router<AppRequestContext>) {
        router.post("/console/companies/:id/tier") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer { try await change(id, form) }
        }
    }

    func change(_ id: String, _ form: Form) async throws -> WebAnswer {
        let kit = companies.kit
        let console = try await kit.form(token: form.csrfToken)
        guard let company = try await CompanyDirectory(db: companies.store.database).company(id) else {
            return companies.missing(console)
        }
        let choice = form.tier ?? ""
        let reason = (form.reason ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        func refuse(_ key: String) async throws -> WebAnswer {
            try await companies.company(
                id, console, error: kit.text(key, console, ["limit": String(Self.reasonLength)]),
                status: .badRequest, form: (choice, form.reason))
        }
        let tier = CompanyTier(rawValue: choice)
        guard tier != nil || choice == Self.appStore else { return try await refuse("companies_tier_bad_choice") }
        guard !reason.isEmpty else { return try await refuse("companies_tier_no_reason") }
        guard reason.count <= Self.reasonLength else { return try await refuse("companies_tier_long_reason") }
        let page = "/console/companies/" + ConsoleFilterParameters.segment(id)
        guard form.confirm == "yes" else {
            let values = ["name": company.name, "from": company.tier.rawValue, "to": choice, "reason": reason]
            return kit.confirmation(
                console, title: kit.text("companies_tier_confirm_title", console, values),
                explanation: kit.text(
                    tier == nil ? "companies_tier_confirm_release" : "companies_tier_confirm_set", console, values),
                action: page + "/tier", fields: ["tier": choice, "reason": reason],
                button: kit.text("companies_tier_confirm_button", console), danger: true, back: page)
        }
        let operatorCommands = Operator(store: companies.store)
        // The company may have gone since the check above: then there is nothing changed to report.
        let changed =
            if let tier {
                try await operatorCommands.setTier(id, tier, reason: reason, by: console.admin)
            } else {
                try await operatorCommands.releaseTier(id, reason: reason, by: console.admin) != nil
            }
        guard changed else { return companies.missing(console) }
        return .redirect(page + "?notice=tier_changed", cookies: console.cookies)
    }
}
