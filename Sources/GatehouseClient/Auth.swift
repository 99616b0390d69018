import Crypto
import ExtrasBase64
import Foundation
import GatehouseClientAPI
import OpenAPIRuntime

/// Accounts: sign-up, the ways to sign in, the session and its events, the account's own settings, and signing out.
public struct Auth: Sendable {
    let client: Client
    let sessions: SessionManager
    let companySessions: SessionManager
    let hub: AuthEventHub
    let pkce: PKCEState
    let restoration: SessionRestore
    /// The server, for the pages a browser opens (a provider's sign-in).
    let serverURL: URL
    /// The same server, for answers read without the generated decoding.
    let raw: RawCaller

    /// What happens to the sessions: the one found at launch, sign-ins, refreshes, expiry warnings, company changes,
    /// the app lock, and sign-outs with their reason. Each call makes a new stream. Its first event is
    /// `initialSession`: the stored session, or nil when there is none, read by the first stream without
    /// `restoreSession()` (unless a sign-in came first, which the stream hears as `signedIn`). A store that cannot be
    /// read (a locked Keychain) sends nothing; `restoreSession()` says why.
    public var events: AsyncStream<AuthEvent> {
        let stream = hub.stream()
        restoration.startIfNeeded { [self] () async throws(GatehouseError) in try await readStoredSessions() }
        return stream
    }

    /// The account's second factors: TOTP apps, recovery codes, and the session's assurance level.
    public var mfa: MFA { MFA(sessions: sessions) }

    /// Loads the sessions kept from an earlier launch (the account's, and the company's it was signed in to), and
    /// answers the account's. `events` reads them by itself; this says whether that worked (`sessionLocked` while
    /// the Keychain is locked). Once read, they are not read again. Offline, they are kept; the server decides when
    /// they end.
    @discardableResult
    public func restoreSession() async throws(GatehouseError) -> AuthSession? {
        try await restoration.restore { [self] () async throws(GatehouseError) in try await readStoredSessions() }
        // The session in use now: a reading the first listener finished long ago may have been signed out of since.
        return await sessions.current
    }

    /// Reads the stored sessions that were not read yet.
    private func readStoredSessions() async throws(GatehouseError) -> AuthSession? {
        let account = try await sessions.restoreIfUnread()
        if account != nil { _ = try await companySessions.restoreIfUnread() }
        return account
    }

    /// The account session in use, if any, as it stands (it may need a refresh).
    public var currentSession: AuthSession? { get async { await sessions.current } }

    /// An account session good for at least another minute, refreshed first when needed.
    public func session() async throws(GatehouseError) -> AuthSession { try await sessions.valid() }

    /// Renews the account session's tokens now; concurrent calls share one request.
    @discardableResult
    public func refreshSession() async throws(GatehouseError) -> AuthSession { try await sessions.refresh() }

    // MARK: The app lock

    /// Tells the client the app's lock screen is up (biometrics, passcode): the sessions are kept, but nothing
    /// refreshes or warns by itself until `unlock()`; calls the app makes still work. Sends `locked`.
    public func lock() async {
        await sessions.lock()
        await companySessions.lock()
    }

    /// Tells the client the app's lock screen went away: an expiry warning or a refresh that fell due meanwhile
    /// happens now. Sends `unlocked`.
    public func unlock() async {
        await sessions.unlock()
        await companySessions.unlock()
    }

    /// Whether the app told the client it is locked.
    public var isLocked: Bool { get async { await sessions.isLocked } }

    // MARK: Signing up and in

    /// Starts a sign-up: the server mails a code (see `verify(email:code:type:)`) and a link (see `handleOpenURL`).
    /// The password and profile take effect once the code is verified. Answers alike for taken addresses.
    public func signUp(
        email: String, password: String? = nil, profile: [String: String] = [:], redirectTo: URL? = nil
    ) async throws(GatehouseError) {
        let client = self.client
        let pkce = await self.pkce.challenge(for: redirectTo)
        _ = try await call {
            try await client.signUp(
                query: .init(redirectTo: redirectTo?.absoluteString),
                body: .json(
                    .init(
                        email: email, password: password, data: profile.mapValues { .string($0) },
                        codeChallenge: pkce.challenge, codeChallengeMethod: pkce.method))
            ).ok
        }
    }

