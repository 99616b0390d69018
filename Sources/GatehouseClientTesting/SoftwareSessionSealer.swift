import Crypto
import Foundation
import GatehouseClient

/// A sealer whose P-256 key lives in memory (or wherever the test keeps `rawRepresentation`), for tests and previews:
/// it seals exactly as `SecureEnclaveSealer` does.
public struct SoftwareSessionSealer: SessionSealer {
    /// The private key, raw.
    public let rawRepresentation: Data

    /// A sealer with a new key.
    public init() { rawRepresentation = P256.KeyAgreement.PrivateKey().rawRepresentation }

    /// A sealer with the key `rawRepresentation`.
    public init(rawRepresentation: Data) throws {
        self.rawRepresentation = try P256.KeyAgreement.PrivateKey(rawRepresentation: rawRepresentation)
            .rawRepresentation
    }

    /// Seals for this key; the key's public half names it in the box.
    public func seal(_ plaintext: Data) throws -> Data {
        let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: rawRepresentation)
        return try SealedSessionBox.seal(
            plaintext, to: key.publicKey, keyReference: key.publicKey.x963Representation)
    }

    /// Opens a box sealed for this key.
    public func open(_ sealed: Data) throws -> Data {
        let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: rawRepresentation)
        return try SealedSessionBox.open(sealed) { reference, ephemeral in
            guard reference == key.publicKey.x963Representation else { throw SealedSessionBox.Failure.otherKey }
            return try key.sharedSecretFromKeyAgreement(with: ephemeral)
        }
    }
}
