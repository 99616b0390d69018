import Foundation
import JWTKit
import SwiftASN1
import X509

/// Why signed data from the App Store was refused; each has its stable code (`ErrorCode.appStore…`).
enum AppStoreRefusal: Error, Equatable {
    /// Not a compact JWS, or its JSON is not what Apple signs.
    case malformed(String)
    /// Not ES256, a chain not of Apple's shape, a certificate invalid at the signed date, or a bad signature.
    case untrusted(String)
    /// Another app's data: the bundle id or the App Apple ID differs.
    case wrongApp
    /// An environment the server does not accept.
    case wrongEnvironment(String)
}

/// Verifies what the App Store signs as Apple's App Store Server Library does (`SignedDataVerifier`): a JWS with `alg`
/// ES256 whose `x5c` holds exactly three certificates, leaf first, chaining to a trusted root (Apple Root CA - G3,
/// and the files `--app-store-root-certificates` adds), the leaf and the intermediate carrying Apple's marker
/// extensions, every certificate valid at the payload's `signedDate`; then the bundle id, the App Apple ID (for
/// Production) and the environment. The chain and the signature are jwt-kit's `X5CVerifier` over swift-certificates.
///
/// One relaxation, only for environments the operator listed: Xcode's StoreKit testing signs with a single
/// self-signed certificate, which verifies when it is one of the added roots itself (Apple's library skips
/// verification for Xcode entirely).
///
/// Online revocation checking (OCSP), which Apple's library offers, is not done: it would make every purchase and
/// notification wait on Apple's responder, and the certificates are short-lived and checked at the signed date.
struct AppStoreVerifier: Sendable {
    /// Apple's marker on the leaf certificate that signs App Store data (1.2.840.113635.100.6.11.1).
    static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    /// Apple's marker on the intermediate (WWDR) certificate (1.2.840.113635.100.6.2.1).
    static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
    /// The longest signed data accepted: a notification with its transaction and renewal info is a few KB.
    static let maxLength = 64 * 1024

    let bundleIDs: Set<String>
    let appAppleID: Int64?
    let environments: Set<AppStoreEnvironment>
    private let chains: X5CVerifier
    /// The roots added by the operator, as DER, for Xcode's single-certificate chains.
    private let addedRoots: [[UInt8]]

    init(settings: AppStoreSettings, addedRoots: [Certificate]) throws {
        bundleIDs = Set(settings.bundleIDs)
        appAppleID = settings.appAppleID
        environments = Set(settings.environments.compactMap(AppStoreEnvironment.init(rawValue:)))
        chains = try X5CVerifier(rootCertificates: [try Self.appleRootCAG3()] + addedRoots)
        self.addedRoots = try addedRoots.map { certificate in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return serializer.serializedBytes
        }
    }

