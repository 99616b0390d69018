import Foundation
import GatehouseClient
import GatehouseClientTesting
import SQLKit
import Testing

@testable import GatehouseServer

extension AccountHarness {
    static let passkeyOrigin = "http://localhost:8080"

    /// A harness with passkeys on, the relying party `localhost` reached from `passkeyOrigin`.
    static func withPasskeys(
        _ configure: @escaping (inout GatehouseConfiguration) -> Void = { _ in },
        _ body: (AccountHarness) async throws -> Void
    ) async throws {
        try await with(
            { configuration in
                configuration.passkeys.enabled = true
                configuration.passkeys.relyingPartyID = "localhost"
                configuration.passkeys.origins = [passkeyOrigin]
                configuration.appleAppIDs = ["ABCDE12345.com.example.app"]
                configure(&configuration)
            }, body)
    }

    /// Options from `optionsPath`, the authenticator's new credential for them, and the verify's answer.
    func registerPasskey(
        _ device: SoftwareAuthenticator, bearer: String, base: String = "/auth/v1/passkeys",
        rpID: String? = nil, edit: (inout [String: Any]) -> Void = { _ in }
    ) async throws -> HTTPReply {
        let options = try await client.post(base + "/registration/options", [:], bearer: bearer)
        try #require(options.status == 200, "\(options.body)")
        let (challengeID, credential) = try Self.create(options, with: device, rpID: rpID)
        var edited = credential
        edit(&edited)
        return try await client.post(
            base + "/registration/verify", ["challenge_id": challengeID, "credential": edited], bearer: bearer)
    }

    /// The authenticator's answer to creation options, as the JSON object a browser sends.
    static func create(_ options: HTTPReply, with device: SoftwareAuthenticator, rpID: String? = nil) throws
        -> (challengeID: String, credential: [String: Any])
    {
        let challengeID = try #require(options.json["challenge_id"] as? String)
        let publicKey = try #require(options.json["options"] as? [String: Any])
        let user = try #require(publicKey["user"] as? [String: Any])
        let excluded = (publicKey["excludeCredentials"] as? [[String: Any]] ?? []).compactMap {
            ($0["id"] as? String).flatMap { Data(base64URL: $0) }
        }
        let json = try device.makeCredential(
            rpID: rpID ?? (publicKey["rp"] as? [String: Any])?["id"] as? String ?? "",
            challenge: try bytes(publicKey["challenge"]), userID: try bytes(user["id"]),
            userName: user["name"] as? String ?? "", excludeCredentialIDs: excluded)
        return (challengeID, try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any]))
    }

    /// Request options from `optionsPath`, the authenticator's assertion, and the verify's answer.
    func passkeyAssertion(
        _ device: SoftwareAuthenticator, optionsPath: String = "/auth/v1/passkeys/authentication/options",
        verifyPath: String = "/auth/v1/passkeys/authentication/verify", bearer: String? = nil,
        edit: (inout [String: Any]) -> Void = { _ in }
    ) async throws -> HTTPReply {
        let options = try await client.post(optionsPath, [:], bearer: bearer)
        try #require(options.status == 200, "\(options.body)")
        let challengeID = try #require(options.json["challenge_id"] as? String)
        var credential = try Self.assert(options, with: device)
        edit(&credential)
        return try await client.post(
            verifyPath, ["challenge_id": challengeID, "credential": credential], bearer: bearer)
    }

    static func assert(_ options: HTTPReply, with device: SoftwareAuthenticator) throws -> [String: Any] {
        let publicKey = try #require(options.json["options"] as? [String: Any])
        let allowed = (publicKey["allowCredentials"] as? [[String: Any]] ?? []).compactMap {
            ($0["id"] as? String).flatMap { Data(base64URL: $0) }
        }
        let json = try device.getAssertion(
            rpID: try #require(publicKey["rpId"] as? String),
            challenge: try bytes(publicKey["challenge"]), allowCredentialIDs: allowed)
        return try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
    }

    /// A base64url field's bytes.
    static func bytes(_ field: Any?) throws -> Data {
        let text = try #require(field as? String)
        return try #require(Data(base64URL: text))
    }

    /// The audit details recorded for `action`, oldest first.
    func auditDetails(_ action: AuditAction) async throws -> [String] {
        try await server.services.store.database.select().column("detail").from("audit_events")
            .where("action", .equal, action.rawValue).orderBy("occurred_at")
            .all(decodingColumn: "detail", as: String?.self).map { $0 ?? "" }
    }

    func passkeyCount() async throws -> Int {
        try await server.services.store.database.select().column("id").from("passkeys").all().count
    }
}

