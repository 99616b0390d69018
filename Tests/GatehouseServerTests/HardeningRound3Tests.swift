import Foundation
import GatehouseClient
import GatehouseClientTesting
import SQLKit
import Testing

@testable import GatehouseServer

/// The third attack review's findings on factors, sessions and passkeys (issue 35), each replayed as the attacker ran
/// it. Every test here failed on main before its fix (docs/security.md, "Round 3", maps them).
@Suite("Hardening round 3: second factors, step-up, passkeys and sessions")
struct HardeningRound3Tests {
    static let password = "correct horse battery"

    static func code(_ reply: HTTPReply) -> String? {
        reply.json["error_code"] as? String ?? reply.json["code"] as? String
    }

    static func aal(_ token: String) throws -> String? { try FactorFlowTests.claims(token)["aal"] as? String }

    /// An owner at aal2 with a verified authenticator app, and a password-only (aal1) session of the same account,
    /// signed in afterwards as an attacker who has the password would.
    static func ownerAndIntruder(_ h: AccountHarness) async throws -> (
        email: String, owner: SignedIn, factor: AccountHarness.Enrolled, intruder: SignedIn
    ) {
        let email = AccountHarness.newEmail("owner")
        let first = try await h.confirmedAccount(email, password: password)
        let factor = try await h.enrolled(first.access, name: "phone")
        let owner = try await h.stepUp(factor, bearer: first.access)
        let intruder = try SignedIn(try await h.client.password(email, password))
        #expect(try aal(intruder.access) == "aal1")
        return (email, owner, factor, intruder)
    }

