import Crypto
import Foundation
import GatehouseClient

/// A passkey authenticator in software, for tests, previews and Linux; on Apple platforms the system authenticator
/// is used. It makes discoverable ES256 passkeys, keeps them in memory, and answers with the W3C JSON a browser's
/// `toJSON()` gives (`RegistrationResponseJSON`, `AuthenticationResponseJSON`), which the server verifies as it
/// would a phone's.
public final class SoftwareAuthenticator: Sendable {
    /// The attestation a registration carries.
    public enum Attestation: Sendable {
        /// Format "none", an empty statement: what browsers send when the site does not ask for attestation.
        case none
        /// Format "packed" without a certificate: the statement is signed by the new credential's own key.
        case packedSelf
    }

    /// The origin written in the client data, "https://example.com".
    public let origin: String
    private let state: Locked<State>

    private struct State {
        var userVerification: Bool
        var signCountStep: UInt32
        var backupEligible: Bool
        var backedUp: Bool
        /// Oldest first.
        var credentials: [Credential]
    }

    /// A discoverable credential, as an authenticator keeps it.
    private struct Credential {
        let id: Data
        let rpID: String
        /// The user handle, returned with every assertion.
        let userID: Data
        let userName: String
        let key: P256.Signing.PrivateKey
        var signCount: UInt32
    }

    /// An authenticator for pages (or apps) of `origin`. `userVerification` false answers as a security key
    /// without a PIN would; `signCountStep` 0 as one that never counts (synced passkeys);
    /// `backupEligible` and `backedUp` as a synced passkey provider.
    public init(
        origin: String, userVerification: Bool = true, signCountStep: UInt32 = 1, backupEligible: Bool = false,
        backedUp: Bool = false
    ) {
        self.origin = origin
        state = Locked(
            State(
                userVerification: userVerification, signCountStep: signCountStep, backupEligible: backupEligible,
                backedUp: backedUp, credentials: []))
    }

    /// Whether it verifies the user (the UV flag).
    public var userVerification: Bool {
        get { state.withLock { $0.userVerification } }
        set { state.withLock { $0.userVerification = newValue } }
    }

    /// How much each assertion adds to the credential's counter; 0 for an authenticator that never counts.
    public var signCountStep: UInt32 {
        get { state.withLock { $0.signCountStep } }
        set { state.withLock { $0.signCountStep = newValue } }
    }

    /// Whether its passkeys may be synced (the BE flag).
    public var backupEligible: Bool {
        get { state.withLock { $0.backupEligible } }
        set { state.withLock { $0.backupEligible = newValue } }
    }

    /// Whether its passkeys are synced now (the BS flag).
    public var backedUp: Bool {
        get { state.withLock { $0.backedUp } }
        set { state.withLock { $0.backedUp = newValue } }
    }

    /// The ids of the credentials it holds, oldest first.
    public var credentialIDs: [Data] {
        state.withLock { $0.credentials.map(\.id) }
    }

    /// A credential's counter, the one its last answer carried.
    public func signCount(of credentialID: Data) -> UInt32? {
        state.withLock { $0.credentials.first { $0.id == credentialID }?.signCount }
    }

    /// Sets a credential's counter, to play a cloned authenticator (one whose counter is behind the server's).
    public func setSignCount(_ signCount: UInt32, of credentialID: Data) {
        state.withLock { state in
            guard let index = state.credentials.firstIndex(where: { $0.id == credentialID }) else { return }
            state.credentials[index].signCount = signCount
        }
    }

    /// `navigator.credentials.create()`: makes a passkey for `rpID` and the user, and returns the registration
    /// JSON. Refused when one of `excludeCredentialIDs` is already here for `rpID` (the browser's
    /// InvalidStateError), as the site asks so that one authenticator is not registered twice.
    public func makeCredential(
        rpID: String, challenge: Data, userID: Data, userName: String, excludeCredentialIDs: [Data] = [],
        attestation: Attestation = .none
    ) throws -> Data {
        try state.withLock { state in
            guard !state.credentials.contains(where: { $0.rpID == rpID && excludeCredentialIDs.contains($0.id) })
            else { throw SoftwareAuthenticatorError.credentialExcluded }
            var generator = SystemRandomNumberGenerator()
            let credential = Credential(
                id: Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }), rpID: rpID,
                userID: userID, userName: userName, key: P256.Signing.PrivateKey(), signCount: 0)

