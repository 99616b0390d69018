import Foundation
import GatehouseClientAPI
import OpenAPIRuntime

/// A second factor for the account (`client.auth.mfa`), as supabase-swift's `AuthMFA`: TOTP factors (enroll,
/// challenge, verify, unenroll), recovery codes, and the session's assurance level. Verifying raises the account
/// session to aal2: the new session is kept and told as `refreshed`.
public struct MFA: Sendable {
    let sessions: SessionManager

    // MARK: TOTP factors

    /// Enrolls an unverified TOTP factor: show its QR code (or secret) to the user's authenticator app, then verify a
    /// code with `challengeAndVerify(factorID:code:)` to finish. Once a factor is verified, enrolling another needs
    /// an aal2 session (`insufficient_aal`). `issuer` is what the app shows (the server's host when nil). A first
    /// factor needs recent proof: a sign-in in the last ten minutes, or `currentPassword`, or a `nonce` from
    /// `auth.reauthenticate()` (else `reauthentication_needed`).
    public func enroll(
        friendlyName: String? = nil, issuer: String? = nil, currentPassword: String? = nil, nonce: String? = nil
    ) async throws(GatehouseError) -> TOTPEnrollment {
        let body = Components.Schemas.EnrollFactorRequest(
            factorType: "totp", friendlyName: friendlyName, issuer: issuer, currentPassword: currentPassword,
            nonce: nonce)
        return TOTPEnrollment(
            try await sessions.authorized { try await $0.enrollFactor(body: .json(body)).ok.body.json })
    }

    /// A challenge to verify one code against: it lives five minutes and is bound to this device's address.
    public func challenge(factorID: String) async throws(GatehouseError) -> MFAChallenge {
        MFAChallenge(
            try await sessions.authorized {
                try await $0.challengeFactor(path: .init(factorId: factorID)).ok.body.json
            })
    }

    /// Verifies a code of the authenticator app against a challenge: the factor becomes verified and the account
    /// session aal2 (a new refresh token; the account's other aal1 sessions end). A wrong or already used code throws
    /// `mfa_verification_failed`; a run of wrong codes makes the server back off (`lockedOut(until:)`).
    @discardableResult
    public func verify(factorID: String, challengeID: String, code: String) async throws(GatehouseError) -> AuthSession
    {
        let body = Components.Schemas.VerifyFactorRequest(challengeId: challengeID, code: code, factorId: factorID)
        do {
            return try await raised {
                try await $0.verifyFactor(path: .init(factorId: factorID), body: .json(body)).ok.body.json
            }
        } catch {
            throw error.asLockout()
        }
    }

    /// A challenge and its verification in one step, for a code the user typed.
    @discardableResult
    public func challengeAndVerify(factorID: String, code: String) async throws(GatehouseError) -> AuthSession {
        let challenge = try await challenge(factorID: factorID)
        return try await verify(factorID: factorID, challengeID: challenge.id, code: code)
    }

    /// Every factor of the account, verified or not, recovery codes included, as the server lists them now.
    public func listFactors() async throws(GatehouseError) -> [Factor] {
        AuthUser(try await sessions.authorized { try await $0.getUser().ok.body.json }).factors
    }

    /// Removes a factor (a verified one needs an aal2 session). The sessions it raised fall back to aal1; this one is
    /// refreshed so that its token says so.
    public func unenroll(factorID: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.unenrollFactor(path: .init(factorId: factorID)).ok }
        await lowered()
    }

    // MARK: Recovery codes

    /// Makes the account's recovery codes (aal2, beside a verified TOTP factor) and answers them: they are shown this
    /// once, so the app shows them now (grouped for reading). Each stands in for a TOTP code once.
    public func generateRecoveryCodes() async throws(GatehouseError) -> [String] {
        try await sessions.authorized { try await $0.generateRecoveryCodes().ok.body.json }.codes ?? []
    }

    /// Replaces every recovery code with new ones (aal2), shown this once; the old codes stop working.
    public func regenerateRecoveryCodes() async throws(GatehouseError) -> [String] {
        try await sessions.authorized { try await $0.regenerateRecoveryCodes().ok.body.json }.codes ?? []
    }

    /// How many recovery codes there are and how many are left unused. Without any: `mfa_factor_not_found`.
    public func recoveryCodesStatus() async throws(GatehouseError) -> (total: Int, remaining: Int) {
        let status = try await sessions.authorized { try await $0.recoveryCodesStatus().ok.body.json }
        return (status.total, status.remaining ?? status.total)
    }

    /// Uses a recovery code in place of a TOTP code (case, spaces and dashes do not matter): the account session
    /// becomes aal2 and the account is told by mail. Five wrong codes in fifteen minutes lock them
    /// (`mfa_recovery_codes_locked`).
    @discardableResult
    public func verifyRecoveryCode(_ code: String) async throws(GatehouseError) -> AuthSession {
        try await raised { try await $0.verifyRecoveryCode(body: .json(.init(code: code))).ok.body.json }
    }

    /// Removes the recovery codes (aal2).
    public func deleteRecoveryCodes() async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.deleteRecoveryCodes().ok }
        await lowered()
    }

    // MARK: Assurance

    /// The account session's assurance level, as supabase-swift's `getAuthenticatorAssuranceLevel`: `current` from
    /// the access token, `next` aal2 when the account has a verified factor (asked of the server), and the methods
    /// that signed the session in.
    public func assuranceLevel() async throws(GatehouseError) -> AssuranceLevel {
        let session = try await sessions.valid()
        return AssuranceLevel(accessToken: session.accessToken, factors: try await listFactors())
    }

    /// Runs a verification and keeps the aal2 session it answers.
    private func raised(
        _ body: @Sendable (Client) async throws -> Components.Schemas.Session
    ) async throws(GatehouseError) -> AuthSession {
        let session = AuthSession(try await sessions.authorized(body))
        try await sessions.replace(session)
        return session
    }

    /// A factor went: the server lowered the sessions it raised, so this one's token is renewed to say so.
    private func lowered() async {
        guard let session = await sessions.current, AssuranceLevel.claims(of: session.accessToken).aal == .aal2
        else { return }
        _ = try? await sessions.refresh()
    }
}

