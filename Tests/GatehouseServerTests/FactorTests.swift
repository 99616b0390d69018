import Crypto
import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// The TOTP and recovery-code rules without I/O: RFC 6238's own vectors, the drift window, replay.
@Suite("Second factor rules")
struct FactorRulesTests {
    static let rfcSecret = Array("12345678901234567890".utf8)

    @Test(
        "RFC 6238 appendix B's SHA-1 vectors, as six digits",
        arguments: [
            (59, "287082"), (1_111_111_109, "081804"), (1_111_111_111, "050471"), (1_234_567_890, "005924"),
            (2_000_000_000, "279037"), (20_000_000_000, "353130"),
        ] as [(Int64, String)])
    func rfcVectors(time: Int64, code: String) {
        let step = TOTP.step(at: Date(timeIntervalSince1970: TimeInterval(time)))
        #expect(TOTP.code(secret: Self.rfcSecret, step: step) == code)
    }

    @Test("a code is accepted one step either side, never two, and only once")
    func window() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let step = TOTP.step(at: now)
        func accepted(_ offset: Int64, after last: Int64? = nil) -> Int64? {
            TOTP.acceptedStep(
                code: TOTP.code(secret: Self.rfcSecret, step: step + offset), secret: Self.rfcSecret, now: now,
                lastUsedStep: last)
        }
        #expect(accepted(0) == step)
        #expect(accepted(-1) == step - 1)
        #expect(accepted(1) == step + 1)
        #expect(accepted(-2) == nil)
        #expect(accepted(2) == nil)
        // Replay: the step accepted last, or any before it, is refused; a later one is not.
        #expect(accepted(0, after: step) == nil)
        #expect(accepted(-1, after: step) == nil)
        #expect(accepted(1, after: step) == step + 1)
        for garbage in ["", "12345", "1234567", "12345a", "１２３４５６", " 123456"] {
            #expect(TOTP.acceptedStep(code: garbage, secret: Self.rfcSecret, now: now, lastUsedStep: nil) == nil)
        }
    }

    @Test("base32 as RFC 4648 spells it, and the otpauth URI authenticator apps read")
    func encoding() throws {
        #expect(Base32.encode(Array("foobar".utf8)) == "MZXW6YTBOI")
        #expect(Base32.encode(Array("f".utf8)) == "MY")
        #expect(try #require(Base32.decode("mzxw6ytboi")) == Array("foobar".utf8))
        #expect(Base32.decode("MZXW1") == nil)
        let secret = TOTP.newSecret()
        #expect(secret.count == 20 && Base32.encode(secret).count == 32)
        #expect(Base32.decode(Base32.encode(secret)) == secret)
        let uri = TOTP.uri(secret: Array("foobar".utf8), issuer: "Acme Co", account: "a+b@example.com")
        #expect(
            uri == "otpauth://totp/Acme%20Co:a%2Bb%40example.com?secret=MZXW6YTBOI&issuer=Acme%20Co"
                + "&algorithm=SHA1&digits=6&period=30")
    }

    @Test("recovery codes: ten distinct, read back in any case with dashes and spaces, keyed digests")
    func recoveryCodes() {
        let codes = RecoveryCodes.generate()
        #expect(codes.count == 10 && Set(codes).count == 10)
        #expect(codes.allSatisfy { $0.count == 16 && RecoveryCodes.normalized($0) == $0 })
        let code = codes[0]
        #expect(RecoveryCodes.normalized(RecoveryCodes.grouped(code).uppercased()) == code)
        #expect(
            RecoveryCodes.normalized(" " + RecoveryCodes.grouped(code).replacingOccurrences(of: "-", with: " "))
                == code)
        #expect(RecoveryCodes.normalized(String(code.dropLast())) == nil)
        #expect(RecoveryCodes.normalized(String(code.dropLast()) + "1") == nil)
        let one = SymmetricKey(size: .bits256)
        let two = SymmetricKey(size: .bits256)
        #expect(
            RecoveryCodes.digest(code, factorID: "a", key: one) != RecoveryCodes.digest(code, factorID: "b", key: one))
        #expect(
            RecoveryCodes.digest(code, factorID: "a", key: one) != RecoveryCodes.digest(code, factorID: "a", key: two))
        #expect(!RecoveryCodes.digest(code, factorID: "a", key: one).contains(code))
    }
}

