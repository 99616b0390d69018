import Foundation

/// Asks Apple for an authorization: the system's Sign in with Apple sheet on Apple platforms
/// (`PlatformAppleIDAuthorizer`), or a stand-in in tests and previews. The SDK makes the nonce and sends what the
/// authorizer answers to the server.
public protocol AppleIDAuthorizer: Sendable {
    /// Runs one Sign in with Apple request asking for the name and email, whose `nonce` is `hashedNonce` (the hex
    /// SHA-256 of the raw nonce the SDK keeps), and answers what Apple gave. Throws `PasskeyAuthenticatorError`
    /// (`.cancelled` when the user dismissed the sheet), or anything else as a failure.
    func authorize(hashedNonce: String) async throws -> AppleIDAuthorization
}

/// What one Sign in with Apple authorization gave the app.
public struct AppleIDAuthorization: Sendable, Equatable {
    /// The identity token (a JWT signed by Apple).
    public let identityToken: String
    /// The single-use code the server exchanges for Apple's refresh token (to revoke it when the account goes).
    public let authorizationCode: String?
    /// The name the user shared: only on the first authorization of the app, nil or empty afterwards.
    public let fullName: PersonNameComponents?

    /// An authorization as Apple gave it.
    public init(identityToken: String, authorizationCode: String? = nil, fullName: PersonNameComponents? = nil) {
        self.identityToken = identityToken
        self.authorizationCode = authorizationCode
        self.fullName = fullName
    }
}

extension Auth {
    /// Signs in with Apple through `authorizer`: a new nonce's SHA-256 goes to Apple, and the identity token, the
    /// authorization code and the name (given once) go to the server with the raw nonce. A dismissed sheet throws
    /// `authenticator(.cancelled)`.
    @discardableResult
    public func signInWithApple(using authorizer: some AppleIDAuthorizer) async throws(GatehouseError) -> AuthSession {
        let nonce = AppleNonce()
        let authorization = try await askAuthenticator { try await authorizer.authorize(hashedNonce: nonce.hashed) }
        return try await signInWithApple(
            idToken: authorization.identityToken, nonce: nonce.raw, authorizationCode: authorization.authorizationCode,
            fullName: authorization.fullName)
    }

    /// Links the Apple ID `authorizer` authorizes to the signed-in account, as `linkIdentity(provider:idToken:nonce:)`
    /// does.
    @discardableResult
    public func linkApple(using authorizer: some AppleIDAuthorizer) async throws(GatehouseError) -> AuthSession {
        let nonce = AppleNonce()
        let authorization = try await askAuthenticator { try await authorizer.authorize(hashedNonce: nonce.hashed) }
        return try await linkIdentity(provider: .apple, idToken: authorization.identityToken, nonce: nonce.raw)
    }
}
