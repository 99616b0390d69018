import Foundation

/// Where a company's tier comes from.
public enum TierSource: String, Sendable, Codable {
    /// A subscription bought in the app decides it.
    case appStore = "app_store"
    /// An operator set it (`gatehouse companies set-tier`): it holds until the operator hands it back.
    case `operator`
}

/// A subscription's state, as the company detail shows it.
enum SubscriptionState: String, Sendable, Codable, CaseIterable {
    case active
    /// Billing failed and Apple retries, while the subscriber keeps the service until the grace period ends.
    case gracePeriod = "grace_period"
    /// Billing failed and Apple retries; the service has stopped.
    case billingRetry = "billing_retry"
    case expired
    case refunded
    /// Family Sharing access withdrawn.
    case revoked

    /// Whether the state keeps the product's tier.
    var entitles: Bool { self == .active || self == .gracePeriod }
}

/// A subscription as stored: one row per original transaction, bound for good to the company that first presented it.
struct SubscriptionRecord: Sendable, Equatable {
    var originalTransactionID: String
    var companyID: String
    var environment: String
    var productID: String
    var tier: CompanyTier
    var state: SubscriptionState
    var transactionID: String
    var expiresAt: Date?
    var graceExpiresAt: Date?
    /// The `signedDate` of the newest signed data applied: older data never undoes it.
    var signedAt: Date
    var updatedAt: Date
}

/// The App Store notification types Gatehouse acts on (Apple's `notificationType`).
enum NotificationType: String, Sendable, CaseIterable {
    case subscribed = "SUBSCRIBED"
    case didRenew = "DID_RENEW"
    case didChangeRenewalPref = "DID_CHANGE_RENEWAL_PREF"
    case didChangeRenewalStatus = "DID_CHANGE_RENEWAL_STATUS"
    case didFailToRenew = "DID_FAIL_TO_RENEW"
    case gracePeriodExpired = "GRACE_PERIOD_EXPIRED"
    case expired = "EXPIRED"
    case refund = "REFUND"
    case refundReversed = "REFUND_REVERSED"
    case revoke = "REVOKE"
    case renewalExtended = "RENEWAL_EXTENDED"
    case test = "TEST"
}

/// Pure decisions about subscriptions and tiers (no I/O): the state signed data describes, whether it may replace
/// what is stored, and the tier a company ends up with.
enum SubscriptionRules {
    /// The state a transaction (and its renewal info, when the notification carries it) describes at `now`.
    /// A notification's type settles what the dates alone cannot: a refund from a revocation, the end of billing
    /// retry from a lapse.
    static func state(
        of transaction: AppStoreTransaction, renewal: AppStoreRenewalInfo?, notification: NotificationType?,
        now: Date
    ) -> SubscriptionState {
        if transaction.revocationDate != nil {
            if notification == .revoke { return .revoked }
            if notification == .refund || transaction.revocationReason != nil { return .refunded }
            return .revoked
        }
        switch notification {
        case .expired: return .expired
        case .gracePeriodExpired: return .billingRetry
        default: break
        }
        // No expiry: a non-renewing product, active until revoked.
        guard let expires = transaction.expiresDate else { return .active }
        if expires > now { return .active }
        if let grace = renewal?.gracePeriodExpiresDate, grace > now { return .gracePeriod }
        if renewal?.isInBillingRetryPeriod == true || notification == .didFailToRenew { return .billingRetry }
        return .expired
    }

    /// Whether signed data from `signedAt` may replace what `stored` holds: never older data (Apple delivers out of
    /// order and retries), so a stale notification cannot undo a newer state.
    static func supersedes(signedAt: Date, stored: SubscriptionRecord?) -> Bool {
        guard let stored else { return true }
        return signedAt >= stored.signedAt
    }

    /// The tier a company's subscriptions give: the highest tier among those still entitled, else nil.
    static func entitledTier(_ subscriptions: [SubscriptionRecord], now: Date) -> CompanyTier? {
        subscriptions.filter { entitled($0, now: now) }.map(\.tier).max(by: { rank($0) < rank($1) })
    }

    /// Whether a stored subscription still entitles at `now`: its state does, and the time it runs to has not passed
    /// (a lapse Apple has not told us of yet counts from its expiry).
    static func entitled(_ subscription: SubscriptionRecord, now: Date) -> Bool {
        switch subscription.state {
        case .active: subscription.expiresAt.map { $0 > now } ?? true
        case .gracePeriod: subscription.graceExpiresAt.map { $0 > now } ?? false
        default: false
        }
    }

    /// Whether a change stopped a subscription giving its tier, which the owner is mailed about: it did before (by its
    /// state; a lapse not yet told counts too) and does not now.
    static func ended(before: SubscriptionRecord?, after: SubscriptionRecord, now: Date) -> Bool {
        guard let before, before.state.entitles else { return false }
        return !entitled(after, now: now)
    }

    /// What a company's tier becomes when its subscriptions change: an operator's override holds; otherwise the
    /// subscriptions decide, and a company whose subscriptions all lapsed falls to Free (its source staying
    /// `app_store`, so the detail says why). Nil leaves the tier as it is.
    static func companyTier(source: TierSource?, entitled: CompanyTier?) -> (tier: CompanyTier, source: TierSource)? {
        switch source {
        case .operator: nil
        case .appStore: (entitled ?? .free, .appStore)
        case nil: entitled.map { ($0, .appStore) }
        }
    }

    private static func rank(_ tier: CompanyTier) -> Int {
        switch tier {
        case .free: 0
        case .business: 1
        case .enterprise: 2
        }
    }
}
