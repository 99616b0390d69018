import Crypto
import CryptoExtras
import Foundation

/// The relying party passkeys are bound to: its id, a registrable domain whose hash every authenticator data
/// carries, and the exact origins whose pages (or apps) may use them.
public struct RelyingParty: Hashable, Sendable {
    /// The RP id, "example.com": passkeys made for it work on it and its subdomains.
    public var id: String
    /// The origins accepted in `clientDataJSON`, compared as exact strings ("https://example.com").
    public var origins: [String]
    /// The name authenticators show.
    public var name: String

    public init(id: String, origins: [String], name: String) {
        self.id = id
        self.origins = origins
        self.name = name
    }
}

/// What the store keeps of a passkey to check its sign-ins.
struct StoredCredential: Hashable, Sendable {
    /// The COSE key as the registration sent it.
    var publicKey: [UInt8]
    /// The COSE algorithm, -7 or -257.
    var algorithm: Int
    /// The counter of the last accepted ceremony.
    var signCount: UInt32
    /// Whether the registration said the passkey may be synced; when known, a sign-in that says otherwise is
    /// refused (the flag never changes for a credential, WebAuthn L3 §6.1.3).
    var backupEligible: Bool?

    init(publicKey: [UInt8], algorithm: Int, signCount: UInt32, backupEligible: Bool? = nil) {
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.backupEligible = backupEligible
    }
}

/// A registration that passed every check: what to store.
struct VerifiedRegistration: Hashable, Sendable {
    let credentialID: [UInt8]
    /// The COSE key's bytes as sent.
    let publicKey: [UInt8]
    /// The COSE algorithm, -7 or -257.
    let algorithm: Int
    let signCount: UInt32
    /// The authenticator model's id, 16 bytes (zeros when it does not say).
    let aaguid: [UInt8]
    /// The passkey may be synced to other devices (a multi-device credential).
    let backupEligible: Bool
    /// The passkey is synced now.
    let backedUp: Bool
    let userVerified: Bool
    let transports: [String]
    /// "none" or "packed".
    let attestationFormat: String
}

/// A sign-in that passed every check: what to update.
struct VerifiedAssertion: Hashable, Sendable {
    let newSignCount: UInt32
    let backupEligible: Bool
    let backedUp: Bool
    let userVerified: Bool
}

extension WebAuthn {
    /// Checks a registration (WebAuthn L3 §7.1) against the challenge the server issued for it. Attestation is
    /// not used for trust: `none`, and `packed` self attestation (checked with the new key), are accepted;
    /// certificate chains and other formats are refused, since nothing here verifies them.
    static func verifyRegistration(
        response: RegistrationResponse, expectedChallenge: [UInt8], relyingParty: RelyingParty,
        requireUserVerification: Bool = true
    ) throws(WebAuthnError) -> VerifiedRegistration {
        try checkClientData(
            response.clientDataJSON, type: "webauthn.create", challenge: expectedChallenge, relyingParty: relyingParty)
        let attestation = try AttestationObject(bytes: response.attestationObject)
        let data = attestation.authenticatorData
        try checkAuthenticatorData(data, relyingParty: relyingParty, requireUserVerification: requireUserVerification)
        guard let credential = data.attestedCredential else { throw .malformedAuthenticatorData }
        guard credential.credentialID == response.credentialID else { throw .malformedCredential }
        let key = try VerificationKey(credential.publicKey)

        switch attestation.format {
        case "none":
            guard attestation.statement.mapPairs?.isEmpty == true else { throw .malformedAttestation }
        case "packed":
            // With x5c the statement is signed by an attestation certificate (ecdaaKeyId: a withdrawn scheme);
            // without, by the credential's own key (self attestation).
            guard attestation.statement[text: "x5c"] == nil, attestation.statement[text: "ecdaaKeyId"] == nil else {
                throw .unsupportedAttestation
            }
            guard let alg = attestation.statement[text: "alg"]?.intValue,
                let signature = attestation.statement[text: "sig"]?.bytesValue,
                attestation.statement.mapPairs?.count == 2, alg == credential.publicKey.algorithm
            else { throw .malformedAttestation }
            let signed = attestation.authenticatorDataBytes + SHA256.hash(data: response.clientDataJSON)
            guard key.isValidSignature(signature, for: signed) else { throw .badSignature }
        default:
            throw .unsupportedAttestation
        }

        return VerifiedRegistration(
            credentialID: credential.credentialID, publicKey: credential.publicKeyBytes,
            algorithm: credential.publicKey.algorithm, signCount: data.signCount, aaguid: credential.aaguid,
            backupEligible: data.flags.contains(.backupEligible), backedUp: data.flags.contains(.backedUp),
            userVerified: data.flags.contains(.userVerified), transports: response.transports,
            attestationFormat: attestation.format)
    }

