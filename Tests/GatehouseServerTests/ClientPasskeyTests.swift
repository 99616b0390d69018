import Foundation
import GatehouseClientTesting
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's passkeys against the server through its router, with `SoftwareAuthenticator` as the device: account
/// passkeys (register, sign in, rename, delete), the authenticator's refusals as typed errors, a server with passkeys
/// off, and company passkeys that log in to their own company only.
@Suite("GatehouseClient passkeys")
struct ClientPasskeyTests {
    /// The origin the software authenticator writes, and the one the server accepts for the relying party
    /// `localhost` (as an iOS app's ceremonies report `https://<relying party id>`).
    static let origin = "https://localhost"

    @Test("Register, list, sign in with the passkey alone (signed in, told, the passkey used), rename, delete")
    func accountPasskey() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            let email = try await Self.signedUp(h, client)
            let phone = SoftwareAuthenticator(origin: Self.origin, backupEligible: true, backedUp: true)
            let passkey = try await client.auth.registerPasskey(using: phone)
            #expect(passkey.isSynced && passkey.lastUsedAt == nil && !passkey.name.isEmpty)
            #expect(try await client.auth.listPasskeys() == [passkey])
            #expect(phone.credentialIDs.count == 1)

            // Signed out, the passkey alone signs in: the new session is kept and told, aal1 by `passkey`.
            try await client.auth.signOut()
            #expect(await client.auth.currentSession == nil)
            let events = Recorder(client.auth.events)
            let session = try await client.auth.signInWithPasskey(using: phone)
            #expect(session.email == email)
            #expect(await client.auth.currentSession == session)
            #expect(try await events.waitFor { $0 == .signedIn(session) })
            let level = try await client.auth.mfa.assuranceLevel()
            #expect(level.current == .aal1 && level.methods.first == "passkey")
            #expect(try await client.auth.user().email == email)
            let used = try #require(try await client.auth.listPasskeys().first)
            #expect(used.id == passkey.id && used.lastUsedAt != nil)

            let renamed = try await client.auth.renamePasskey(id: passkey.id, to: "Work phone")
            #expect(renamed.id == passkey.id && renamed.name == "Work phone")
            #expect(try await client.auth.listPasskeys().map(\.name) == ["Work phone"])