/// A field of a credential's `response`, as bytes, changed by `change` and written back.
private func alter(_ credential: inout [String: Any], _ field: String, _ change: (inout [UInt8]) -> Void) {
    var response = credential["response"] as? [String: Any] ?? [:]
    var bytes = Array(Data(base64URL: response[field] as? String ?? "") ?? Data())
    change(&bytes)
    response[field] = Secrets.base64URL(Data(bytes))
    credential["response"] = response
}

@Suite("Passkeys")
struct PasskeyTests {
    static func code(_ reply: HTTPReply) -> String? {
        reply.json["error_code"] as? String ?? reply.json["code"] as? String
    }

    @Test("register, list, sign in with no session: aal1 with amr passkey; the counter grows; rename and delete")
    func registerAndSignIn() async throws {
        try await AccountHarness.withPasskeys { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)

            let options = try await h.client.post("/auth/v1/passkeys/registration/options", [:], bearer: account.access)
            #expect(options.status == 200)
            let publicKey = try #require(options.json["options"] as? [String: Any])
            #expect((publicKey["rp"] as? [String: Any])?["id"] as? String == "localhost")
            let user = try #require(publicKey["user"] as? [String: Any])
            #expect(user["name"] as? String == email)
            #expect(Data(base64URL: user["id"] as? String ?? "") == Data(account.userID.utf8))
            let selection = try #require(publicKey["authenticatorSelection"] as? [String: Any])
            #expect(selection["residentKey"] as? String == "required")
            #expect(selection["userVerification"] as? String == "required")
            #expect(
                (publicKey["pubKeyCredParams"] as? [[String: Any]])?.compactMap { $0["alg"] as? Int } == [-7, -257])
            #expect(options.json["expires_at"] as? Int == Int(h.clock.now.timeIntervalSince1970) + 300)

            let (challengeID, credential) = try AccountHarness.create(options, with: device)
            let registered = try await h.client.post(
                "/auth/v1/passkeys/registration/verify", ["challenge_id": challengeID, "credential": credential],
                bearer: account.access)
            #expect(registered.status == 200, "\(registered.body)")
            let passkeyID = try #require(registered.json["id"] as? String)
            #expect(registered.json["friendly_name"] as? String == "Passkey")
            #expect(registered.json["backed_up"] as? Bool == false)

            // Listed, also at Supabase's trailing-slash path.
            for path in ["/auth/v1/passkeys", "/auth/v1/passkeys/"] {
                let list = try await h.client.get(path, bearer: account.access)
                #expect(list.status == 200 && list.jsonArray.map { $0["id"] as? String } == [passkeyID])
            }

            // Sign in with no session: a session at aal1 whose amr is passkey.
            h.clock.advance(by: 60)
            let signedIn = try await h.passkeyAssertion(device)
            #expect(signedIn.status == 200, "\(signedIn.body)")
            let session = try SignedIn(signedIn)
            #expect(session.userID == account.userID)
            let claims = try FactorFlowTests.claims(session.access)
            #expect(claims["aal"] as? String == "aal1")
            #expect((claims["amr"] as? [[String: Any]])?.first?["method"] as? String == "passkey")
            #expect(try await h.client.user(session.access).status == 200)
            #expect(try await h.auditDetails(.signedIn).last?.contains("passkey") == true)
            let credentialID = try #require(device.credentialIDs.first)
            let first = try #require(device.signCount(of: credentialID))
            #expect(try await h.passkeyAssertion(device).status == 200)
            #expect(device.signCount(of: credentialID) == first + 1)
            let used = try await h.client.get("/auth/v1/passkeys", bearer: account.access)
            #expect(used.jsonArray.first?["last_used_at"] is String)

