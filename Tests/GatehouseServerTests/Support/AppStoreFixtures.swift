import Crypto
import Foundation
import SwiftASN1
import X509

@testable import GatehouseServer

/// Signed App Store data in Apple's shape, made by the tests: a root, an intermediate and a leaf carrying Apple's
/// marker extensions (and variants that break one rule each), and JWS signed with the leaf's key as the App Store
/// signs transactions, renewal info and notifications.
struct AppStoreFixtures: Sendable {
    static let shared: AppStoreFixtures = try! AppStoreFixtures()
    static let bundleID = "com.example.gatehouse"
    static let appAppleID: Int64 = 1_234_567_890
    static let business = "com.example.gatehouse.business.monthly"
    static let enterprise = "com.example.gatehouse.enterprise.monthly"

    struct Signer: Sendable {
        let key: P256.Signing.PrivateKey
        /// DER, leaf first.
        let chain: [[UInt8]]
    }

    let rootKey = P256.Signing.PrivateKey()
    let root: Certificate
    /// The root, PEM, in a file for `--app-store-root-certificates`.
    let rootFile: String
    /// Leaf, intermediate and root as Apple chains them.
    let apple: Signer
    let leafWithoutMarker: Signer
    let intermediateWithoutMarker: Signer
    /// A leaf that expired an hour ago.
    let expiredLeaf: Signer
    /// A chain of another root nobody trusts.
    let foreign: Signer

    init() throws {
        let now = Date()
        let rootName = try DistinguishedName { CommonName("Gatehouse Test Root CA") }
        root = try Self.certificate(
            key: rootKey, subject: rootName, issuer: rootName, issuerKey: rootKey, ca: true, marker: nil, now: now)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-app-store-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        rootFile = folder.appendingPathComponent("root.pem").path
        try root.serializeAsPEM().pemString.write(toFile: rootFile, atomically: true, encoding: .utf8)
        apple = try Self.chain(root: root, rootKey: rootKey, now: now)
        leafWithoutMarker = try Self.chain(root: root, rootKey: rootKey, now: now, leafMarker: false)
        intermediateWithoutMarker = try Self.chain(root: root, rootKey: rootKey, now: now, intermediateMarker: false)
        expiredLeaf = try Self.chain(root: root, rootKey: rootKey, now: now, leafExpired: true)
        let foreignKey = P256.Signing.PrivateKey()
        let foreignName = try DistinguishedName { CommonName("Someone Else's Root") }
        let foreignRoot = try Self.certificate(
            key: foreignKey, subject: foreignName, issuer: foreignName, issuerKey: foreignKey, ca: true, marker: nil,
            now: now)
        foreign = try Self.chain(root: foreignRoot, rootKey: foreignKey, now: now)
    }

    /// The settings that turn purchases on for these fixtures: Production and Sandbox, two products.
    func configure(_ configuration: inout GatehouseConfiguration, environments: [String] = ["Production", "Sandbox"]) {
        configuration.appStore.bundleIDs = [Self.bundleID]
        configuration.appStore.appAppleID = Self.appAppleID
        configuration.appStore.environments = environments
        configuration.appStore.products = [Self.business: .business, Self.enterprise: .enterprise]
        configuration.appStore.rootCertificateFiles = [rootFile]
    }

    // MARK: Payloads

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// A subscription transaction as StoreKit 2 signs it.
    static func transaction(
        token: String?, product: String = business, original: String = "2000000000000001",
        id: String = UUID().uuidString, expires: Date? = Date().addingTimeInterval(30 * 86_400),
        signed: Date = Date(), environment: String = "Production", bundleID: String = bundleID,
        revoked: Date? = nil, revocationReason: Int? = nil, upgraded: Bool = false
    ) -> [String: Any] {
        var payload: [String: Any] = [
            "transactionId": id, "originalTransactionId": original, "bundleId": bundleID, "productId": product,
            "purchaseDate": milliseconds(signed.addingTimeInterval(-60)),
            "originalPurchaseDate": milliseconds(signed.addingTimeInterval(-60)), "quantity": 1,
            "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED",
            "signedDate": milliseconds(signed), "environment": environment, "transactionReason": "PURCHASE",
            "storefront": "USA", "storefrontId": "143441", "price": 9990, "currency": "USD",
            "subscriptionGroupIdentifier": "21000001", "webOrderLineItemId": "2000000000000002",
        ]
        if let token { payload["appAccountToken"] = token }
        if let expires { payload["expiresDate"] = milliseconds(expires) }
        if let revoked { payload["revocationDate"] = milliseconds(revoked) }
        if let revocationReason { payload["revocationReason"] = revocationReason }
        if upgraded { payload["isUpgraded"] = true }
        return payload
    }

