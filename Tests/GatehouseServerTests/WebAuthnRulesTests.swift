import Crypto
import CryptoExtras
import Foundation
import GatehouseClient
import GatehouseClientTesting
import Testing

@testable import GatehouseServer

/// The passkey checks, pure: registrations and sign-ins made by the SDK's software authenticator (ES256) and by
/// an RS256 one written here, each accepted, and each kind of forgery refused with its own error.
@Suite("WebAuthn rules")
struct WebAuthnRulesTests {
    static let relyingParty = RelyingParty(
        id: "example.com", origins: ["https://example.com", "https://app.example.com"], name: "Example")
    static let origin = "https://example.com"

    let challenge = randomBytes(32)
    let userID = Data(randomBytes(16))

    // MARK: Registration

    @Test("A registration with attestation none is accepted, and gives what to store")
    func registration() throws {
        let authenticator = SoftwareAuthenticator(origin: Self.origin)
        let verified = try verifyRegistration(register(authenticator))
        #expect(verified.credentialID == Array(try #require(authenticator.credentialIDs.first)))
        #expect(verified.algorithm == -7)
        #expect(try COSEKey(bytes: verified.publicKey).algorithm == -7)
        #expect(verified.signCount == 0)
        #expect(verified.aaguid == [UInt8](repeating: 0, count: 16))
        #expect(verified.userVerified)
        #expect(!verified.backupEligible && !verified.backedUp)
        #expect(verified.transports == ["hybrid", "internal"])
        #expect(verified.attestationFormat == "none")
    }

    @Test("Packed self attestation is accepted, and refused when its signature or algorithm is wrong")
    func packedSelfAttestation() throws {
        let authenticator = SoftwareAuthenticator(origin: Self.origin)
        let json = try register(authenticator, attestation: .packedSelf)
        #expect(try verifyRegistration(json).attestationFormat == "packed")

        let tampered = try editingStatement(json) { statement in
            var signature = try #require(statement[text: "sig"]?.bytesValue)
            signature[signature.count - 1] ^= 0x01
            return statement.setting(.text("sig"), to: .bytes(signature))
        }
        #expect(throws: WebAuthnError.badSignature) { try verifyRegistration(tampered) }
        let otherAlgorithm = try editingStatement(json) { $0.setting(.text("alg"), to: .int(-257)) }
        #expect(throws: WebAuthnError.malformedAttestation) { try verifyRegistration(otherAlgorithm) }
        let extraField = try editingStatement(json) { $0.setting(.text("extra"), to: .null) }
        #expect(throws: WebAuthnError.malformedAttestation) { try verifyRegistration(extraField) }
    }

    @Test("Packed attestation with a certificate chain, and other formats, are refused")
    func unsupportedAttestation() throws {
        let authenticator = SoftwareAuthenticator(origin: Self.origin)
        let packed = try register(authenticator, attestation: .packedSelf)
        let withChain = try editingStatement(packed) { $0.setting(.text("x5c"), to: .array([.bytes([0x30, 0x00])])) }
        #expect(throws: WebAuthnError.unsupportedAttestation) { try verifyRegistration(withChain) }
        for format in ["tpm", "fido-u2f", "android-key", "apple", "nonsense"] {
            let other = try editingAttestation(packed) { $0.setting(.text("fmt"), to: .text(format)) }
            #expect(throws: WebAuthnError.unsupportedAttestation) { try verifyRegistration(other) }
        }
        let noneWithStatement = try editingAttestation(register(SoftwareAuthenticator(origin: Self.origin))) {
            $0.setting(.text("attStmt"), to: .mapOf([.text("alg"): .int(-7)]))
        }
        #expect(throws: WebAuthnError.malformedAttestation) { try verifyRegistration(noneWithStatement) }
    }

