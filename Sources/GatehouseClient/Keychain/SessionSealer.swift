import Crypto
import Foundation

/// Encrypts the stored session before it goes into the Keychain, so an item copied off the device reads as nothing.
/// `SecureEnclaveSealer` keeps its key in the Secure Enclave; `SoftwareSessionSealer` is for tests and Linux.
public protocol SessionSealer: Sendable {
    /// `plaintext`, sealed.
    func seal(_ plaintext: Data) throws -> Data
    /// The plaintext of `sealed`; throws when it was sealed with another key or altered.
    func open(_ sealed: Data) throws -> Data
}

/// A sealer whose P-256 key lives in memory (or wherever the app keeps `rawRepresentation`): for tests, previews,
/// and platforms without a Secure Enclave. It seals exactly as `SecureEnclaveSealer` does.
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

/// ECIES over P-256: an ephemeral key agreed with the recipient's, HKDF-SHA256 to an AES-256-GCM key. The box is
/// `01 | reference length (2 bytes) | key reference | ephemeral public key (X9.63, 65 bytes) | AES-GCM combined`, the
/// header authenticated with the ciphertext. The key reference tells the opener which key (the Secure Enclave's
/// wrapped key, or a public key).
enum SealedSessionBox {
    enum Failure: Error {
        case malformed, otherKey
    }

    private static let version: UInt8 = 1
    private static let info = Data("gatehouse session v1".utf8)

    static func seal(_ plaintext: Data, to recipient: P256.KeyAgreement.PublicKey, keyReference: Data) throws -> Data {
        guard keyReference.count <= Int(UInt16.max) else { throw Failure.malformed }
        let ephemeral = P256.KeyAgreement.PrivateKey()
        let ephemeralPublic = ephemeral.publicKey.x963Representation
        var header = Data([version, UInt8(keyReference.count >> 8), UInt8(keyReference.count & 0xFF)])
        header += keyReference + ephemeralPublic
        let key = derive(try ephemeral.sharedSecretFromKeyAgreement(with: recipient), ephemeral: ephemeralPublic)
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: header)
        guard let combined = box.combined else { throw Failure.malformed }
        return header + combined
    }

    static func open(
        _ sealed: Data, agree: (_ keyReference: Data, _ ephemeral: P256.KeyAgreement.PublicKey) throws -> SharedSecret
    ) throws -> Data {
        let bytes = [UInt8](sealed)
        guard bytes.count > 3, bytes[0] == version else { throw Failure.malformed }
        let referenceEnd = 3 + (Int(bytes[1]) << 8 | Int(bytes[2]))
        let headerEnd = referenceEnd + 65
        guard bytes.count > headerEnd else { throw Failure.malformed }
        let ephemeralPublic = Data(bytes[referenceEnd..<headerEnd])
        let ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: ephemeralPublic)
        let secret = try agree(Data(bytes[3..<referenceEnd]), ephemeral)
        let box = try AES.GCM.SealedBox(combined: Data(bytes[headerEnd...]))
        return try AES.GCM.open(
            box, using: derive(secret, ephemeral: ephemeralPublic), authenticating: Data(bytes[..<headerEnd]))
    }

    private static func derive(_ secret: SharedSecret, ephemeral: Data) -> SymmetricKey {
        secret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: ephemeral, sharedInfo: info, outputByteCount: 32)
    }
}
