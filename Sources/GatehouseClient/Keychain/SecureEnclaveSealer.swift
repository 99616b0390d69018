#if canImport(CryptoKit) && (os(iOS) || os(macOS) || os(visionOS) || os(watchOS))
    import CryptoKit
    import Foundation

    /// Seals the session for a P-256 key that never leaves this device's Secure Enclave. The key's wrapped form
    /// travels in each box; only this device's Secure Enclave can use it, so a copied item opens nowhere else.
    public struct SecureEnclaveSealer: SessionSealer {
        private let wrappedKey: Data
        private let publicKey: Data

        /// A sealer with a new Secure Enclave key, or nil where there is none (the simulator, older Macs): keep the
        /// session unsealed there.
        public static func ifAvailable() -> SecureEnclaveSealer? {
            guard SecureEnclave.isAvailable, let key = try? SecureEnclave.P256.KeyAgreement.PrivateKey() else {
                return nil
            }
            return SecureEnclaveSealer(wrappedKey: key.dataRepresentation, publicKey: key.publicKey.x963Representation)
        }

        private init(wrappedKey: Data, publicKey: Data) {
            self.wrappedKey = wrappedKey
            self.publicKey = publicKey
        }

        /// Seals for this sealer's key.
        public func seal(_ plaintext: Data) throws -> Data {
            let recipient = try P256.KeyAgreement.PublicKey(x963Representation: publicKey)
            return try SealedSessionBox.seal(plaintext, to: recipient, keyReference: wrappedKey)
        }

        /// Opens a box sealed by any sealer of this device's Secure Enclave.
        public func open(_ sealed: Data) throws -> Data {
            try SealedSessionBox.open(sealed) { wrappedKey, ephemeral in
                try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: wrappedKey)
                    .sharedSecretFromKeyAgreement(with: ephemeral)
            }
        }
    }
#endif