    /// Checks a sign-in (WebAuthn L3 §7.2) with the stored credential `response.credentialID` named, against the
    /// challenge the server issued for it. The counter must grow unless it stays at zero (authenticators that do
    /// not count, such as synced passkeys); a counter that goes back means a cloned authenticator.
    static func verifyAssertion(
        response: AuthenticationResponse, expectedChallenge: [UInt8], relyingParty: RelyingParty,
        credential: StoredCredential, requireUserVerification: Bool = true
    ) throws(WebAuthnError) -> VerifiedAssertion {
        try checkClientData(
            response.clientDataJSON, type: "webauthn.get", challenge: expectedChallenge, relyingParty: relyingParty)
        let data = try AuthenticatorData(bytes: response.authenticatorData)
        try checkAuthenticatorData(data, relyingParty: relyingParty, requireUserVerification: requireUserVerification)
        guard data.attestedCredential == nil else { throw .malformedAuthenticatorData }
        if let eligible = credential.backupEligible, eligible != data.flags.contains(.backupEligible) {
            throw .invalidBackupState
        }

        let storedKey = try COSEKey(bytes: credential.publicKey)
        guard storedKey.algorithm == credential.algorithm else { throw .malformedPublicKey }
        let signed = response.authenticatorData + SHA256.hash(data: response.clientDataJSON)
        guard try VerificationKey(storedKey).isValidSignature(response.signature, for: signed) else {
            throw .badSignature
        }
        if data.signCount != 0 || credential.signCount != 0, data.signCount <= credential.signCount {
            throw .signCountRegressed
        }

        return VerifiedAssertion(
            newSignCount: data.signCount, backupEligible: data.flags.contains(.backupEligible),
            backedUp: data.flags.contains(.backedUp), userVerified: data.flags.contains(.userVerified))
    }

    /// The client data checks both ceremonies share: its type, the challenge (compared in constant time), an
    /// allowed origin, and a page that was not in another origin's frame.
    private static func checkClientData(
        _ json: [UInt8], type: String, challenge: [UInt8], relyingParty: RelyingParty
    ) throws(WebAuthnError) {
        let clientData = try ClientData(json: json)
        guard clientData.type == type else { throw .wrongType }
        guard constantTimeEquals(clientData.challenge, challenge) else { throw .challengeMismatch }
        guard relyingParty.origins.contains(clientData.origin) else { throw .originNotAllowed }
        guard !clientData.crossOrigin else { throw .crossOrigin }
    }

    /// The authenticator data checks both ceremonies share: the relying party's hash, user presence, user
    /// verification when required, and consistent backup flags.
    private static func checkAuthenticatorData(
        _ data: AuthenticatorData, relyingParty: RelyingParty, requireUserVerification: Bool
    ) throws(WebAuthnError) {
        guard data.rpIDHash.elementsEqual(SHA256.hash(data: Data(relyingParty.id.utf8))) else {
            throw .rpIDMismatch
        }
        guard data.flags.contains(.userPresent) else { throw .userNotPresent }
        guard !requireUserVerification || data.flags.contains(.userVerified) else { throw .userNotVerified }
        guard data.flags.contains(.backupEligible) || !data.flags.contains(.backedUp) else {
            throw .invalidBackupState
        }
    }

    /// Compares two byte strings in time that depends only on their lengths.
    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}

/// A COSE key made into swift-crypto's, refused when it is not a valid key (a point off the curve, a modulus
/// BoringSSL rejects).
private enum VerificationKey {
    case es256(P256.Signing.PublicKey)
    case rs256(_RSA.Signing.PublicKey)

    init(_ key: COSEKey) throws(WebAuthnError) {
        do {
            switch key {
            case .es256(let x, let y):
                self = .es256(try P256.Signing.PublicKey(x963Representation: [0x04] + x + y))
            case .rs256(let n, let e):
                self = .rs256(try _RSA.Signing.PublicKey(n: n, e: e))
            }
        } catch {
            throw .malformedPublicKey
        }
    }

    /// ES256 signatures are DER-encoded (WebAuthn L3 §6.5.5), RS256 ones PKCS #1 v1.5 over SHA-256.
    func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        switch self {
        case .es256(let key):
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: message)
        case .rs256(let key):
            return key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: message, padding: .insecurePKCS1v1_5)
        }
    }
}
