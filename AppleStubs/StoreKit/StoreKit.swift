// StoreKit 2 (a Swift framework: these are its Swift declarations as Apple documents them), the parts the purchase
// adapter uses.
import Foundation

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public struct Product: Identifiable, Sendable {
    // let id: String
    public let id: String

    // static func products<Identifiers>(for identifiers: Identifiers) async throws -> [Product]
    //     where Identifiers : Collection, Identifiers.Element == String
    public static func products<Identifiers: Collection>(for identifiers: Identifiers) async throws -> [Product]
    where Identifiers.Element == String { _stub() }

    // func purchase(options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult
    public func purchase(options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { _stub() }

    /// implied: the element of `purchase(options:)`'s set.
    public struct PurchaseOption: Hashable, Sendable {
        // static func appAccountToken(_ token: UUID) -> Product.PurchaseOption
        public static func appAccountToken(_ token: UUID) -> Product.PurchaseOption { _stub() }
    }

    /// implied: what `purchase(options:)` returns.
    public enum PurchaseResult: Sendable {
        case success(VerificationResult<Transaction>)
        case userCancelled
        case pending
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public enum VerificationResult<SignedType: Sendable>: Sendable {
    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    case verified(SignedType)

    // var jwsRepresentation: String { get }
    public var jwsRepresentation: String { _stub() }

    /// implied: the error an unverified result carries.
    public enum VerificationError: Error, Sendable {
        case revokedCertificate
        case invalidCertificateChain
        case invalidDeviceVerification
        case invalidEncoding
        case invalidSignature
        case missingRequiredProperties
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public struct Transaction: Identifiable, Sendable {
    // let id: UInt64
    public let id: UInt64
    // let originalID: UInt64
    public let originalID: UInt64
    // let productID: String
    public let productID: String
    // let appAccountToken: UUID?
    public let appAccountToken: UUID?

    // static var updates: Transaction.Transactions { get }
    public static var updates: Transaction.Transactions { _stub() }
    // static var currentEntitlements: Transaction.Transactions { get }
    public static var currentEntitlements: Transaction.Transactions { _stub() }
    // static var unfinished: Transaction.Transactions { get }
    public static var unfinished: Transaction.Transactions { _stub() }

    // func finish() async
    public func finish() async { _stub() }

    /// implied: the sequence `updates`, `currentEntitlements` and `unfinished` are.
    public struct Transactions: AsyncSequence, Sendable {
        /// implied: what `for await` yields.
        public typealias Element = VerificationResult<Transaction>
        /// implied: its iterator.
        public struct AsyncIterator: AsyncIteratorProtocol {
            /// implied: what `for await` calls.
            public mutating func next() async -> VerificationResult<Transaction>? { _stub() }
        }
        /// implied: what `for await` calls.
        public func makeAsyncIterator() -> AsyncIterator { _stub() }
    }
}

func _stub() -> Never { fatalError("an Apple SDK stub: for type-checking only") }
