import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

extension FakeProviders {
    /// An Apple identity token for `sub` whose nonce claim is `hashedNonce`, as the app handed it to Apple's sheet.
    func apple(sub: String, email: String?, hashedNonce: String) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        return try await sign(
            ProviderTestClaims(
                iss: "https://appleid.apple.com", aud: clientID, sub: sub, exp: now + 600, iat: now,
                nonce: hashedNonce, email: email, email_verified: email == nil ? nil : true))
    }
}

/// Apple's sheet, as the tests answer it: an identity token signed by the fake providers for the nonce the SDK
/// passed, with the code and the name Apple gives on a first authorization.
struct FakeAppleSheet: AppleIDAuthorizer {
    let providers: FakeProviders
    let sub: String
    let email: String?
    let fullName: PersonNameComponents?

    func authorize(hashedNonce: String) async throws -> AppleIDAuthorization {
        AppleIDAuthorization(
            identityToken: try await providers.apple(sub: sub, email: email, hashedNonce: hashedNonce),
            authorizationCode: "c.\(UUID().uuidString)", fullName: fullName)
    }
}

/// The SDK's Sign in with Apple, Google and linked identities against the server's router, with Apple's and
/// Google's keys served on loopback.
@Suite("GatehouseClient identities against the server")
struct ClientIdentityTests {
    /// Runs `body` against a harness that signs in with Apple and Google (no Apple code exchange) and links manually
    /// (unless told not to), stopping the fake providers afterwards, also when `body` throws.
    static func withProviders(
        manualLinking: Bool = true, _ body: (AccountHarness, FakeProviders) async throws -> Void
    ) async throws {
        let providers = try await FakeProviders.start()
        do {
            try await AccountHarness.with({ providers.configure(&$0, manualLinking: manualLinking, codes: false) }) {
                try await body($0, providers)
            }
        } catch {
            try? await providers.server.stop()
            throw error
        }
        try await providers.server.stop()
    }

    static func name(_ given: String, _ family: String) -> PersonNameComponents {
        var name = PersonNameComponents()
        name.givenName = given
        name.familyName = family
        return name
    }

    static func appleSub() -> String { "001234.\(UUID().uuidString.prefix(8).lowercased())" }

    @Test("Sign in with Apple through the SDK: the name Apple gave once is the profile's, and stays on a later sign-in")
    func appleName() async throws {
        try await Self.withProviders { h, providers in
            let device = try AppDevice(h)
            let sub = Self.appleSub()
            let email = AccountHarness.newEmail("apple")
            let first = FakeAppleSheet(
                providers: providers, sub: sub, email: email, fullName: Self.name("Ada", "Lovelace"))
            let session = try await device.client.auth.signInWithApple(using: first)
            let user = try await device.client.auth.user()
            #expect(user.id == session.userID)
            #expect(user.email == email)
            #expect(user.profile["full_name"] == "Ada Lovelace")
            #expect(user.profile["given_name"] == "Ada")
            #expect(user.profile["family_name"] == "Lovelace")
            #expect(Set(user.identities.map(\.provider)) == [.email, .apple])
            let appleIdentity = try #require(user.identities.first { $0.provider == .apple })
            #expect(appleIdentity.providerUserID == sub)

            // Apple sends no name the second time: the same account, the name kept.
            let later = try AppDevice(h)
            let again = try await later.client.auth.signInWithApple(
                using: FakeAppleSheet(providers: providers, sub: sub, email: nil, fullName: nil))
            #expect(again.userID == session.userID)
            #expect(try await later.client.auth.user().profile["full_name"] == "Ada Lovelace")
        }
    }

    @Test("The providers the server offers; link Google, list and unlink identities; refusals keep their codes")
    func linkAndUnlink() async throws {
        try await Self.withProviders { h, providers in
            let device = try AppDevice(h)
            #expect(
                try await device.client.auth.signInProviders()
                    == SignInProviders(email: true, apple: true, google: true))
            let session = try await device.client.auth.signInWithApple(
                using: FakeAppleSheet(
                    providers: providers, sub: Self.appleSub(), email: AccountHarness.newEmail("apple"), fullName: nil))
            #expect(Set(try await device.client.auth.identities().map(\.provider)) == [.email, .apple])

            let googleEmail = AccountHarness.newEmail("google")
            let linked = try await device.client.auth.linkIdentity(
                provider: .google,
                idToken: try await providers.google(sub: "g-\(UUID().uuidString)", email: googleEmail, nonce: "raw-1"),
                nonce: "raw-1")
            #expect(linked.userID == session.userID)
            #expect(await device.client.auth.currentSession == linked)
            let both = try await device.client.auth.identities()
            #expect(Set(both.map(\.provider)) == [.email, .apple, .google])
            let googleIdentity = try #require(both.first { $0.provider == .google })
            #expect(googleIdentity.email == googleEmail)

            do {
                try await device.client.auth.unlinkIdentity("no-such-identity")
                Issue.record("an unknown identity was unlinked")
            } catch let error as GatehouseError {
                #expect(error.code == .identityNotFound)
                if case .server(let status, _, _) = error { #expect(status == 422) }
            }
            try await device.client.auth.unlinkIdentity(googleIdentity.id)
            let left = try await device.client.auth.identities()
            #expect(Set(left.map(\.provider)) == [.email, .apple])

            // Apple goes too; the address is then the only way in, and stays.
            try await device.client.auth.unlinkIdentity(try #require(left.first { $0.provider == .apple }).id)
            let only = try await device.client.auth.identities()
            #expect(only.map(\.provider) == [.email])
            do {
                try await device.client.auth.unlinkIdentity(only[0].id)
                Issue.record("the last identity was unlinked")
            } catch let error as GatehouseError {
                #expect(error.code == .singleIdentityNotDeletable)
            }
            #expect(try await device.client.auth.identities().map(\.provider) == [.email])
        }
    }

    @Test("Google signs in through the SDK; linking where the server does not allow it is manual_linking_disabled")
    func googleAndLinkingOff() async throws {
        try await Self.withProviders(manualLinking: false) { h, providers in
            let device = try AppDevice(h)
            let email = AccountHarness.newEmail("google")
            let session = try await device.client.auth.signInWithGoogle(
                idToken: try await providers.google(sub: "g-\(UUID().uuidString)", email: email, nonce: "raw-2"),
                nonce: "raw-2")
            let user = try await device.client.auth.user()
            #expect(user.id == session.userID)
            #expect(user.email == email)
            #expect(user.identities.map(\.provider).contains(.google))

            do {
                try await device.client.auth.linkIdentity(
                    provider: .google,
                    idToken: try await providers.google(sub: "g-\(UUID().uuidString)", email: email, nonce: nil),
                    nonce: nil)
                Issue.record("an identity was linked with manual linking off")
            } catch let error as GatehouseError {
                #expect(error.code == .manualLinkingDisabled)
            }
            // A wrong nonce is refused with the server's code, and the session stays.
            do {
                try await device.client.auth.signInWithGoogle(
                    idToken: try await providers.google(sub: "g-\(UUID().uuidString)", email: email, nonce: "one"),
                    nonce: "two")
                Issue.record("a token for another nonce signed in")
            } catch let error as GatehouseError {
                #expect(error.code == "bad_jwt")
            }
            #expect(await device.client.auth.currentSession == session)
        }
    }
}
