import Foundation

/// Passkey ceremonies (WebAuthn Level 3), pure: this file parses what a browser or an app sends, `WebAuthn.swift`
/// checks it. Parsing needs nothing but Foundation and `CBOR.swift`, so the fuzzer compiles the three alone.
enum WebAuthn {
    /// The shortest and longest credential ids accepted (WebAuthn L3 §6.1: at least 16 bytes, at most 1023).
    static let credentialIDLengths = 16...1023
    /// The longest user handle (WebAuthn L3 §5.4.3: `user.id` is at most 64 bytes).
    static let maxUserHandleLength = 64

    /// Base64url (RFC 4648 §5) without padding, or with the exact padding; nothing else (no whitespace, no `+` or
    /// `/`, no stray bits in the last character), so each byte string has one spelling.
    static func base64URLDecoded(_ text: String) -> [UInt8]? {
        var characters = Array(text.utf8)
        if characters.last == UInt8(ascii: "=") {
            guard characters.count % 4 == 0 else { return nil }
            characters.removeLast()
            if characters.last == UInt8(ascii: "=") { characters.removeLast() }
        }
        guard characters.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for character in characters {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        guard buffer == 0 else { return nil }
        return bytes
    }
}

/// Why a passkey registration or sign-in was refused. `reason` is stable, for the audit log and the API's error
/// code; no case carries any of the input.
enum WebAuthnError: Error, Hashable, Sendable {
    /// The credential JSON: its shape, a base64url field, `id` and `rawId` that differ, an id's length, a `type`
    /// other than "public-key", or a credential id in the authenticator data other than `rawId`.
    case malformedCredential
    /// `clientDataJSON` is not the JSON object browsers write.
    case malformedClientData
    /// The authenticator data is too short, has bytes left over, or lacks (or has) the attested credential data.
    case malformedAuthenticatorData
    /// The attestation object, the credential's COSE key or the extensions are not CBOR the decoder accepts.
    case malformedCBOR(CBOR.Error)
    /// The COSE key lacks a field, has one of the wrong type or size, or is not a point on its curve.
    case malformedPublicKey
    /// The attestation statement is not the shape its format requires.
    case malformedAttestation
    /// `clientData.type` is not the ceremony's ("webauthn.create" or "webauthn.get").
    case wrongType
    case challengeMismatch
    case originNotAllowed
    /// The page that asked was embedded in another origin's frame.
    case crossOrigin
    /// The authenticator data's rpIdHash is not SHA-256 of the relying party's id.
    case rpIDMismatch
    case userNotPresent
    case userNotVerified
    /// The backed-up flag without the backup-eligible one, or a backup eligibility that changed since registration.
    case invalidBackupState
    /// A key algorithm other than ES256 (-7) and RS256 (-257).
    case unsupportedAlgorithm
    /// An attestation format or kind that is not verified: anything but `none` and `packed` self attestation.
    case unsupportedAttestation
    case badSignature
    /// The authenticator's counter did not grow: the credential may have been cloned.
    case signCountRegressed

    /// The stable code for logs and answers.
    var reason: String {
        switch self {
        case .malformedCredential: "malformed_credential"
        case .malformedClientData: "malformed_client_data"
        case .malformedAuthenticatorData: "malformed_authenticator_data"
        case .malformedCBOR: "malformed_cbor"
        case .malformedPublicKey: "malformed_public_key"
        case .malformedAttestation: "malformed_attestation"
        case .wrongType: "wrong_type"
        case .challengeMismatch: "challenge_mismatch"
        case .originNotAllowed: "origin_not_allowed"
        case .crossOrigin: "cross_origin"
        case .rpIDMismatch: "rp_id_mismatch"
        case .userNotPresent: "user_not_present"
        case .userNotVerified: "user_not_verified"
        case .invalidBackupState: "invalid_backup_state"
        case .unsupportedAlgorithm: "unsupported_algorithm"
        case .unsupportedAttestation: "unsupported_attestation"
        case .badSignature: "bad_signature"
        case .signCountRegressed: "sign_count_regressed"
        }
    }
}

extension WebAuthnError: CustomStringConvertible {
    var description: String {
        guard case .malformedCBOR(let error) = self else { return "passkey refused: \(reason)" }
        return "passkey refused: \(reason) (\(error))"
    }
}

/// An answer to `navigator.credentials.create()` in the W3C JSON form (`RegistrationResponseJSON`, what browsers'
/// `toJSON()`, supabase-js and supabase-swift send), its base64url fields decoded. Decodable, so it can sit in a
/// larger request body; `init(json:)` reads it alone.
struct RegistrationResponse: Decodable, Hashable, Sendable {
    let credentialID: [UInt8]
    let clientDataJSON: [UInt8]
    let attestationObject: [UInt8]
    /// The transports the client reported, only those WebAuthn L3 defines (§5.8.4), for `allowCredentials` hints.
    let transports: [String]
    /// "platform" or "cross-platform", when the client said.
    let authenticatorAttachment: String?