    @Test("Finding 1: an aal1 session neither sees nor verifies the owner's unfinished factor, on the API or the page")
    func pendingFactorBypass() async throws {
        try await AccountHarness.with { h in
            let (_, owner, _, intruder) = try await Self.ownerAndIntruder(h)
            // The owner starts a second authenticator and walks away.
            let pending = try await h.enrolled(owner.access, name: "tablet")

            // The page: a refused code shows no secret and no QR code of the pending factor.
            let page = try await h.form(
                "/account/factors/verify", ["factor_id": pending.id, "code": "000000"], session: intruder.access)
            #expect(!page.body.contains(RecoveryCodes.grouped(Base32.encode(pending.secret))))
            #expect(!page.body.contains(Base32.encode(pending.secret)) && !page.body.contains("<svg"))

            // The API: even the right code of the pending factor does not raise a session below aal2.
            let challenge = try #require(
                try await h.challenge(pending.id, bearer: intruder.access).json["id"] as? String)
            let verified = try await h.verifyFactor(
                pending.id, challenge: challenge, code: h.code(pending), bearer: intruder.access)
            #expect(verified.status == 422 && Self.code(verified) == "insufficient_aal")
            #expect(verified.json["access_token"] == nil)
            // The page's post with the right code does not either: the session stays aal1.
            let posted = try await h.form(
                "/account/factors/verify", ["factor_id": pending.id, "code": h.code(pending, steps: 1)],
                session: intruder.access)
            #expect(!(posted.headers["set-cookie"] ?? "").contains(WebSession.accessCookie + "="))
            let status = try await h.server.services.store.database.select().column("status").from("mfa_factors")
                .where("id", .equal, pending.id).first(decodingColumn: "status", as: String.self)
            #expect(status == "unverified")

            // The owner, at aal2, still finishes it.
            #expect(try await h.stepUp(pending, bearer: owner.access).access.isEmpty == false)
        }
    }

    @Test("Finding 2: a token issued at aal1 stays aal1 after its session steps up")
    func staleTokenStepUp() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("stepup")
            let cid = try await h.company("Guarded", owner: &owner)
            // The aal1 token an attacker copied, then the owner steps the same session up.
            let stolen = owner.account.access
            let factor = try await h.enrolled(stolen, name: "phone")
            let raised = try await h.stepUp(factor, bearer: stolen)
            #expect(try Self.aal(raised.access) == "aal2")
            let guarded = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: raised.access))
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["requires_mfa": true], bearer: guarded.access).status
                    == 200)

            let codes = try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: stolen)
            #expect(codes.status == 403 && Self.code(codes) == "insufficient_aal")
            let another = try await h.enroll(stolen, name: "attacker")
            #expect(another.status == 403 && Self.code(another) == "insufficient_aal")
            let login = try await h.client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: stolen)
            #expect(login.status == 403 && Self.code(login) == "insufficient_aal")
            // The raised token does all of it.
            #expect(
                try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: raised.access).status == 200)
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: raised.access
                ).status == 200)
        }
    }

    @Test("Finding 3: password, email, deletion and signing out other devices need aal2 once a factor is verified")
    func sensitiveChangesNeedAAL2() async throws {
        try await AccountHarness.with { h in
            let (email, owner, _, intruder) = try await Self.ownerAndIntruder(h)
            let password = try await h.client.put(
                "/auth/v1/user", ["password": "a brand new passphrase"], bearer: intruder.access)
            #expect(password.status == 401 && Self.code(password) == "insufficient_aal")
            let address = try await h.client.put(
                "/auth/v1/user", ["email": AccountHarness.newEmail("thief")], bearer: intruder.access)
            #expect(address.status == 401 && Self.code(address) == "insufficient_aal")
            let deletion = try await h.client.deleteAccount(
                ["current_password": Self.password], bearer: intruder.access)
            #expect(deletion.status == 401 && Self.code(deletion) == "insufficient_aal", "\(deletion.body)")
            // Profile data is not guarded: it hands nothing over.
            #expect(
                try await h.client.put("/auth/v1/user", ["data": ["name": "Ann"]], bearer: intruder.access).status
                    == 200)

            // The pages: nothing changes, nothing ends.
            _ = try await h.form(
                "/account/password", ["password": "a brand new passphrase", "current_password": Self.password],
                session: intruder.access)
            _ = try await h.form("/account/sign-out-others", [:], session: intruder.access)
            _ = try await h.form(
                "/account/delete", ["confirm": "yes", "current_password": Self.password], session: intruder.access)
            #expect(try await h.client.password(email, Self.password).status == 200)
            #expect(try await h.client.refresh(owner.refresh).status == 200)

            // At aal2 the owner may.
            let changed = try await h.client.put(
                "/auth/v1/user", ["password": "a brand new passphrase", "current_password": Self.password],
                bearer: owner.access)
            #expect(changed.status == 200, "\(changed.body)")
        }
    }

    @Test("Finding 5: a new way in needs recent proof, and the owner is mailed when one is added or removed")
    func newWaysInNeedProofAndMail() async throws {
        try await AccountHarness.withPasskeys { h in
            let email = AccountHarness.newEmail("proof")
            let session = try await h.confirmedAccount(email, password: Self.password)
            // A session stolen long after its sign-in.
            h.clock.advance(by: 11 * 60)
            let factor = try await h.enroll(session.access, name: "phone")
            #expect(factor.status == 400 && Self.code(factor) == "reauthentication_needed")
            let options = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: session.access)
            #expect(options.status == 400 && Self.code(options) == "reauthentication_needed")
            let wrong = try await h.client.post(
                "/auth/v1/factors", ["factor_type": "totp", "current_password": "not it"], bearer: session.access)
            #expect(wrong.status == 400 && Self.code(wrong) == "current_password_invalid")

            // The current password is proof; the owner hears of each way in added and removed.
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            let proven = try await h.client.post(
                "/auth/v1/passkeys/registration/options", ["current_password": Self.password], bearer: session.access)
            #expect(proven.status == 200, "\(proven.body)")
            let (challengeID, credential) = try AccountHarness.create(proven, with: device)
            let added = try await h.client.post(
                "/auth/v1/passkeys/registration/verify", ["challenge_id": challengeID, "credential": credential],
                bearer: session.access)
            #expect(added.status == 200, "\(added.body)")
            let addedMail = try await h.mail(to: email, subject: "A passkey was added to your account")
            #expect(addedMail.text.contains("a passkey, named"))
            let passkeyID = try #require(added.json["id"] as? String)
            #expect(try await h.client.delete("/auth/v1/passkeys/\(passkeyID)", bearer: session.access).status < 300)
            _ = try await h.mail(to: email, subject: "A passkey was removed from your account")

            let enrolled = try await h.client.post(
                "/auth/v1/factors",
                ["factor_type": "totp", "friendly_name": "phone", "current_password": Self.password],
                bearer: session.access)
            #expect(enrolled.status == 200, "\(enrolled.body)")
            let secretText = try #require((enrolled.json["totp"] as? [String: Any])?["secret"] as? String)
            let secret = try #require(Base32.decode(secretText))
            let app = AccountHarness.Enrolled(
                id: try #require(enrolled.json["id"] as? String), secret: secret, uri: "", qrCode: "")
            let raised = try await h.stepUp(app, bearer: session.access)
            let factorMail = try await h.mail(to: email, subject: "An authenticator app was added to your account")
            #expect(factorMail.text.contains("an authenticator app, named \"phone\""))
            #expect(try await h.client.delete("/auth/v1/factors/\(app.id)", bearer: raised.access).status == 200)
            _ = try await h.mail(to: email, subject: "An authenticator app was removed from your account")
        }
    }

    @Test("Finding 5: on the pages, a session signed in long ago is asked to sign in again before adding a way in")
    func pagesAskForAFreshSignIn() async throws {
        try await AccountHarness.withPasskeys { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail("stale"), password: Self.password)
            h.clock.advance(by: 11 * 60)
            let page = try await h.form("/account/factors", [:], session: session.access)
            #expect(page.body.contains("sign out, sign in again, then try once more"))
            #expect(!page.body.contains("<svg"))
            let account = try await h.page("/account", session: session.access)
            let options = try await h.script(
                "/account/passkeys/options", session: session.access, token: try PasskeyPagesTests.token(account))
            #expect(options.status == 400 && (options.json["message"] as? String)?.contains("sign in again") == true)
        }
    }

    @Test("Finding 5: after a password change the page marks passkeys added since the last password sign-in")
    func passwordChangeReviewsPasskeys() async throws {
        try await AccountHarness.withPasskeys { h in
            let email = AccountHarness.newEmail("review")
            _ = try await h.confirmedAccount(email, password: Self.password)
            let mine = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            let signedIn = try SignedIn(try await h.client.password(email, Self.password))
            #expect(try await h.registerPasskey(mine, bearer: signedIn.access).status == 200)
            h.clock.advance(by: 60)
            // Someone who stole that session adds theirs (within its first ten minutes, or with a reauthentication
            // code from a mailbox they also read); the owner signs in with the password later and changes it.
            let theirs = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            let intruding = try await h.registerPasskey(theirs, bearer: signedIn.access)
            let intruderPasskey = try #require(intruding.json["id"] as? String)
            h.clock.advance(by: 60)
            let owner = try SignedIn(try await h.client.password(email, Self.password))
            let changed = try await h.form(
                "/account/password", ["password": "a brand new passphrase", "current_password": Self.password],
                session: owner.access)
            #expect(changed.status == 303, "\(changed.body)")
            let page = try await h.page("/account?notice=password_changed", session: owner.access)
            #expect(page.body.contains("id=\"passkey-review\""))
            let marked = page.body.matches(
                of: /<li class="passkey review">(?:.|\n)*?name="passkey_id" value="([^"]+)"/
            ).map { String($0.1) }
            #expect(marked == [intruderPasskey])
            // Elsewhere the page marks nothing.
            #expect(!(try await h.page("/account", session: owner.access)).body.contains("passkey-review"))
        }
    }

    @Test("Finding 8: wrong recovery codes lock one client out, not the owner's recovery from elsewhere")
    func recoveryCeilingPerClient() async throws {
        try await AccountHarness.with { h in
            let (email, owner, _, intruder) = try await Self.ownerAndIntruder(h)
            let codes = try #require(
                try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: owner.access)
                    .json["codes"] as? [String])
            func client(_ ip: String) -> AuthClient {
                AuthClient(http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", ip)])
            }
            let attacker = client("198.51.100.7")
            var statuses: [Int] = []
            for _ in 0..<6 {
                statuses.append(
                    try await attacker.post(
                        "/auth/v1/factors/recovery-codes/verify", ["code": "AAAA-BBBB-CCCC-DDDD"],
                        bearer: intruder.access
                    ).status)
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 422 } && statuses.last == 429)
            // The owner, from their own address, recovers.
            let home = client("203.0.113.9")
            let ownerAAL1 = try SignedIn(try await home.password(email, Self.password))
            let used = try await home.post(
                "/auth/v1/factors/recovery-codes/verify", ["code": codes[0]], bearer: ownerAAL1.access)
            #expect(used.status == 200, "\(used.body)")
        }
    }

    @Test("Finding 10: a company token ends only its own session")
    func companyTokenLogout() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("logout")
            let cid = try await h.company("Acme", owner: &owner)
            let company = try #require(owner.company)
            for scope in ["global", "others"] {
                let refused = try await h.client.post("/auth/v1/logout?scope=\(scope)", [:], bearer: company.access)
                #expect(refused.status == 403 && Self.code(refused) == "account_session_required", "\(scope)")
            }
            #expect(try await h.client.user(owner.account.access).status == 200)
            #expect(try await h.client.refresh(owner.account.refresh).status == 200)
            // Its own session, it may end.
            #expect(try await h.client.post("/auth/v1/logout?scope=local", [:], bearer: company.access).status == 204)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: company.access).status == 403)
        }
    }

    @Test("Finding 11: the admin API never leaves recovery codes as the only factor")
    func adminLeavesNoLoneRecoveryCodes() async throws {
        try await AccountHarness.with { h in
            let (_, owner, factor, intruder) = try await Self.ownerAndIntruder(h)
            #expect(try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: owner.access).status == 200)
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let deleted = try await admin.send(
                .delete, "/auth/v1/admin/users/\(owner.userID)/factors/\(factor.id)", [:])
            #expect(deleted.status == 200, "\(deleted.body)")
            let left = try await admin.get("/auth/v1/admin/users/\(owner.userID)/factors")
            #expect(left.jsonArray.isEmpty, "\(left.body)")
            // With no factor left, the password session may enroll a new one (it is the account's first again).
            #expect(try await h.enroll(intruder.access, name: "new phone").status == 200)
        }
    }

    @Test("Finding 11: a recovery-code set left alone by an older release still guards what needs aal2")
    func loneRecoveryCodesStillGuard() async throws {
        try await AccountHarness.with { h in
            let (_, owner, factor, intruder) = try await Self.ownerAndIntruder(h)
            #expect(try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: owner.access).status == 200)
            // As an older release's admin API left it: the app gone, the codes kept.
            try await h.server.services.store.database.delete(from: "mfa_factors").where("id", .equal, factor.id).run()
            let enroll = try await h.enroll(intruder.access, name: "attacker")
            #expect(enroll.status == 403 && Self.code(enroll) == "insufficient_aal")
            let password = try await h.client.put(
                "/auth/v1/user", ["password": "a brand new passphrase"], bearer: intruder.access)
            #expect(password.status == 401 && Self.code(password) == "insufficient_aal")
        }
    }

    @Test("Finding 13: racing verifications of one challenge leave only the winner's step")
    func losingVerifyLeavesNoStep() async throws {
        try await AccountHarness.with { h in
            let session = try await h.confirmedAccount(AccountHarness.newEmail("race"))
            let factor = try await h.enrolled(session.access)
            var bearer = try await h.stepUp(factor, bearer: session.access).access
            for round in 0..<8 {
                h.clock.advance(by: 90)
                let challenge = try #require(try await h.challenge(factor.id, bearer: bearer).json["id"] as? String)
                // Two codes the window accepts, this step's and the next one's, on one challenge at once.
                let now = TOTP.step(at: h.clock.now)
                let current = bearer
                async let early = h.verifyFactor(factor.id, challenge: challenge, code: h.code(factor), bearer: current)
                async let late = h.verifyFactor(
                    factor.id, challenge: challenge, code: h.code(factor, steps: 1), bearer: current)
                let (first, second) = try await (early, late)
                #expect([first.status, second.status].sorted() == [200, 422], "round \(round)")
                let winner: Int64 = first.status == 200 ? now : now + 1
                let stored = try await h.server.services.store.database.select().column("last_used_step")
                    .from("mfa_factors").where("id", .equal, factor.id)
                    .first(decodingColumn: "last_used_step", as: Int64.self)
                #expect(stored == winner, "round \(round): the loser's step was kept")
                bearer = try SignedIn(first.status == 200 ? first : second).access
            }
        }
    }

    @Test("Finding 13: after an email change, the authenticator's label and the recovery mail use the new address")
    func currentEmailNotToken() async throws {
        try await AccountHarness.with { h in
            let (_, owner, _, _) = try await Self.ownerAndIntruder(h)
            let codes = try #require(
                try await h.client.post("/auth/v1/factors/recovery-codes", [:], bearer: owner.access)
                    .json["codes"] as? [String])
            // The change completed; the session's tokens still carry the old address until they are refreshed.
            let newEmail = AccountHarness.newEmail("moved")
            try await h.server.services.store.database.update("accounts").set("email", to: newEmail)
                .where("id", .equal, owner.userID).run()
            let enrolled = try await h.enroll(owner.access, name: "second phone")
            let uri = try #require((enrolled.json["totp"] as? [String: Any])?["uri"] as? String)
            #expect(uri.contains(newEmail.replacingOccurrences(of: "@", with: "%40")) || uri.contains(newEmail))
            let aal1 = try SignedIn(try await h.client.password(newEmail, Self.password))
            #expect(
                try await h.client.post(
                    "/auth/v1/factors/recovery-codes/verify", ["code": codes[1]], bearer: aal1.access
                )
                .status == 200)
            _ = try await h.mail(to: newEmail, subject: "A recovery code was used")
        }
    }

    @Test("Finding 13: a company passkey made while no credential was required stops once the company requires one")
    func companyPasskeyNeedsCredential() async throws {
        try await AccountHarness.withPasskeys { h in
            var owner = try await h.person("strict")
            let cid = try await h.company("Strict Co", owner: &owner)
            let ownerCompany = try #require(owner.company?.access)
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["requires_credential": false], bearer: ownerCompany)
                    .status == 200)
            let member = try await h.person("walkin")
            let share = try await h.client.createShare(cid, permission: "read_write", bearer: ownerCompany)
            _ = try await h.client.accept(try #require(share.json["token"] as? String), bearer: member.account.access)
            let entered = try SignedIn(
                try await h.client.companyLogin(cid, username: nil, password: nil, bearer: member.account.access))
            let base = "/v1/companies/\(cid)/passkeys"
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(device, bearer: entered.access, base: base).status == 200)

            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["requires_credential": true], bearer: ownerCompany)
                    .status == 200)
            let options = try await h.client.post(base + "/login/options", [:], bearer: member.account.access)
            let challengeID = try #require(options.json["challenge_id"] as? String)
            let assertion = try AccountHarness.assert(options, with: device)
            let refused = try await h.client.post(
                base + "/login/verify", ["challenge_id": challengeID, "credential": assertion],
                bearer: member.account.access)
            #expect(refused.status == 403 && Self.code(refused) == "company_credential_required", "\(refused.body)")
            // Once the member sets a credential, the passkey logs in beside it.
            #expect(
                try await h.client.createCredential(
                    cid, username: "walkin", password: "member secret 1", bearer: member.account.access
                ).status == 201)
            let login = try await h.passkeyAssertion(
                device, optionsPath: base + "/login/options", verifyPath: base + "/login/verify",
                bearer: member.account.access)
            #expect(login.status == 200, "\(login.body)")
        }
    }
}