    /// Mails a sign-in code, and a magic link when `redirectTo` is given (creating the account when `createUser`).
    /// The link runs the PKCE flow: it opens the app at `redirectTo` with a code only this client can exchange.
    public func sendCode(email: String, createUser: Bool = true, redirectTo: URL? = nil) async throws(GatehouseError) {
        let client = self.client
        let pkce = await self.pkce.challenge(for: redirectTo)
        _ = try await call {
            try await client.sendOTP(
                query: .init(redirectTo: redirectTo?.absoluteString),
                body: .json(
                    .init(
                        email: email, createUser: createUser, codeChallenge: pkce.challenge,
                        codeChallengeMethod: pkce.method))
            ).ok
        }
    }

    /// Mails a new sign-up code to an address not yet confirmed (the server waits 60 s between mails).
    public func resendSignUpCode(email: String) async throws(GatehouseError) {
        let client = self.client
        _ = try await call { try await client.resend(body: .json(.init(email: email, _type: .signup))).ok }
    }

    /// Mails a password reset code (and a link, PKCE, when `redirectTo` is given). Verify it with type `.recovery`,
    /// then set the new password with `updateUser(password:)`.
    public func sendPasswordReset(email: String, redirectTo: URL? = nil) async throws(GatehouseError) {
        let client = self.client
        let pkce = await self.pkce.challenge(for: redirectTo)
        _ = try await call {
            try await client.recover(
                query: .init(redirectTo: redirectTo?.absoluteString),
                body: .json(
                    .init(email: email, codeChallenge: pkce.challenge, codeChallengeMethod: pkce.method))
            ).ok
        }
    }

    /// What a mailed code is for.
    public enum CodeType: String, Sendable {
        /// The code of a sign-up.
        case signup
        /// A magic-link sign-in.
        case magiclink
        /// A password reset.
        case recovery
        /// A sign-in code (`sendCode`).
        case email
        /// The confirmation of a new address.
        case emailChange = "email_change"
    }

    /// Verifies a mailed code and signs in. The first of an email change's two codes (one mailed to each address)
    /// throws `otherAddressPending`: the second completes the change.
    @discardableResult
    public func verify(email: String, code: String, type: CodeType = .email) async throws(GatehouseError) -> AuthSession
    {
        let client = self.client
        return try await signIn {
            let answer = try await client.verify(
                body: .json(.init(_type: .init(rawValue: type.rawValue) ?? .email, email: email, token: code))
            ).ok.body.json
            switch answer {
            case .Session(let session): return session
            case .ConfirmationAccepted: throw GatehouseError.otherAddressPending
            }
        }
    }

    /// Signs in from a link the app was opened with: the PKCE code in `url` is exchanged with the verifier this client
    /// made when it asked for the mail, or for `oauthSignInURL`, `signInWithSSO` or `linkIdentityURL` (a link's
    /// session replaces the account's, told as `refreshed`). A URL that carries an error answers it as a `server` error with its code.
    @discardableResult
    public func handleOpenURL(_ url: URL) async throws(GatehouseError) -> AuthSession {
        let code = try OAuthRedirect.code(in: url)
        guard let pending = await pkce.pending else {
            throw .server(status: 400, code: "flow_state_not_found", message: "This client did not ask for that link")
        }
        let session =
            switch pending.purpose {
            case .signIn: try await exchange(code, verifier: pending.verifier)
            case .link: try await exchangeLinked(code, verifier: pending.verifier)
            }
        await pkce.finish()
        return session
    }

    /// Signs in with email and password. A run of wrong passwords makes the server back off: `lockedOut(until:)`.
    @discardableResult
    public func signIn(email: String, password: String) async throws(GatehouseError) -> AuthSession {
        let client = self.client
        do {
            return try await signIn {
                try await client.token(
                    query: .init(grantType: .password),
                    body: .json(.PasswordGrant(.init(email: email, password: password)))
                ).ok.body.json
            }
        } catch {
            throw error.asLockout()
        }
    }