    /// The transports kept; others are dropped rather than stored.
    static let knownTransports: Set = ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"]

    init(json: Data) throws(WebAuthnError) {
        do { self = try JSONDecoder().decode(Self.self, from: json) } catch { throw .malformedCredential }
    }

    private enum CodingKeys: String, CodingKey {
        case id, rawId, type, response, authenticatorAttachment
    }

    private struct Response: Decodable {
        let clientDataJSON: String
        let attestationObject: String
        let transports: [String]?
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        credentialID = try decodeCredentialID(container, id: .id, rawId: .rawId, type: .type)
        let response = try container.decode(Response.self, forKey: .response)
        clientDataJSON = try base64URLField(response.clientDataJSON, container, .response)
        attestationObject = try base64URLField(response.attestationObject, container, .response)
        var transports: [String] = []
        for transport in response.transports ?? []
        where Self.knownTransports.contains(transport) && !transports.contains(transport) {
            transports.append(transport)
        }
        self.transports = transports
        authenticatorAttachment = try container.decodeIfPresent(String.self, forKey: .authenticatorAttachment)
            .flatMap { ["platform", "cross-platform"].contains($0) ? $0 : nil }
    }
}

/// An answer to `navigator.credentials.get()` in the W3C JSON form (`AuthenticationResponseJSON`), its base64url
/// fields decoded. The credential id picks the stored credential; the user handle, when sent, names its account.
struct AuthenticationResponse: Decodable, Hashable, Sendable {
    let credentialID: [UInt8]
    let clientDataJSON: [UInt8]
    let authenticatorData: [UInt8]
    let signature: [UInt8]
    /// The account's user handle (`user.id` at registration); nil when absent, null or empty.
    let userHandle: [UInt8]?

    init(json: Data) throws(WebAuthnError) {
        do { self = try JSONDecoder().decode(Self.self, from: json) } catch { throw .malformedCredential }
    }

    private enum CodingKeys: String, CodingKey {
        case id, rawId, type, response
    }

    private struct Response: Decodable {
        let clientDataJSON: String
        let authenticatorData: String
        let signature: String
        let userHandle: String?
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        credentialID = try decodeCredentialID(container, id: .id, rawId: .rawId, type: .type)
        let response = try container.decode(Response.self, forKey: .response)
        clientDataJSON = try base64URLField(response.clientDataJSON, container, .response)
        authenticatorData = try base64URLField(response.authenticatorData, container, .response)
        signature = try base64URLField(response.signature, container, .response)
        let userHandle = try response.userHandle.map { try base64URLField($0, container, .response) }
        guard (userHandle?.count ?? 0) <= WebAuthn.maxUserHandleLength else {
            throw DecodingError.dataCorruptedError(
                forKey: .response, in: container, debugDescription: "user handle too long")
        }
        self.userHandle = userHandle?.isEmpty == false ? userHandle : nil
    }
}

/// The fields both answers share: `type` is "public-key", `id` and `rawId` are the same credential id, of an
/// allowed length.
private func decodeCredentialID<Key: CodingKey>(
    _ container: KeyedDecodingContainer<Key>, id: Key, rawId: Key, type: Key
) throws -> [UInt8] {
    guard try container.decode(String.self, forKey: type) == "public-key" else {
        throw DecodingError.dataCorruptedError(forKey: type, in: container, debugDescription: "not public-key")
    }
    let rawID = try base64URLField(container.decode(String.self, forKey: rawId), container, rawId)
    // Compared decoded, so that one padded and one unpadded spelling of the same bytes agree.
    guard try base64URLField(container.decode(String.self, forKey: id), container, id) == rawID,
        WebAuthn.credentialIDLengths.contains(rawID.count)
    else {
        throw DecodingError.dataCorruptedError(forKey: id, in: container, debugDescription: "bad credential id")
    }
    return rawID
}

private func base64URLField<Key: CodingKey>(
    _ text: String, _ container: KeyedDecodingContainer<Key>, _ key: Key
) throws -> [UInt8] {
    guard let bytes = WebAuthn.base64URLDecoded(text) else {
        throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not base64url")
    }
    return bytes
}

/// `clientDataJSON`, the browser's record of the ceremony that the authenticator signs (WebAuthn L3 §5.8.1).
struct ClientData: Hashable, Sendable {
    /// "webauthn.create" or "webauthn.get".
    let type: String
    let challenge: [UInt8]
    /// The page's origin (`https://example.com`), or an app's (`android:apk-key-hash:…`).
    let origin: String
    /// True when the page that asked was in a frame of another origin.
    let crossOrigin: Bool