            // Deleted, it no longer signs in, though the device still holds it; the session stays.
            try await client.auth.deletePasskey(id: passkey.id)
            #expect(try await client.auth.listPasskeys().isEmpty)
            do throws(GatehouseError) {
                try await client.auth.signInWithPasskey(using: phone)
                Issue.record("a deleted passkey signed in")
            } catch {
                #expect(error.code == .webauthnCredentialNotFound)
            }
            #expect(await client.auth.currentSession == session)
        }
    }

    @Test("Finding 5: long after sign-in a passkey needs the current password (a typed error without it), and is told")
    func passkeyNeedsRecentProof() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            let email = try await Self.signedUp(h, client)
            h.clock.advance(by: 11 * 60)
            let phone = SoftwareAuthenticator(origin: Self.origin)
            do throws(GatehouseError) {
                try await client.auth.registerPasskey(using: phone)
                Issue.record("a passkey was added eleven minutes after sign-in without proof")
            } catch {
                #expect(error.code == .reauthenticationNeeded)
            }
            #expect(phone.credentialIDs.isEmpty)
            let passkey = try await client.auth.registerPasskey(using: phone, currentPassword: "correct horse battery")
            #expect(try await client.auth.listPasskeys() == [passkey])
            _ = try await h.mail(to: email, subject: "A passkey was added to your account")
        }
    }

    @Test("A device that holds the account's passkey refuses a second one (a typed error); another device may add one")
    func registeredTwice() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            _ = try await Self.signedUp(h, client)
            let phone = SoftwareAuthenticator(origin: Self.origin)
            _ = try await client.auth.registerPasskey(using: phone)
            do throws(GatehouseError) {
                _ = try await client.auth.registerPasskey(using: phone)
                Issue.record("one device registered two passkeys for the account")
            } catch {
                #expect(error == .authenticator(.credentialExcluded))
            }
            #expect(phone.credentialIDs.count == 1)
            #expect(try await client.auth.listPasskeys().count == 1)
            _ = try await client.auth.registerPasskey(using: SoftwareAuthenticator(origin: Self.origin))
            #expect(try await client.auth.listPasskeys().count == 2)
        }
    }

    @Test("The user cancels, the device has no passkey, or answers nonsense: typed errors, and nothing changes")
    func authenticatorRefusals() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            _ = try await Self.signedUp(h, client)
            let before = await client.auth.currentSession
            let refusals: [(Refusing, GatehouseError)] = [
                (.cancelled, .authenticator(.cancelled)),
                (.nonsense, .authenticator(.failed("The authenticator's answer is not a JSON object"))),
            ]
            for (authenticator, expected) in refusals {
                await #expect(throws: expected) { try await client.auth.registerPasskey(using: authenticator) }
                await #expect(throws: expected) { try await client.auth.signInWithPasskey(using: authenticator) }
            }
            let empty = SoftwareAuthenticator(origin: Self.origin)
            await #expect(throws: GatehouseError.authenticator(.noCredential)) {
                try await client.auth.signInWithPasskey(using: empty)
            }
            #expect(try await client.auth.listPasskeys().isEmpty)
            #expect(await client.auth.currentSession == before)
        }
    }

    @Test("Passkeys off: each passkey call says passkey_disabled, and the device is never asked")
    func passkeysOff() async throws {
        try await Self.withServer(passkeys: false) { h in
            let client = try Self.client(h)
            _ = try await Self.signedUp(h, client)
            let phone = SoftwareAuthenticator(origin: Self.origin)
            for attempt in 0..<3 {
                do throws(GatehouseError) {
                    switch attempt {
                    case 0: _ = try await client.auth.registerPasskey(using: phone)
                    case 1: _ = try await client.auth.signInWithPasskey(using: phone)
                    default: _ = try await client.auth.listPasskeys()
                    }
                    Issue.record("passkey call \(attempt) answered while passkeys are off")
                } catch {
                    #expect(error.code == .passkeyDisabled)
                    #expect(error == .server(status: 404, code: "passkey_disabled", message: "Passkeys are disabled"))
                }
            }
            #expect(phone.credentialIDs.isEmpty)
            #expect(await client.auth.currentSession != nil)
        }
    }

    @Test("The JSON the platform adapter writes from an authenticator's raw fields registers and signs in")
    func platformJSON() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            let email = try await Self.signedUp(h, client)
            let relayed = Relayed(device: SoftwareAuthenticator(origin: Self.origin))
            let passkey = try await client.auth.registerPasskey(using: relayed)
            try await client.auth.signOut()
            #expect(try await client.auth.signInWithPasskey(using: relayed).email == email)
            #expect(try await client.auth.listPasskeys().map(\.id) == [passkey.id])
        }
    }

    @Test("Company passkeys: registered in its session, log in again (amr company_passkey), open no other company")
    func companyPasskey() async throws {
        try await Self.withServer { h in
            let client = try Self.client(h)
            _ = try await Self.signedUp(h, client)
            let acme = try await client.companies.create(name: "Acme Ltd")
            _ = try await client.companies.createCredential(in: acme.id, username: "olive", password: "blue tractor 42")
            let phone = SoftwareAuthenticator(origin: Self.origin)

            // Registering needs the company session of that company, not the account's alone.
            await #expect(throws: GatehouseError.notSignedIn) {
                try await client.companies.registerPasskey(for: acme.id, using: phone)
            }
            try await client.companies.signIn(to: acme.id, username: "olive", password: "blue tractor 42")
            let passkey = try await client.companies.registerPasskey(for: acme.id, using: phone)
            #expect(try await client.companies.passkeys(for: acme.id) == [passkey])
            #expect(try await client.auth.listPasskeys().isEmpty)

            // Logged out of the company, the passkey logs in again: the company session is kept and told.
            try await client.companies.signOut()
            #expect(await client.companies.currentCompanyID == nil)
            let events = Recorder(client.auth.events)
            let session = try await client.companies.signInWithPasskey(to: acme.id, using: phone)
            #expect(session.companyID == acme.id)
            #expect(await client.companies.currentCompanyID == acme.id)
            #expect(try await events.waitFor { $0 == .companyChanged(companyID: acme.id) })
            let bearer = try #require(await client.auth.companySessions.current?.accessToken)
            #expect(ClientAssurance.claims(of: bearer).methods.first == "company_passkey")
            #expect(try await client.companies.details().name == "Acme Ltd")
            // A company passkey is no account passkey.
            do throws(GatehouseError) {
                try await client.auth.signInWithPasskey(using: phone)
                Issue.record("a company passkey signed in to the account")
            } catch {
                #expect(error.code == .webauthnCredentialNotFound)
            }
            #expect(await client.companies.currentCompanyID == acme.id)

            // Another company of the same member: without a passkey for it, the options say so, and Acme stays.
            let globex = try await client.companies.create(name: "Globex")
            _ = try await client.companies.createCredential(
                in: globex.id, username: "olive", password: "green tractor 17")
            do throws(GatehouseError) {
                try await client.companies.signInWithPasskey(to: globex.id, using: phone)
                Issue.record("Acme's passkey logged in to Globex")
            } catch {
                #expect(error.code == .webauthnCredentialNotFound)
            }
            #expect(await client.companies.currentCompanyID == acme.id)

            // With a Globex passkey on another device, Acme's passkey signing Globex's challenge is still refused.
            try await client.companies.signIn(to: globex.id, username: "olive", password: "green tractor 17")
            let laptop = SoftwareAuthenticator(origin: Self.origin)
            _ = try await client.companies.registerPasskey(for: globex.id, using: laptop)
            try await client.companies.signOut()
            do throws(GatehouseError) {
                try await client.companies.signInWithPasskey(to: globex.id, using: IgnoringAllowList(device: phone))
                Issue.record("Acme's passkey logged in to Globex")
            } catch {
                #expect(error.code == .webauthnCredentialNotFound)
            }
            #expect(await client.companies.currentCompanyID == nil)
            try await client.companies.signInWithPasskey(to: globex.id, using: laptop)
            #expect(await client.companies.currentCompanyID == globex.id)

            // Acme's passkey is removed in Acme's session; then it logs in no more.
            await #expect(throws: GatehouseError.notSignedIn) {
                try await client.companies.deletePasskey(passkey.id, in: acme.id)
            }
            try await client.companies.signInWithPasskey(to: acme.id, using: phone)
            try await client.companies.deletePasskey(passkey.id, in: acme.id)
            #expect(try await client.companies.passkeys(for: acme.id).isEmpty)
            try await client.companies.signOut()
            do throws(GatehouseError) {
                try await client.companies.signInWithPasskey(to: acme.id, using: phone)
                Issue.record("a deleted company passkey logged in")
            } catch {
                #expect(error.code == .webauthnCredentialNotFound)
            }
        }
    }

    // MARK: Helpers

    /// A server with passkeys on (or off), its relying party `localhost` reached from `origin`.
    static func withServer(passkeys: Bool = true, _ body: (AccountHarness) async throws -> Void) async throws {
        try await AccountHarness.with(
            { configuration in
                configuration.passkeys.enabled = passkeys
                configuration.passkeys.relyingPartyID = "localhost"
                configuration.passkeys.origins = [origin]
            }, body)
    }

    /// A client of the harness's server through its router.
    static func client(_ h: AccountHarness) throws -> GatehouseClient {
        GatehouseClient(
            url: try #require(URL(string: h.server.baseURL)), sessionStore: MemorySessionStore(), refreshMargin: 60,
            middlewares: [], transport: h.sdkTransport)
    }

    /// Signs up through the SDK and confirms with the mailed code; answers the address.
    static func signedUp(_ h: AccountHarness, _ client: GatehouseClient) async throws -> String {
        let email = AccountHarness.newEmail("passkey")
        try await client.auth.signUp(email: email, password: "correct horse battery")
        let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
        try await client.auth.verify(email: email, code: code, type: .signup)
        return email
    }
}

