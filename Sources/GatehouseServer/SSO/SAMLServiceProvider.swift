import Crypto
import CryptoExtras
import Foundation
import NIOConcurrencyHelpers
import SwiftASN1
import X509

/// Gatehouse as a SAML service provider: its entity id (`<public URL>/auth/v1/sso/saml/metadata`, as GoTrue), its
/// assertion consumer service, and the key identity providers encrypt assertions to. The key is made once per store
/// (RSA 2048, kept sealed among the server secrets) and its certificate made from it, self-signed and fixed, so every
/// instance publishes the same metadata.
final class SAMLServiceProvider: Sendable {
    let entityID: String
    let acsURL: String
    private let secrets: ServerSecrets
    private let loaded = NIOLockedValueBox<Keys?>(nil)

    struct Keys: Sendable {
        /// The private key's PEM, for decrypting assertions.
        let privateKeyPEM: String
        /// The certificate's DER, published in the metadata.
        let certificate: Data
    }

    static let secretName = "saml_sp_key"

    init(publicURL: String, secrets: ServerSecrets) {
        entityID = publicURL + "/auth/v1/sso/saml/metadata"
        acsURL = publicURL + "/auth/v1/sso/saml/acs"
        self.secrets = secrets
    }

    /// The key and certificate, made on first use.
    func keys() async throws -> Keys {
        if let keys = loaded.withLockedValue({ $0 }) { return keys }
        let pem = try await secrets.text(Self.secretName) {
            try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        }
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        let keys = Keys(privateKeyPEM: pem, certificate: try Self.certificate(for: key, host: host))
        loaded.withLockedValue { $0 = keys }
        return keys
    }

    /// The metadata identity providers are given: `validUntil` two days ahead, or five years for a download.
    func metadata(now: Date, download: Bool) async throws -> String {
        let keys = try await keys()
        return SAMLServiceProviderMetadata.xml(
            entityID: entityID, acsURL: acsURL, encryptionCertificateDER: keys.certificate,
            nameIDFormat: nil,
            validUntil: now.addingTimeInterval(download ? 5 * 365 * 86_400 : 2 * 86_400))
    }

    private var host: String { URL(string: entityID)?.host ?? "gatehouse" }

    /// A self-signed certificate for `key`, the same every time it is made from the same key (PKCS #1 v1.5 signatures
    /// are deterministic): valid from 2000 for two hundred years, as GoTrue's, since identity providers take the key,
    /// not the dates.
    static func certificate(for key: _RSA.Signing.PrivateKey, host: String) throws -> Data {
        let name = try DistinguishedName { CommonName("SAML 2.0 Certificate for \(host)") }
        let start = Date(timeIntervalSince1970: 946_684_800)
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(bytes: [1]), publicKey: .init(key.publicKey),
            notValidBefore: start, notValidAfter: start.addingTimeInterval(200 * 365 * 86_400), issuer: name,
            subject: name, signatureAlgorithm: .sha256WithRSAEncryption,
            extensions: try Certificate.Extensions {
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true, dataEncipherment: true))
            },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes)
    }
}