    private struct Wire: Decodable {
        let type: String
        let challenge: String
        let origin: String
        let crossOrigin: Bool?
    }

    init(json: [UInt8]) throws(WebAuthnError) {
        let wire: Wire
        do { wire = try JSONDecoder().decode(Wire.self, from: Data(json)) } catch { throw .malformedClientData }
        guard let challenge = WebAuthn.base64URLDecoded(wire.challenge) else { throw .malformedClientData }
        type = wire.type
        self.challenge = challenge
        origin = wire.origin
        crossOrigin = wire.crossOrigin ?? false
    }
}

/// A credential's public key as COSE sends it (RFC 9052 §7, RFC 9053), for the two algorithms accepted: those
/// every platform authenticator offers.
enum COSEKey: Hashable, Sendable {
    /// ECDSA over P-256 with SHA-256 (COSE alg -7): the point's coordinates, 32 bytes each.
    case es256(x: [UInt8], y: [UInt8])
    /// RSASSA-PKCS1-v1_5 with SHA-256 (COSE alg -257): modulus and public exponent, big-endian.
    case rs256(n: [UInt8], e: [UInt8])

    static let es256Algorithm = -7
    static let rs256Algorithm = -257
    /// RSA moduli accepted: 2048 bits at least (weaker keys are refused), 16384 at most (BoringSSL's limit).
    static let rsaModulusBits = 2048...16384

    /// The COSE algorithm number.
    var algorithm: Int {
        switch self {
        case .es256: Self.es256Algorithm
        case .rs256: Self.rs256Algorithm
        }
    }

    /// The key encoded in `bytes`, which hold nothing else (a stored credential's key).
    init(bytes: [UInt8]) throws(WebAuthnError) {
        let key: CBOR
        do throws(CBOR.Error) { key = try CBOR.decode(bytes) } catch { throw .malformedCBOR(error) }
        try self.init(key)
    }

    init(_ key: CBOR) throws(WebAuthnError) {
        guard key.mapPairs != nil, let kty = key[int: 1]?.intValue, let alg = key[int: 3]?.intValue else {
            throw .malformedPublicKey
        }
        switch alg {
        case Self.es256Algorithm:
            // kty 2 is EC2, crv 1 is P-256.
            guard kty == 2, key[int: -1]?.intValue == 1, let x = key[int: -2]?.bytesValue,
                let y = key[int: -3]?.bytesValue, x.count == 32, y.count == 32
            else { throw .malformedPublicKey }
            self = .es256(x: x, y: y)
        case Self.rs256Algorithm:
            // kty 3 is RSA.
            guard kty == 3, let n = key[int: -1]?.bytesValue, let e = key[int: -2]?.bytesValue, !e.isEmpty,
                Self.rsaModulusBits.contains(Self.bitLength(n))
            else { throw .malformedPublicKey }
            self = .rs256(n: n, e: e)
        default:
            throw .unsupportedAlgorithm
        }
    }

    /// The bit length of a big-endian unsigned integer.
    private static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.count - first - 1) * 8 + (8 - bytes[first].leadingZeroBitCount)
    }
}

