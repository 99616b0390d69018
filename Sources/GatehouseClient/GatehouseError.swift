import Foundation

/// What can go wrong in a Gatehouse call, typed for the cases an app handles; anything else carries the server's
/// stable code. Each has a short message for an alert or VoiceOver (`localizedDescription`, `recoverySuggestion`)
/// that never carries a token, a password or a server's internals, and a `code` to compare with.
public enum GatehouseError: Error, Sendable, Equatable {
    /// A wrong email, username or password (the server gives one answer for all).
    case invalidCredentials
    /// Too many requests: try again at `retryAfter.date` (a UI can count down to it).
    case rateLimited(retryAfter: RetryAfter)
    /// Too many wrong passwords for this account (or this company's credential): try again after this moment.
    case lockedOut(until: Date)
    /// The password breaks the server's policy, for these reasons (`length`, `common`, …).
    case weakPassword(reasons: [String])
    /// The address has not been confirmed yet.
    case emailNotConfirmed
    /// The server could not be reached; the session, if any, is kept. The detail is for logs, not for people.
    case network(String)
    /// The session ended on the server (revoked, expired, or its refresh token reused): sign in again.
    case sessionExpired
    /// The member was removed from the company or lost access: drop its local data.
    case companyAccessRevoked
    /// The session store failed to read or write; the detail (for logs) says why.
    case sessionStore(String)
    /// `KeychainSessionStore` could not read or write the session: `.biometryCancelled` when the user dismissed the
    /// Face ID or Touch ID prompt of a biometry-bound session (it is kept: show the lock screen, not an alert),
    /// `.biometryFailed`, a damaged item, a missing entitlement, or another Keychain answer.
    case keychain(KeychainStoreError)
    /// The session is kept but cannot be read until the device is unlocked (a prewarmed launch before the first
    /// unlock): wait for the unlock and restore again. It is never a sign-out.
    case sessionLocked
    /// A company store's database failed to read or write; the detail (for logs) says why.
    case localStore(String)
    /// There is no session (for a company's calls: no session signed in to that company).
    case notSignedIn
    /// An email change's code was accepted from one address; the change completes, and signs in, when the code
    /// mailed to the other address is verified too.
    case otherAddressPending
    /// The passkey authenticator gave no passkey (the user cancelled, it holds this account's passkey already, it has
    /// none for this server, or it failed), or Sign in with Apple gave no authorization (cancelled or failed).
    case authenticator(PasskeyAuthenticatorError)
    /// The address's company requires single sign-on: email sign-in (password, code or link) and sign-up are refused
    /// for it. Sign in through the company's identity provider `providerID` instead, with
    /// `Auth.signInWithSSO(providerID:redirectTo:)` (`LoginFlowModel` moves to its single sign-on step by itself).
    case ssoRequired(providerID: String)
    /// Any other refusal: the HTTP status, the server's stable code and its message (for logs: the server's words,
    /// not written for the app's users).
    case server(status: Int, code: String, message: String)
}

/// When a refused request may be tried again: the moment the answer's `Retry-After` names, for a countdown.
public struct RetryAfter: Sendable, Hashable {
    /// The wait assumed when an answer gives no usable `Retry-After`: a minute.
    public static let assumedDelay: TimeInterval = 60

    /// The moment the next try is allowed.
    public let date: Date

    /// A retry allowed from `date`.
    public init(date: Date) { self.date = date }

    /// The `Retry-After` value of an answer received at `now`: delay-seconds (`120`) or an HTTP-date
    /// (`Wed, 21 Oct 2015 07:28:00 GMT`, and RFC 9110's two obsolete forms); nil when it is neither.
    public init?(header: String, receivedAt now: Date) {
        let value = header.trimmingCharacters(in: .whitespaces)
        if !value.isEmpty, value.allSatisfy(\.isASCII), value.allSatisfy(\.isNumber) {
            guard let seconds = TimeInterval(value) else { return nil }
            date = now.addingTimeInterval(seconds)
            return
        }
        guard let parsed = Self.httpDate(value) else { return nil }
        date = parsed
    }

    /// The seconds left at `now` until the next try, never negative: what a countdown shows.
    public func remaining(at now: Date) -> TimeInterval { max(0, date.timeIntervalSince(now)) }

    /// An HTTP-date in any of RFC 9110's three forms.
    private static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}