    @Test("An RS256 registration and sign-in are accepted")
    func rs256() throws {
        let authenticator = try RSAAuthenticator()
        let none = try verifyRegistration(authenticator.registration(challenge: challenge))
        #expect(none.algorithm == -257)
        let packed = try verifyRegistration(authenticator.registration(challenge: challenge, format: "packed"))
        #expect(packed.attestationFormat == "packed")

        let stored = StoredCredential(publicKey: packed.publicKey, algorithm: packed.algorithm, signCount: 0)
        let verified = try verifyAssertion(authenticator.assertion(challenge: challenge, signCount: 7), stored)
        #expect(verified.newSignCount == 7)
        let forged = try authenticator.assertion(challenge: challenge, signCount: 8, tamperSignature: true)
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(forged, stored) }
    }

    @Test("Client data of the wrong ceremony, challenge or origin, or from a frame, is refused")
    func registrationClientData() throws {
        let json = try register(SoftwareAuthenticator(origin: Self.origin))
        let wrongType = try editingClientData(json) {
            $0.replacingOccurrences(of: "webauthn.create", with: "webauthn.get")
        }
        #expect(throws: WebAuthnError.wrongType) { try verifyRegistration(wrongType) }
        #expect(throws: WebAuthnError.challengeMismatch) { try verifyRegistration(json, challenge: randomBytes(32)) }
        #expect(throws: WebAuthnError.challengeMismatch) { try verifyRegistration(json, challenge: []) }
        let framed = try editingClientData(json) { $0.replacingOccurrences(of: "false", with: "true") }
        #expect(throws: WebAuthnError.crossOrigin) { try verifyRegistration(framed) }
        let notJSON = try editingResponse(json, "clientDataJSON") { $0 = Array("webauthn.create".utf8) }
        #expect(throws: WebAuthnError.malformedClientData) { try verifyRegistration(notJSON) }

        for origin in [
            "https://evil.example", "http://example.com", "https://example.com:8443", "https://example.com/",
        ] {
            let elsewhere = try register(SoftwareAuthenticator(origin: origin))
            #expect(throws: WebAuthnError.originNotAllowed) { try verifyRegistration(elsewhere) }
        }
        let otherAllowedOrigin = try register(SoftwareAuthenticator(origin: "https://app.example.com"))
        _ = try verifyRegistration(otherAllowedOrigin)
    }

    @Test("A passkey for another relying party, or made without the user, is refused")
    func registrationAuthenticatorData() throws {
        let otherRP = try register(SoftwareAuthenticator(origin: Self.origin), rpID: "evil.example")
        #expect(throws: WebAuthnError.rpIDMismatch) { try verifyRegistration(otherRP) }

        let json = try register(SoftwareAuthenticator(origin: Self.origin))
        let absent = try editingAuthenticatorData(json) { $0[32] &= ~0x01 }
        #expect(throws: WebAuthnError.userNotPresent) { try verifyRegistration(absent) }

        let unverified = try register(SoftwareAuthenticator(origin: Self.origin, userVerification: false))
        #expect(throws: WebAuthnError.userNotVerified) { try verifyRegistration(unverified) }
        #expect(try verifyRegistration(unverified, requireUserVerification: false).userVerified == false)
    }

    @Test("Backup flags are recorded; backed up without backup eligible is refused")
    func backupFlags() throws {
        let synced = SoftwareAuthenticator(origin: Self.origin, backupEligible: true, backedUp: true)
        let verified = try verifyRegistration(register(synced))
        #expect(verified.backupEligible && verified.backedUp)
        let inconsistent = SoftwareAuthenticator(origin: Self.origin, backupEligible: false, backedUp: true)
        #expect(throws: WebAuthnError.invalidBackupState) { try verifyRegistration(register(inconsistent)) }
    }

    @Test("Keys of other algorithms, or not valid keys, are refused")
    func publicKeys() throws {
        let ed25519 = CBOR.mapOf([
            .int(1): .int(1), .int(3): .int(-8), .int(-1): .int(6), .int(-2): .bytes(randomBytes(32)),
        ])
        #expect(throws: WebAuthnError.unsupportedAlgorithm) { try verifyRegistration(forgedRegistration(key: ed25519)) }
        let ps256 = try RSAAuthenticator().coseKey.setting(.int(3), to: .int(-37))
        #expect(throws: WebAuthnError.unsupportedAlgorithm) { try verifyRegistration(forgedRegistration(key: ps256)) }

        let offCurve = es256Key(x: [UInt8](repeating: 1, count: 32), y: [UInt8](repeating: 1, count: 32))
        #expect(throws: WebAuthnError.malformedPublicKey) { try verifyRegistration(forgedRegistration(key: offCurve)) }
        let shortX = es256Key(x: randomBytes(31), y: randomBytes(32))
        #expect(throws: WebAuthnError.malformedPublicKey) { try verifyRegistration(forgedRegistration(key: shortX)) }
        let wrongCurve = validES256Key().setting(.int(-1), to: .int(2))
        #expect(throws: WebAuthnError.malformedPublicKey) {
            try verifyRegistration(forgedRegistration(key: wrongCurve))
        }
        let wrongKeyType = validES256Key().setting(.int(1), to: .int(3))
        #expect(throws: WebAuthnError.malformedPublicKey) {
            try verifyRegistration(forgedRegistration(key: wrongKeyType))
        }
        let rsa1024 = CBOR.mapOf([
            .int(1): .int(3), .int(3): .int(-257), .int(-1): .bytes([0xc1] + randomBytes(127)),
            .int(-2): .bytes([1, 0, 1]),
        ])
        #expect(throws: WebAuthnError.malformedPublicKey) { try verifyRegistration(forgedRegistration(key: rsa1024)) }
        #expect(throws: WebAuthnError.malformedPublicKey) { try COSEKey(rsa1024) }
        _ = try verifyRegistration(forgedRegistration(key: validES256Key()))
    }

    @Test("Authenticator data: extensions are read, anything malformed around them is refused")
    func authenticatorDataLayout() throws {
        let key = validES256Key()
        let extensions = CBOR.mapOf([.text("credProtect"): .int(2)]).encoded
        _ = try verifyRegistration(forgedRegistration(key: key, flags: 0x45 | 0x80, after: extensions))
        // ED set, no extensions; extensions that are not a map; bytes after the key with ED clear.
        #expect(throws: WebAuthnError.malformedCBOR(.truncated)) {
            try verifyRegistration(forgedRegistration(key: key, flags: 0x45 | 0x80))
        }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) {
            try verifyRegistration(forgedRegistration(key: key, flags: 0x45 | 0x80, after: [0x01]))
        }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) {
            try verifyRegistration(forgedRegistration(key: key, after: extensions))
        }
        // No attested credential data in a registration.
        #expect(throws: WebAuthnError.malformedAuthenticatorData) {
            try verifyRegistration(forgedRegistration(key: key, flags: 0x05))
        }
        let json = try register(SoftwareAuthenticator(origin: Self.origin))
        let short = try editingAuthenticatorData(json) { $0.removeLast($0.count - 36) }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) { try verifyRegistration(short) }
        let keyCut = try editingAuthenticatorData(json) { $0.removeLast() }
        #expect(throws: WebAuthnError.malformedCBOR(.truncated)) { try verifyRegistration(keyCut) }
    }

    @Test("The credential JSON: id and rawId agree and match the authenticator data, and everything is base64url")
    func credentialJSON() throws {
        let json = try register(SoftwareAuthenticator(origin: Self.origin))
        let otherID = try editingJSON(json) { $0["id"] = base64URL(randomBytes(32)) }
        #expect(throws: WebAuthnError.malformedCredential) { try verifyRegistration(otherID) }
        let otherCredential = try editingJSON(json) {
            let id = base64URL(randomBytes(32))
            $0["id"] = id
            $0["rawId"] = id
        }
        #expect(throws: WebAuthnError.malformedCredential) { try verifyRegistration(otherCredential) }
        let shortID = try editingJSON(json) {
            let id = base64URL(randomBytes(15))
            $0["id"] = id
            $0["rawId"] = id
        }
        #expect(throws: WebAuthnError.malformedCredential) { try verifyRegistration(shortID) }
        let password = try editingJSON(json) { $0["type"] = "password" }
        #expect(throws: WebAuthnError.malformedCredential) { try verifyRegistration(password) }
        for bad in ["not base64!", "AAAA+/", "AA=A", "A", "AB", "QQ=", "QR=="] {
            let malformed = try editingJSON(json) {
                var response = $0["response"] as! [String: Any]
                response["clientDataJSON"] = bad
                $0["response"] = response
            }
            #expect(throws: WebAuthnError.malformedCredential) { try verifyRegistration(malformed) }
        }
        #expect(throws: WebAuthnError.malformedCredential) { try RegistrationResponse(json: Data("{}".utf8)) }
        #expect(throws: WebAuthnError.malformedCredential) { try RegistrationResponse(json: Data("[1]".utf8)) }

        // Padding is accepted, and what supabase-swift sends (no transports, attachment or extension results).
        let padded = try editingJSON(json) {
            let raw = $0["rawId"] as! String
            $0["id"] = raw + String(repeating: "=", count: (4 - raw.count % 4) % 4)
            $0.removeValue(forKey: "clientExtensionResults")
            $0.removeValue(forKey: "authenticatorAttachment")
            var response = $0["response"] as! [String: Any]
            response.removeValue(forKey: "transports")
            $0["response"] = response
        }
        #expect(try verifyRegistration(padded).transports.isEmpty)
    }

    @Test("Attestation objects that are not strict CBOR are refused")
    func malformedCBOR() throws {
        let json = try register(SoftwareAuthenticator(origin: Self.origin))
        let cut = try editingResponse(json, "attestationObject") { $0.removeLast() }
        #expect(throws: WebAuthnError.malformedCBOR(.truncated)) { try verifyRegistration(cut) }
        let empty = try editingResponse(json, "attestationObject") { $0 = [] }
        #expect(throws: WebAuthnError.malformedCBOR(.truncated)) { try verifyRegistration(empty) }
        let indefinite = try editingResponse(json, "attestationObject") { $0[0] = 0xbf }
        #expect(throws: WebAuthnError.malformedCBOR(.indefiniteLength)) { try verifyRegistration(indefinite) }
        let trailing = try editingResponse(json, "attestationObject") { $0.append(0) }
        #expect(throws: WebAuthnError.malformedCBOR(.trailingBytes)) { try verifyRegistration(trailing) }
        let notAMap = try editingResponse(json, "attestationObject") { $0 = [0x80] }
        #expect(throws: WebAuthnError.malformedAttestation) { try verifyRegistration(notAMap) }
    }

    // MARK: Sign-in

    @Test("A sign-in is accepted; the counter grows and the user handle names the account")
    func assertion() throws {
        var passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        for expected: UInt32 in 1...3 {
            let json = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
            #expect(try AuthenticationResponse(json: json).userHandle == Array(userID))
            let verified = try verifyAssertion(json, passkey.stored)
            #expect(verified.newSignCount == expected)
            #expect(verified.userVerified)
            passkey.stored.signCount = verified.newSignCount
        }
    }

    @Test("A sign-in with the wrong ceremony, challenge, origin, frame, relying party or user is refused")
    func assertionRefusals() throws {
        let passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        let json = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        let wrongType = try editingClientData(json) {
            $0.replacingOccurrences(of: "webauthn.get", with: "webauthn.create")
        }
        #expect(throws: WebAuthnError.wrongType) { try verifyAssertion(wrongType, passkey.stored) }
        #expect(throws: WebAuthnError.challengeMismatch) {
            try verifyAssertion(json, passkey.stored, challenge: randomBytes(32))
        }
        let framed = try editingClientData(json) { $0.replacingOccurrences(of: "false", with: "true") }
        #expect(throws: WebAuthnError.crossOrigin) { try verifyAssertion(framed, passkey.stored) }
        let elsewhere = try editingClientData(json) {
            $0.replacingOccurrences(of: Self.origin, with: "https://evil.example")
        }
        #expect(throws: WebAuthnError.originNotAllowed) { try verifyAssertion(elsewhere, passkey.stored) }
        let otherRP = try editingResponse(json, "authenticatorData") { $0[0] ^= 0xff }
        #expect(throws: WebAuthnError.rpIDMismatch) { try verifyAssertion(otherRP, passkey.stored) }
        let absent = try editingResponse(json, "authenticatorData") { $0[32] &= ~0x01 }
        #expect(throws: WebAuthnError.userNotPresent) { try verifyAssertion(absent, passkey.stored) }
        // Attested credential data belongs to registrations only.
        let attested = try editingResponse(json, "authenticatorData") {
            $0[32] |= 0x40
            $0 += [UInt8](repeating: 0, count: 16) + [0, 16] + randomBytes(16) + validES256Key().encoded
        }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) { try verifyAssertion(attested, passkey.stored) }

        passkey.authenticator.userVerification = false
        let unverified = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(throws: WebAuthnError.userNotVerified) { try verifyAssertion(unverified, passkey.stored) }
        #expect(try verifyAssertion(unverified, passkey.stored, requireUserVerification: false).userVerified == false)
    }

    @Test("A tampered authenticator data, client data or signature is refused")
    func tampering() throws {
        let passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        let json = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        _ = try verifyAssertion(json, passkey.stored)
        let counter = try editingResponse(json, "authenticatorData") { $0[36] ^= 0x10 }
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(counter, passkey.stored) }
        let flags = try editingResponse(json, "authenticatorData") { $0[32] ^= 0x02 }
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(flags, passkey.stored) }
        let clientData = try editingClientData(json) { $0.replacingOccurrences(of: "false}", with: "false,\"x\":1}") }
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(clientData, passkey.stored) }
        let signature = try editingResponse(json, "signature") { $0[$0.count - 1] ^= 0x01 }
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(signature, passkey.stored) }
        let garbage = try editingResponse(json, "signature") { $0 = [0x30, 0x00] }
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(garbage, passkey.stored) }

        // Another passkey's key, or a stored algorithm that is not the key's.
        let other = try enroll(SoftwareAuthenticator(origin: Self.origin))
        #expect(throws: WebAuthnError.badSignature) { try verifyAssertion(json, other.stored) }
        var mislabelled = passkey.stored
        mislabelled.algorithm = -257
        #expect(throws: WebAuthnError.malformedPublicKey) { try verifyAssertion(json, mislabelled) }
    }

    @Test("A counter that goes back means a cloned authenticator; one that stays at zero is accepted")
    func signCounter() throws {
        var passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        let credentialID = try #require(passkey.authenticator.credentialIDs.first)
        let first = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        passkey.stored.signCount = try verifyAssertion(first, passkey.stored).newSignCount
        // The same answer again (a replay within the challenge's life) does not move the counter.
        #expect(throws: WebAuthnError.signCountRegressed) { try verifyAssertion(first, passkey.stored) }
        passkey.stored.signCount = 5
        passkey.authenticator.setSignCount(2, of: credentialID)
        let clone = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(passkey.authenticator.signCount(of: credentialID) == 3)
        #expect(throws: WebAuthnError.signCountRegressed) { try verifyAssertion(clone, passkey.stored) }
        // An authenticator that stops counting after it counted.
        passkey.authenticator.setSignCount(0, of: credentialID)
        passkey.authenticator.signCountStep = 0
        let stopped = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(throws: WebAuthnError.signCountRegressed) { try verifyAssertion(stopped, passkey.stored) }

        let synced = try enroll(SoftwareAuthenticator(origin: Self.origin, signCountStep: 0))
        for _ in 0..<2 {
            let json = try synced.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
            #expect(try verifyAssertion(json, synced.stored).newSignCount == 0)
        }
    }

    @Test("A sign-in whose backup eligibility differs from the registration's is refused")
    func backupEligibilityChange() throws {
        let passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        passkey.authenticator.backupEligible = true
        let json = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(throws: WebAuthnError.invalidBackupState) { try verifyAssertion(json, passkey.stored) }
        var unknown = passkey.stored
        unknown.backupEligible = nil
        #expect(try verifyAssertion(json, unknown).backupEligible)
        passkey.authenticator.backedUp = true
        passkey.authenticator.backupEligible = false
        let inconsistent = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(throws: WebAuthnError.invalidBackupState) { try verifyAssertion(inconsistent, unknown) }
    }

    @Test("Assertion JSON: a malformed field, id and rawId that differ, or a long user handle are refused")
    func assertionJSON() throws {
        let passkey = try enroll(SoftwareAuthenticator(origin: Self.origin))
        let json = try passkey.authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        let otherID = try editingJSON(json) { $0["id"] = base64URL(randomBytes(32)) }
        #expect(throws: WebAuthnError.malformedCredential) { try AuthenticationResponse(json: otherID) }
        let badSignature = try editingJSON(json) {
            var response = $0["response"] as! [String: Any]
            response["signature"] = "MEUC*"
            $0["response"] = response
        }
        #expect(throws: WebAuthnError.malformedCredential) { try AuthenticationResponse(json: badSignature) }
        let longHandle = try editingResponse(json, "userHandle") { $0 = randomBytes(65) }
        #expect(throws: WebAuthnError.malformedCredential) { try AuthenticationResponse(json: longHandle) }
        for handle in [NSNull(), "" as Any] {
            let noHandle = try editingJSON(json) {
                var response = $0["response"] as! [String: Any]
                response["userHandle"] = handle
                $0["response"] = response
            }
            #expect(try AuthenticationResponse(json: noHandle).userHandle == nil)
            _ = try verifyAssertion(noHandle, passkey.stored)
        }
        let cutData = try editingResponse(json, "authenticatorData") { $0.removeLast() }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) { try verifyAssertion(cutData, passkey.stored) }
        let longData = try editingResponse(json, "authenticatorData") { $0.append(0) }
        #expect(throws: WebAuthnError.malformedAuthenticatorData) { try verifyAssertion(longData, passkey.stored) }
        var corruptKey = passkey.stored
        corruptKey.publicKey.removeLast()
        #expect(throws: WebAuthnError.malformedCBOR(.truncated)) { try verifyAssertion(json, corruptKey) }
    }

    @Test("Each refusal has a stable reason, and no description carries input")
    func reasons() {
        let cases: [(WebAuthnError, String)] = [
            (.malformedCredential, "malformed_credential"), (.malformedClientData, "malformed_client_data"),
            (.malformedAuthenticatorData, "malformed_authenticator_data"),
            (.malformedCBOR(.duplicateKey), "malformed_cbor"), (.malformedPublicKey, "malformed_public_key"),
            (.malformedAttestation, "malformed_attestation"), (.wrongType, "wrong_type"),
            (.challengeMismatch, "challenge_mismatch"), (.originNotAllowed, "origin_not_allowed"),
            (.crossOrigin, "cross_origin"), (.rpIDMismatch, "rp_id_mismatch"), (.userNotPresent, "user_not_present"),
            (.userNotVerified, "user_not_verified"), (.invalidBackupState, "invalid_backup_state"),
            (.unsupportedAlgorithm, "unsupported_algorithm"), (.unsupportedAttestation, "unsupported_attestation"),
            (.badSignature, "bad_signature"), (.signCountRegressed, "sign_count_regressed"),
        ]
        for (error, reason) in cases {
            #expect(error.reason == reason)
            #expect(error.description.hasPrefix("passkey refused: \(reason)"))
        }
        #expect(
            WebAuthnError.malformedCBOR(.duplicateKey).description == "passkey refused: malformed_cbor (duplicateKey)")
    }

    // MARK: The software authenticator

    @Test("The software authenticator writes client data as browsers do")
    func clientDataAsBrowsersWrite() throws {
        let authenticator = SoftwareAuthenticator(origin: "https://example.com")
        let json = try register(authenticator)
        let response = try RegistrationResponse(json: json)
        #expect(
            String(decoding: response.clientDataJSON, as: UTF8.self)
                == "{\"type\":\"webauthn.create\",\"challenge\":\"\(base64URL(challenge))\",\"origin\":\"https://example.com\",\"crossOrigin\":false}"
        )
        let escaped = try SoftwareAuthenticator(origin: "a\"b\\c\u{1}").makeCredential(
            rpID: "example.com", challenge: Data(), userID: userID, userName: "ada")
        let clientData = try RegistrationResponse(json: escaped).clientDataJSON
        #expect(String(decoding: clientData, as: UTF8.self).contains(#""origin":"a\"b\\c\u0001","#))
        #expect(try ClientData(json: clientData).origin == "a\"b\\c\u{1}")
    }

    @Test("The software authenticator refuses an excluded credential, and picks credentials as the allow list says")
    func softwareAuthenticatorChoices() throws {
        let authenticator = SoftwareAuthenticator(origin: Self.origin)
        _ = try register(authenticator)
        let first = try #require(authenticator.credentialIDs.first)
        #expect(throws: SoftwareAuthenticatorError.credentialExcluded) {
            try authenticator.makeCredential(
                rpID: "example.com", challenge: Data(challenge), userID: userID, userName: "ada",
                excludeCredentialIDs: [Data(randomBytes(32)), first])
        }
        // The same credential excluded for another site does not stop a registration there.
        _ = try authenticator.makeCredential(
            rpID: "other.example", challenge: Data(challenge), userID: userID, userName: "ada",
            excludeCredentialIDs: [first])
        _ = try register(authenticator)
        #expect(authenticator.credentialIDs.count == 3)
        let newest = authenticator.credentialIDs[2]

        let discoverable = try authenticator.getAssertion(rpID: "example.com", challenge: Data(challenge))
        #expect(try AuthenticationResponse(json: discoverable).credentialID == Array(newest))
        let allowed = try authenticator.getAssertion(
            rpID: "example.com", challenge: Data(challenge), allowCredentialIDs: [first])
        #expect(try AuthenticationResponse(json: allowed).credentialID == Array(first))
        #expect(throws: SoftwareAuthenticatorError.noCredential) {
            try authenticator.getAssertion(rpID: "unknown.example", challenge: Data(challenge))
        }
        #expect(throws: SoftwareAuthenticatorError.noCredential) {
            try authenticator.getAssertion(
                rpID: "example.com", challenge: Data(challenge), allowCredentialIDs: [Data(randomBytes(32))])
        }
    }

    // MARK: Helpers

    /// An authenticator with one registered passkey, and what the server stored of it.
    struct Passkey {
        let authenticator: SoftwareAuthenticator
        var stored: StoredCredential
    }

    func enroll(_ authenticator: SoftwareAuthenticator) throws -> Passkey {
        let verified = try verifyRegistration(register(authenticator))
        return Passkey(
            authenticator: authenticator,
            stored: StoredCredential(
                publicKey: verified.publicKey, algorithm: verified.algorithm, signCount: verified.signCount,
                backupEligible: verified.backupEligible))
    }

    func register(
        _ authenticator: SoftwareAuthenticator, rpID: String = "example.com",
        attestation: SoftwareAuthenticator.Attestation = .none
    ) throws -> Data {
        try authenticator.makeCredential(
            rpID: rpID, challenge: Data(challenge), userID: userID, userName: "ada@example.com",
            attestation: attestation)
    }

    func verifyRegistration(
        _ json: Data, challenge: [UInt8]? = nil, requireUserVerification: Bool = true
    ) throws(WebAuthnError) -> VerifiedRegistration {
        try WebAuthn.verifyRegistration(
            response: RegistrationResponse(json: json), expectedChallenge: challenge ?? self.challenge,
            relyingParty: Self.relyingParty, requireUserVerification: requireUserVerification)
    }

    func verifyAssertion(
        _ json: Data, _ credential: StoredCredential, challenge: [UInt8]? = nil, requireUserVerification: Bool = true
    ) throws(WebAuthnError) -> VerifiedAssertion {
        try WebAuthn.verifyAssertion(
            response: AuthenticationResponse(json: json), expectedChallenge: challenge ?? self.challenge,
            relyingParty: Self.relyingParty, credential: credential, requireUserVerification: requireUserVerification)
    }

    /// A registration written here with `key` as the credential's key: the flags (UP, UV, AT by default), the key,
    /// and `after` it, attestation none.
    func forgedRegistration(key: CBOR, flags: UInt8 = 0x45, after: [UInt8] = []) -> Data {
        let credentialID = randomBytes(32)
        var authenticatorData = Array(SHA256.hash(data: Data("example.com".utf8))) + [flags, 0, 0, 0, 0]
        if flags & 0x40 != 0 {
            authenticatorData += [UInt8](repeating: 0, count: 16) + [0, UInt8(credentialID.count)] + credentialID
            authenticatorData += key.encoded
        }
        authenticatorData += after
        let attestationObject = CBOR.mapOf([
            .text("fmt"): .text("none"), .text("attStmt"): .mapOf([:]), .text("authData"): .bytes(authenticatorData),
        ])
        return Self.registrationJSON(
            credentialID: credentialID, clientData: Self.clientData("webauthn.create", challenge: challenge),
            attestationObject: attestationObject.encoded)
    }

    /// Client data as browsers write it.
    static func clientData(_ type: String, challenge: [UInt8]) -> [UInt8] {
        let challenge = base64URL(challenge)
        return Array(
            "{\"type\":\"\(type)\",\"challenge\":\"\(challenge)\",\"origin\":\"\(origin)\",\"crossOrigin\":false}".utf8)
    }

    static func registrationJSON(credentialID: [UInt8], clientData: [UInt8], attestationObject: [UInt8]) -> Data {
        json([
            "id": base64URL(credentialID), "rawId": base64URL(credentialID), "type": "public-key",
            "response": [
                "clientDataJSON": base64URL(clientData), "attestationObject": base64URL(attestationObject),
            ],
        ])
    }

    func validES256Key() -> CBOR {
        let point = P256.Signing.PrivateKey().publicKey.x963Representation
        return es256Key(x: Array(point[1...32]), y: Array(point[33...64]))
    }

    func es256Key(x: [UInt8], y: [UInt8]) -> CBOR {
        .mapOf([.int(1): .int(2), .int(3): .int(-7), .int(-1): .int(1), .int(-2): .bytes(x), .int(-3): .bytes(y)])
    }

    /// An RS256 authenticator (the SDK's is ES256 only), as Windows Hello's keys sign: PKCS #1 v1.5, SHA-256.
    struct RSAAuthenticator {
        let key: _RSA.Signing.PrivateKey
        let credentialID = randomBytes(20)

        init() throws { key = try _RSA.Signing.PrivateKey(keySize: .bits2048) }

        var coseKey: CBOR {
            let primitives = try! key.publicKey.getKeyPrimitives()
            return .mapOf([
                .int(1): .int(3), .int(3): .int(-257), .int(-1): .bytes(Array(primitives.modulus)),
                .int(-2): .bytes(Array(primitives.publicExponent)),
            ])
        }

        func registration(challenge: [UInt8], format: String = "none") throws -> Data {
            let clientData = WebAuthnRulesTests.clientData("webauthn.create", challenge: challenge)
            let authenticatorData =
                Array(SHA256.hash(data: Data("example.com".utf8))) + [0x45, 0, 0, 0, 0]
                + [UInt8](repeating: 0, count: 16) + [0, UInt8(credentialID.count)] + credentialID + coseKey.encoded
            var statement = CBOR.mapOf([:])
            if format == "packed" {
                let signature = try key.signature(
                    for: authenticatorData + SHA256.hash(data: clientData), padding: .insecurePKCS1v1_5)
                statement = .mapOf([.text("alg"): .int(-257), .text("sig"): .bytes(Array(signature.rawRepresentation))])
            }
            let attestationObject = CBOR.mapOf([
                .text("fmt"): .text(format), .text("attStmt"): statement, .text("authData"): .bytes(authenticatorData),
            ])
            return WebAuthnRulesTests.registrationJSON(
                credentialID: credentialID, clientData: clientData, attestationObject: attestationObject.encoded)
        }

        func assertion(challenge: [UInt8], signCount: UInt32, tamperSignature: Bool = false) throws -> Data {
            let clientData = WebAuthnRulesTests.clientData("webauthn.get", challenge: challenge)
            let authenticatorData =
                Array(SHA256.hash(data: Data("example.com".utf8))) + [0x05]
                + withUnsafeBytes(of: signCount.bigEndian, Array.init)
            var signature = Array(
                try key.signature(for: authenticatorData + SHA256.hash(data: clientData), padding: .insecurePKCS1v1_5)
                    .rawRepresentation)
            if tamperSignature { signature[0] ^= 0x01 }
            return json([
                "id": base64URL(credentialID), "rawId": base64URL(credentialID), "type": "public-key",
                "response": [
                    "clientDataJSON": base64URL(clientData), "authenticatorData": base64URL(authenticatorData),
                    "signature": base64URL(signature),
                ],
            ])
        }
    }
}

