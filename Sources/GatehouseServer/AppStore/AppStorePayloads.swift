import Foundation
import JWTKit

/// The App Store environment a signed payload comes from.
public enum AppStoreEnvironment: String, Sendable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

/// What every payload Apple signs carries: when it was signed, which the certificates must be valid at.
protocol AppStoreSignedPayload: JWTPayload {
    var signedDate: Date { get }
}

extension AppStoreSignedPayload {
    /// Claims are checked by `AppStoreVerifier` against the settings, not by jwt-kit.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A StoreKit 2 transaction (`Transaction.jwsRepresentation`; Apple's `JWSTransactionDecodedPayload`): only the fields
/// a company's tier depends on. Dates are milliseconds since 1970, as Apple writes them.
struct AppStoreTransaction: AppStoreSignedPayload, Equatable {
    var transactionId: String
    var originalTransactionId: String
    var bundleId: String
    var productId: String
    var purchaseDate: Date?
    var expiresDate: Date?
    var revocationDate: Date?
    /// 0 (other) or 1 (a problem in the app): present on refunds.
    var revocationReason: Int?
    /// The subscription moved to a higher product; the transaction of that product governs from now on.
    var isUpgraded: Bool?
    /// The UUID the app set at purchase (`Product.PurchaseOption.appAccountToken`): the company's purchase token.
    var appAccountToken: String?
    var type: String?
    var environment: String
    var signedDate: Date
}

/// A subscription's renewal state (Apple's `JWSRenewalInfoDecodedPayload`).
struct AppStoreRenewalInfo: AppStoreSignedPayload, Equatable {
    var originalTransactionId: String
    var productId: String?
    var autoRenewProductId: String?
    /// 1 on, 0 off.
    var autoRenewStatus: Int?
    var isInBillingRetryPeriod: Bool?
    /// Until when the subscription keeps its service while Apple retries billing.
    var gracePeriodExpiresDate: Date?
    var environment: String
    var signedDate: Date
}

/// An App Store Server Notification V2 (Apple's `ResponseBodyV2DecodedPayload`).
struct AppStoreNotification: AppStoreSignedPayload, Equatable {
    struct Data: Codable, Equatable, Sendable {
        var appAppleId: Int64?
        var bundleId: String?
        var environment: String?
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
        /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
        var status: Int?
    }

    /// Apple's summary of a renewal-date extension for many subscribers (RENEWAL_EXTENSION): it names the app only.
    struct Summary: Codable, Equatable, Sendable {
        var appAppleId: Int64?
        var bundleId: String?
        var environment: String?
    }

    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var data: Data?
    var summary: Summary?
    var version: String?
    var signedDate: Date

    /// The app and environment the notification names, wherever it names them.
    var bundleID: String? { data?.bundleId ?? summary?.bundleId }
    var appAppleID: Int64? { data?.appAppleId ?? summary?.appAppleId }
    var environment: String? { data?.environment ?? summary?.environment }
}

/// `{"signedPayload": …}`, the body Apple posts.
struct AppStoreNotificationBody: Decodable {
    var signedPayload: String
}
