import Foundation
import GatehouseAPI
import SQLKit

/// What another feature asks of subscriptions: a company's tier, its source and its newest subscription, as the
/// company detail shows them. The small interface Subscriptions exports (docs/architecture.md, "Who may use whom").
struct SubscriptionDirectory {
    private let subscriptions: SubscriptionRepository

    init(db: any SQLDatabase) { subscriptions = SubscriptionRepository(db: db) }

    func view(of company: CompanyRecord) async throws -> Schemas.CompanySubscription {
        SubscriptionService.view(company, try await subscriptions.subscriptions(companyID: company.id).first)
    }
}
