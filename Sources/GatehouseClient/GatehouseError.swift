import Foundation

/// What can go wrong in a Gatehouse call, typed for the cases an app handles; anything else carries the server's
/// stable code.
public enum GatehouseError: Error, Sendable, Equatable {
    /// A wrong email, username or password (the server gives one answer for all).
    case invalidCredentials
    /// Too many requests; try again after this many seconds, when the server said.
    case rateLimited(retryAfter: TimeInterval?)
    /// Too many wrong passwords for this account (or this company's credential): try again after this moment.
    case lockedOut(until: Date)
    /// The password breaks the server's policy, for these reasons (`too_short`, `common`, …).
    case weakPassword(reasons: [String])
    /// The address has not been confirmed yet.
    case emailNotConfirmed
    /// The server could not be reached; the session, if any, is kept.
    case network(String)
    /// The session ended on the server (revoked, expired, or its refresh token reused): sign in again.
    case sessionExpired
    /// The member was removed from the company or lost access: drop its local data.
    case companyAccessRevoked
    /// The session store failed to read or write; the message says why.
    case sessionStore(String)
    /// The session is kept but cannot be read until the device is unlocked (a prewarmed launch before the first
    /// unlock): wait for the unlock and restore again. It is never a sign-out.
    case sessionLocked
    /// A company store's database failed to read or write; the message says why.
    case localStore(String)
    /// There is no session (for a company's calls: no session logged in to that company).
    case notSignedIn
    /// An email change's code was accepted from one address; the change completes, and signs in, when the code
    /// mailed to the other address is verified too.
    case otherAddressPending
    /// The passkey authenticator gave no passkey: the user cancelled, it holds this account's passkey already, it has
    /// none for this server, or it failed.
    case authenticator(PasskeyAuthenticatorError)
    /// Any other refusal: the HTTP status, the server's stable code and its message.
    case server(status: Int, code: String, message: String)
}

extension GatehouseError {
    /// The server's stable code of a `server` error; nil for the typed cases.
    public var code: String? {
        if case .server(_, let code, _) = self { return code }
        return nil
    }

    /// The server's stable code of a `server` error as a `Code`, to compare with the well-known ones.
    public var errorCode: Code? { code.map(Code.init(rawValue:)) }

    /// A server's stable error code: an open set, so a newer server's codes do not break older apps. The
    /// well-known ones an app handles are named here; any other arrives as it is.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The code as the server spells it.
        public let rawValue: String
        /// A code as the server spells it.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code as the server spells it.
        public var description: String { rawValue }

        /// The session is at aal1 where a verified second factor is needed: enrolling another factor, removing a
        /// verified one, recovery codes, or logging in to a company that requires one.
        public static let insufficientAal = Code(rawValue: "insufficient_aal")
        /// A wrong, used or out-of-window TOTP code, or a wrong or spent recovery code.
        public static let mfaVerificationFailed = Code(rawValue: "mfa_verification_failed")
        /// The challenge is older than five minutes: ask for another.
        public static let mfaChallengeExpired = Code(rawValue: "mfa_challenge_expired")
        /// No such factor or challenge of the account's.
        public static let mfaFactorNotFound = Code(rawValue: "mfa_factor_not_found")
        /// The challenge was used already, or made from another address.
        public static let mfaIpAddressMismatch = Code(rawValue: "mfa_ip_address_mismatch")
        /// The account has a factor of that name already.
        public static let mfaFactorNameConflict = Code(rawValue: "mfa_factor_name_conflict")
        /// Five wrong recovery codes in fifteen minutes: wait.
        public static let mfaRecoveryCodesLocked = Code(rawValue: "mfa_recovery_codes_locked")
        /// Recovery codes need a verified TOTP factor beside them.
        public static let mfaRecoveryCodesSoleFactor = Code(rawValue: "mfa_recovery_codes_sole_factor")
        /// Recovery codes exist already: regenerate them instead.
        public static let mfaVerifiedFactorExists = Code(rawValue: "mfa_verified_factor_exists")
        /// The account has ten factors already.
        public static let tooManyEnrolledMfaFactors = Code(rawValue: "too_many_enrolled_mfa_factors")
    }
}

/// The body of an error answer, in the `{code, message}` shape the SDK asks for.
struct ErrorBody: Decodable {
    let code: String?
    let message: String?
    let weak_password: WeakPassword?

    struct WeakPassword: Decodable {
        let reasons: [String]?
    }

    /// The typed error for an answer with `status`, this body and the `Retry-After` header.
    static func error(status: Int, body: Data, retryAfter: String?) -> GatehouseError {
        let decoded = try? JSONDecoder().decode(ErrorBody.self, from: body)
        let code = decoded?.code ?? "http_\(status)"
        switch code {
        case "invalid_credentials": return .invalidCredentials
        case "over_request_rate_limit", "over_email_send_rate_limit":
            return .rateLimited(retryAfter: retryAfter.flatMap(TimeInterval.init))
        case "weak_password": return .weakPassword(reasons: decoded?.weak_password?.reasons ?? [])
        case "email_not_confirmed": return .emailNotConfirmed
        case "refresh_token_not_found", "refresh_token_already_used", "session_expired", "session_not_found",
            "user_banned", "user_not_found":
            return .sessionExpired
        case "company_access_revoked": return .companyAccessRevoked
        default: return .server(status: status, code: code, message: decoded?.message ?? "")
        }
    }
}
