import Crypto
import Foundation
import Testing

@testable import GatehouseServer

/// The subscription rules without a store (`SubscriptionRules`), and the verifier's trust anchor.
@Suite("Subscription rules and the App Store's root")
struct SubscriptionRulesTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func transaction(expires: TimeInterval? = 3600, revoked: Bool = false, reason: Int? = nil)
        -> AppStoreTransaction
    {
        AppStoreTransaction(
            transactionId: "2", originalTransactionId: "1", bundleId: "b", productId: "p",
            expiresDate: expires.map { now.addingTimeInterval($0) }, revocationDate: revoked ? now : nil,
            revocationReason: reason, environment: "Production", signedDate: now)
    }

    static func renewal(grace: TimeInterval? = nil, retry: Bool = false) -> AppStoreRenewalInfo {
        AppStoreRenewalInfo(
            originalTransactionId: "1", isInBillingRetryPeriod: retry,
            gracePeriodExpiresDate: grace.map { now.addingTimeInterval($0) }, environment: "Production",
            signedDate: now)
    }

    @Test(
        "the state signed data describes",
        arguments: [
            (transaction(), nil, nil, SubscriptionState.active),
            (transaction(expires: nil), nil, nil, .active),
            (transaction(expires: -1), nil, nil, .expired),
            (
                transaction(expires: -1), renewal(grace: 3600, retry: true), NotificationType.didFailToRenew,
                .gracePeriod
            ),
            (transaction(expires: -1), renewal(grace: -1, retry: true), .didFailToRenew, .billingRetry),
            (transaction(expires: -1), renewal(retry: true), .gracePeriodExpired, .billingRetry),
            (transaction(expires: -1), nil, .didFailToRenew, .billingRetry),
            (transaction(), nil, .expired, .expired),
            (transaction(revoked: true, reason: 0), nil, .refund, .refunded),
            (transaction(revoked: true), nil, .revoke, .revoked),
            (transaction(revoked: true, reason: 1), nil, nil, .refunded),
            (transaction(revoked: true), nil, nil, .revoked),
        ] as [(AppStoreTransaction, AppStoreRenewalInfo?, NotificationType?, SubscriptionState)])
    func state(
        _ transaction: AppStoreTransaction, _ renewal: AppStoreRenewalInfo?, _ type: NotificationType?,
        _ expected: SubscriptionState
    ) {
        #expect(
            SubscriptionRules.state(of: transaction, renewal: renewal, notification: type, now: Self.now) == expected)
    }

    static func record(
        _ state: SubscriptionState, tier: CompanyTier = .business, expires: TimeInterval? = 3600,
        grace: TimeInterval? = nil, signed: TimeInterval = 0
    ) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionID: "1", companyID: "c", environment: "Production", productID: "p", tier: tier,
            state: state, transactionID: "2", expiresAt: expires.map { now.addingTimeInterval($0) },
            graceExpiresAt: grace.map { now.addingTimeInterval($0) }, signedAt: now.addingTimeInterval(signed),
            updatedAt: now)
    }

    @Test("entitlement runs to the expiry or the grace period's end, and the highest entitled tier wins")
    func entitlement() {
        #expect(SubscriptionRules.entitled(Self.record(.active), now: Self.now))
        #expect(!SubscriptionRules.entitled(Self.record(.active, expires: -1), now: Self.now))
        #expect(SubscriptionRules.entitled(Self.record(.gracePeriod, expires: -1, grace: 60), now: Self.now))
        #expect(!SubscriptionRules.entitled(Self.record(.gracePeriod, expires: -1, grace: -1), now: Self.now))
        for state in [SubscriptionState.billingRetry, .expired, .refunded, .revoked] {
            #expect(!SubscriptionRules.entitled(Self.record(state), now: Self.now))
        }
        let records = [
            Self.record(.active), Self.record(.active, tier: .enterprise), Self.record(.expired, tier: .enterprise),
        ]
        #expect(SubscriptionRules.entitledTier(records, now: Self.now) == .enterprise)
        #expect(SubscriptionRules.entitledTier([Self.record(.refunded)], now: Self.now) == nil)
    }

    @Test("older signed data never replaces newer; an override holds; a lapse falls to Free")
    func orderAndPrecedence() {
        #expect(SubscriptionRules.supersedes(signedAt: Self.now, stored: nil))
        #expect(SubscriptionRules.supersedes(signedAt: Self.now, stored: Self.record(.active, signed: 0)))
        #expect(!SubscriptionRules.supersedes(signedAt: Self.now, stored: Self.record(.active, signed: 1)))
        #expect(SubscriptionRules.companyTier(source: .operator, entitled: .enterprise) == nil)
        #expect(SubscriptionRules.companyTier(source: .appStore, entitled: nil)! == (.free, .appStore))
        #expect(SubscriptionRules.companyTier(source: nil, entitled: .business)! == (.business, .appStore))
        #expect(SubscriptionRules.companyTier(source: nil, entitled: nil) == nil)
        #expect(SubscriptionRules.ended(before: Self.record(.active), after: Self.record(.refunded), now: Self.now))
        #expect(!SubscriptionRules.ended(before: nil, after: Self.record(.refunded), now: Self.now))
        #expect(!SubscriptionRules.ended(before: Self.record(.expired), after: Self.record(.refunded), now: Self.now))
    }

    @Test("the built-in root is Apple Root CA - G3, by its published SHA-256 fingerprint")
    func appleRoot() throws {
        let fingerprint = SHA256.hash(data: AppStoreVerifier.appleRootCAG3DER).map { String(format: "%02X", $0) }
            .joined(separator: ":")
        #expect(
            fingerprint
                == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79")
        #expect(try AppStoreVerifier.appleRootCAG3().subject.description.contains("Apple Root CA - G3"))
    }
}