    /// Signs in with an Apple identity token. `nonce` is the raw value whose SHA-256 the app gave Apple (see
    /// `AppleNonce`). Pass the authorization's `authorizationCode` too, so that the server can revoke the app's Apple
    /// tokens when the account is deleted, and its `fullName`: Apple gives the name only on the first authorization,
    /// and the server keeps it in the profile (`full_name`, `given_name`, `family_name`). `AppleIDAuthorizer` does
    /// all of this.
    @discardableResult
    public func signInWithApple(
        idToken: String, nonce: String?, authorizationCode: String? = nil, fullName: PersonNameComponents? = nil
    ) async throws(GatehouseError) -> AuthSession {
        let grant = Components.Schemas.IDTokenGrant(
            provider: IdentityProvider.apple.rawValue, idToken: idToken, nonce: nonce,
            authorizationCode: authorizationCode.flatMap { $0.isEmpty ? nil : $0 }, fullName: Self.wireName(fullName))
        let client = self.client
        return try await signIn {
            try await client.token(query: .init(grantType: .idToken), body: .json(.IDTokenGrant(grant))).ok.body.json
        }
    }

    /// The given and family name of `name`, or nil when it has neither (a later authorization's empty name).
    static func wireName(_ name: PersonNameComponents?) -> Components.Schemas.IDTokenGrant.FullNamePayload? {
        let given = name?.givenName.flatMap { $0.isEmpty ? nil : $0 }
        let family = name?.familyName.flatMap { $0.isEmpty ? nil : $0 }
        guard given != nil || family != nil else { return nil }
        return .init(givenName: given, familyName: family)
    }

    /// Keeps the account session a sign-in answered (of any method: password, code, Apple, passkey), signing out of
    /// the company signed in to.
    func signIn(
        _ body: @Sendable () async throws -> Components.Schemas.Session
    ) async throws(GatehouseError) -> AuthSession {
        let signedIn = AuthSession(try await call(body))
        try await adopt(signedIn)
        return signedIn
    }

    /// Keeps a new account session, signing out of the company signed in to.
    func adopt(_ signedIn: AuthSession) async throws(GatehouseError) {
        try await companySessions.end(.sessionEnded)
        try await sessions.adopt(signedIn)
    }

    // MARK: The account

    /// The signed-in account as the server knows it.
    public func user() async throws(GatehouseError) -> AuthUser {
        AuthUser(try await sessions.authorized { try await $0.getUser().ok.body.json })
    }

    /// Mails a code that authorizes a password or email change; pass it as `nonce` to `updateUser`.
    public func reauthenticate() async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.reauthenticate().ok }
    }

    /// Changes the account: profile values (an empty string removes a key), the password, or the email address (a
    /// code goes to the new address and one to the current address; `verify(type: .emailChange)` both). A password
    /// change needs `currentPassword` or a `nonce` from `reauthenticate()` when the session signed in longer ago than
    /// the server allows (a day by default); a password or code given is always checked.
    @discardableResult
    public func updateUser(
        email: String? = nil, password: String? = nil, currentPassword: String? = nil, nonce: String? = nil,
        profile: [String: String]? = nil
    ) async throws(GatehouseError) -> AuthUser {
        let data = profile?.mapValues { $0.isEmpty ? JSONValue.null : .string($0) }
        let body = Components.Schemas.UpdateUserRequest(
            email: email, password: password, currentPassword: currentPassword, nonce: nonce, data: data)
        return AuthUser(try await sessions.authorized { try await $0.updateUser(body: .json(body)).ok.body.json })
    }

    /// The account's sessions on every device, newest first as the server lists them.
    public func deviceSessions() async throws(GatehouseError) -> [DeviceSession] {
        try await sessions.authorized { try await $0.listSessions().ok.body.json }.sessions.map(DeviceSession.init)
    }

    /// Ends one of the account's sessions (another device's, usually).
    public func revokeSession(id: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.revokeSession(path: .init(id: id)).noContent }
    }

    // MARK: Signing out

    /// Which sessions a sign-out ends.
    public enum SignOutScope: String, Sendable {
        /// This session.
        case local
        /// Every session of the account.
        case global
        /// Every other session.
        case others
    }

    /// Signs out of the account (and out of the company, as `companies.signOut()` does). The local sessions end
    /// even when the server cannot be reached; `others` ends the account's sessions elsewhere and keeps this one.
    public func signOut(scope: SignOutScope = .local) async throws(GatehouseError) {
        let client = self.client
        if let current = await sessions.current {
            _ = try? await call(bearer: current.accessToken) {
                try await client.logout(query: .init(scope: .init(rawValue: scope.rawValue))).noContent
            }
        }
        guard scope != .others else { return }
        try await companySessions.end(.requested)
        try await sessions.end(.requested)
    }
}

