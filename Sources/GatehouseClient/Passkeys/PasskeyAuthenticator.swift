import ExtrasBase64
import Foundation
import GatehouseClientAPI
import OpenAPIRuntime

/// Makes and uses passkeys for the SDK: the system's on Apple platforms (`PlatformPasskeyAuthenticator`), or
/// `SoftwareAuthenticator` in tests, previews and on Linux. The SDK asks the server for a challenge, hands it to the
/// authenticator, and sends back what the authenticator answers.
public protocol PasskeyAuthenticator: Sendable {
    /// Makes a passkey for the request's relying party and user (`navigator.credentials.create()`), refusing when it
    /// holds one of the excluded credentials, and answers the W3C `RegistrationResponseJSON` as UTF-8 bytes.
    func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data

    /// Signs the request's challenge with one of its passkeys for the relying party (`navigator.credentials.get()`),
    /// one of the allowed ones when any are listed, and answers the W3C `AuthenticationResponseJSON` as UTF-8 bytes.
    func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data
}

/// What a passkey registration asks of the authenticator: the server's creation options, decoded.
public struct PasskeyRegistrationRequest: Sendable, Equatable {
    /// The domain the passkey is bound to (`rp.id`).
    public let relyingPartyID: String
    /// The server's one-time challenge.
    public let challenge: Data
    /// The user handle the passkey keeps and answers with every assertion (`user.id`).
    public let userID: Data
    /// The account name the authenticator shows (`user.name`).
    public let userName: String
    /// The friendlier name the authenticator may show (`user.displayName`).
    public let userDisplayName: String
    /// Passkeys already registered for this user: an authenticator holding one of them refuses.
    public let excludeCredentialIDs: [Data]
    /// Whether the user must be verified (biometrics or passcode), not only present.
    public let requiresUserVerification: Bool

    /// A request as given (for custom authenticators and tests).
    public init(
        relyingPartyID: String, challenge: Data, userID: Data, userName: String, userDisplayName: String,
        excludeCredentialIDs: [Data] = [], requiresUserVerification: Bool = true
    ) {
        self.relyingPartyID = relyingPartyID
        self.challenge = challenge
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.excludeCredentialIDs = excludeCredentialIDs
        self.requiresUserVerification = requiresUserVerification
    }

    init(_ wire: Components.Schemas.PublicKeyCredentialCreationOptions) throws(GatehouseError) {
        self.init(
            relyingPartyID: wire.rp.id, challenge: try PasskeyWire.bytes(wire.challenge, "challenge"),
            userID: try PasskeyWire.bytes(wire.user.id, "user.id"), userName: wire.user.name,
            userDisplayName: wire.user.displayName,
            excludeCredentialIDs: try wire.excludeCredentials.map { descriptor throws(GatehouseError) in
                try PasskeyWire.bytes(descriptor.id, "excludeCredentials")
            },
            requiresUserVerification: wire.authenticatorSelection.userVerification == "required")
    }
}

/// What a passkey sign-in or company login asks of the authenticator: the server's request options, decoded.
public struct PasskeyAssertionRequest: Sendable, Equatable {
    /// The domain the passkey is bound to (`rpId`).
    public let relyingPartyID: String
    /// The server's one-time challenge.
    public let challenge: Data
    /// The passkeys that may answer; empty for a sign-in where the passkey names its user.
    public let allowCredentialIDs: [Data]
    /// Whether the user must be verified (biometrics or passcode), not only present.
    public let requiresUserVerification: Bool

    /// A request as given (for custom authenticators and tests).
    public init(
        relyingPartyID: String, challenge: Data, allowCredentialIDs: [Data] = [], requiresUserVerification: Bool = true
    ) {
        self.relyingPartyID = relyingPartyID
        self.challenge = challenge
        self.allowCredentialIDs = allowCredentialIDs
        self.requiresUserVerification = requiresUserVerification
    }

    init(_ wire: Components.Schemas.PublicKeyCredentialRequestOptions) throws(GatehouseError) {
        self.init(
            relyingPartyID: wire.rpId, challenge: try PasskeyWire.bytes(wire.challenge, "challenge"),
            allowCredentialIDs: try wire.allowCredentials.map { descriptor throws(GatehouseError) in
                try PasskeyWire.bytes(descriptor.id, "allowCredentials")
            },
            requiresUserVerification: wire.userVerification == "required")
    }
}

/// Why an authenticator gave no passkey. Authenticators throw it; the SDK hands it on as
/// `GatehouseError.authenticator`.
public enum PasskeyAuthenticatorError: Error, Sendable, Equatable, LocalizedError {
    /// The user dismissed the passkey sheet (or the task was cancelled): usually nothing to show.
    case cancelled
    /// The authenticator holds one of the excluded passkeys: this account (or company) has a passkey here already.
    case credentialExcluded
    /// The authenticator holds no passkey for this server (among the allowed ones).
    case noCredential
    /// Anything else, with the authenticator's own description.
    case failed(String)

    public var errorDescription: String? {
        switch self {
        case .cancelled: "The passkey request was cancelled."
        case .credentialExcluded: "This device already has a passkey for this account."
        case .noCredential: "This device has no passkey for this account."
        case .failed(let reason): "The passkey request failed: \(reason)"
        }
    }
}

