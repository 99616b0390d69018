// CryptoKit, as swift-crypto's `Crypto` (the same API: swift-crypto is CryptoKit's open-source counterpart) plus the
// Secure Enclave, which swift-crypto has not: the parts of `SecureEnclave` an adapter uses, as Apple documents them.
@_exported import Crypto
import Foundation
import LocalAuthentication
import Security

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public enum SecureEnclave {
    // static var isAvailable: Bool { get }
    public static var isAvailable: Bool { _stub() }

    public enum P256 {
        public enum KeyAgreement {
            public struct PrivateKey {
                // init(compactRepresentable: Bool = true, accessControl: SecAccessControl =
                //     SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, [], nil)!,
                //     authenticationContext: LAContext? = nil) throws
                // (iOS 13.0+, macOS 10.15+, visionOS 1.0+, watchOS 9.0+)
                public init(
                    compactRepresentable: Bool = true,
                    accessControl: SecAccessControl = SecAccessControlCreateWithFlags(
                        nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, [], nil)!,
                    authenticationContext: LAContext? = nil
                ) throws { _stub() }
                // init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws
                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws { _stub() }
                // var dataRepresentation: Data { get }
                public var dataRepresentation: Data { _stub() }
                // var publicKey: P256.KeyAgreement.PublicKey { get }
                public var publicKey: Crypto.P256.KeyAgreement.PublicKey { _stub() }
                // func sharedSecretFromKeyAgreement(with publicKeyShare: P256.KeyAgreement.PublicKey) throws
                //     -> SharedSecret
                public func sharedSecretFromKeyAgreement(with publicKeyShare: Crypto.P256.KeyAgreement.PublicKey) throws
                    -> SharedSecret
                { _stub() }
            }
        }
    }
}

/// Bodies are never run: these modules exist to be type-checked against.
func _stub() -> Never { fatalError("an Apple SDK stub: for type-checking only") }
