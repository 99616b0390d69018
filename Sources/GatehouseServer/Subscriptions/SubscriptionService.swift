import Foundation
import GatehouseAPI
import Logging
import SQLKit

/// Company tiers bought in the app: a purchase the app reports, App Store Server Notifications V2, and the tier each
/// leaves a company with. Every change is one transaction with its audit event and, when a subscription stops
/// giving its tier, the owner's mail.
struct SubscriptionService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let mailer: Mailer
    /// Nil while purchases are off (`--app-store-bundle-ids` unset).
    let verifier: AppStoreVerifier?
    /// Which product buys which tier.
    let products: [String: CompanyTier]
    let logger: Logger

    static let disabled = APIError(
        .notFound, code: .appStoreDisabled, message: "In-app purchases are not set up on this server")

    // MARK: A purchase the app reports

    /// Applies a StoreKit 2 transaction the owner's app reports for the company, and answers the company's
    /// subscription as it now is.
    func report(_ signedTransaction: String, by caller: CompanyCaller) async throws -> Schemas.CompanySubscription {
        guard let verifier else { throw Self.disabled }
        guard caller.membership.isOwner else {
            throw APIError(.forbidden, code: .forbidden, message: "Only the owner may report a purchase")
        }
        guard signedTransaction.utf8.count <= AppStoreVerifier.maxLength else {
            throw APIError.payloadTooLarge(limit: AppStoreVerifier.maxLength)
        }
        let transaction: AppStoreTransaction
        do {
            transaction = try await verifier.transaction(signedTransaction)
        } catch {
            await trail.recordRefusal(caller.event(.subscriptionRefused, detail: ["reason": Self.reason(error)]))
            throw Self.apiError(error)
        }
        let ids = [
            "transaction_id": transaction.transactionId, "original_transaction_id": transaction.originalTransactionId,
        ]
        func refuse(_ error: APIError) async -> APIError {
            await trail.recordRefusal(
                caller.event(.subscriptionRefused, detail: ids.merging(["reason": error.code]) { $1 }))
            return error
        }
        guard let company = try await CompanyDirectory(db: store.database).company(caller.companyID) else {
            throw CompanyService.companyNotFound
        }
        guard let token = transaction.appAccountToken.flatMap(Secrets.identifier), token == company.appAccountToken
        else {
            throw await refuse(
                APIError(
                    .forbidden, code: .appStoreOtherCompany,
                    message: "The purchase was made for another company: set its appAccountToken to this company's"))
        }
        guard transaction.isUpgraded != true else {
            throw await refuse(
                APIError(
                    .conflict, code: .appStoreTransactionSuperseded,
                    message: "The subscription was upgraded: report the transaction of the product it moved to"))
        }
        guard let tier = products[transaction.productId] else {
            throw await refuse(Self.productUnknown(transaction.productId))
        }
        let now = clock.now
        let state = SubscriptionRules.state(of: transaction, renewal: nil, notification: nil, now: now)
        let event = caller.event(.subscriptionReported, detail: ids.merging(["source": "app_store"]) { $1 })
        let outcome = try await store.transaction { [self] db in
            try await apply(
                Change(transaction: transaction, renewal: nil, tier: tier, state: state, companyID: company.id),
                event: event, now: now, db: db)
        }
        if outcome == .claimed {
            throw await refuse(
                APIError(
                    .conflict, code: .appStoreTransactionClaimed,
                    message: "This purchase already belongs to another company"))
        }
        return try await subscription(company.id)
    }

    // MARK: App Store Server Notifications V2

    /// Applies one notification, once. Returns when the change is committed: the 200 Apple waits for.
    func notify(_ signedPayload: String, client: ClientInfo) async throws {
        guard let verifier else { throw Self.disabled }
        guard signedPayload.utf8.count <= AppStoreVerifier.maxLength else {
            throw APIError.payloadTooLarge(limit: AppStoreVerifier.maxLength)
        }
        let notification: AppStoreNotification
        let transaction: AppStoreTransaction?
        let renewal: AppStoreRenewalInfo?
        do {
            notification = try await verifier.notification(signedPayload)
            transaction = try await notification.data?.signedTransactionInfo.asyncMap(verifier.transaction)
            renewal = try await notification.data?.signedRenewalInfo.asyncMap(verifier.renewalInfo)
        } catch {
            await trail.recordRefusal(
                client.event(.subscriptionRefused, accountID: nil, detail: ["reason": Self.reason(error)]))
            throw Self.apiError(error)
        }
        var detail = [
            "source": "app_store", "notification_type": notification.notificationType,
            "notification_uuid": notification.notificationUUID,
        ]
        if let subtype = notification.subtype { detail["subtype"] = subtype }
        let type = NotificationType(rawValue: notification.notificationType)
        guard let type, type != .test, let transaction else {
            // TEST, a type Gatehouse does not act on, or one without a transaction: acknowledged, so Apple stops.
            logger.info(
                "App Store notification acknowledged without a change",
                metadata: ["type": "\(notification.notificationType)", "uuid": "\(notification.notificationUUID)"])
            return
        }
        detail["transaction_id"] = transaction.transactionId
        detail["original_transaction_id"] = transaction.originalTransactionId
        let now = clock.now
        let state = SubscriptionRules.state(of: transaction, renewal: renewal, notification: type, now: now)
        let products = self.products
        let details = detail
        try await store.transaction { [self] db in
            let subscriptions = SubscriptionRepository(db: db)
            guard
                try await subscriptions.markApplied(
                    notificationUUID: notification.notificationUUID, type: notification.notificationType, now: now)
            else { return }
            // The company the original transaction is bound to; a first notification (the app's report not yet
            // arrived) finds it by the purchase token the app set.
            var companyID = try await subscriptions.subscription(
                originalTransactionID: transaction.originalTransactionId)?
                .companyID
            if companyID == nil, let token = transaction.appAccountToken.flatMap(Secrets.identifier) {
                companyID = try await CompanyDirectory(db: db).company(appAccountToken: token)?.id
            }
            guard let companyID, let tier = products[transaction.productId], transaction.isUpgraded != true else {
                logger.warning(
                    "App Store notification for no company, an unknown product or an upgraded transaction",
                    metadata: ["type": "\(notification.notificationType)", "product": "\(transaction.productId)"])
                return
            }
            let event = AuditEvent(.subscriptionNotified, companyID: companyID, ip: client.ip, detail: details)
            _ = try await apply(
                Change(
                    transaction: transaction, renewal: renewal, tier: tier, state: state, companyID: companyID),
                event: event, now: now, db: db)
        }
    }

    // MARK: Reconciliation

    /// Asks the App Store Server API about every bound subscription and applies what it says, through the same
    /// rules as a notification (newer signed data wins), so missed notifications are repaired. One line per
    /// subscription: company, original transaction, the state it has now, and what happened.
    func reconcile(api: AppStoreServerAPI) async throws -> [String] {
        guard let verifier else { throw Self.disabled }
        var lines: [String] = []
        for bound in try await SubscriptionRepository(db: store.database).all() {
            let prefix = "\(bound.companyID)  \(bound.originalTransactionID)"
            guard let environment = AppStoreEnvironment(rawValue: bound.environment),
                [.production, .sandbox].contains(environment)
            else {
                lines.append("\(prefix)  \(bound.state.rawValue)  skipped: \(bound.environment) has no server API")
                continue
            }
            do {
                let statuses = try await api.statuses(
                    originalTransactionID: bound.originalTransactionID, environment: environment, now: clock.now)
                let last = statuses.data.flatMap(\.lastTransactions).filter {
                    $0.originalTransactionId == bound.originalTransactionID
                }
                guard let last = last.first else {
                    lines.append("\(prefix)  \(bound.state.rawValue)  unchanged: the API does not know it")
                    continue
                }
                lines.append("\(prefix)  " + (try await reconcile(bound, last, verifier: verifier)))
            } catch let refusal as AppStoreRefusal {
                lines.append("\(prefix)  \(bound.state.rawValue)  failed: \(Self.apiError(refusal).message)")
            } catch let failure as AppStoreServerAPI.Failure {
                lines.append("\(prefix)  \(bound.state.rawValue)  failed: \(failure)")
            }
        }
        return lines
    }

    private func reconcile(
        _ bound: SubscriptionRecord, _ last: AppStoreServerAPI.Statuses.Last, verifier: AppStoreVerifier
    ) async throws -> String {
        let transaction = try await verifier.transaction(last.signedTransactionInfo)
        let renewal = try await last.signedRenewalInfo.asyncMap(verifier.renewalInfo)
        guard let tier = products[transaction.productId] else {
            return "\(bound.state.rawValue)  failed: product \(transaction.productId) is not in --app-store-products"
        }
        // The status settles what the dates alone cannot, as a notification's type does.
        let type: NotificationType? =
            switch last.status {
            case 2: .expired
            case 3, 4: .didFailToRenew
            case 5: .revoke
            default: nil
            }
        let now = clock.now
        let state = SubscriptionRules.state(of: transaction, renewal: renewal, notification: type, now: now)
        let event = AuditEvent(
            .subscriptionReconciled, companyID: bound.companyID,
            detail: [
                "source": "reconcile", "status": String(last.status), "transaction_id": transaction.transactionId,
                "original_transaction_id": transaction.originalTransactionId,
            ])
        let change = Change(
            transaction: transaction, renewal: renewal, tier: tier, state: state, companyID: bound.companyID)
        let outcome = try await store.transaction { [self] db in
            try await apply(change, event: event, now: now, db: db)
        }
        switch outcome {
        case .applied:
            return state == bound.state && transaction.transactionId == bound.transactionID
                ? "\(state.rawValue)  unchanged" : "\(state.rawValue)  repaired (was \(bound.state.rawValue))"
        case .stale: return "\(bound.state.rawValue)  unchanged: newer signed data is stored"
        case .claimed: return "\(bound.state.rawValue)  failed: bound to another company"
        }
    }

    // MARK: Applying a change

    /// What signed data says of one subscription.
    private struct Change: Sendable {
        let transaction: AppStoreTransaction
        let renewal: AppStoreRenewalInfo?
        let tier: CompanyTier
        let state: SubscriptionState
        let companyID: String

        var signedAt: Date { max(transaction.signedDate, renewal?.signedDate ?? .distantPast) }

        func record(now: Date) -> SubscriptionRecord {
            SubscriptionRecord(
                originalTransactionID: transaction.originalTransactionId, companyID: companyID,
                environment: transaction.environment, productID: transaction.productId, tier: tier, state: state,
                transactionID: transaction.transactionId, expiresAt: transaction.expiresDate,
                graceExpiresAt: renewal?.gracePeriodExpiresDate, signedAt: signedAt, updatedAt: now)
        }
    }

    private enum Outcome: Sendable, Equatable {
        case applied, stale, claimed
    }

    /// Writes the subscription unless newer signed data is stored, then the company's tier, the audit events and
    /// the owner's mail, all in `db`'s transaction.
    private func apply(_ change: Change, event: AuditEvent, now: Date, db: any SQLDatabase) async throws -> Outcome {
        let subscriptions = SubscriptionRepository(db: db)
        let record = change.record(now: now)
        var stored = try await subscriptions.subscription(originalTransactionID: record.originalTransactionID)
        if stored == nil, try await !subscriptions.insert(record) {
            // Bound by a concurrent first report between the read and the insert.
            stored = try await subscriptions.subscription(originalTransactionID: record.originalTransactionID)
        }
        if let stored {
            guard stored.companyID == record.companyID else { return .claimed }
            guard SubscriptionRules.supersedes(signedAt: record.signedAt, stored: stored) else {
                var stale = event
                stale.action = AuditAction.subscriptionStale.rawValue
                try await trail.within(db).record(stale)
                return .stale
            }
            try await subscriptions.update(record)
        }
        var recorded = event
        recorded.detail["state"] = record.state.rawValue
        recorded.detail["product_id"] = record.productID
        try await trail.within(db).record(recorded)
        try await settleTier(record.companyID, now: now, db: db)
        if SubscriptionRules.ended(before: stored, after: record, now: now) {
            try await mailOwner(record, db: db)
        }
        return .applied
    }

    /// Sets the company's tier from its subscriptions, unless an operator's override holds.
    private func settleTier(_ companyID: String, now: Date, db: any SQLDatabase) async throws {
        let companies = CompanyDirectory(db: db)
        guard let company = try await companies.company(companyID) else { return }
        let entitled = SubscriptionRules.entitledTier(
            try await SubscriptionRepository(db: db).subscriptions(companyID: companyID), now: now)
        guard let settled = SubscriptionRules.companyTier(source: company.tierSource, entitled: entitled),
            settled.tier != company.tier || settled.source != company.tierSource
        else { return }
        try await companies.setTier(companyID, settled.tier, source: settled.source, reason: nil, now: now)
        if settled.tier != company.tier {
            try await trail.within(db).record(
                AuditEvent(
                    .tierChanged, companyID: companyID,
                    detail: ["from": company.tier.rawValue, "to": settled.tier.rawValue, "by": "app_store"]))
        }
    }

    private func mailOwner(_ subscription: SubscriptionRecord, db: any SQLDatabase) async throws {
        guard let company = try await CompanyDirectory(db: db).company(subscription.companyID),
            let owner = try await AccountDirectory(db: db).find(id: company.ownerID)
        else { return }
        try await mailer.enqueue(
            .subscriptionEnded(company: company.name, state: subscription.state.rawValue), to: owner.email, db: db)
    }

    // MARK: What the company detail shows

    /// The company's tier, its source and its newest subscription.
    func subscription(_ companyID: String) async throws -> Schemas.CompanySubscription {
        guard let company = try await CompanyDirectory(db: store.database).company(companyID) else {
            throw CompanyService.companyNotFound
        }
        let newest = try await SubscriptionRepository(db: store.database).subscriptions(companyID: companyID).first
        return Self.view(company, newest)
    }

    static func view(_ company: CompanyRecord, _ newest: SubscriptionRecord?) -> Schemas.CompanySubscription {
        Schemas.CompanySubscription(
            tier: Schemas.Tier(company.tier),
            tierSource: company.tierSource.flatMap { Schemas.TierSource(rawValue: $0.rawValue) },
            state: newest.flatMap { Schemas.SubscriptionState(rawValue: $0.state.rawValue) },
            productId: newest?.productID, environment: newest?.environment, expiresAt: newest?.expiresAt,
            gracePeriodExpiresAt: newest?.graceExpiresAt)
    }

    // MARK: Refusals

    static func productUnknown(_ productID: String) -> APIError {
        APIError(
            .unprocessableContent, code: .appStoreProductUnknown,
            message: "The product is not one this server sells (--app-store-products)")
    }

    static func apiError(_ refusal: AppStoreRefusal) -> APIError {
        switch refusal {
        case .malformed(let message): APIError(.badRequest, code: .appStoreMalformed, message: message)
        case .untrusted(let message): APIError(.badRequest, code: .appStoreUntrusted, message: message)
        case .wrongApp:
            APIError(.badRequest, code: .appStoreWrongApp, message: "The signed data is for another app")
        case .wrongEnvironment(let environment):
            APIError(
                .badRequest, code: .appStoreWrongEnvironment,
                message: "Signed data from the \(environment) environment is not accepted here")
        }
    }

    private static func reason(_ refusal: AppStoreRefusal) -> String { apiError(refusal).code }
}

extension Optional {
    /// `map` with an async, throwing transform.
    fileprivate func asyncMap<T, E: Error>(_ transform: (Wrapped) async throws(E) -> T) async throws(E) -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