    static func renewalInfo(
        original: String = "2000000000000001", product: String = business, grace: Date? = nil,
        billingRetry: Bool = false, signed: Date = Date(), environment: String = "Production"
    ) -> [String: Any] {
        var payload: [String: Any] = [
            "originalTransactionId": original, "productId": product, "autoRenewProductId": product,
            "autoRenewStatus": 1, "isInBillingRetryPeriod": billingRetry, "signedDate": milliseconds(signed),
            "environment": environment, "recentSubscriptionStartDate": milliseconds(signed.addingTimeInterval(-60)),
        ]
        if let grace { payload["gracePeriodExpiresDate"] = milliseconds(grace) }
        return payload
    }

    /// A notification whose data carries `transaction` (and `renewal`), signed with the same chain.
    func notification(
        _ type: String, subtype: String? = nil, uuid: String = UUID().uuidString, transaction: [String: Any]?,
        renewal: [String: Any]? = nil, signed: Date = Date(), environment: String = "Production",
        appAppleID: Int64 = appAppleID, bundleID: String = bundleID, status: Int? = nil
    ) throws -> String {
        var data: [String: Any] = [
            "appAppleId": appAppleID, "bundleId": bundleID, "bundleVersion": "42", "environment": environment,
        ]
        if let transaction { data["signedTransactionInfo"] = try sign(transaction) }
        if let renewal { data["signedRenewalInfo"] = try sign(renewal) }
        if let status { data["status"] = status }
        var payload: [String: Any] = [
            "notificationType": type, "notificationUUID": uuid, "data": data, "version": "2.0",
            "signedDate": Self.milliseconds(signed),
        ]
        if let subtype { payload["subtype"] = subtype }
        return try sign(payload)
    }

    // MARK: Signing

    /// `payload` as a compact JWS: header `{alg, x5c}` with `signer`'s chain (or `chain` instead), signed ES256.
    func sign(
        _ payload: [String: Any], with signer: Signer? = nil, alg: String = "ES256", chain: [[UInt8]]? = nil
    ) throws -> String {
        let signer = signer ?? apple
        let header: [String: Any] = [
            "alg": alg, "x5c": (chain ?? signer.chain).map { Data($0).base64EncodedString() },
        ]
        let input =
            Self.base64URL(try JSONSerialization.data(withJSONObject: header)) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: payload))
        let signature = try signer.key.signature(for: Data(input.utf8)).rawRepresentation
        return input + "." + Self.base64URL(signature)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    // MARK: Certificates

    private static func chain(
        root: Certificate, rootKey: P256.Signing.PrivateKey, now: Date, leafMarker: Bool = true,
        intermediateMarker: Bool = true, leafExpired: Bool = false
    ) throws -> Signer {
        let intermediateKey = P256.Signing.PrivateKey()
        let intermediateName = try DistinguishedName { CommonName("Gatehouse Test Worldwide Developer Relations") }
        let intermediate = try certificate(
            key: intermediateKey, subject: intermediateName, issuer: root.subject, issuerKey: rootKey, ca: true,
            marker: intermediateMarker ? AppStoreVerifier.intermediateMarker : nil, now: now)
        let leafKey = P256.Signing.PrivateKey()
        let leaf = try certificate(
            key: leafKey, subject: try DistinguishedName { CommonName("Gatehouse Test App Store Signing") },
            issuer: intermediateName, issuerKey: intermediateKey, ca: false,
            marker: leafMarker ? AppStoreVerifier.leafMarker : nil, now: now, expired: leafExpired)
        return Signer(key: leafKey, chain: try [leaf, intermediate, root].map(der))
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    private static func certificate(
        key: P256.Signing.PrivateKey, subject: DistinguishedName, issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey, ca: Bool, marker: ASN1ObjectIdentifier?, now: Date, expired: Bool = false
    ) throws -> Certificate {
        var extensions = Certificate.Extensions()
        if ca {
            try extensions.append(
                Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true))
            try extensions.append(Certificate.Extension(KeyUsage(keyCertSign: true), critical: true))
        } else {
            try extensions.append(Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true))
            try extensions.append(Certificate.Extension(KeyUsage(digitalSignature: true), critical: true))
        }
        // Key identifiers, which a strict verifier (OpenSSL's X509_STRICT, as Apple's Python library sets) requires.
        try extensions.append(
            Certificate.Extension(SubjectKeyIdentifier(hash: .init(key.publicKey)), critical: false))
        try extensions.append(
            Certificate.Extension(
                AuthorityKeyIdentifier(
                    keyIdentifier: SubjectKeyIdentifier(hash: .init(issuerKey.publicKey)).keyIdentifier),
                critical: false))
        // Apple's markers are ASN.1 NULL, not critical.
        if let marker {
            try extensions.append(Certificate.Extension(oid: marker, critical: false, value: [0x05, 0x00]))
        }
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-86_400 * 30),
            notValidAfter: expired ? now.addingTimeInterval(-3600) : now.addingTimeInterval(86_400 * 365),
            issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: .init(issuerKey))
    }
}
