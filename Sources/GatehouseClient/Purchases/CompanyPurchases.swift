import Foundation

/// A verified StoreKit 2 transaction, as the SDK needs it.
public struct StoreTransaction: Sendable, Equatable {
    /// The transaction's id.
    public let id: UInt64
    /// The id of the subscription's first transaction: the subscription the server binds to one company.
    public let originalID: UInt64
    /// The product bought.
    public let productID: String
    /// The purchase token the app set: the company it was bought for.
    public let appAccountToken: UUID?
    /// The signed transaction (`VerificationResult.jwsRepresentation`), which the server verifies itself.
    public let signedData: String

    /// A transaction with its signed form.
    public init(id: UInt64, originalID: UInt64, productID: String, appAccountToken: UUID?, signedData: String) {
        self.id = id
        self.originalID = originalID
        self.productID = productID
        self.appAccountToken = appAccountToken
        self.signedData = signedData
    }
}

/// How a purchase ended.
public enum PurchaseOutcome: Sendable, Equatable {
    /// Bought and verified by StoreKit.
    case purchased(StoreTransaction)
    /// The person cancelled.
    case cancelled
    /// Waiting for approval (Ask to Buy); the transaction arrives later through `updates`.
    case pending
}

/// What the SDK needs of StoreKit 2: `StoreKitPurchases` on Apple platforms, a fake in tests.
public protocol PurchaseSeam: Sendable {
    /// Buys `productID` with `appAccountToken` as its purchase token.
    func purchase(productID: String, appAccountToken: UUID) async throws -> PurchaseOutcome
    /// The verified transactions that entitle the app now (`Transaction.currentEntitlements`).
    func currentEntitlements() async -> [StoreTransaction]
    /// Verified transactions as StoreKit delivers them (`Transaction.updates`): renewals, approvals, purchases made
    /// on another device.
    func updates() -> AsyncStream<StoreTransaction>
    /// Tells StoreKit the app has delivered what `transaction` bought.
    func finish(_ transaction: StoreTransaction) async
}

/// Why buying a tier failed.
public enum PurchaseError: Error, Sendable, Equatable {
    /// The company has no purchase token (a server before in-app purchases).
    case noPurchaseToken
    /// StoreKit failed; its description.
    case store(String)
    /// The server refused or could not be reached; the transaction stays unfinished, so StoreKit offers it again.
    case server(GatehouseError)
}

/// Company tiers bought in the app: buys through StoreKit with the company's purchase token, tells the server, and
/// finishes each transaction only once the server has it (docs/app-store.md). The calls report through the company
/// session, so `company` is the company signed in to, and its owner buys.
public struct CompanyPurchases: Sendable {
    private let seam: any PurchaseSeam
    private let report: @Sendable (String) async throws(GatehouseError) -> CompanySubscription

    /// Purchases through `seam` (`StoreKitPurchases()` on Apple platforms), reported through `companies`.
    public init(seam: any PurchaseSeam, companies: Companies) {
        self.init(seam: seam) { (signed) throws(GatehouseError) in
            try await companies.reportPurchase(signedTransaction: signed)
        }
    }

    init(
        seam: any PurchaseSeam, report: @escaping @Sendable (String) async throws(GatehouseError) -> CompanySubscription
    ) {
        self.seam = seam
        self.report = report
    }

    /// Buys `productID` for `company`. Nil when the person cancelled, or when the purchase waits for approval
    /// (`forward(for:onChange:)` reports it when it comes).
    public func purchase(_ productID: String, for company: Company) async throws(PurchaseError)
        -> CompanySubscription?
    {
        try await purchase(productID, token: company.appAccountToken)
    }

    func purchase(_ productID: String, token: UUID?) async throws(PurchaseError) -> CompanySubscription? {
        guard let token else { throw .noPurchaseToken }
        let outcome: PurchaseOutcome
        do {
            outcome = try await seam.purchase(productID: productID, appAccountToken: token)
        } catch {
            throw .store(String(describing: error))
        }
        guard case .purchased(let transaction) = outcome else { return nil }
        return try await deliver(transaction)
    }

    /// Reports what StoreKit holds for `company` that the server's subscription does not show yet (at launch, a
    /// purchase whose report was lost); nil when nothing is missing.
    public func reportUnseen(for company: Company) async throws(PurchaseError) -> CompanySubscription? {
        try await reportUnseen(token: company.appAccountToken, shown: company.subscription)
    }

    func reportUnseen(token: UUID?, shown: CompanySubscription) async throws(PurchaseError) -> CompanySubscription? {
        guard let transaction = Self.unseen(await seam.currentEntitlements(), token: token, shown: shown) else {
            return nil
        }
        return try await deliver(transaction)
    }

    /// Reports each transaction StoreKit delivers for `company` as it comes, until the updates end (run it in a task
    /// for the app's life). A report that fails leaves its transaction unfinished, so StoreKit delivers it again.
    public func forward(for company: Company, onChange: @Sendable (CompanySubscription) async -> Void) async {
        await forward(token: company.appAccountToken, onChange: onChange)
    }

    func forward(token: UUID?, onChange: @Sendable (CompanySubscription) async -> Void) async {
        for await transaction in seam.updates() where token != nil && transaction.appAccountToken == token {
            if let subscription = try? await deliver(transaction) { await onChange(subscription) }
        }
    }

    /// The newest entitlement bought for `company` that its subscription does not show: another product, or a
    /// subscription the server does not hold as active.
    static func unseen(_ entitlements: [StoreTransaction], token: UUID?, shown: CompanySubscription)
        -> StoreTransaction?
    {
        guard let token,
            let newest = entitlements.filter({ $0.appAccountToken == token }).max(by: { $0.id < $1.id })
        else { return nil }
        return shown.source == .appStore && shown.state == .active && shown.productID == newest.productID
            ? nil : newest
    }

    private func deliver(_ transaction: StoreTransaction) async throws(PurchaseError) -> CompanySubscription {
        let subscription: CompanySubscription
        do {
            subscription = try await report(transaction.signedData)
        } catch {
            throw .server(error)
        }
        await seam.finish(transaction)
        return subscription
    }
}
