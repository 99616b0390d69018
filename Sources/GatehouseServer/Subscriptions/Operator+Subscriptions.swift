import Foundation

extension Operator {
    /// Ends an operator's override: the company's App Store subscriptions decide its tier again (Free when none
    /// entitles). Returns the tier it now has, nil when there is no such company.
    public func releaseTier(_ id: String) async throws -> CompanyTier? {
        try await store.transaction { db in
            let companies = CompanyDirectory(db: db)
            guard let company = try await companies.company(id) else { return nil }
            let subscriptions = try await SubscriptionRepository(db: db).subscriptions(companyID: id)
            let now = Date()
            let tier = SubscriptionRules.entitledTier(subscriptions, now: now) ?? .free
            try await companies.setTier(
                id, tier, source: subscriptions.isEmpty ? nil : .appStore, reason: nil, now: now)
            try await trail.within(db).record(
                AuditEvent(
                    .tierChanged, companyID: id,
                    detail: ["from": company.tier.rawValue, "to": tier.rawValue, "by": "operator_release"]))
            return tier
        }
    }
}