/// A TOTP factor just enrolled, and what the authenticator app needs to add it.
public struct TOTPEnrollment: Sendable, Equatable, Identifiable {
    /// The factor's id (for `challenge`, `verify`, `unenroll`).
    public let id: String
    /// The name the user gave it (may be empty).
    public let friendlyName: String
    /// The secret in base32, for typing into the app by hand.
    public let secret: String
    /// The `otpauth://` URI the QR code holds.
    public let uri: String
    /// The URI as a QR code: an SVG document (prefix `data:image/svg+xml;utf-8,` to show it in a web view).
    public let qrCodeSVG: String

    init(_ wire: Components.Schemas.EnrolledFactor) {
        id = wire.id
        friendlyName = wire.friendlyName
        secret = wire.totp.secret
        uri = wire.totp.uri
        qrCodeSVG = wire.totp.qrCode
    }
}

/// A challenge of a factor: verify a code against it before it expires.
public struct MFAChallenge: Sendable, Equatable, Identifiable {
    /// The challenge's id.
    public let id: String
    /// When it stops being accepted.
    public let expiresAt: Date

    init(_ wire: Components.Schemas.FactorChallenge) {
        id = wire.id
        expiresAt = Date(timeIntervalSince1970: TimeInterval(wire.expiresAt))
    }
}

/// One of the account's second factors.
public struct Factor: Sendable, Equatable, Identifiable {
    /// What kind of factor it is: an open set, so a newer server's kinds do not break older apps.
    public struct Kind: RawRepresentable, Sendable, Hashable {
        /// The kind as the server spells it (`factor_type`).
        public let rawValue: String
        /// A kind as the server spells it.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A TOTP authenticator app.
        public static let totp = Kind(rawValue: "totp")
        /// The account's set of recovery codes.
        public static let recoveryCode = Kind(rawValue: "recovery_code")
    }

    /// Whether a factor has been verified once (only verified factors count for aal2).
    public enum Status: String, Sendable, Equatable {
        /// Enrolled, its first code not yet verified.
        case unverified
        /// In use.
        case verified
    }

    /// The factor's id.
    public let id: String
    /// The name the user gave it (may be empty).
    public let friendlyName: String
    /// Its kind.
    public let type: Kind
    /// Whether it was verified.
    public let status: Status
    /// When it was enrolled.
    public let createdAt: Date

    init(_ wire: Components.Schemas.Factor) {
        id = wire.id
        friendlyName = wire.friendlyName ?? ""
        type = Kind(rawValue: wire.factorType.rawValue)
        status = Status(rawValue: wire.status.rawValue) ?? .unverified
        createdAt = wire.createdAt
    }

    /// A factor as the server would list it (for previews and tests).
    public init(id: String, friendlyName: String = "", type: Kind, status: Status, createdAt: Date = Date()) {
        self.id = id
        self.friendlyName = friendlyName
        self.type = type
        self.status = status
        self.createdAt = createdAt
    }
}

/// How strongly the account session was authenticated, and how strongly it could be.
public struct AssuranceLevel: Sendable, Equatable {
    /// An authenticator assurance level.
    public enum Level: String, Sendable, Equatable, Comparable {
        /// One factor: a password, a mailed code or link, Apple.
        case aal1
        /// A second factor verified in this session.
        case aal2

        /// aal1 is below aal2.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs == .aal1 && rhs == .aal2 }
    }

    /// The session's level, from its access token.
    public let current: Level
    /// The level the session can reach: aal2 when the account has a verified factor, else the current one.
    public let next: Level
    /// How the session was authenticated (`password`, `otp`, `totp`, `mfa/recovery_code`, …), newest first.
    public let methods: [String]

    /// A level as given.
    public init(current: Level, next: Level, methods: [String] = []) {
        self.current = current
        self.next = next
        self.methods = methods
    }

    /// The level of a session with `accessToken`, for an account with `factors`: current from the token's `aal`
    /// claim (aal1 when it has none), next aal2 when a TOTP factor is verified, methods from its `amr` claim.
    public init(accessToken: String, factors: [Factor]) {
        let claims = Self.claims(of: accessToken)
        current = claims.aal ?? .aal1
        next = factors.contains { $0.type == .totp && $0.status == .verified } ? .aal2 : current
        methods = claims.methods
    }

    /// Whether the session should verify a second factor before going on (aal1, with one to verify).
    public var needsSecondFactor: Bool { current < next }

    /// The `aal` and `amr` methods of an access token; the signature is the server's to check, not this reader's.
    static func claims(of accessToken: String) -> (aal: Level?, methods: [String]) {
        let parts = accessToken.split(separator: ".")
        guard parts.count >= 2 else { return (nil, []) }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text),
            let payload = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { return (nil, []) }
        let aal = (payload["aal"] as? String).flatMap(Level.init(rawValue:))
        let amr = payload["amr"] as? [Any] ?? []
        return (aal, amr.compactMap { ($0 as? [String: Any])?["method"] as? String })
    }
}
