import Foundation
import Testing

@testable import GatehouseClient

/// Buying a company tier (`CompanyPurchases`) through a fake StoreKit seam and a report the test answers: the
/// purchase token goes to StoreKit, the signed transaction to the server, and a transaction is finished only once
/// the server has it. No StoreKit, no server.
@Suite("Company purchases through the StoreKit seam")
struct PurchaseTests {
    /// StoreKit as the test scripts it: what a purchase answers, the entitlements, the updates; what was finished.
    final class FakeStore: PurchaseSeam, @unchecked Sendable {
        private let lock = NSLock()
        var outcome: PurchaseOutcome = .cancelled
        var entitlements: [StoreTransaction] = []
        var delivered: [StoreTransaction] = []
        private(set) var tokens: [UUID] = []
        private(set) var finished: [UInt64] = []

        func purchase(productID: String, appAccountToken: UUID) async throws -> PurchaseOutcome {
            lock.withLock { tokens.append(appAccountToken) }
            return outcome
        }
        func currentEntitlements() async -> [StoreTransaction] { entitlements }
        func updates() -> AsyncStream<StoreTransaction> {
            AsyncStream { continuation in
                for transaction in delivered { continuation.yield(transaction) }
                continuation.finish()
            }
        }
        func finish(_ transaction: StoreTransaction) async { lock.withLock { finished.append(transaction.id) } }
    }

    /// The server's side: the signed data it was sent, and what it answers.
    final class FakeServer: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var reported: [String] = []
        var refuse = false

        func report(_ signed: String) throws(GatehouseError) -> CompanySubscription {
            lock.withLock { reported.append(signed) }
            if refuse { throw .server(status: 403, code: "app_store_other_company", message: "another company's") }
            return CompanySubscription(tier: .business, source: .appStore, state: .active, productID: "business")
        }
    }

    static let token = UUID()

    static func transaction(_ id: UInt64, product: String = "business", token: UUID? = token) -> StoreTransaction {
        StoreTransaction(id: id, originalID: 1, productID: product, appAccountToken: token, signedData: "jws-\(id)")
    }

    static func purchases(_ store: FakeStore, _ server: FakeServer) -> CompanyPurchases {
        CompanyPurchases(seam: store) { (signed) throws(GatehouseError) in try server.report(signed) }
    }

    @Test("a purchase carries the company's token, is reported, and only then finished")
    func purchase() async throws {
        let (store, server) = (FakeStore(), FakeServer())
        store.outcome = .purchased(Self.transaction(7))
        let subscription = try await Self.purchases(store, server).purchase("business", token: Self.token)
        #expect(subscription?.tier == .business && subscription?.source == .appStore)
        #expect(store.tokens == [Self.token] && server.reported == ["jws-7"] && store.finished == [7])
    }

    @Test("cancelled and pending purchases report nothing; no token is a clear error")
    func cancelledPendingNoToken() async throws {
        let (store, server) = (FakeStore(), FakeServer())
        let purchases = Self.purchases(store, server)
        #expect(try await purchases.purchase("business", token: Self.token) == nil)
        store.outcome = .pending
        #expect(try await purchases.purchase("business", token: Self.token) == nil)
        #expect(server.reported.isEmpty && store.finished.isEmpty)
        await #expect(throws: PurchaseError.noPurchaseToken) { try await purchases.purchase("business", token: nil) }
    }

    @Test("a refused report leaves the transaction unfinished, so StoreKit offers it again")
    func refusedStaysUnfinished() async throws {
        let (store, server) = (FakeStore(), FakeServer())
        server.refuse = true
        store.outcome = .purchased(Self.transaction(8))
        await #expect(throws: PurchaseError.self) {
            try await Self.purchases(store, server).purchase("business", token: Self.token)
        }
        #expect(server.reported == ["jws-8"] && store.finished.isEmpty)
    }

    @Test("at launch, the newest entitlement the server does not show is reported; one it shows is not")
    func unseenEntitlements() async throws {
        let (store, server) = (FakeStore(), FakeServer())
        store.entitlements = [
            Self.transaction(3), Self.transaction(5, product: "enterprise"), Self.transaction(9, token: UUID()),
        ]
        let purchases = Self.purchases(store, server)
        let free = CompanySubscription(tier: .free)
        #expect(try await purchases.reportUnseen(token: Self.token, shown: free) != nil)
        #expect(server.reported == ["jws-5"] && store.finished == [5])
        let shown = CompanySubscription(tier: .enterprise, source: .appStore, state: .active, productID: "enterprise")
        #expect(try await purchases.reportUnseen(token: Self.token, shown: shown) == nil)
        #expect(server.reported.count == 1)
    }

    @Test("updates for the company are reported and finished as they come; others are left alone")
    func forwardUpdates() async throws {
        let (store, server) = (FakeStore(), FakeServer())
        store.delivered = [Self.transaction(11), Self.transaction(12, token: UUID()), Self.transaction(13)]
        let changes = Changes()
        await Self.purchases(store, server).forward(token: Self.token) { await changes.append($0) }
        #expect(server.reported == ["jws-11", "jws-13"] && store.finished == [11, 13])
        #expect(await changes.count == 2)
    }

    actor Changes {
        var count = 0
        func append(_ subscription: CompanySubscription) { count += 1 }
    }
}
