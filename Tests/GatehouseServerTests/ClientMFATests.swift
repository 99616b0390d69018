import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

/// `client.auth.mfa` against the server through its router: TOTP enrollment and verification, recovery codes, and a
/// company that requires a second factor (the flow alone is in `SecondFactorFlowTests`).
@Suite("GatehouseClient second factor")
struct ClientMFATests {
    @Test("Enroll, a wrong code, challengeAndVerify: the session is aal2, kept and told; factors listed; unenroll")
    func enrollAndVerify() async throws {
        try await AccountHarness.with { h in
            let client = try Self.client(h)
            _ = try await Self.signedUp(h, client)
            let events = Recorder(client.auth.events)
            #expect(
                try await client.auth.mfa.assuranceLevel()
                    == ClientAssurance(current: .aal1, next: .aal1, methods: ["otp"]))

            let enrollment = try await client.auth.mfa.enroll(friendlyName: "phone", issuer: "Acme")
            #expect(enrollment.friendlyName == "phone" && enrollment.secret.count == 32)
            #expect(enrollment.uri.hasPrefix("otpauth://totp/Acme:") && enrollment.qrCodeSVG.contains("<svg"))
            let listed = try await client.auth.mfa.listFactors()
            #expect(listed.map(\.id) == [enrollment.id] && listed.first?.status == .unverified)
            #expect(listed.first?.type == .totp && listed.first?.friendlyName == "phone")

            let challenge = try await client.auth.mfa.challenge(factorID: enrollment.id)
            #expect(Int64(challenge.expiresAt.timeIntervalSince1970) == Int64(h.clock.now.timeIntervalSince1970) + 300)
            do throws(GatehouseError) {
                try await client.auth.mfa.verify(factorID: enrollment.id, challengeID: challenge.id, code: "000000")
                Issue.record("a wrong code was accepted")
            } catch {
                #expect(error.code == .mfaVerificationFailed && error.code.rawValue == "mfa_verification_failed")
            }

            let raised = try await client.auth.mfa.challengeAndVerify(
                factorID: enrollment.id, code: try Self.totp(enrollment.secret, h))
            #expect(await client.auth.currentSession == raised)
            #expect(try await events.waitFor { $0 == .refreshed(raised) })
            let level = try await client.auth.mfa.assuranceLevel()
            #expect(level.current == .aal2 && level.next == .aal2 && level.methods.first == "totp")
            #expect(try await client.auth.mfa.listFactors().map(\.status) == [.verified])
            #expect(try await client.auth.user().factors.map(\.id) == [enrollment.id])
            // The refresh token the verification answered is the one kept: a refresh stays aal2.
            let refreshed = try await client.auth.refreshSession()
            #expect(ClientAssurance(accessToken: refreshed.accessToken, factors: []).current == .aal2)

            // The same code again (on a fresh challenge) is refused: each code is accepted once.
            await #expect(throws: GatehouseError.self) {
                try await client.auth.mfa.challengeAndVerify(
                    factorID: enrollment.id, code: try Self.totp(enrollment.secret, h))
            }
            // Another enrolment at aal2 is allowed; removing a factor lowers the session back to aal1.
            let second = try await client.auth.mfa.enroll(friendlyName: "tablet")
            try await client.auth.mfa.unenroll(factorID: second.id)
            try await client.auth.mfa.unenroll(factorID: enrollment.id)
            #expect(try await client.auth.mfa.listFactors().isEmpty)
            #expect(try await client.auth.mfa.assuranceLevel().current == .aal1)
            do throws(GatehouseError) {
                _ = try await client.auth.mfa.challenge(factorID: enrollment.id)
                Issue.record("a removed factor was challenged")
            } catch {
                #expect(error.code == .mfaFactorNotFound)
            }
        }
    }

    @Test("Recovery codes: generated at aal2, one raises a new aal1 sign-in, spent once, regenerated, removed")
    func recoveryCodes() async throws {
        try await AccountHarness.with { h in
            let client = try Self.client(h)
            let email = try await Self.signedUp(h, client)
            do throws(GatehouseError) {
                _ = try await client.auth.mfa.generateRecoveryCodes()
                Issue.record("recovery codes were made at aal1")
            } catch {
                #expect(error.code == .insufficientAal)
            }
            let enrollment = try await client.auth.mfa.enroll()
            try await client.auth.mfa.challengeAndVerify(
                factorID: enrollment.id, code: try Self.totp(enrollment.secret, h))
            let codes = try await client.auth.mfa.generateRecoveryCodes()
            #expect(codes.count == 10 && Set(codes).count == 10)
            #expect(try await client.auth.mfa.recoveryCodesStatus() == (10, 10))
            #expect(try await client.auth.mfa.listFactors().contains { $0.type == .recoveryCode })

            // A new sign-in is aal1 and could be aal2; a recovery code raises it.
            try await client.auth.signIn(email: email, password: "correct horse battery")
            #expect(try await client.auth.mfa.assuranceLevel().needsSecondFactor)
            let raised = try await client.auth.mfa.verifyRecoveryCode(codes[2].uppercased())
            #expect(await client.auth.currentSession == raised)
            let level = try await client.auth.mfa.assuranceLevel()
            #expect(level.current == .aal2 && level.methods.first == "mfa/recovery_code")
            #expect(try await client.auth.mfa.recoveryCodesStatus() == (10, 9))
            do throws(GatehouseError) {
                try await client.auth.mfa.verifyRecoveryCode(codes[2])
                Issue.record("a spent recovery code was accepted")
            } catch {
                #expect(error.code == .mfaVerificationFailed)
            }

            let renewed = try await client.auth.mfa.regenerateRecoveryCodes()
            #expect(renewed.count == 10 && Set(renewed).isDisjoint(with: codes))
            #expect(try await client.auth.mfa.recoveryCodesStatus() == (10, 10))
            try await client.auth.mfa.deleteRecoveryCodes()
            do throws(GatehouseError) {
                _ = try await client.auth.mfa.recoveryCodesStatus()
                Issue.record("deleted recovery codes still have a status")
            } catch {
                #expect(error.code == .mfaFactorNotFound)
            }
        }
    }

    @Test(
        "A company that requires a second factor: the company model says so, the flow sets one up and logs in, and the next sign-in asks for it first"
    )
    func companyLoginFlow() async throws {
        try await AccountHarness.with { h in
            // The owner verifies a factor, logs in to the company at aal2 and requires a second factor.
            let owner = try Self.client(h)
            _ = try await Self.signedUp(h, owner)
            let company = try await owner.companies.create(name: "Vault Ltd")
            #expect(!company.requiresMFA)
            #expect(try await Operator(store: h.server.services.store).setTier(company.id, .business))
            _ = try await owner.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            let ownerFactor = try await owner.auth.mfa.enroll()
            try await owner.auth.mfa.challengeAndVerify(
                factorID: ownerFactor.id, code: try Self.totp(ownerFactor.secret, h))
            try await owner.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
            let link = try #require(try await owner.companies.createShare(permission: .readWrite).url)
            #expect(try await owner.companies.update(CompanyUpdate(requiresMFA: true)).requiresMFA)
            #expect(try await owner.companies.details().requiresMFA)

            // A member without a factor: the list says the company requires one; the flow leads there.
            let member = try Self.client(h)
            let email = try await Self.signedUp(h, member)
            _ = try await member.companies.acceptShare(link)
            #expect(try await member.companies.list().first { $0.id == company.id }?.requiresMFA == true)
            try await member.auth.signOut()
            let model = await LoginFlowModel(client: member)
            await model.start()
            #expect(await model.flow.screen == .signIn(notice: nil))
            try await model.signIn(email: email, password: "correct horse battery")
            await model.select(company.id)
            guard case .createCredential(let summary, nil) = await model.flow.screen else {
                Issue.record("expected the credential screen, got \(await model.flow.screen)")
                return
            }
            #expect(summary.requiresMFA)
            await model.createCredential(username: "mel", password: "purple tractor 9")
            #expect(await model.flow.screen == .secondFactorSetupRequired(summary))
            try await model.enrollSecondFactor(friendlyName: "phone")
            #expect(await model.flow.screen == .secondFactor(company: summary, error: nil))
            let enrollment = try #require(await model.enrollment)
            await model.verifySecondFactor(code: "000000")
            guard case .secondFactor(let asking, let refusal?) = await model.flow.screen, asking == summary else {
                Issue.record("expected the refused code on the step, got \(await model.flow.screen)")
                return
            }
            #expect(refusal.code == .mfaVerificationFailed)
            await model.verifySecondFactor(code: try Self.totp(enrollment.secret, h))
            #expect(await model.flow.screen == .home(summary.withCredential))
            #expect(await member.companies.currentCompanyID == company.id)
            #expect(try await member.auth.mfa.assuranceLevel().current == .aal2)
            await model.stop()

            // Another device: the sign-in asks for the second factor before the list, then the company logs in.
            h.clock.advance(by: 30)  // the next time step: each code is accepted once
            let device = try Self.client(h)
            let relaunch = await LoginFlowModel(client: device, selectedCompanyID: company.id)
            await relaunch.start()
            try await relaunch.signIn(email: email, password: "correct horse battery")
            #expect(await relaunch.flow.screen == .secondFactor(company: nil, error: nil))
            await relaunch.verifySecondFactor(code: try Self.totp(enrollment.secret, h))
            #expect(await relaunch.flow.screen == .companyLogin(summary.withCredential, error: nil))
            await relaunch.signIn(username: "mel", password: "purple tractor 9")
            #expect(await relaunch.flow.screen == .home(summary.withCredential))
            await relaunch.stop()
        }
    }

    // MARK: Helpers

    /// A client of the harness's server through its router.
    static func client(_ h: AccountHarness) throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: h.server.baseURL)), sessionStore: MemorySessionStore(), refreshMargin: 60,
            middlewares: [], transport: h.sdkTransport)
    }

    /// Signs up through the SDK and confirms with the mailed code; answers the address.
    static func signedUp(_ h: AccountHarness, _ client: GatehouseClient) async throws -> String {
        let email = AccountHarness.newEmail("mfa")
        try await client.auth.signUp(email: email, password: "correct horse battery")
        let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
        try await client.auth.verify(email: email, code: code, type: .signup)
        return email
    }

    /// The code an authenticator app shows for `secret` (base32) at the harness clock's time.
    static func totp(_ secret: String, _ h: AccountHarness) throws -> String {
        TOTP.code(secret: try #require(Base32.decode(secret)), step: TOTP.step(at: h.clock.now))
    }
}