extension GatehouseError {
    /// The code of this error: the server's stable code for a refusal (`invalid_credentials`, `insufficient_aal`, …),
    /// the SDK's own for what happened on the device (`network_error`, `session_locked`, …).
    public var code: Code {
        switch self {
        case .invalidCredentials: .invalidCredentials
        case .rateLimited, .lockedOut: .overRequestRateLimit
        case .weakPassword: .weakPassword
        case .emailNotConfirmed: .emailNotConfirmed
        case .network: .networkError
        case .sessionExpired: .sessionExpired
        case .companyAccessRevoked: .companyAccessRevoked
        case .sessionStore: .sessionStoreFailed
        case .keychain(.biometryCancelled): .biometryCancelled
        case .keychain(.biometryFailed): .biometryFailed
        case .keychain: .sessionStoreFailed
        case .sessionLocked: .sessionLocked
        case .localStore: .localStoreFailed
        case .notSignedIn: .notSignedIn
        case .otherAddressPending: .otherAddressPending
        case .authenticator(let failure):
            switch failure {
            case .cancelled: .authenticatorCancelled
            case .credentialExcluded: .authenticatorCredentialExcluded
            case .noCredential: .authenticatorNoCredential
            case .failed: .authenticatorFailed
            }
        case .ssoRequired: .ssoRequired
        case .server(_, let code, _): Code(rawValue: code)
        }
    }

