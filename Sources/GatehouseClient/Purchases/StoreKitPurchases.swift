#if canImport(StoreKit) && (os(iOS) || os(macOS) || os(visionOS))
    import Foundation
    import StoreKit

    /// The purchase seam on Apple platforms: StoreKit 2. A purchase carries the company's token as its
    /// `appAccountToken`; only transactions StoreKit verified are passed on, with their signed form for the server.
    @available(iOS 15.0, macOS 12.0, visionOS 1.0, *)
    public struct StoreKitPurchases: PurchaseSeam {
        /// Why StoreKit could not buy.
        public enum Failure: Error, Sendable {
            /// No product has that id in the App Store (or in the StoreKit configuration file).
            case unknownProduct(String)
            /// StoreKit could not verify the transaction it returned.
            case unverified
        }

        /// StoreKit 2, as the app's process sees it.
        public init() {}

        public func purchase(productID: String, appAccountToken: UUID) async throws -> PurchaseOutcome {
            guard let product = try await Product.products(for: [productID]).first else {
                throw Failure.unknownProduct(productID)
            }
            switch try await product.purchase(options: [.appAccountToken(appAccountToken)]) {
            case .success(let result):
                guard let transaction = Self.verified(result) else { throw Failure.unverified }
                return .purchased(transaction)
            case .userCancelled: return .cancelled
            case .pending: return .pending
            @unknown default: return .cancelled
            }
        }

        public func currentEntitlements() async -> [StoreTransaction] {
            var transactions: [StoreTransaction] = []
            for await result in Transaction.currentEntitlements {
                if let transaction = Self.verified(result) { transactions.append(transaction) }
            }
            return transactions
        }

        public func updates() -> AsyncStream<StoreTransaction> {
            AsyncStream { continuation in
                let task = Task {
                    for await result in Transaction.updates {
                        if let transaction = Self.verified(result) { continuation.yield(transaction) }
                    }
                    continuation.finish()
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }

        public func finish(_ transaction: StoreTransaction) async {
            for await result in Transaction.unfinished {
                if case .verified(let unfinished) = result, unfinished.id == transaction.id {
                    await unfinished.finish()
                    return
                }
            }
        }

        private static func verified(_ result: VerificationResult<Transaction>) -> StoreTransaction? {
            guard case .verified(let transaction) = result else { return nil }
            return StoreTransaction(
                id: transaction.id, originalID: transaction.originalID, productID: transaction.productID,
                appAccountToken: transaction.appAccountToken, signedData: result.jwsRepresentation)
        }
    }
#endif
