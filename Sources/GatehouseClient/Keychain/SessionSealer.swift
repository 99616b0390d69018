import Crypto
import Foundation

/// Encrypts the stored session before it goes into the Keychain, so an item copied off the device reads as nothing.
/// `SecureEnclaveSealer` keeps its key in the Secure Enclave; `SoftwareSessionSealer` (GatehouseClientTesting) is for
/// tests and previews.
public protocol SessionSealer: Sendable {
    /// `plaintext`, sealed.
    func seal(_ plaintext: Data) throws -> Data
    /// The plaintext of `sealed`; throws when it was sealed with another key or altered.
    func open(_ sealed: Data) throws -> Data
}

/// ECIES over P-256: an ephemeral key agreed with the recipient's, HKDF-SHA256 to an AES-256-GCM key. The box is
/// `01 | reference length (2 bytes) | key reference | ephemeral public key (X9.63, 65 bytes) | AES-GCM combined`, the
/// header authenticated with the ciphertext. The key reference tells the opener which key (the Secure Enclave's
/// wrapped key, or a public key). Package-wide so that GatehouseClientTesting's software sealer seals the same way.
package enum SealedSessionBox {
    package enum Failure: Error {
        case malformed, otherKey
    }

    private static let version: UInt8 = 1
    private static let info = Data("gatehouse session v1".utf8)

    package static func seal(_ plaintext: Data, to recipient: P256.KeyAgreement.PublicKey, keyReference: Data) throws
        -> Data
    {
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

    package static func open(
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