/// Runs one request of an authenticator the app supplied (a passkey's, Apple's sheet, a browser's sign-in page) and
/// answers what it gave; what it throws becomes `GatehouseError.authenticator` (a cancelled task is `.cancelled`).
func askAuthenticator<Answer>(_ request: () async throws -> Answer) async throws(GatehouseError) -> Answer {
    do {
        return try await request()
    } catch let error as PasskeyAuthenticatorError {
        throw .authenticator(error)
    } catch let error as GatehouseError {
        throw error
    } catch is CancellationError {
        throw .authenticator(.cancelled)
    } catch {
        throw .authenticator(.failed((error as? LocalizedError)?.errorDescription ?? String(describing: error)))
    }
}

/// A passkey of the account, or of the account's member in one company.
public struct Passkey: Sendable, Equatable, Identifiable {
    /// The passkey's id (for `renamePasskey`, `deletePasskey`).
    public let id: String
    /// The name it is listed under (the server names new ones; the user may rename account passkeys).
    public let name: String
    /// When it was registered.
    public let createdAt: Date
    /// When it last signed in, if ever.
    public let lastUsedAt: Date?
    /// Whether its authenticator backs it up (a synced passkey, as iCloud Keychain's): it outlives this device.
    public let isSynced: Bool

    /// A passkey as the server would list it (for previews and tests).
    public init(id: String, name: String, createdAt: Date = Date(), lastUsedAt: Date? = nil, isSynced: Bool = false) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.isSynced = isSynced
    }

    init(_ wire: Components.Schemas.Passkey) {
        self.init(
            id: wire.id, name: wire.friendlyName, createdAt: wire.createdAt, lastUsedAt: wire.lastUsedAt,
            isSynced: wire.backedUp)
    }
}

extension GatehouseError.Code {
    /// Passkeys are off on this server.
    public static let passkeyDisabled = Self(rawValue: "passkey_disabled")
    /// The ceremony's challenge is unknown, spent, or another account's: start again.
    public static let webauthnChallengeNotFound = Self(rawValue: "webauthn_challenge_not_found")
    /// The ceremony took longer than five minutes: start again.
    public static let webauthnChallengeExpired = Self(rawValue: "webauthn_challenge_expired")
    /// The server refused the authenticator's answer (origin, relying party, signature, user verification, …).
    public static let webauthnVerificationFailed = Self(rawValue: "webauthn_verification_failed")
    /// The passkey is not registered here (deleted, or another company's).
    public static let webauthnCredentialNotFound = Self(rawValue: "webauthn_credential_not_found")
    /// The passkey is registered already.
    public static let webauthnCredentialExists = Self(rawValue: "webauthn_credential_exists")
    /// The account (or the member in this company) has ten passkeys already.
    public static let tooManyPasskeys = Self(rawValue: "too_many_passkeys")
}

/// The wire's side of a ceremony: base64url fields in, the authenticator's JSON out.
enum PasskeyWire {
    /// A base64url field of the server's options; malformed, the answer is as unreadable as any other.
    static func bytes(_ text: String, _ field: String) throws(GatehouseError) -> Data {
        guard let data = base64URLDecoded(text) else {
            throw .network("The server's passkey options carry a malformed \(field)")
        }
        return data
    }

    /// Runs the authenticator and reads its answer as the JSON object the server takes; what it throws becomes
    /// `GatehouseError.authenticator`.
    static func credential(
        _ authenticate: () async throws -> Data
    ) async throws(GatehouseError) -> Components.Schemas.PasskeyVerifyRequest.CredentialPayload {
        let json = try await askAuthenticator(authenticate)
        do {
            return .init(additionalProperties: try JSONDecoder().decode(OpenAPIObjectContainer.self, from: json))
        } catch {
            throw .authenticator(.failed("The authenticator's answer is not a JSON object"))
        }
    }

    /// `RegistrationResponseJSON` (WebAuthn L3 §5.1) from an authenticator's raw fields.
    static func registration(
        credentialID: Data, clientDataJSON: Data, attestationObject: Data, transports: [String], attachment: String
    ) throws -> Data {
        try json(
            Credential(
                id: base64URL(credentialID), rawId: base64URL(credentialID),
                response: .init(
                    clientDataJSON: base64URL(clientDataJSON), attestationObject: base64URL(attestationObject),
                    transports: transports),
                authenticatorAttachment: attachment))
    }

    /// `AuthenticationResponseJSON` (WebAuthn L3 §5.1) from an authenticator's raw fields.
    static func assertion(
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?,
        attachment: String
    ) throws -> Data {
        try json(
            Credential(
                id: base64URL(credentialID), rawId: base64URL(credentialID),
                response: .init(
                    clientDataJSON: base64URL(clientDataJSON), authenticatorData: base64URL(authenticatorData),
                    signature: base64URL(signature), userHandle: userHandle.map(base64URL)),
                authenticatorAttachment: attachment))
    }

    private static func json(_ credential: Credential) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(credential)
    }

    /// A `PublicKeyCredential` as `toJSON()` writes it; absent fields are left out.
    private struct Credential: Encodable {
        struct Response: Encodable {
            let clientDataJSON: String
            var attestationObject: String?
            var transports: [String]?
            var authenticatorData: String?
            var signature: String?
            var userHandle: String?
        }
        let id: String
        let rawId: String
        let response: Response
        var type = "public-key"
        let authenticatorAttachment: String
        var clientExtensionResults: [String: String] = [:]
    }
}

/// The bytes of a base64url text (padded or not); nil when it is not base64url.
func base64URLDecoded(_ text: String) -> Data? {
    (try? Base64.decode(string: text, options: [.base64UrlAlphabet, .omitPaddingCharacter])).map { Data($0) }
}
