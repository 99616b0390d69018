import Foundation
import Testing

@testable import GatehouseServer

/// GoTrue's anonymous sign-in (`--anonymous-users on`): a sign-up without an email, made permanent by confirming one.
@Suite("Anonymous users")
struct AnonymousTests {
    /// The claims of an access token, read without checking it (the server checked it).
    static func claims(_ token: String) throws -> [String: Any] {
        let part = String(token.split(separator: ".")[1])
        var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let data = try #require(Data(base64Encoded: base64))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("off (the default): a sign-up without an email is 422 anonymous_provider_disabled, and settings say so")
    func offByDefault() async throws {
        try await AccountHarness.with { h in
            let refused = try await h.client.post("/auth/v1/signup", ["data": ["n": 1]])
            #expect(refused.status == 422 && refused.json["error_code"] as? String == "anonymous_provider_disabled")
            let settings = try await h.client.get("/auth/v1/settings")
            #expect((settings.json["external"] as? [String: Any])?["anonymous_users"] as? Bool == false)
        }
    }

    @Test(
        "an anonymous user signs in, may not own companies or accept shares, and becomes permanent with the same id by confirming an email"
    )
    func madePermanent() async throws {
        try await AccountHarness.with({ $0.auth.anonymousUsers = true }) { h in
            let signedUp = try await h.client.post("/auth/v1/signup", ["data": ["nickname": "guest"]])
            #expect(signedUp.status == 200)
            let session = try SignedIn(signedUp)
            let user = try #require(signedUp.json["user"] as? [String: Any])
            let id = try #require(user["id"] as? String)
            #expect(user["is_anonymous"] as? Bool == true && user["email"] as? String == "")
            #expect((user["identities"] as? [Any])?.isEmpty == true)
            #expect((user["user_metadata"] as? [String: Any])?["nickname"] as? String == "guest")
            let claims = try Self.claims(session.access)
            #expect(claims["is_anonymous"] as? Bool == true)
            #expect((claims["amr"] as? [[String: Any]])?.first?["method"] as? String == "anonymous")
            #expect(try await h.client.user(session.access).json["id"] as? String == id)

            // Not yet: companies and shares, a password alone, a reauthentication code.
            let company = try await h.client.createCompany("Guest Co", bearer: session.access)
            #expect(company.status == 403 && company.json["code"] as? String == "anonymous_not_allowed")
            let password = try await h.client.put(
                "/auth/v1/user", ["password": "guest passphrase 1"], bearer: session.access)
            #expect(password.status == 422 && password.json["error_code"] as? String == "validation_failed")
            #expect(try await h.client.get("/auth/v1/reauthenticate", bearer: session.access).status == 422)

            // Nor with an email in the same request: whoever confirms that address would take over an account whose
            // password someone else chose.
            let email = AccountHarness.newEmail("kept")
            let both = try await h.client.put(
                "/auth/v1/user", ["email": email, "password": "guest passphrase 1"], bearer: session.access)
            #expect(both.status == 422)

            // An email: one code, to the new address, and the same user, permanent; a password after that.
            let asked = try await h.client.put("/auth/v1/user", ["email": email], bearer: session.access)
            #expect(asked.status == 200 && asked.json["new_email"] as? String == email)
            let code = try #require(try await h.mail(to: email, subject: "Confirm your new email address").code)
            let confirmed = try await h.client.verify(email, code: code, type: "email_change")
            #expect(confirmed.status == 200)
            let permanent = try SignedIn(confirmed)
            let now = try #require(confirmed.json["user"] as? [String: Any])
            #expect(now["id"] as? String == id && now["is_anonymous"] as? Bool == false)
            #expect(now["email"] as? String == email && now["email_confirmed_at"] is String)
            #expect((now["user_metadata"] as? [String: Any])?["nickname"] as? String == "guest")
            #expect((now["identities"] as? [[String: Any]])?.first?["provider"] as? String == "email")
            #expect(try Self.claims(permanent.access)["is_anonymous"] as? Bool == false)
            let password2 = try await h.client.put(
                "/auth/v1/user", ["password": "guest passphrase 1"], bearer: permanent.access)
            #expect(password2.status == 200)
            #expect(try await h.client.password(email, "guest passphrase 1").status == 200)
            #expect(try await h.client.createCompany("Kept Co", bearer: permanent.access).status == 201)
        }
    }

    @Test("thirty anonymous sign-ins an hour from one address; no mail ever goes to a placeholder; idle ones are swept")
    func limitsAndSweep() async throws {
        try await AccountHarness.with({ $0.auth.anonymousUsers = true }) { h in
            var sessions: [SignedIn] = []
            for _ in 0..<30 { sessions.append(try SignedIn(try await h.client.post("/auth/v1/signup", [:]))) }
            let limited = try await h.client.post("/auth/v1/signup", [:])
            #expect(limited.status == 429 && limited.json["error_code"] as? String == "over_request_rate_limit")
            // The placeholder address cannot be given anywhere mail would go.
            let id = try #require(try await h.client.user(sessions[0].access).json["id"] as? String)
            let placeholder = AccountRecord.anonymousEmail(id: id)
            #expect(try await h.client.otp(placeholder).status == 400)
            #expect(try await h.client.post("/auth/v1/recover", ["email": placeholder]).status == 400)
            // Deleting itself needs nothing more than its session.
            #expect(try await h.client.deleteAccount([:], bearer: sessions[1].access).status == 204)

            // One stays in use; the others go once idle past the retention (30 days by default).
            h.clock.advance(by: 10 * 86_400)
            _ = try SignedIn(try await h.client.refresh(sessions[0].refresh))
            h.clock.advance(by: 21 * 86_400)
            let report = try await SweeperTests.sweeper(h).sweep()
            #expect(report.deleted[.anonymousAccounts] == 28)
            #expect(try await AccountRepository(db: h.server.services.store.database).find(id: id) != nil)
        }
    }
}