    /// An error's code: the server's stable codes are an open set, so a newer server's codes do not break older
    /// apps. The well-known ones an app handles are named here; any other arrives as it is.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible,
        ExpressibleByStringLiteral
    {
        /// The code as the server spells it.
        public let rawValue: String
        /// A code as the server spells it.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A code as the server spells it.
        public init(stringLiteral value: String) { rawValue = value }
        /// The code as the server spells it.
        public var description: String { rawValue }

        /// Reads the code from its string.
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        /// Writes the code as its string.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        // The server's, behind the typed cases.

        /// A wrong email, username or password.
        public static let invalidCredentials = Code(rawValue: "invalid_credentials")
        /// Too many requests (and a password check's backoff).
        public static let overRequestRateLimit = Code(rawValue: "over_request_rate_limit")
        /// Too many mails to one address.
        public static let overEmailSendRateLimit = Code(rawValue: "over_email_send_rate_limit")
        /// The password breaks the policy.
        public static let weakPassword = Code(rawValue: "weak_password")
        /// The address is not confirmed.
        public static let emailNotConfirmed = Code(rawValue: "email_not_confirmed")
        /// The session ended.
        public static let sessionExpired = Code(rawValue: "session_expired")
        /// The session is unknown to the server (signed out elsewhere).
        public static let sessionNotFound = Code(rawValue: "session_not_found")
        /// The refresh token is unknown (revoked).
        public static let refreshTokenNotFound = Code(rawValue: "refresh_token_not_found")
        /// The refresh token was used already (a copy of the session refreshed first).
        public static let refreshTokenAlreadyUsed = Code(rawValue: "refresh_token_already_used")
        /// The account is banned.
        public static let userBanned = Code(rawValue: "user_banned")
        /// The account is gone.
        public static let userNotFound = Code(rawValue: "user_not_found")
        /// The member lost access to the company.
        public static let companyAccessRevoked = Code(rawValue: "company_access_revoked")

        // The SDK's own, for what happened on the device.

        /// The server could not be reached.
        public static let networkError = Code(rawValue: "network_error")
        /// The session store failed.
        public static let sessionStoreFailed = Code(rawValue: "session_store_failed")
        /// The session cannot be read until the device is unlocked.
        public static let sessionLocked = Code(rawValue: "session_locked")
        /// The user dismissed Face ID or Touch ID for a biometry-bound session; it is kept.
        public static let biometryCancelled = Code(rawValue: "biometry_cancelled")
        /// Face ID or Touch ID did not recognise the user, or is locked out; the session is kept.
        public static let biometryFailed = Code(rawValue: "biometry_failed")
        /// A company store's database failed.
        public static let localStoreFailed = Code(rawValue: "local_store_failed")
        /// There is no session.
        public static let notSignedIn = Code(rawValue: "not_signed_in")
        /// An email change waits for the other address's code.
        public static let otherAddressPending = Code(rawValue: "other_address_pending")
        /// The user dismissed the passkey or Sign in with Apple sheet.
        public static let authenticatorCancelled = Code(rawValue: "authenticator_cancelled")
        /// The device holds a passkey of this account already.
        public static let authenticatorCredentialExcluded = Code(rawValue: "authenticator_credential_excluded")
        /// The device holds no passkey for this server.
        public static let authenticatorNoCredential = Code(rawValue: "authenticator_no_credential")
        /// The authenticator failed.
        public static let authenticatorFailed = Code(rawValue: "authenticator_failed")

        // The server's, of second factors.

        /// The session is at aal1 where a verified second factor is needed: enrolling another factor, removing a
        /// verified one, recovery codes, or signing in to a company that requires one.
        public static let insufficientAal = Code(rawValue: "insufficient_aal")
        /// Adding a way in (a passkey, a first factor) or a sensitive change needs recent proof: a sign-in in the
        /// last ten minutes, the current password, or a code from `reauthenticate()`.
        public static let reauthenticationNeeded = Code(rawValue: "reauthentication_needed")
        /// A company passkey used without a credential where the company requires one: set the credential first.
        public static let companyCredentialRequired = Code(rawValue: "company_credential_required")
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

extension GatehouseError: LocalizedError {
    /// One short sentence for an alert's title or a VoiceOver announcement.
    public var errorDescription: String? {
        switch self {
        case .invalidCredentials: "The email, username or password is incorrect."
        case .rateLimited: "Too many attempts."
        case .lockedOut: "Too many wrong passwords."
        case .weakPassword: "This password is too weak."
        case .emailNotConfirmed: "Your email address isn’t confirmed yet."
        case .network: "The server can’t be reached."
        case .sessionExpired: "Your session has ended."
        case .companyAccessRevoked: "You no longer have access to this company."
        case .sessionStore: "Your sign-in couldn’t be saved on this device."
        case .keychain(.biometryCancelled): "Face ID or Touch ID was cancelled."
        case .keychain(.biometryFailed): "Face ID or Touch ID didn’t recognise you."
        case .keychain(.invalidData), .keychain(.cannotUnseal): "Your saved sign-in couldn’t be read."
        case .keychain(.cannotSeal): "Your sign-in couldn’t be saved on this device."
        case .keychain(.missingEntitlement), .keychain(.unexpected): "This device’s keychain couldn’t be used."
        case .sessionLocked: "Your sign-in can’t be read while the device is locked."
        case .localStore: "The data on this device couldn’t be read or saved."
        case .notSignedIn: "You’re not signed in."
        case .otherAddressPending: "One more code is needed."
        case .authenticator(let failure):
            switch failure {
            case .cancelled: "The request was cancelled."
            case .credentialExcluded: "This device already has a passkey for this account."
            case .noCredential: "This device has no passkey for this account."
            case .failed: "This device couldn’t complete the request."
            }
        case .ssoRequired: "Your company signs you in with single sign-on."
        case .server(let status, let code, _): Self.description(of: Code(rawValue: code), status: status)
        }
    }

    /// What to do about it, when there is something to say.
    public var recoverySuggestion: String? {
        switch self {
        case .invalidCredentials: "Check them and try again."
        case .rateLimited(let retryAfter): "Try again after \(Self.time(retryAfter.date))."
        case .lockedOut(let until): "Try again after \(Self.time(until))."
        case .weakPassword(let reasons): Self.advice(for: reasons)
        case .emailNotConfirmed: "Enter the code from the email we sent you."
        case .network: "Check your connection and try again."
        case .sessionExpired: "Sign in again."
        case .companyAccessRevoked: "Ask the company’s owner if you need it again."
        case .sessionStore, .localStore: "Restart the app. If it happens again, free some space on the device."
        case .keychain(.biometryCancelled): nil
        case .keychain(.biometryFailed): "Try again."
        case .keychain(.invalidData), .keychain(.cannotUnseal): "Sign in again."
        case .keychain: "Restart the app. If it happens again, reinstall it."
        case .sessionLocked: "Unlock the device to continue."
        case .notSignedIn: "Sign in to continue."
        case .otherAddressPending: "Enter the code sent to your other email address to finish the change."
        case .authenticator(.noCredential): "Sign in another way."
        case .authenticator: nil
        case .ssoRequired: "Continue with your company’s sign-in."
        case .server(let status, let code, _): Self.suggestion(for: Code(rawValue: code), status: status)
        }
    }

    /// `date` as a time of day in the user's locale.
    private static func time(_ date: Date) -> String { date.formatted(date: .omitted, time: .shortened) }

    /// Advice for the password policy's reasons.
    private static func advice(for reasons: [String]) -> String {
        if reasons.contains("length") { return "Use a longer password." }
        if reasons.contains("too_long") { return "Use a shorter password." }
        if reasons.contains("matches_identity") { return "Don’t use your email address or username." }
        if reasons.contains("common") { return "Avoid common passwords." }
        if reasons.contains("repetitive") { return "Avoid repeated characters and sequences." }
        return "Choose a longer, less common password."
    }

    /// A sentence for a refusal the SDK has no case for.
    private static func description(of code: Code, status: Int) -> String {
        switch code {
        case .insufficientAal: "This needs your second factor."
        case .mfaVerificationFailed, "webauthn_verification_failed": "That code didn’t work."
        case .mfaChallengeExpired, "otp_expired", "webauthn_challenge_expired": "That code has expired."
        case .mfaRecoveryCodesLocked: "Too many wrong recovery codes."
        case "email_exists", "user_already_exists": "An account with this email already exists."
        case "same_password": "That’s your current password."
        case .reauthenticationNeeded: "Confirm it’s you first."
        case .companyCredentialRequired: "This company needs your username and password."
        case "not_a_member", "forbidden", "record_forbidden": "You don’t have permission to do that."
        case "passkey_disabled": "Passkeys aren’t available."
        case .ssoProviderNotFound: "There’s no single sign-on for that company."
        case .ssoProviderDisabled: "Your company’s single sign-on is turned off."
        case "store_unavailable", "server_busy": "The server is busy."
        default: status >= 500 ? "The server ran into a problem." : "That couldn’t be done."
        }
    }

    /// What to do about a refusal the SDK has no case for.
    private static func suggestion(for code: Code, status: Int) -> String? {
        switch code {
        case .insufficientAal: "Verify your authenticator app’s code, then try again."
        case .mfaVerificationFailed: "Check the code and try again."
        case .mfaChallengeExpired, "otp_expired", "webauthn_challenge_expired": "Ask for a new one."
        case .mfaRecoveryCodesLocked: "Wait a few minutes, then try again."
        case "email_exists", "user_already_exists": "Sign in instead."
        case .reauthenticationNeeded: "Enter your current password or the code we email you."
        case .companyCredentialRequired: "Set your username and password for this company, then try again."
        case .ssoProviderNotFound: "Check the address, or sign in another way."
        case .ssoProviderDisabled: "Ask your company’s administrator."
        case "store_unavailable", "server_busy": "Try again in a moment."
        default: status >= 500 ? "Try again later." : nil
        }
    }
}

/// The body of an error answer, in the `{code, message}` shape the SDK asks for.
struct ErrorBody: Decodable {
    let code: String?
    let message: String?
    let weak_password: WeakPassword?
    /// The identity provider an `sso_required` refusal names.
    let provider_id: String?

    struct WeakPassword: Decodable {
        let reasons: [String]?
    }

    /// The typed error for an answer with `status`, this body and the `Retry-After` header, received at `now`.
    static func error(status: Int, body: Data, retryAfter: String?, receivedAt now: Date = Date()) -> GatehouseError {
        let decoded = try? JSONDecoder().decode(ErrorBody.self, from: body)
        let code = GatehouseError.Code(rawValue: decoded?.code ?? "http_\(status)")
        switch code {
        case .invalidCredentials: return .invalidCredentials
        case .overRequestRateLimit, .overEmailSendRateLimit:
            let stated = retryAfter.flatMap { RetryAfter(header: $0, receivedAt: now) }
            return .rateLimited(
                retryAfter: stated ?? RetryAfter(date: now.addingTimeInterval(RetryAfter.assumedDelay)))
        case .weakPassword: return .weakPassword(reasons: decoded?.weak_password?.reasons ?? [])
        case .emailNotConfirmed: return .emailNotConfirmed
        case .refreshTokenNotFound, .refreshTokenAlreadyUsed, .sessionExpired, .sessionNotFound, .userBanned,
            .userNotFound:
            return .sessionExpired
        case .companyAccessRevoked: return .companyAccessRevoked
        case .ssoRequired where !(decoded?.provider_id ?? "").isEmpty:
            return .ssoRequired(providerID: decoded?.provider_id ?? "")
        default: return .server(status: status, code: code.rawValue, message: decoded?.message ?? "")
        }
    }
}