            let clientData = clientDataJSON(type: "webauthn.create", challenge: challenge)
            let publicKey = credential.key.publicKey.x963Representation
            let coseKey = CBOREncoder.encode(
                .map([
                    (.int(1), .int(2)),  // kty: EC2
                    (.int(3), .int(-7)),  // alg: ES256
                    (.int(-1), .int(1)),  // crv: P-256
                    (.int(-2), .bytes(Array(publicKey[1...32]))),
                    (.int(-3), .bytes(Array(publicKey[33...64]))),
                ]))
            var authenticatorData = header(rpID: rpID, state: state, attested: true, signCount: credential.signCount)
            authenticatorData += [UInt8](repeating: 0, count: 16)  // AAGUID: none given.
            authenticatorData += [UInt8(credential.id.count >> 8), UInt8(credential.id.count & 0xff)]
            authenticatorData += credential.id
            authenticatorData += coseKey

            let statement: CBOREncoder.Item
            switch attestation {
            case .none:
                statement = .map([])
            case .packedSelf:
                let signature = try credential.key.signature(for: authenticatorData + SHA256.hash(data: clientData))
                statement = .map([(.text("alg"), .int(-7)), (.text("sig"), .bytes(Array(signature.derRepresentation)))])
            }
            let attestationObject = CBOREncoder.encode(
                .map([
                    (.text("fmt"), .text(attestation == .none ? "none" : "packed")),
                    (.text("attStmt"), statement),
                    (.text("authData"), .bytes(authenticatorData)),
                ]))
            state.credentials.append(credential)