/// The verifier of the PKCE flow in progress: made when a link is asked for, spent when the app opens it.
actor PKCEState {
    /// A verifier kept for the link that will open the app, and what its session is for.
    struct Pending {
        let verifier: String
        let purpose: Purpose
    }

    /// What the code a link brings back is for.
    enum Purpose {
        /// A sign-in: mailed links, `oauthSignInURL` and `signInWithSSO`.
        case signIn
        /// Linking an identity to the signed-in account: `linkIdentityURL`.
        case link
    }

    private(set) var pending: Pending?

    /// The challenge and method of a mail request: a new verifier's S256 challenge when the mail links back to the
    /// app at `redirect`, none without a redirect.
    func challenge(for redirect: URL?) -> (challenge: String?, method: String?) {
        guard redirect != nil else { return (nil, nil) }
        let made = PKCEVerifier()
        keep(made, for: .signIn)
        return (made.challenge, PKCEVerifier.method)
    }

    /// Keeps `made` for the link that will open the app, in place of any kept before, until the app hands it in.
    func keep(_ made: PKCEVerifier, for purpose: Purpose) {
        pending = Pending(verifier: made.value, purpose: purpose)
    }

    func finish() { pending = nil }
}

/// One PKCE verifier (RFC 7636) and its S256 challenge: the challenge goes out with the request, the verifier with
/// the code that comes back.
struct PKCEVerifier: Sendable {
    /// The method GoTrue names S256 by.
    static let method = "s256"
    /// 64 characters of base64url (48 random bytes): within RFC 7636's 43 to 128.
    let value: String

    /// A new random verifier.
    init() { self.init(randomToken(bytes: 48)) }

    init(_ value: String) { self.value = value }

    /// BASE64URL(SHA256(verifier)), unpadded.
    var challenge: String { base64URL(Data(SHA256.hash(data: Data(value.utf8)))) }
}

/// The nonce of a Sign in with Apple request: give Apple `hashed`, and Gatehouse `raw`.
public struct AppleNonce: Sendable {
    /// The value to send with the identity token.
    public let raw: String
    /// Its SHA-256 in hex: the `nonce` of the Apple request.
    public let hashed: String

    /// A new random nonce.
    public init() {
        raw = randomToken(bytes: 32)
        hashed = Self.hash(raw)
    }

    /// The hex SHA-256 of a raw nonce: what Apple (or Google) gets, and the token carries.
    static func hash(_ raw: String) -> String {
        SHA256.hash(data: Data(raw.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// `bytes` random bytes, base64url.
func randomToken(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return base64URL(Data((0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
}

/// Base64url without padding (RFC 4648 §5).
package func base64URL(_ data: Data) -> String {
    Base64.encodeToString(bytes: data, options: [.base64UrlAlphabet, .omitPaddingCharacter])
}

extension GatehouseError {
    /// A 429 on a password check is the server backing off that account: the app shows when it may try again.
    func asLockout() -> GatehouseError {
        guard case .rateLimited(let retryAfter) = self else { return self }
        return .lockedOut(until: retryAfter.date)
    }
}