    /// The settings' certificate files, each PEM (one or more certificates) or DER.
    static func certificates(files: [String]) throws(ConfigurationError) -> [Certificate] {
        var certificates: [Certificate] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ConfigurationError("--app-store-root-certificates names a file that cannot be read: '\(file)'")
            }
            let text = String(decoding: data, as: UTF8.self)
            do {
                if text.contains("-----BEGIN CERTIFICATE-----") {
                    certificates += try PEMDocument.parseMultiple(pemString: text).map {
                        try Certificate(pemDocument: $0)
                    }
                } else {
                    certificates.append(try Certificate(derEncoded: Array(data)))
                }
            } catch {
                throw ConfigurationError("--app-store-root-certificates: '\(file)' is not a PEM or DER certificate")
            }
        }
        return certificates
    }

    // MARK: The three kinds of signed data

    func transaction(_ jws: String) async throws(AppStoreRefusal) -> AppStoreTransaction {
        let transaction = try await verified(jws, as: AppStoreTransaction.self)
        try check(bundleID: transaction.bundleId, appAppleID: nil, environment: transaction.environment)
        return transaction
    }

    func renewalInfo(_ jws: String) async throws(AppStoreRefusal) -> AppStoreRenewalInfo {
        let info = try await verified(jws, as: AppStoreRenewalInfo.self)
        try check(bundleID: nil, appAppleID: nil, environment: info.environment)
        return info
    }

    func notification(_ jws: String) async throws(AppStoreRefusal) -> AppStoreNotification {
        let notification = try await verified(jws, as: AppStoreNotification.self)
        guard let environment = notification.environment else {
            throw .malformed("The notification names no environment")
        }
        try check(bundleID: notification.bundleID, appAppleID: notification.appAppleID, environment: environment)
        return notification
    }

    /// The app and environment checks of Apple's library: the bundle id must be one of ours (when the payload names
    /// one), Production must name our App Apple ID, and the environment must be accepted.
    private func check(bundleID: String?, appAppleID: Int64?, environment: String) throws(AppStoreRefusal) {
        guard let environment = AppStoreEnvironment(rawValue: environment), environments.contains(environment) else {
            throw .wrongEnvironment(environment)
        }
        if let bundleID, !bundleIDs.contains(bundleID) { throw .wrongApp }
        if environment == .production, appAppleID != nil, appAppleID != self.appAppleID { throw .wrongApp }
    }

    // MARK: The signature

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }()

    /// The payload of `jws` once its chain and signature verify.
    private func verified<Payload: AppStoreSignedPayload>(
        _ jws: String, as: Payload.Type
    ) async throws(AppStoreRefusal) -> Payload {
        guard jws.utf8.count <= Self.maxLength else { throw .malformed("The signed data is too long") }
        let header: JWTHeader
        let payload: Payload
        do {
            (header, payload, _) = try DefaultJWTParser(jsonDecoder: Self.decoder).parse(
                Array(jws.utf8), as: Payload.self)
        } catch {
            throw .malformed("The signed data is not a JWS of the expected shape")
        }
        guard header.alg == "ES256" else { throw .untrusted("The signed data must be signed with ES256") }
        guard let x5c = header.x5c else { throw .untrusted("The signed data carries no certificate chain (x5c)") }
        if x5c.count == 1, let environment = AppStoreEnvironment(rawValue: environmentName(of: payload) ?? ""),
            [.xcode, .localTesting].contains(environment), environments.contains(environment)
        {
            return try await selfSigned(jws, certificate: x5c[0], as: Payload.self)
        }
        guard x5c.count == 3 else {
            throw .untrusted("The certificate chain (x5c) must hold exactly three certificates, not \(x5c.count)")
        }
        do {
            return try await chains.verifyJWS(
                Array(jws.utf8), as: Payload.self, jsonDecoder: Self.decoder,
                validationTime: .fixed(payload.signedDate),
                policy: { AppleMarkers() })
        } catch {
            throw .untrusted("The certificate chain or the signature does not verify")
        }
    }

    /// Xcode's StoreKit testing: one self-signed certificate, trusted only when it is one of the added roots.
    private func selfSigned<Payload: AppStoreSignedPayload>(
        _ jws: String, certificate: String, as: Payload.Type
    ) async throws(AppStoreRefusal) -> Payload {
        do {
            guard let der = Data(base64Encoded: certificate), addedRoots.contains(Array(der)) else {
                throw AppStoreRefusal.untrusted("")
            }
            let pem = try Certificate(derEncoded: Array(der)).serializeAsPEM().pemString
            let keys = JWTKeyCollection(defaultJWTParser: DefaultJWTParser(jsonDecoder: Self.decoder))
            await keys.add(ecdsa: try ES256PublicKey(certificate: pem))
            return try await keys.verify(jws, as: Payload.self)
        } catch {
            throw .untrusted("The single certificate is not an added root, or the signature does not verify")
        }
    }

    private func environmentName(of payload: some AppStoreSignedPayload) -> String? {
        switch payload {
        case let transaction as AppStoreTransaction: transaction.environment
        case let info as AppStoreRenewalInfo: info.environment
        case let notification as AppStoreNotification: notification.environment
        default: nil
        }
    }

    // MARK: Apple Root CA - G3

    /// Apple Root CA - G3 (https://www.apple.com/certificateauthority/AppleRootCA-G3.cer), SHA-256 fingerprint
    /// 63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79, valid until 2039.
    static let appleRootCAG3DER = Data(
        base64Encoded: """
            MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBD\
            ZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgx\
            OTA2WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQK\
            DApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf\
            TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4ia\
            pIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZL\
            uN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM6BgD56KyKA==
            """)!

    static func appleRootCAG3() throws -> Certificate { try Certificate(derEncoded: Array(appleRootCAG3DER)) }
}

/// Apple's shape of an App Store chain, beside RFC 5280's checks: leaf, intermediate and root, the leaf and the
/// intermediate carrying Apple's markers.
struct AppleMarkers: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else { return .failsToMeetPolicy(reason: "an App Store chain has three certificates") }
        guard chain[0].extensions[oid: AppStoreVerifier.leafMarker] != nil else {
            return .failsToMeetPolicy(reason: "the leaf lacks Apple's App Store marker")
        }
        guard chain[1].extensions[oid: AppStoreVerifier.intermediateMarker] != nil else {
            return .failsToMeetPolicy(reason: "the intermediate lacks Apple's marker")
        }
        return .meetsPolicy
    }
}