            return try Self.json(
                RegistrationJSON(
                    id: base64URL(credential.id), rawId: base64URL(credential.id),
                    response: .init(
                        clientDataJSON: base64URL(clientData), attestationObject: base64URL(Data(attestationObject)),
                        authenticatorData: base64URL(Data(authenticatorData)), transports: ["hybrid", "internal"],
                        publicKey: base64URL(credential.key.publicKey.derRepresentation), publicKeyAlgorithm: -7)))
        }
    }

    /// `navigator.credentials.get()`: signs `challenge` with the newest credential for `rpID` among
    /// `allowCredentialIDs` (any of its credentials for `rpID` when empty: a discoverable sign-in), and returns the
    /// assertion JSON with the user handle. The credential's counter grows by `signCountStep`.
    public func getAssertion(rpID: String, challenge: Data, allowCredentialIDs: [Data] = []) throws -> Data {
        try state.withLock { state in
            guard
                let index = state.credentials.lastIndex(where: {
                    $0.rpID == rpID && (allowCredentialIDs.isEmpty || allowCredentialIDs.contains($0.id))
                })
            else { throw SoftwareAuthenticatorError.noCredential }
            state.credentials[index].signCount &+= state.signCountStep
            let credential = state.credentials[index]

            let clientData = clientDataJSON(type: "webauthn.get", challenge: challenge)
            let authenticatorData = header(rpID: rpID, state: state, attested: false, signCount: credential.signCount)
            let signature = try credential.key.signature(for: authenticatorData + SHA256.hash(data: clientData))

            return try Self.json(
                AssertionJSON(
                    id: base64URL(credential.id), rawId: base64URL(credential.id),
                    response: .init(
                        clientDataJSON: base64URL(clientData), authenticatorData: base64URL(Data(authenticatorData)),
                        signature: base64URL(signature.derRepresentation), userHandle: base64URL(credential.userID))))
        }
    }

    /// The client data exactly as browsers write it (WebAuthn L3 §5.8.1.2: this key order, no spaces).
    private func clientDataJSON(type: String, challenge: Data) -> Data {
        let members = [("type", type), ("challenge", base64URL(challenge)), ("origin", origin)].map {
            Self.jsonString($0) + ":" + Self.jsonString($1)
        }
        return Data(("{" + members.joined(separator: ",") + ",\"crossOrigin\":false}").utf8)
    }

    /// The authenticator data up to the counter: rpIdHash, flags, counter.
    private func header(rpID: String, state: State, attested: Bool, signCount: UInt32) -> [UInt8] {
        var flags: UInt8 = 0x01  // UP: the user is always present.
        if state.userVerification { flags |= 0x04 }
        if state.backupEligible { flags |= 0x08 }
        if state.backedUp { flags |= 0x10 }
        if attested { flags |= 0x40 }
        return Array(SHA256.hash(data: Data(rpID.utf8))) + [flags]
            + withUnsafeBytes(of: signCount.bigEndian, Array.init)
    }

    /// A JSON string as WebAuthn's CCDToString writes it: `"` and `\` escaped, control characters as `\u00xx`.
    private static func jsonString(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\u{0}"..."\u{1f}":
                output += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    private static func json(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    /// `RegistrationResponseJSON` (WebAuthn L3 §5.1).
    private struct RegistrationJSON: Encodable {
        struct Response: Encodable {
            let clientDataJSON: String
            let attestationObject: String
            let authenticatorData: String
            let transports: [String]
            let publicKey: String
            let publicKeyAlgorithm: Int
        }
        let id: String
        let rawId: String
        let response: Response
        var type = "public-key"
        var authenticatorAttachment = "platform"
        var clientExtensionResults: [String: String] = [:]
    }

    /// `AuthenticationResponseJSON` (WebAuthn L3 §5.1).
    private struct AssertionJSON: Encodable {
        struct Response: Encodable {
            let clientDataJSON: String
            let authenticatorData: String
            let signature: String
            let userHandle: String
        }
        let id: String
        let rawId: String
        let response: Response
        var type = "public-key"
        var authenticatorAttachment = "platform"
        var clientExtensionResults: [String: String] = [:]
    }
}

/// Why the software authenticator refused, named after the browser's `DOMException`s.
public enum SoftwareAuthenticatorError: Error, Equatable, Sendable, LocalizedError {
    /// InvalidStateError: one of the excluded credentials is already here.
    case credentialExcluded
    /// NotAllowedError: no credential here for that relying party (and allow list).
    case noCredential

    public var errorDescription: String? {
        switch self {
        case .credentialExcluded: "This authenticator already holds one of the excluded credentials."
        case .noCredential: "This authenticator holds no credential for this site."
        }
    }
}

extension SoftwareAuthenticator: PasskeyAuthenticator {
    /// Makes a passkey as `makeCredential` does; an excluded credential here throws `credentialExcluded`.
    public func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data {
        do {
            return try makeCredential(
                rpID: request.relyingPartyID, challenge: request.challenge, userID: request.userID,
                userName: request.userName, excludeCredentialIDs: request.excludeCredentialIDs)
        } catch let error as SoftwareAuthenticatorError {
            throw error.passkeyError
        }
    }

    /// Signs as `getAssertion(rpID:challenge:allowCredentialIDs:)` does; no passkey here throws `noCredential`.
    public func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data {
        do {
            return try getAssertion(
                rpID: request.relyingPartyID, challenge: request.challenge,
                allowCredentialIDs: request.allowCredentialIDs)
        } catch let error as SoftwareAuthenticatorError {
            throw error.passkeyError
        }
    }
}

extension SoftwareAuthenticatorError {
    /// The same refusal as any authenticator says it.
    var passkeyError: PasskeyAuthenticatorError {
        switch self {
        case .credentialExcluded: .credentialExcluded
        case .noCredential: .noCredential
        }
    }
}