/// One small helper per factor endpoint, and the code an authenticator app would show at the test clock's time.
extension AccountHarness {
    struct Enrolled {
        let id: String
        let secret: [UInt8]
        let uri: String
        let qrCode: String
    }

    func enroll(_ bearer: String, name: String? = nil, issuer: String? = nil) async throws -> HTTPReply {
        var body: [String: Any] = ["factor_type": "totp"]
        if let name { body["friendly_name"] = name }
        if let issuer { body["issuer"] = issuer }
        return try await client.post("/auth/v1/factors", body, bearer: bearer)
    }

    func enrolled(_ bearer: String, name: String? = nil) async throws -> Enrolled {
        let reply = try await enroll(bearer, name: name)
        #expect(reply.status == 200)
        let totp = try #require(reply.json["totp"] as? [String: Any])
        let secret = try #require(totp["secret"] as? String)
        return Enrolled(
            id: try #require(reply.json["id"] as? String), secret: try #require(Base32.decode(secret)),
            uri: try #require(totp["uri"] as? String), qrCode: try #require(totp["qr_code"] as? String))
    }

    func challenge(_ factorID: String, bearer: String) async throws -> HTTPReply {
        try await client.post("/auth/v1/factors/\(factorID)/challenge", [:], bearer: bearer)
    }

    func verifyFactor(_ factorID: String, challenge: String, code: String, bearer: String) async throws -> HTTPReply {
        try await client.post(
            "/auth/v1/factors/\(factorID)/verify", ["challenge_id": challenge, "code": code], bearer: bearer)
    }

    /// The code of `factor` now, or `steps` time steps from now.
    func code(_ factor: Enrolled, steps: Int64 = 0) -> String {
        TOTP.code(secret: factor.secret, step: TOTP.step(at: clock.now) + steps)
    }

    /// Challenges and verifies `factor` with the current code; the aal2 session.
    func stepUp(_ factor: Enrolled, bearer: String, steps: Int64 = 0) async throws -> SignedIn {
        let challenge = try #require(try await challenge(factor.id, bearer: bearer).json["id"] as? String)
        let verified = try await verifyFactor(
            factor.id, challenge: challenge, code: code(factor, steps: steps), bearer: bearer)
        #expect(verified.status == 200, "\(verified.body)")
        return try SignedIn(verified)
    }
}

@Suite("Second factor: TOTP in GoTrue's wire format, aal2, recovery codes, companies that require it")
struct FactorFlowTests {
    static func claims(_ token: String) throws -> [String: Any] { try CompanyFlowTests.claims(token) }

    static func code(_ reply: HTTPReply) -> String? { reply.json["error_code"] as? String }

    @Test("enroll, challenge, verify: the session reaches aal2, keeps it through refresh, and other aal1 sessions end")
    func enrollAndVerify() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let first = try await h.confirmedAccount(email)
            let other = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try Self.claims(first.access)["aal"] as? String == "aal1")