// MARK: JSON and CBOR editing

/// `json` with its top-level object changed by `edit`.
private func editingJSON(_ json: Data, _ edit: (inout [String: Any]) throws -> Void) throws -> Data {
    var object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
    try edit(&object)
    return try JSONSerialization.data(withJSONObject: object)
}

/// `json` with the bytes of the base64url field `response.<field>` changed by `edit`.
private func editingResponse(_ json: Data, _ field: String, _ edit: (inout [UInt8]) throws -> Void) throws -> Data {
    try editingJSON(json) { object in
        var response = try #require(object["response"] as? [String: Any])
        let text = try #require(response[field] as? String)
        var bytes = try #require(WebAuthn.base64URLDecoded(text))
        try edit(&bytes)
        response[field] = base64URL(bytes)
        object["response"] = response
    }
}

/// `json` with its client data's text changed by `edit`.
private func editingClientData(_ json: Data, _ edit: (String) -> String) throws -> Data {
    try editingResponse(json, "clientDataJSON") { $0 = Array(edit(String(decoding: $0, as: UTF8.self)).utf8) }
}

/// `json` with its attestation object changed by `edit`.
private func editingAttestation(_ json: Data, _ edit: (CBOR) throws -> CBOR) throws -> Data {
    try editingResponse(json, "attestationObject") { $0 = try edit(CBOR.decode($0)).encoded }
}

/// `json` with its attestation statement changed by `edit`.
private func editingStatement(_ json: Data, _ edit: (CBOR) throws -> CBOR) throws -> Data {
    try editingAttestation(json) { object in
        let statement = try #require(object[text: "attStmt"])
        return object.setting(.text("attStmt"), to: try edit(statement))
    }
}

/// `json` with the authenticator data in its attestation object changed by `edit`.
private func editingAuthenticatorData(_ json: Data, _ edit: (inout [UInt8]) -> Void) throws -> Data {
    try editingAttestation(json) { object in
        var bytes = try #require(object[text: "authData"]?.bytesValue)
        edit(&bytes)
        return object.setting(.text("authData"), to: .bytes(bytes))
    }
}

private func json(_ object: [String: Any]) -> Data {
    try! JSONSerialization.data(withJSONObject: object)
}

private func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

private func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}