            // Rename, then delete: the passkey no longer signs in.
            let renamed = try await h.client.patch(
                "/auth/v1/passkeys/\(passkeyID)", ["friendly_name": "Work laptop"], bearer: account.access)
            #expect(renamed.status == 200 && renamed.json["friendly_name"] as? String == "Work laptop")
            let blank = try await h.client.patch(
                "/auth/v1/passkeys/\(passkeyID)", ["friendly_name": " "], bearer: account.access)
            #expect(blank.status == 400 && Self.code(blank) == "validation_failed")
            let deleted = try await h.client.delete("/auth/v1/passkeys/\(passkeyID)", bearer: account.access)
            #expect(deleted.status == 204)
            let again = try await h.client.delete("/auth/v1/passkeys/\(passkeyID)", bearer: account.access)
            #expect(again.status == 404)
            let gone = try await h.passkeyAssertion(device)
            #expect(gone.status == 400 && Self.code(gone) == "webauthn_credential_not_found")
            #expect(try await h.auditDetails(.passkeyDeleted).count == 1)
        }
    }

    @Test("off by default: every passkey route answers 404 passkey_disabled, after authorization where it is needed")
    func offByDefault() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            for path in ["/auth/v1/passkeys/authentication/options", "/auth/v1/passkeys/registration/options"] {
                let reply = try await h.client.post(path, [:], bearer: account.access)
                #expect(reply.status == 404 && Self.code(reply) == "passkey_disabled")
            }
            let list = try await h.client.get("/auth/v1/passkeys", bearer: account.access)
            #expect(list.status == 404 && Self.code(list) == "passkey_disabled")
            #expect(try await h.client.get("/auth/v1/passkeys").status == 401)
            let verify = try await h.client.post(
                "/auth/v1/passkeys/authentication/verify",
                ["challenge_id": UUID().uuidString, "credential": ["id": "x"]])
            #expect(verify.status == 404 && Self.code(verify) == "passkey_disabled")
            #expect(try await h.client.get("/.well-known/apple-app-site-association").status == 404)
        }
    }

    @Test("a challenge is used once, lives five minutes, and answers only its own ceremony and user")
    func challenges() async throws {
        try await AccountHarness.withPasskeys { h in
            let alice = try await h.confirmedAccount(AccountHarness.newEmail("alice"))
            let bob = try await h.confirmedAccount(AccountHarness.newEmail("bob"))
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(device, bearer: alice.access).status == 200)

            // Replayed: the same assertion twice.
            let options = try await h.client.post("/auth/v1/passkeys/authentication/options", [:])
            let body: [String: Any] = [
                "challenge_id": try #require(options.json["challenge_id"] as? String),
                "credential": try AccountHarness.assert(options, with: device),
            ]
            #expect(try await h.client.post("/auth/v1/passkeys/authentication/verify", body).status == 200)
            let replayed = try await h.client.post("/auth/v1/passkeys/authentication/verify", body)
            #expect(replayed.status == 400 && Self.code(replayed) == "webauthn_challenge_not_found")

            // Expired: five minutes and a second.
            let late = try await h.client.post("/auth/v1/passkeys/authentication/options", [:])
            let lateCredential = try AccountHarness.assert(late, with: device)
            h.clock.advance(by: 301)
            let expired = try await h.client.post(
                "/auth/v1/passkeys/authentication/verify",
                ["challenge_id": late.json["challenge_id"] as? String ?? "", "credential": lateCredential])
            #expect(expired.status == 400 && Self.code(expired) == "webauthn_challenge_expired")

            // Alice's registration challenge is not Bob's, nor a sign-in's.
            let aliceOptions = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: alice.access)
            let (aliceChallenge, credential) = try AccountHarness.create(
                aliceOptions, with: SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin))
            let asBob = try await h.client.post(
                "/auth/v1/passkeys/registration/verify", ["challenge_id": aliceChallenge, "credential": credential],
                bearer: bob.access)
            #expect(asBob.status == 400 && Self.code(asBob) == "webauthn_challenge_not_found")
            let otherOptions = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: alice.access)
            let asSignIn = try await h.client.post(
                "/auth/v1/passkeys/authentication/verify",
                ["challenge_id": otherOptions.json["challenge_id"] as? String ?? "", "credential": credential])
            #expect(asSignIn.status == 400 && Self.code(asSignIn) == "webauthn_challenge_not_found")
            let notUUID = try await h.client.post(
                "/auth/v1/passkeys/authentication/verify", ["challenge_id": "nope", "credential": credential])
            #expect(notUUID.status == 400 && Self.code(notUUID) == "validation_failed")
            #expect(try await h.passkeyCount() == 1)
        }
    }

    @Test("bad input: each WebAuthn refusal is a 400 with a stable code, audited, nothing stored, never a crash")
    func refusals() async throws {
        try await AccountHarness.withPasskeys { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let origin = AccountHarness.passkeyOrigin
            func refusedRegistration(
                _ device: SoftwareAuthenticator, rpID: String? = nil, edit: (inout [String: Any]) -> Void = { _ in }
            ) async throws -> String? {
                let reply = try await h.registerPasskey(device, bearer: account.access, rpID: rpID, edit: edit)
                #expect(reply.status == 400, "\(reply.body)")
                return Self.code(reply)
            }
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: "https://evil.example"))
                    == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin), rpID: "evil.example")
                    == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin, userVerification: false))
                    == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin)) {
                    alter(&$0, "attestationObject") { $0 = [0xA3, 0x63, 0x66, 0x6D] }
                } == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin)) {
                    alter(&$0, "clientDataJSON") { $0 = Array("{\"type\":".utf8) }
                } == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin)) { $0["rawId"] = "AAAA" }
                    == "webauthn_verification_failed")
            #expect(
                try await refusedRegistration(SoftwareAuthenticator(origin: origin)) { $0 = ["hello": [1, 2]] }
                    == "webauthn_verification_failed")
            #expect(try await h.passkeyCount() == 0)
            let reasons = try await h.auditDetails(.passkeyRegistrationFailed)
            for reason in ["origin_not_allowed", "rp_id_mismatch", "user_not_verified", "malformed"] {
                #expect(reasons.contains { $0.contains(reason) }, "\(reason) in \(reasons)")
            }

            // Sign-in: a tampered authenticator data byte or signature, a stranger's device, a wrong origin.
            let device = SoftwareAuthenticator(origin: origin)
            #expect(try await h.registerPasskey(device, bearer: account.access).status == 200)
            let tamperedData = try await h.passkeyAssertion(device) { alter(&$0, "authenticatorData") { $0[36] ^= 1 } }
            #expect(tamperedData.status == 400 && Self.code(tamperedData) == "webauthn_verification_failed")
            let tamperedSignature = try await h.passkeyAssertion(device) {
                alter(&$0, "signature") { $0[$0.count - 1] ^= 1 }
            }
            #expect(tamperedSignature.status == 400 && Self.code(tamperedSignature) == "webauthn_verification_failed")
            let noFlags = try await h.passkeyAssertion(device) { alter(&$0, "authenticatorData") { $0[32] = 0 } }
            #expect(noFlags.status == 400 && Self.code(noFlags) == "webauthn_verification_failed")
            let stranger = SoftwareAuthenticator(origin: origin)
            _ = try stranger.makeCredential(
                rpID: "localhost", challenge: Data(count: 32), userID: Data(account.userID.utf8), userName: "x")
            let unknown = try await h.passkeyAssertion(stranger)
            #expect(unknown.status == 400 && Self.code(unknown) == "webauthn_credential_not_found")
            // Another user's handle on a known credential is not that user.
            let wrongHandle = try await h.passkeyAssertion(device) {
                var response = $0["response"] as? [String: Any] ?? [:]
                response["userHandle"] = Secrets.base64URL(Data("someone-else".utf8))
                $0["response"] = response
            }
            #expect(wrongHandle.status == 400 && Self.code(wrongHandle) == "webauthn_credential_not_found")
            let failures = try await h.auditDetails(.passkeySignInFailed)
            #expect(failures.contains { $0.contains("bad_signature") })
            #expect(failures.contains { $0.contains("unknown_credential") })
            // The store is unchanged by any of it, and the good passkey still signs in.
            #expect(try await h.passkeyCount() == 1)
            #expect(try await h.passkeyAssertion(device).status == 200)
        }
    }

    @Test("a counter that goes back is a cloned authenticator: refused and audited; counters that stay at zero pass")
    func signCounter() async throws {
        try await AccountHarness.withPasskeys { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(device, bearer: account.access).status == 200)
            let credentialID = try #require(device.credentialIDs.first)
            #expect(try await h.passkeyAssertion(device).status == 200)
            #expect(try await h.passkeyAssertion(device).status == 200)
            // A clone still at the count of the first sign-in.
            device.setSignCount(0, of: credentialID)
            let cloned = try await h.passkeyAssertion(device)
            #expect(cloned.status == 400 && Self.code(cloned) == "webauthn_verification_failed")
            #expect(try await h.auditDetails(.passkeyCloneSuspected).count == 1)

            // Synced passkeys never count: zero after zero is fine, as often as it comes.
            let synced = SoftwareAuthenticator(
                origin: AccountHarness.passkeyOrigin, signCountStep: 0, backupEligible: true, backedUp: true)
            let registered = try await h.registerPasskey(synced, bearer: account.access)
            #expect(registered.status == 200 && registered.json["backed_up"] as? Bool == true)
            #expect(registered.json["friendly_name"] as? String == "Passkey")
            for _ in 0..<3 { #expect(try await h.passkeyAssertion(synced).status == 200) }
        }
    }

    @Test("limits: ten passkeys, one credential once, aal2 once a factor is verified, no anonymous users")
    func limits() async throws {
        try await AccountHarness.withPasskeys({ $0.auth.anonymousUsers = true }) { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(device, bearer: account.access).status == 200)
            // The same authenticator: the options exclude its credential, and it refuses as a browser does.
            await #expect(throws: SoftwareAuthenticatorError.self) {
                _ = try await h.registerPasskey(device, bearer: account.access)
            }
            // A credential id registered already (here: to the row of this account's first passkey) is refused,
            // whoever's it is, and nothing is stored.
            let options = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: account.access)
            let (challengeID, credential) = try AccountHarness.create(
                options, with: SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin))
            try await h.server.services.store.database.update("passkeys")
                .set("credential_id", to: try #require(credential["id"] as? String)).run()
            let duplicate = try await h.client.post(
                "/auth/v1/passkeys/registration/verify", ["challenge_id": challengeID, "credential": credential],
                bearer: account.access)
            #expect(duplicate.status == 422 && Self.code(duplicate) == "webauthn_credential_exists")
            #expect(try await h.passkeyCount() == 1)

            for _ in 0..<9 {
                let more = try await h.registerPasskey(
                    SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin), bearer: account.access)
                #expect(more.status == 200)
            }
            let eleventh = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: account.access)
            #expect(eleventh.status == 422 && Self.code(eleventh) == "too_many_passkeys")

            // With a verified second factor, managing passkeys needs aal2.
            let factor = try await h.enrolled(account.access)
            let raised = try await h.stepUp(factor, bearer: account.access)
            let fresh = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let list = try await h.client.get("/auth/v1/passkeys", bearer: raised.access)
            let firstID = try #require(list.jsonArray.first?["id"] as? String)
            let low = try await h.client.delete("/auth/v1/passkeys/\(firstID)", bearer: fresh.access)
            #expect(low.status == 403 && Self.code(low) == "insufficient_aal")
            #expect(try await h.client.delete("/auth/v1/passkeys/\(firstID)", bearer: raised.access).status == 204)

            // Anonymous users add an email first.
            let anonymous = try SignedIn(try await h.client.post("/auth/v1/signup", [:]))
            let refused = try await h.client.post(
                "/auth/v1/passkeys/registration/options", [:], bearer: anonymous.access)
            #expect(refused.status == 403 && Self.code(refused) == "anonymous_not_allowed")
        }
    }

    @Test("company passkeys: from a company session, instead of the password, private, gone with the membership")
    func companyPasskeys() async throws {
        try await AccountHarness.withPasskeys { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Acme", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            let ownerAcme = try #require(owner.company?.access)
            let other = try await h.company("Other", owner: &owner)
            let base = "/v1/companies/\(cid)/passkeys"
            let phone = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)

            // The account session alone may not add one: that would step past the company's own login.
            let fromAccount = try await h.client.post(
                base + "/registration/options", [:], bearer: member.account.access)
            #expect(fromAccount.status == 403 && Self.code(fromAccount) == "company_context_required")
            let companyAccess = try #require(member.company?.access)
            let options = try await h.client.post(base + "/registration/options", [:], bearer: companyAccess)
            #expect(options.status == 200)
            let user = try #require((options.json["options"] as? [String: Any])?["user"] as? [String: Any])
            #expect((user["name"] as? String)?.hasSuffix("· Acme") == true && user["displayName"] as? String == "Acme")
            #expect(
                try AccountHarness.bytes(user["id"])
                    == PasskeyService.companyUserHandle(cid, accountID: member.id))
            let registered = try await h.registerPasskey(phone, bearer: companyAccess, base: base)
            #expect(registered.status == 200, "\(registered.body)")
            let passkeyID = try #require(registered.json["id"] as? String)
            let list = try await h.client.get(base, bearer: companyAccess)
            #expect(list.jsonArray.map { $0["id"] as? String } == [passkeyID])
            // Private: not among the account's passkeys, nor the owner's company list.
            #expect(try await h.client.get("/auth/v1/passkeys", bearer: member.account.access).jsonArray.isEmpty)
            #expect(try await h.client.get(base, bearer: ownerAcme).jsonArray.isEmpty)

            // Log in with it from the account session: a company session that says company_passkey.
            let options2 = try await h.client.post(base + "/login/options", [:], bearer: member.account.access)
            let allowed = (options2.json["options"] as? [String: Any])?["allowCredentials"] as? [[String: Any]]
            #expect(allowed?.count == 1)
            let login = try await h.passkeyAssertion(
                phone, optionsPath: base + "/login/options", verifyPath: base + "/login/verify",
                bearer: member.account.access)
            #expect(login.status == 200, "\(login.body)")
            let claims = try FactorFlowTests.claims(try SignedIn(login).access)
            #expect(claims["cid"] as? String == cid)
            #expect((claims["amr"] as? [[String: Any]])?.first?["method"] as? String == "company_passkey")
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: try SignedIn(login).access).status == 200)

            // Not a way into the account, nor into another company.
            let asAccount = try await h.passkeyAssertion(phone)
            #expect(asAccount.status == 400 && Self.code(asAccount) == "webauthn_credential_not_found")
            let otherBase = "/v1/companies/\(other)/passkeys"
            let none = try await h.client.post(otherBase + "/login/options", [:], bearer: owner.account.access)
            #expect(none.status == 400 && Self.code(none) == "webauthn_credential_not_found")
            let ownerPhone = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(ownerPhone, bearer: ownerAcme, base: base).status == 200)
            // The owner's Acme passkey, offered to Other's login with Other's challenge.
            let otherOptions = try await h.client.post(
                otherBase + "/login/options", [:], bearer: owner.account.access)
            #expect(otherOptions.status == 400)
            // A member's assertion posted to a company they are not in: 404 before any check.
            let stranger = try await h.client.post(
                otherBase + "/login/verify", ["challenge_id": UUID().uuidString, "credential": [:] as [String: Any]],
                bearer: member.account.access)
            #expect(stranger.status == 404)

            // Another member's passkey for this company does not log this member in, even from an authenticator
            // that ignores the allowed list.
            let memberOptions = try await h.client.post(base + "/login/options", [:], bearer: member.account.access)
            let publicKey = try #require(memberOptions.json["options"] as? [String: Any])
            let borrowedAssertion = try ownerPhone.getAssertion(
                rpID: "localhost", challenge: try AccountHarness.bytes(publicKey["challenge"]))
            let borrowed = try await h.client.post(
                base + "/login/verify",
                [
                    "challenge_id": memberOptions.json["challenge_id"] as? String ?? "",
                    "credential": try JSONSerialization.jsonObject(with: borrowedAssertion),
                ], bearer: member.account.access)
            #expect(borrowed.status == 400 && Self.code(borrowed) == "webauthn_credential_not_found")

            // Removed by the member; and every company passkey goes with the membership.
            let second = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(second, bearer: companyAccess, base: base).status == 200)
            #expect(try await h.client.delete(base + "/\(passkeyID)", bearer: companyAccess).status == 204)
            #expect(try await h.client.delete(base + "/\(passkeyID)", bearer: companyAccess).status == 404)
            let removed = try await h.client.delete(
                "/v1/companies/\(cid)/members/\(member.id)", bearer: ownerAcme)
            #expect(removed.status == 204 || removed.status == 200, "\(removed.body)")
            let remaining = try await h.server.services.store.database.select().column("id").from("passkeys")
                .where("account_id", .equal, member.id).all()
            #expect(remaining.isEmpty)
        }
    }

    @Test("a company that requires a second factor asks for it before a passkey login, as before a password one")
    func companyPasskeyAndMFA() async throws {
        try await AccountHarness.withPasskeys { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Acme", owner: &owner)
            let base = "/v1/companies/\(cid)/passkeys"
            let phone = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(
                try await h.registerPasskey(phone, bearer: try #require(owner.company?.access), base: base)
                    .status == 200)
            let factor = try await h.enrolled(owner.account.access)
            let raised = try await h.stepUp(factor, bearer: owner.account.access)
            let company = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: raised.access))
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["requires_mfa": true], bearer: company.access)
                    .status == 200)
            let low = try SignedIn(try await h.client.password(owner.email, "correct horse battery"))
            let refused = try await h.client.post(base + "/login/options", [:], bearer: low.access)
            #expect(refused.status == 403 && Self.code(refused) == "insufficient_aal")
            let login = try await h.passkeyAssertion(
                phone, optionsPath: base + "/login/options", verifyPath: base + "/login/verify", bearer: raised.access)
            #expect(login.status == 200)
            #expect(try FactorFlowTests.claims(try SignedIn(login).access)["aal"] as? String == "aal2")
        }
    }

    @Test("the admin API lists and removes a user's passkeys; the app-site association names the apps")
    func adminAndAssociation() async throws {
        try await AccountHarness.withPasskeys { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let device = SoftwareAuthenticator(origin: AccountHarness.passkeyOrigin)
            #expect(try await h.registerPasskey(device, bearer: account.access).status == 200)
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let list = try await admin.get("/auth/v1/admin/users/\(account.userID)/passkeys")
            let id = try #require(list.jsonArray.first?["id"] as? String)
            #expect(list.status == 200 && list.jsonArray.count == 1)
            let deleted = try await admin.send(.delete, "/auth/v1/admin/users/\(account.userID)/passkeys/\(id)", [:])
            #expect(deleted.status == 204)
            #expect(try await admin.get("/auth/v1/admin/users/\(account.userID)/passkeys").jsonArray.isEmpty)
            let missing = try await admin.send(.delete, "/auth/v1/admin/users/\(account.userID)/passkeys/\(id)", [:])
            #expect(missing.status == 404)
            #expect(try await h.auditDetails(.passkeyDeleted).first?.contains(id) == true)
            let signIn = try await h.passkeyAssertion(device)
            #expect(signIn.status == 400 && Self.code(signIn) == "webauthn_credential_not_found")

            let association = try await h.client.get("/.well-known/apple-app-site-association")
            #expect(association.status == 200)
            #expect(
                (association.headers["Content-Type"] ?? association.headers["content-type"])?.hasPrefix(
                    "application/json") == true)
            let apps = (association.json["webcredentials"] as? [String: Any])?["apps"] as? [String]
            #expect(apps == ["ABCDE12345.com.example.app"])
            let details = (association.json["applinks"] as? [String: Any])?["details"] as? [[String: Any]]
            #expect(details?.first?["appIDs"] as? [String] == ["ABCDE12345.com.example.app"])
            let paths = (details?.first?["components"] as? [[String: Any]])?.compactMap { $0["/"] as? String }
            #expect(paths == ["/share/*", "/auth/v1/verify"])
        }
    }
}
