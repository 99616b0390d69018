import Foundation

extension Operator {
    /// Ends an operator's override: the company's App Store subscriptions decide its tier again (Free when none
    /// entitles). Returns the tier it now has, nil when there is no such company.
    public func releaseTier(_ id: String) async throws -> CompanyTier? {
        try await releaseTier(id, reason: nil, by: .commandLine)
    }

    /// The same, by `admin`: the command line (audited `by: operator`) or an operator in the console (`by: console`
    /// with the operator's id, address and reason). The event says `released: yes`.
    func releaseTier(_ id: String, reason: String?, by admin: AdminCaller) async throws -> CompanyTier? {
        try await store.transaction { db in
            let companies = CompanyDirectory(db: db)
            guard let company = try await companies.company(id) else { return nil }
            let subscriptions = try await SubscriptionRepository(db: db).subscriptions(companyID: id)
            let now = Date()
            let tier = SubscriptionRules.entitledTier(subscriptions, now: now) ?? .free
            try await companies.setTier(
                id, tier, source: subscriptions.isEmpty ? nil : .appStore, reason: nil, now: now)
            var detail = ["from": company.tier.rawValue, "to": tier.rawValue, "released": "yes"]
            if let reason { detail["reason"] = reason }
            var event = admin.event(.tierChanged, accountID: nil, detail: detail)
            event.companyID = id
            try await trail.within(db).record(event)
            return tier
        }
    }
}