/// An authenticator that never gives a passkey: the user dismisses the sheet, or it answers what is no JSON.
private enum Refusing: PasskeyAuthenticator {
    case cancelled
    case nonsense

    func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data { try answer() }
    func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data { try answer() }

    private func answer() throws -> Data {
        guard self == .nonsense else { throw CancellationError() }
        return Data("not json".utf8)
    }
}

/// A device that signs with its newest passkey whatever the allowed list says, as a tampered client could.
private struct IgnoringAllowList: PasskeyAuthenticator {
    let device: SoftwareAuthenticator

    func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data {
        try await device.createCredential(request)
    }

    func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data {
        try await device.getAssertion(
            PasskeyAssertionRequest(relyingPartyID: request.relyingPartyID, challenge: request.challenge))
    }
}

/// The software authenticator's answers taken apart into the raw fields the system gives on Apple platforms, and
/// written again as `PlatformPasskeyAuthenticator` writes them.
private struct Relayed: PasskeyAuthenticator {
    let device: SoftwareAuthenticator

    func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data {
        let answer = try Self.fields(try await device.createCredential(request))
        return try PasskeyWire.registration(
            credentialID: answer.id, clientDataJSON: answer.field("clientDataJSON"),
            attestationObject: answer.field("attestationObject"), transports: ["hybrid", "internal"],
            attachment: "platform")
    }

    func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data {
        let answer = try Self.fields(try await device.getAssertion(request))
        return try PasskeyWire.assertion(
            credentialID: answer.id, clientDataJSON: answer.field("clientDataJSON"),
            authenticatorData: answer.field("authenticatorData"), signature: answer.field("signature"),
            userHandle: answer.field("userHandle"), attachment: "platform")
    }

    private struct Fields {
        let id: Data
        let response: [String: Any]

        func field(_ name: String) throws -> Data {
            let text = try #require(response[name] as? String)
            return try #require(base64URLDecoded(text))
        }
    }

    private static func fields(_ json: Data) throws -> Fields {
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let rawID = try #require(object["rawId"] as? String)
        return Fields(
            id: try #require(base64URLDecoded(rawID)), response: try #require(object["response"] as? [String: Any]))
    }
}