/// The authenticator data (WebAuthn L3 §6.1): the relying party's hash, the flags, the counter, and at
/// registration the new credential and its key.
struct AuthenticatorData: Hashable, Sendable {
    /// The flags byte.
    struct Flags: OptionSet, Hashable, Sendable {
        let rawValue: UInt8
        static let userPresent = Flags(rawValue: 0x01)
        static let userVerified = Flags(rawValue: 0x04)
        static let backupEligible = Flags(rawValue: 0x08)
        static let backedUp = Flags(rawValue: 0x10)
        static let attestedCredentialData = Flags(rawValue: 0x40)
        static let extensionData = Flags(rawValue: 0x80)
    }

    /// The credential a registration creates.
    struct AttestedCredential: Hashable, Sendable {
        /// The authenticator model's id, 16 bytes (zeros when it does not say).
        let aaguid: [UInt8]
        let credentialID: [UInt8]
        let publicKey: COSEKey
        /// The key's COSE bytes as sent, what the store keeps.
        let publicKeyBytes: [UInt8]
    }

    let rpIDHash: [UInt8]
    let flags: Flags
    let signCount: UInt32
    let attestedCredential: AttestedCredential?
    /// The authenticator's extension outputs, a CBOR map, when the ED flag is set.
    let extensions: CBOR?

    init(bytes: [UInt8]) throws(WebAuthnError) {
        var reader = bytes[...]
        func take(_ count: Int) throws(WebAuthnError) -> [UInt8] {
            guard reader.count >= count else { throw .malformedAuthenticatorData }
            defer { reader = reader.dropFirst(count) }
            return Array(reader.prefix(count))
        }
        func cbor() throws(WebAuthnError) -> (value: CBOR, bytes: [UInt8]) {
            do throws(CBOR.Error) {
                let (value, length) = try CBOR.decodePrefix(reader)
                defer { reader = reader.dropFirst(length) }
                return (value, Array(reader.prefix(length)))
            } catch {
                throw .malformedCBOR(error)
            }
        }

        rpIDHash = try take(32)
        flags = Flags(rawValue: try take(1)[0])
        signCount = try take(4).reduce(0) { $0 << 8 | UInt32($1) }
        if flags.contains(.attestedCredentialData) {
            let aaguid = try take(16)
            let length = try take(2).reduce(0) { $0 << 8 | Int($1) }
            guard WebAuthn.credentialIDLengths.contains(length) else { throw .malformedAuthenticatorData }
            let credentialID = try take(length)
            let key = try cbor()
            attestedCredential = AttestedCredential(
                aaguid: aaguid, credentialID: credentialID, publicKey: try COSEKey(key.value),
                publicKeyBytes: key.bytes)
        } else {
            attestedCredential = nil
        }
        if flags.contains(.extensionData) {
            let extensions = try cbor().value
            guard extensions.mapPairs != nil else { throw .malformedAuthenticatorData }
            self.extensions = extensions
        } else {
            extensions = nil
        }
        guard reader.isEmpty else { throw .malformedAuthenticatorData }
    }
}

/// The attestation object a registration returns (WebAuthn L3 §6.5): the statement's format, the statement,
/// and the authenticator data.
struct AttestationObject: Hashable, Sendable {
    /// "none", "packed", "tpm", … (the IANA registry of WebAuthn attestation formats).
    let format: String
    /// The statement, a map whose fields depend on the format.
    let statement: CBOR
    /// The authenticator data's bytes, which a packed statement signs.
    let authenticatorDataBytes: [UInt8]
    let authenticatorData: AuthenticatorData

    init(bytes: [UInt8]) throws(WebAuthnError) {
        let object: CBOR
        do throws(CBOR.Error) { object = try CBOR.decode(bytes) } catch { throw .malformedCBOR(error) }
        guard let format = object[text: "fmt"]?.textValue, let statement = object[text: "attStmt"],
            statement.mapPairs != nil, let authenticatorData = object[text: "authData"]?.bytesValue
        else { throw .malformedAttestation }
        self.format = format
        self.statement = statement
        authenticatorDataBytes = authenticatorData
        self.authenticatorData = try AuthenticatorData(bytes: authenticatorData)
    }
}
