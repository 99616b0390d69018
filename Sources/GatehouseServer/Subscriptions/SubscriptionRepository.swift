import Foundation
import SQLKit

/// SQL for App Store subscriptions and the notifications already applied.
struct SubscriptionRepository {
    let db: any SQLDatabase

    private static let columns = [
        "original_transaction_id", "company_id", "environment", "product_id", "tier", "state", "transaction_id",
        "expires_at", "grace_expires_at", "signed_at", "updated_at",
    ]

    /// The subscription of an original transaction, locked for the transaction's update on PostgreSQL.
    func subscription(originalTransactionID: String) async throws -> SubscriptionRecord? {
        try await db.select().columns(Self.columns).from("app_store_subscriptions")
            .where("original_transaction_id", .equal, originalTransactionID).for(.update).first()
            .map(Self.decode)
    }

    /// Every subscription a company has had, newest first.
    func subscriptions(companyID: String) async throws -> [SubscriptionRecord] {
        try await db.select().columns(Self.columns).from("app_store_subscriptions")
            .where("company_id", .equal, companyID).orderBy("signed_at", .descending).all().map(Self.decode)
    }

    /// Every subscription bound to a company, for reconciliation.
    func all() async throws -> [SubscriptionRecord] {
        try await db.select().columns(Self.columns).from("app_store_subscriptions")
            .orderBy("company_id").orderBy("original_transaction_id").all().map(Self.decode)
    }

    /// Binds an original transaction to its company for good (the first writer wins; false when it was already
    /// bound), or updates it.
    func insert(_ subscription: SubscriptionRecord) async throws -> Bool {
        try await !db.insert(into: "app_store_subscriptions").columns(Self.columns).values(Self.binds(subscription))
            .ignoringConflicts(with: "original_transaction_id")
            .returning("original_transaction_id").all().isEmpty
    }

    func update(_ subscription: SubscriptionRecord) async throws {
        try await db.update("app_store_subscriptions")
            .set("environment", to: subscription.environment).set("product_id", to: subscription.productID)
            .set("tier", to: subscription.tier.rawValue).set("state", to: subscription.state.rawValue)
            .set("transaction_id", to: subscription.transactionID)
            .set("expires_at", to: subscription.expiresAt?.epochMilliseconds)
            .set("grace_expires_at", to: subscription.graceExpiresAt?.epochMilliseconds)
            .set("signed_at", to: subscription.signedAt.epochMilliseconds)
            .set("updated_at", to: subscription.updatedAt.epochMilliseconds)
            .where("original_transaction_id", .equal, subscription.originalTransactionID)
            .where("company_id", .equal, subscription.companyID)
            .run()
    }

    // MARK: Notifications applied

    /// Records a notification as applied; false when it already was (Apple retries until it gets a 200).
    func markApplied(notificationUUID: String, type: String, now: Date) async throws -> Bool {
        try await !db.insert(into: "app_store_notifications").columns("notification_uuid", "type", "received_at")
            .values(SQLBind(notificationUUID), SQLBind(type), SQLBind(now.epochMilliseconds))
            .ignoringConflicts(with: "notification_uuid")
            .returning("notification_uuid").all().isEmpty
    }

    private static func binds(_ s: SubscriptionRecord) -> [SQLBind] {
        [
            SQLBind(s.originalTransactionID), SQLBind(s.companyID), SQLBind(s.environment), SQLBind(s.productID),
            SQLBind(s.tier.rawValue), SQLBind(s.state.rawValue), SQLBind(s.transactionID),
            SQLBind(s.expiresAt?.epochMilliseconds), SQLBind(s.graceExpiresAt?.epochMilliseconds),
            SQLBind(s.signedAt.epochMilliseconds), SQLBind(s.updatedAt.epochMilliseconds),
        ]
    }

    private static func decode(_ row: any SQLRow) throws -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionID: try row.decode(column: "original_transaction_id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            environment: try row.decode(column: "environment", as: String.self),
            productID: try row.decode(column: "product_id", as: String.self),
            tier: CompanyTier(rawValue: try row.decode(column: "tier", as: String.self)) ?? .free,
            state: SubscriptionState(rawValue: try row.decode(column: "state", as: String.self)) ?? .expired,
            transactionID: try row.decode(column: "transaction_id", as: String.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64?.self).map(Date.init(epochMilliseconds:)),
            graceExpiresAt: try row.decode(column: "grace_expires_at", as: Int64?.self)
                .map(Date.init(epochMilliseconds:)),
            signedAt: Date(epochMilliseconds: try row.decode(column: "signed_at", as: Int64.self)),
            updatedAt: Date(epochMilliseconds: try row.decode(column: "updated_at", as: Int64.self)))
    }
}