            let factor = try await h.enrolled(first.access, name: "phone")
            #expect(
                factor.uri.hasPrefix("otpauth://totp/") && factor.uri.contains("secret=\(Base32.encode(factor.secret))")
            )
            #expect(factor.qrCode.hasPrefix("<svg") && factor.qrCode.contains("</svg>"))
            // Listed unverified in the user object; the secret is sealed at rest.
            let user = try await h.client.user(first.access)
            let listed = try #require((user.json["factors"] as? [[String: Any]])?.first)
            #expect(listed["status"] as? String == "unverified" && listed["friendly_name"] as? String == "phone")
            #expect(listed["factor_type"] as? String == "totp" && listed["phone"] as? String == "")
            let stored = try #require(
                try await h.server.services.store.database.select().column("secret").from("mfa_factors")
                    .where("id", .equal, factor.id).first(decodingColumn: "secret", as: String.self))
            #expect(stored.hasPrefix(SecretBox.prefix) && !stored.contains(Base32.encode(factor.secret)))

            let challenge = try await h.challenge(factor.id, bearer: first.access)
            #expect(challenge.status == 200 && challenge.json["type"] as? String == "totp")
            let expiresAt = try #require(challenge.json["expires_at"] as? Int)
            #expect(expiresAt == Int(h.clock.now.timeIntervalSince1970) + 300)
            let challengeID = try #require(challenge.json["id"] as? String)

            // A wrong code: 422, and the challenge stays usable.
            let wrong = try await h.verifyFactor(
                factor.id, challenge: challengeID, code: "000000", bearer: first.access)
            #expect(wrong.status == 422 && Self.code(wrong) == "mfa_verification_failed")
            let verified = try await h.verifyFactor(
                factor.id, challenge: challengeID, code: h.code(factor), bearer: first.access)
            #expect(verified.status == 200)
            let raised = try SignedIn(verified)
            let claims = try Self.claims(raised.access)
            #expect(claims["aal"] as? String == "aal2")
            #expect(claims["session_id"] as? String == (try Self.claims(first.access)["session_id"] as? String))
            let amr = try #require(claims["amr"] as? [[String: Any]])
            // Newest first: the sign-up code that signed this session in, then the factor.
            #expect(amr.map { $0["method"] as? String } == ["totp", "otp"])
            let factors = try #require((verified.json["user"] as? [String: Any])?["factors"] as? [[String: Any]])
            #expect(factors.first?["status"] as? String == "verified")

            // The challenge is spent; the aal1 refresh token is retired; a refresh keeps aal2.
            let again = try await h.verifyFactor(
                factor.id, challenge: challengeID, code: h.code(factor), bearer: raised.access)
            #expect(again.status == 422 && Self.code(again) == "mfa_ip_address_mismatch")
            #expect(try await h.client.refresh(first.refresh).status == 400)
            let refreshed = try SignedIn(try await h.client.refresh(raised.refresh))
            #expect(try Self.claims(refreshed.access)["aal"] as? String == "aal2")
            // The other aal1 session ended with the first verification.
            #expect(try await h.client.refresh(other.refresh).status == 400)
            #expect(try await h.client.user(other.access).status == 403)
        }
    }

    @Test("a code is used once, a challenge lives five minutes, and wrong codes back off per factor")
    func replayExpiryAndBackoff() async throws {
        try await AccountHarness.with { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail())
            let factor = try await h.enrolled(session.access)
            let raised = try await h.stepUp(factor, bearer: session.access)
            // The same code on a fresh challenge: refused (RFC 6238 §5.2), even within its 30 seconds.
            let fresh = try #require(try await h.challenge(factor.id, bearer: raised.access).json["id"] as? String)
            let replay = try await h.verifyFactor(
                factor.id, challenge: fresh, code: h.code(factor), bearer: raised.access)
            #expect(replay.status == 422 && Self.code(replay) == "mfa_verification_failed")
            // The next step's code is fine; it rotates the refresh token again.
            let next = try await h.verifyFactor(
                factor.id, challenge: fresh, code: h.code(factor, steps: 1), bearer: raised.access)
            #expect(next.status == 200)
            #expect(try await h.client.refresh(raised.refresh).status == 400)

            // Wrong codes: three free, then the factor backs off (counted before the check), audited.
            let challenge = try #require(try await h.challenge(factor.id, bearer: raised.access).json["id"] as? String)
            var statuses: [Int] = []
            for _ in 0..<5 {
                statuses.append(
                    try await h.verifyFactor(factor.id, challenge: challenge, code: "123456", bearer: raised.access)
                        .status)
            }
            #expect(statuses.prefix(4).allSatisfy { $0 == 422 } && statuses.last == 429)
            let limited = try await h.verifyFactor(
                factor.id, challenge: challenge, code: h.code(factor), bearer: raised.access)
            #expect(limited.status == 429)
            let failures = try await h.server.services.store.database.select().column("detail").from("audit_events")
                .where("action", .equal, "mfa_verify_failed").all(decodingColumn: "detail", as: String.self)
            #expect(failures.filter { $0.contains("wrong_code") }.count >= 4)
            // An hour later the backoff has passed (and the access token expired: refresh it).
            h.clock.advance(by: 3601)
            let renewed = try SignedIn(try await h.client.refresh(try SignedIn(next).refresh))
            // A challenge older than five minutes is refused and gone.
            let old = try #require(try await h.challenge(factor.id, bearer: renewed.access).json["id"] as? String)
            h.clock.advance(by: 301)
            let expired = try await h.verifyFactor(
                factor.id, challenge: old, code: h.code(factor), bearer: renewed.access)
            #expect(expired.status == 422 && Self.code(expired) == "mfa_challenge_expired")
            let gone = try await h.verifyFactor(factor.id, challenge: old, code: h.code(factor), bearer: renewed.access)
            #expect(Self.code(gone) == "mfa_factor_not_found")

        }
    }

    @Test("bad input: another user's factor, aal1 where aal2 is needed, names, limits, types, anonymous users")
    func badInput() async throws {
        try await AccountHarness.with({ $0.auth.anonymousUsers = true }) { h in
            let alice = try await h.confirmedAccount(AccountHarness.newEmail("alice"))
            let bob = try await h.confirmedAccount(AccountHarness.newEmail("bob"))
            let factor = try await h.enrolled(alice.access, name: "phone")
            // Bob cannot see, challenge, verify or remove it: as if it did not exist.
            let foreign = try await h.challenge(factor.id, bearer: bob.access)
            #expect(foreign.status == 404 && Self.code(foreign) == "mfa_factor_not_found")
            #expect(try await h.client.delete("/auth/v1/factors/\(factor.id)", bearer: bob.access).status == 404)
            #expect(try await h.challenge("not-a-uuid", bearer: alice.access).status == 404)
            // Another user's challenge id does not verify Alice's factor.
            let bobs = try await h.enrolled(bob.access)
            let bobChallenge = try #require(try await h.challenge(bobs.id, bearer: bob.access).json["id"] as? String)
            let crossed = try await h.verifyFactor(
                factor.id, challenge: bobChallenge, code: h.code(factor), bearer: alice.access)
            #expect(crossed.status == 422 && Self.code(crossed) == "mfa_factor_not_found")

            let conflict = try await h.enroll(alice.access, name: "phone")
            #expect(conflict.status == 422 && Self.code(conflict) == "mfa_factor_name_conflict")
            let phone = try await h.client.post("/auth/v1/factors", ["factor_type": "phone"], bearer: alice.access)
            #expect(phone.status == 400 && Self.code(phone) == "validation_failed")
            let longIssuer = try await h.enroll(alice.access, issuer: String(repeating: "ü", count: 33))
            #expect(longIssuer.status == 400 && Self.code(longIssuer) == "validation_failed")
            let malformed = try await h.client.post("/auth/v1/factors", ["friendly_name": 3], bearer: alice.access)
            #expect(malformed.status == 400)
            for index in 1..<10 { #expect(try await h.enroll(alice.access, name: "key \(index)").status == 200) }
            let eleventh = try await h.enroll(alice.access, name: "one too many")
            #expect(eleventh.status == 422 && Self.code(eleventh) == "too_many_enrolled_mfa_factors")

            // Once one is verified: a further enrolment, or removing a verified factor, needs aal2.
            let raised = try await h.stepUp(factor, bearer: alice.access)
            let aal1 = try SignedIn(
                try await h.client.password(try #require(Self.email(h, alice)), "correct horse battery"))
            let enrolAtAAL1 = try await h.enroll(aal1.access, name: "laptop")
            #expect(enrolAtAAL1.status == 403 && Self.code(enrolAtAAL1) == "insufficient_aal")
            let removeAtAAL1 = try await h.client.delete("/auth/v1/factors/\(factor.id)", bearer: aal1.access)
            #expect(removeAtAAL1.status == 422 && Self.code(removeAtAAL1) == "insufficient_aal")
            // The verification removed the other unfinished enrolments, so aal2 may enroll again.
            #expect(try await h.enroll(raised.access, name: "laptop").status == 200)

            // Anonymous users have no factors.
            let anonymous = try SignedIn(try await h.client.post("/auth/v1/signup", [:]))
            let refused = try await h.enroll(anonymous.access)
            #expect(refused.status == 403 && Self.code(refused) == "anonymous_not_allowed")
        }
    }

    static func email(_ h: AccountHarness, _ session: SignedIn) async throws -> String? {
        (try await h.client.user(session.access)).json["email"] as? String
    }

    @Test("removing a factor at aal2 lowers the sessions it raised; its refresh gives aal1")
    func unenroll() async throws {
        try await AccountHarness.with { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail())
            let factor = try await h.enrolled(session.access)
            let raised = try await h.stepUp(factor, bearer: session.access)
            let removed = try await h.client.delete("/auth/v1/factors/\(factor.id)", bearer: raised.access)
            #expect(removed.status == 200 && removed.json["id"] as? String == factor.id)
            let refreshed = try SignedIn(try await h.client.refresh(raised.refresh))
            let claims = try Self.claims(refreshed.access)
            #expect(claims["aal"] as? String == "aal1")
            #expect((claims["amr"] as? [[String: Any]])?.map { $0["method"] as? String } == ["otp"])
            #expect(try await h.client.user(refreshed.access).json["factors"] == nil)
        }
    }

    @Test("recovery codes: shown once at aal2, each stands in for a TOTP code once, used ones are mailed")
    func recoveryCodes() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let session = try await h.confirmedAccount(email)
            let refusedWithout = try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: session.access)
            #expect(refusedWithout.status == 403 && Self.code(refusedWithout) == "insufficient_aal")
            let factor = try await h.enrolled(session.access)
            let raised = try await h.stepUp(factor, bearer: session.access)
            let generated = try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: raised.access)
            #expect(generated.status == 200 && generated.json["type"] as? String == "recovery_code")
            let codes = try #require(generated.json["codes"] as? [String])
            #expect(codes.count == 10 && generated.json["total"] as? Int == 10)
            let twice = try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: raised.access)
            #expect(Self.code(twice) == "mfa_verified_factor_exists")
            // Not stored in the clear.
            let digests = try await h.server.services.store.database.select().column("digest")
                .from("mfa_recovery_codes").all(decodingColumn: "digest", as: String.self)
            #expect(digests.count == 10 && !digests.contains { digest in codes.contains { digest.contains($0) } })

            // A new aal1 sign-in uses one, typed in groups: aal2 with mfa/recovery_code; the account is told.
            let aal1 = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let typed = RecoveryCodes.grouped(codes[3]).uppercased()
            let used = try await h.client.post(
                "/auth/v1/factors/recovery-codes/verify", ["code": typed], bearer: aal1.access)
            #expect(used.status == 200)
            let claims = try Self.claims(try SignedIn(used).access)
            #expect(claims["aal"] as? String == "aal2")
            #expect((claims["amr"] as? [[String: Any]])?.first?["method"] as? String == "mfa/recovery_code")
            let mail = try await h.mail(to: email, subject: "A recovery code was used")
            #expect(mail.text.contains("9 unused codes are left"))
            let reused = try await h.client.post(
                "/auth/v1/factors/recovery-codes/verify", ["code": codes[3]], bearer: aal1.access)
            #expect(reused.status == 422 && Self.code(reused) == "mfa_verification_failed")
            let status = try await h.client.get("/auth/v1/factors/recovery-codes", bearer: raised.access)
            #expect(status.json["remaining"] as? Int == 9 && status.json["codes"] == nil)

            // Regenerated: the old codes are void. Five wrong codes lock the set.
            let regenerated = try await h.client.post(
                "/auth/v1/factors/recovery-codes/regenerate", [:], bearer: raised.access)
            let newCodes = try #require(regenerated.json["codes"] as? [String])
            #expect(Set(newCodes).isDisjoint(with: codes))
            let later = try SignedIn(try await h.client.password(email, "correct horse battery"))
            var statuses: [Int] = []
            for code in codes.prefix(6) {
                statuses.append(
                    try await h.client.post(
                        "/auth/v1/factors/recovery-codes/verify", ["code": code], bearer: later.access
                    )
                    .status)
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 422 })
            let locked = try await h.client.post(
                "/auth/v1/factors/recovery-codes/verify", ["code": newCodes[0]], bearer: later.access)
            #expect(locked.status == 429 && Self.code(locked) == "mfa_recovery_codes_locked")

            // The last TOTP factor cannot leave the codes alone.
            let sole = try await h.client.delete("/auth/v1/factors/\(factor.id)", bearer: raised.access)
            #expect(sole.status == 422 && Self.code(sole) == "mfa_recovery_codes_sole_factor")
        }
    }

    @Test("a company that requires a second factor: set at aal2, aal1 company sessions end, login refused until aal2")
    func companyRequiresMFA() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Acme", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)

            // The owner's company session is aal1: it may not require what it lacks.
            let early = try await h.client.patch(
                "/v1/companies/\(cid)", ["requires_mfa": true], bearer: owner.company?.access)
            #expect(early.status == 403 && early.json["code"] as? String == "insufficient_aal")
            let factor = try await h.enrolled(owner.account.access)
            let raised = try await h.stepUp(factor, bearer: owner.account.access)
            owner.company = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: raised.access))
            #expect(try Self.claims(try #require(owner.company?.access))["aal"] as? String == "aal2")
            let set = try await h.client.patch(
                "/v1/companies/\(cid)", ["requires_mfa": true], bearer: owner.company?.access)
            #expect(set.status == 200 && set.json["requires_mfa"] as? Bool == true)
            let changes = try await h.server.services.store.database.select().column("detail").from("audit_events")
                .where("action", .equal, "company_updated").all(decodingColumn: "detail", as: String.self)
            #expect(changes.contains { $0.contains("requires_mfa") })

            // The member's aal1 company session ended; the owner's aal2 one did not.
            let memberCompany = try #require(member.company)
            #expect(try await h.client.refresh(memberCompany.refresh).status == 400)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: owner.company?.access).status == 200)
            let listed = try await h.client.get("/v1/companies", bearer: member.account.access)
            let summary = try #require((listed.json["companies"] as? [[String: Any]])?.first)
            #expect(summary["requires_mfa"] as? Bool == true)

            // The member's login is refused until their account session is aal2, before the password is looked at.
            let username = "user-\(member.id.prefix(6))"
            let refused = try await h.client.companyLogin(
                cid, username: username, password: "wrong", bearer: member.account.access)
            #expect(refused.status == 403 && refused.json["code"] as? String == "insufficient_aal")
            let memberFactor = try await h.enrolled(member.account.access)
            let memberRaised = try await h.stepUp(memberFactor, bearer: member.account.access)
            let login = try await h.client.companyLogin(
                cid, username: username, password: "member secret 1", bearer: memberRaised.access)
            #expect(login.status == 200)
            #expect(try Self.claims(try SignedIn(login).access)["aal"] as? String == "aal2")

            // The admin API removes the member's factor: their company session in this company ends.
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let list = try await admin.get("/auth/v1/admin/users/\(member.id)/factors")
            #expect(list.status == 200 && (list.jsonArray.first?["id"] as? String) == memberFactor.id)
            let deleted = try await admin.send(
                .delete, "/auth/v1/admin/users/\(member.id)/factors/\(memberFactor.id)", [:])
            #expect(deleted.status == 200 && deleted.json["id"] as? String == memberFactor.id)
            #expect(try await h.client.refresh(try SignedIn(login).refresh).status == 400)
            let lowered = try SignedIn(try await h.client.refresh(memberRaised.refresh))
            #expect(try Self.claims(lowered.access)["aal"] as? String == "aal1")
            #expect(try await admin.get("/auth/v1/admin/users/\(member.id)/factors").jsonArray.isEmpty)
            #expect(
                try await h.server.services.store.database.select().column("id").from("audit_events")
                    .where("action", .equal, "factor_deleted").all().count == 1)
        }
    }

    @Test("the operator's lost-phone case: `users factors list` shows them, `reset` removes them and lowers sessions")
    func operatorReset() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let session = try await h.confirmedAccount(email)
            let factor = try await h.enrolled(session.access, name: "lost phone")
            let raised = try await h.stepUp(factor, bearer: session.access)
            let support = Operator(store: h.server.services.store)
            let lines = try #require(try await support.factors(email))
            #expect(
                lines.count == 1 && lines[0].contains("\(factor.id)  totp  verified")
                    && lines[0].hasSuffix("lost phone"))
            #expect(try await support.factors("nobody@example.com") == nil)
            #expect(try await support.resetFactors(email) == 1)
            #expect(try await support.factors(email) == [])
            let lowered = try SignedIn(try await h.client.refresh(raised.refresh))
            #expect(try Self.claims(lowered.access)["aal"] as? String == "aal1")
            let detail = try await h.server.services.store.database.select().column("detail").from("audit_events")
                .where("action", .equal, "factors_reset").all(decodingColumn: "detail", as: String.self)
            #expect(detail.count == 1 && detail[0].contains("operator"))
            // A fresh sign-in is aal1 and may enroll again without aal2.
            let again = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.enroll(again.access).status == 200)
        }
    }
}
