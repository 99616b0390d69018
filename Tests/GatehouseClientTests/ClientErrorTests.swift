import Foundation
import Testing

@testable import GatehouseClient

/// The SDK's errors as an app shows them: a short message for every case (never a secret it carries), codes that
/// survive the trip from the server and back, and rate limits as a moment to count down to.
@Suite("GatehouseClient errors")
struct ClientErrorTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    /// What a detail may carry and a message must never show.
    static let secrets = ["eyJhbGciOi", "refresh-7f3a", "hunter2", "/Users/ada", "SQLITE_FULL", "boom at 0x7f"]

    /// One value of every case, its details full of secrets. The switch below fails to compile when a case is added
    /// and not listed here.
    static let everyCase: [GatehouseError] = [
        .invalidCredentials,
        .rateLimited(retryAfter: RetryAfter(date: now + 30)),
        .lockedOut(until: now + 900),
        .weakPassword(reasons: ["length", "common"]),
        .emailNotConfirmed,
        .network("POST https://auth.example.com/token?refresh_token=refresh-7f3a: Bearer eyJhbGciOi boom at 0x7f"),
        .sessionExpired,
        .companyAccessRevoked,
        .sessionStore("cannot write /Users/ada/session.json: password hunter2"),
        .keychain(.biometryCancelled),
        .keychain(.biometryFailed),
        .keychain(.invalidData(removed: true)),
        .keychain(.cannotUnseal(removed: false)),
        .keychain(.cannotSeal),
        .keychain(.missingEntitlement),
        .keychain(.unexpected(.save, KeychainStatus(rawValue: -25244))),
        .sessionLocked,
        .localStore("SQLITE_FULL in /Users/ada/acme.sqlite"),
        .notSignedIn,
        .otherAddressPending,
        .authenticator(.cancelled),
        .authenticator(.credentialExcluded),
        .authenticator(.noCredential),
        .authenticator(.failed("boom at 0x7f, token eyJhbGciOi")),
        .ssoRequired(providerID: "eyJhbGciOi"),
        .server(status: 400, code: "mfa_verification_failed", message: "code hunter2 is wrong"),
        .server(status: 409, code: "username_taken", message: "hunter2 refresh-7f3a"),
        .server(status: 503, code: "store_unavailable", message: "SQLITE_FULL"),
        .server(status: 500, code: "unexpected_failure", message: "boom at 0x7f"),
    ]

    static func listed(_ error: GatehouseError) -> Bool {
        switch error {
        case .invalidCredentials, .rateLimited, .lockedOut, .weakPassword, .emailNotConfirmed, .network,
            .sessionExpired, .companyAccessRevoked, .sessionStore, .keychain, .sessionLocked, .localStore, .notSignedIn,
            .otherAddressPending, .authenticator, .ssoRequired, .server:
            true
        }
    }

    @Test("Every case has a short message for an alert and VoiceOver, and none shows a secret it carries")
    func messages() throws {
        #expect(Self.everyCase.allSatisfy(Self.listed))
        for error in Self.everyCase {
            let message = try #require(error.errorDescription, "\(error.code)")
            #expect(!message.isEmpty && message.count <= 60, "\(error.code): \(message)")
            #expect(message.hasSuffix("."), "a sentence: \(message)")
            #expect(error.localizedDescription == message)
            let shown = message + " " + (error.recoverySuggestion ?? "")
            for secret in Self.secrets {
                #expect(!shown.contains(secret), "\(error.code) shows \(secret)")
            }
        }
        #expect(GatehouseError.network("x").recoverySuggestion == "Check your connection and try again.")
        #expect(GatehouseError.weakPassword(reasons: ["length"]).recoverySuggestion == "Use a longer password.")
        #expect(GatehouseError.sessionExpired.recoverySuggestion == "Sign in again.")
        let countdown = try #require(
            GatehouseError.rateLimited(retryAfter: RetryAfter(date: Self.now)).recoverySuggestion)
        #expect(countdown.hasPrefix("Try again after "))
    }

    @Test("Codes: every case has one; the server's come back as the same case; any code survives as it is")
    func codesRoundTrip() throws {
        for error in Self.everyCase { #expect(!error.code.rawValue.isEmpty) }
        // The server's codes behind the typed cases map to those cases, and the cases answer them again.
        let typed: [GatehouseError] = [
            .invalidCredentials, .weakPassword(reasons: ["length"]), .emailNotConfirmed, .sessionExpired,
            .companyAccessRevoked, .rateLimited(retryAfter: RetryAfter(date: Self.now + 12)),
            .server(status: 422, code: "insufficient_aal", message: "need aal2"),
            .server(status: 418, code: "a_code_from_a_newer_server", message: ""),
        ]
        for error in typed {
            var body = #"{"code":"\#(error.code.rawValue)""#
            if case .weakPassword(let reasons) = error { body += #","weak_password":{"reasons":["\#(reasons[0])"]}"# }
            if case .server(_, _, let message) = error { body += #","message":"\#(message)""# }
            body += "}"
            let status = if case .server(let status, _, _) = error { status } else { 400 }
            let parsed = ErrorBody.error(status: status, body: Data(body.utf8), retryAfter: "12", receivedAt: Self.now)
            #expect(parsed == error)
            #expect(parsed.code == error.code)
        }
        // Every way the server says a session is over is one case.
        for code in [
            "refresh_token_not_found", "refresh_token_already_used", "session_expired", "session_not_found",
            "user_banned", "user_not_found",
        ] {
            #expect(
                ErrorBody.error(status: 403, body: Data(#"{"code":"\#(code)"}"#.utf8), retryAfter: nil)
                    == .sessionExpired)
        }
        // The code type is open: literals, raw values and JSON all give the same code.
        let unknown: GatehouseError.Code = "a_code_from_a_newer_server"
        #expect(unknown == GatehouseError.Code(rawValue: "a_code_from_a_newer_server"))
        #expect(GatehouseError.Code.insufficientAal == "insufficient_aal")
        let encoded = try JSONEncoder().encode([GatehouseError.Code.mfaVerificationFailed, unknown])
        #expect(
            String(decoding: encoded, as: UTF8.self) == #"["mfa_verification_failed","a_code_from_a_newer_server"]"#)
        #expect(
            try JSONDecoder().decode([GatehouseError.Code].self, from: encoded) == [.mfaVerificationFailed, unknown])
        // A body that is not ours still has a code.
        #expect(ErrorBody.error(status: 502, body: Data("<html>".utf8), retryAfter: nil).code == "http_502")
    }

    @Test(
        "Retry-After: delay-seconds and the three HTTP-date forms become a moment; anything else is not one",
        arguments: [
            ("120", now + 120),
            ("0", now),
            (" 30 ", now + 30),
            ("Wed, 21 Oct 2026 07:28:00 GMT", Date(timeIntervalSince1970: 1_792_567_680)),
            ("Wednesday, 21-Oct-26 07:28:00 GMT", Date(timeIntervalSince1970: 1_792_567_680)),
            ("Wed Oct 21 07:28:00 2026", Date(timeIntervalSince1970: 1_792_567_680)),
        ])
    func retryAfterParses(header: String, expected: Date) throws {
        let retry = try #require(RetryAfter(header: header, receivedAt: Self.now))
        #expect(retry.date == expected)
    }

    @Test(
        "Retry-After that is neither seconds nor an HTTP-date is refused", arguments: ["soon", "-5", "1.5", "", "١٢"])
    func retryAfterRefuses(header: String) {
        #expect(RetryAfter(header: header, receivedAt: Self.now) == nil)
    }

    @Test(
        "A 429 is a moment to count down to: stated by seconds or date, a minute when not said; a lockout on passwords")
    func rateLimits() {
        func answer(_ retryAfter: String?) -> GatehouseError {
            ErrorBody.error(
                status: 429, body: Data(#"{"code":"over_request_rate_limit"}"#.utf8), retryAfter: retryAfter,
                receivedAt: Self.now)
        }
        #expect(answer("45") == .rateLimited(retryAfter: RetryAfter(date: Self.now + 45)))
        #expect(
            answer("Wed, 21 Oct 2026 07:28:00 GMT")
                == .rateLimited(retryAfter: RetryAfter(date: Date(timeIntervalSince1970: 1_792_567_680))))
        #expect(answer(nil) == .rateLimited(retryAfter: RetryAfter(date: Self.now + 60)))
        #expect(answer("whenever") == .rateLimited(retryAfter: RetryAfter(date: Self.now + 60)))
        let mail = ErrorBody.error(
            status: 429, body: Data(#"{"code":"over_email_send_rate_limit"}"#.utf8), retryAfter: "60",
            receivedAt: Self.now)
        #expect(mail == .rateLimited(retryAfter: RetryAfter(date: Self.now + 60)))
        // The countdown: seconds left, never below zero.
        let retry = RetryAfter(date: Self.now + 45)
        #expect(retry.remaining(at: Self.now) == 45)
        #expect(retry.remaining(at: Self.now + 44.5) == 0.5)
        #expect(retry.remaining(at: Self.now + 90) == 0)
        // A password check's 429 is the account's lockout, ending at the same moment.
        #expect(answer("45").asLockout() == .lockedOut(until: Self.now + 45))
        #expect(GatehouseError.invalidCredentials.asLockout() == .invalidCredentials)
    }
}
