import Crypto
import Foundation
import GatehouseServer
import Testing

/// PKCE as supabase-swift sends it: a challenge at the top level of the mail request with method "s256", a link that
/// redirects with `?code=`, and `POST /auth/v1/token?grant_type=pkce {auth_code, code_verifier}`.
@Suite("PKCE (supabase-swift's default flow)")
struct PKCETests {
    /// What supabase-swift makes: 64 random bytes, base64url without padding, and its S256 challenge.
    struct Verifier {
        let verifier: String
        var challenge: String { base64URL(Data(SHA256.hash(data: Data(verifier.utf8)))) }

        init() {
            var generator = SystemRandomNumberGenerator()
            verifier = Self.base64URL(Data((0..<64).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        }

        static func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        func base64URL(_ data: Data) -> String { Self.base64URL(data) }
    }

    static let callback = "myapp://login-callback"
    static func configure(_ configuration: inout GatehouseConfiguration) {
        configuration.auth.redirectAllowList = [callback]
    }

    /// Opens the mailed link and presses its button; returns the authorization code the app receives.
    static func authCode(_ h: AccountHarness, to email: String, subject: String) async throws -> String {
        let link = try #require(try await h.mail(to: email, subject: subject).link)
        let (_, answer) = try await h.followLink(link)
        #expect(answer.status == 303)
        let location = try #require(answer.headers["location"])
        #expect(location.hasPrefix(callback + "?code="))
        #expect(!location.contains("access_token"))
        return try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
    }

    static func exchange(_ h: AccountHarness, code: String, verifier: String) async throws -> HTTPReply {
        try await h.client.post("/auth/v1/token?grant_type=pkce", ["auth_code": code, "code_verifier": verifier])
    }

    @Test(
        "sign-up link → ?code= → token?grant_type=pkce with the verifier: a session, the sign-up's password; a replay ends it"
    )
    func signUpFlow() async throws {
        try await AccountHarness.with(Self.configure) { h in
            let pkce = Verifier()
            let email = AccountHarness.newEmail("pkce")
            let signedUp = try await h.client.post(
                "/auth/v1/signup?redirect_to=myapp%3A%2F%2Flogin-callback",
                [
                    "email": email, "password": "correct horse battery", "code_challenge": pkce.challenge,
                    "code_challenge_method": "s256",
                ])
            #expect(signedUp.status == 200)
            let code = try await Self.authCode(h, to: email, subject: "Confirm your email")
            let session = try await Self.exchange(h, code: code, verifier: pkce.verifier)
            #expect(session.status == 200)
            let signedIn = try SignedIn(session)
            #expect(try await h.client.user(signedIn.access).json["email_confirmed_at"] is String)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
            // A code presented again (it leaked?) is refused, and the session its first exchange started ends.
            let replayed = try await Self.exchange(h, code: code, verifier: pkce.verifier)
            #expect(replayed.json["error_code"] as? String == "flow_state_not_found")
            #expect(try await h.client.user(signedIn.access).status == 403)
        }
    }

    @Test("a wrong verifier, a second exchange and an expired flow state are refused with GoTrue's codes")
    func refusals() async throws {
        try await AccountHarness.with(Self.configure) { h in
            let pkce = Verifier()
            let email = AccountHarness.newEmail("pkce")
            let body: [String: Any] = [
                "email": email, "code_challenge": pkce.challenge, "code_challenge_method": "s256",
            ]
            _ = try await h.client.post("/auth/v1/otp?redirect_to=myapp%3A%2F%2Flogin-callback", body)
            let code = try await Self.authCode(h, to: email, subject: "Your sign-in code")
            let wrong = try await Self.exchange(h, code: code, verifier: Verifier().verifier)
            #expect(wrong.status == 400)
            #expect(wrong.json["error_code"] as? String == "bad_code_verifier")
            // A code is never worth a second guess: the wrong verifier used it up.
            let again = try await Self.exchange(h, code: code, verifier: pkce.verifier)
            #expect(again.status == 404)
            #expect(again.json["error_code"] as? String == "flow_state_not_found")

            h.clock.advance(by: 61)
            _ = try await h.client.post("/auth/v1/otp?redirect_to=myapp%3A%2F%2Flogin-callback", body)
            let late = try await Self.authCode(h, to: email, subject: "Your sign-in code")
            h.clock.advance(by: 301)
            let expired = try await Self.exchange(h, code: late, verifier: pkce.verifier)
            #expect(expired.status == 422)
            #expect(expired.json["error_code"] as? String == "flow_state_expired")

            let plain = try await h.client.post(
                "/auth/v1/otp", ["email": email, "code_challenge": pkce.verifier, "code_challenge_method": "plain"])
            #expect(plain.status == 400)
            #expect(plain.json["error_code"] as? String == "validation_failed")
        }
    }

    @Test("recovery in the PKCE flow: the exchanged session may set a new password without the old one")
    func recoveryFlow() async throws {
        try await AccountHarness.with(Self.configure) { h in
            let email = AccountHarness.newEmail("pkce")
            _ = try await h.confirmedAccount(email)
            let pkce = Verifier()
            #expect(
                try await h.client.post(
                    "/auth/v1/recover?redirect_to=myapp%3A%2F%2Flogin-callback",
                    ["email": email, "code_challenge": pkce.challenge, "code_challenge_method": "s256"]
                ).status == 200)
            let code = try await Self.authCode(h, to: email, subject: "Reset your password")
            let session = try SignedIn(try await Self.exchange(h, code: code, verifier: pkce.verifier))
            #expect(
                try await h.client.put("/auth/v1/user", ["password": "a brand new passphrase"], bearer: session.access)
                    .status == 200)
            #expect(try await h.client.password(email, "a brand new passphrase").status == 200)
        }
    }
}
