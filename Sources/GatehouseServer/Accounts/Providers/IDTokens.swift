import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseAPI
import JWTKit
import NIOCore

/// What a verified id token (Apple's, Google's) says about the person.
struct ExternalIdentity: Sendable {
    /// `apple` or `google`: the identity's provider.
    let provider: String
    let subject: String
    let email: String?
    let emailVerified: Bool
    /// Apple's private relay address (`is_private_email`).
    let isPrivateEmail: Bool
    /// When the token stops being valid: until then it is remembered, so it signs in once.
    let expiresAt: Date
    /// What GoTrue keeps in the identity's `identity_data` beside `sub` and `email`: name and picture claims.
    let profile: [String: JSONValue]
}

/// Why an id token was refused (never includes the token). `description` is the answer's `error_description`.
enum IDTokenError: Error, Equatable, CustomStringConvertible {
    case keysUnavailable
    case signature
    case issuer
    case audience
    case nonceMismatch
    case nonceRequired
    case nonceUnexpected

    var description: String {
        switch self {
        case .keysUnavailable: "the provider's signing keys could not be fetched"
        case .signature: "Bad ID token: its signature or expiry did not verify"
        case .issuer: "Bad ID token: it was not issued by the provider"
        case .audience: "Unacceptable audience in id_token"
        case .nonceMismatch: "Nonces mismatch"
        case .nonceRequired, .nonceUnexpected: "Passed nonce and nonce in id_token should either both exist or not."
        }
    }
}

/// The claims an OpenID Connect id token carries that sign-in reads. Apple sends `email_verified` and
/// `is_private_email` as strings, Google as booleans: `BoolClaim` reads both.
struct IDTokenClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim?
    var nonce: String?
    var email: String?
    var email_verified: BoolClaim?
    var is_private_email: BoolClaim?
    var name: String?
    var given_name: String?
    var family_name: String?
    var picture: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

/// The rules an id token is checked by once its signature verified; pure, so they are tested without keys.
enum IDTokenRules {
    /// GoTrue's nonce rule: the request and the token carry one or neither, and the token's is the hex SHA-256 of
    /// the request's. `acceptsRawNonce` (Apple only, as before this rule) also takes a token holding the raw nonce,
    /// for apps that handed Apple the nonce unhashed.
    static func checkNonce(token: String?, request: String?, acceptsRawNonce: Bool) throws(IDTokenError) {
        let token = token.flatMap { $0.isEmpty ? nil : $0 }
        let request = request.flatMap { $0.isEmpty ? nil : $0 }
        switch (token, request) {
        case (nil, nil): return
        case (.some, nil): throw .nonceRequired
        case (nil, .some): throw .nonceUnexpected
        case (.some(let claimed), .some(let raw)):
            if Secrets.constantTimeEquals(claimed, hexSHA256(raw)) { return }
            if acceptsRawNonce, Secrets.constantTimeEquals(claimed, raw) { return }
            throw .nonceMismatch
        }
    }

    static func hexSHA256(_ value: String) -> String {
        SHA256.hash(data: Data(value.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Name and picture claims, as GoTrue keeps them in `identity_data`.
    static func profile(_ claims: IDTokenClaims) -> [String: JSONValue] {
        var profile: [String: JSONValue] = [:]
        for (key, value) in [
            ("name", claims.name), ("given_name", claims.given_name), ("family_name", claims.family_name),
            ("picture", claims.picture),
        ] {
            if let value, !value.isEmpty { profile[key] = .string(value) }
        }
        return profile
    }
}

/// A provider's published signing keys (a JWKS URL), fetched on first use, kept for an hour, and fetched again at
/// once for a key id it does not know (a rotation), such a fetch at most every ten seconds so made-up key ids cannot
/// make it hammer the provider. Concurrent fetches share one request.
actor JWKSCache {
    let url: String
    private var keys: JWTKeyCollection?
    private var fetchedAt: Date?
    /// When an unknown key id last made it fetch before the keys were old.
    private var forcedAt: Date?
    private var known: Set<String> = []
    private var fetching: Task<(JWTKeyCollection, Set<String>), any Error>?
    static let maximumAge: TimeInterval = 3600
    static let leastRefetchInterval: TimeInterval = 10

    init(url: String) { self.url = url }

    /// Verifies `token`'s signature and its payload's own `verify`, fetching the keys again once when the token
    /// names a key id they lack (jwt-kit would try its default key instead). Throws `IDTokenError.keysUnavailable`
    /// when no keys can be had, `.signature` for anything else.
    func verify<Payload: JWTPayload>(_ token: String, as payload: Payload.Type) async throws(IDTokenError) -> Payload {
        var keys = try await collection(forceRefresh: false)
        if let kid = Self.keyID(of: token), !known.contains(kid) {
            keys = try await collection(forceRefresh: true)
        }
        do {
            return try await keys.verify(token, as: Payload.self)
        } catch {
            throw .signature
        }
    }

    /// The `kid` in a JWS's header, if it names one.
    static func keyID(of token: String) -> String? {
        unverifiedPart(0, of: token)?["kid"] as? String
    }

    /// Part `index` of a three-part JWS (0 the header, 1 the payload) as a JSON object, its signature unchecked: for
    /// choosing keys, or comparing with what was verified otherwise, never to trust alone.
    static func unverifiedPart(_ index: Int, of jws: String) -> [String: Any]? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Data(base64URL: String(parts[index])) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// A provider's published document (keys, discovery): 200 and at most 1 MiB within 10 s, or
    /// `IDTokenError.keysUnavailable`.
    static func get(_ url: String) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        guard response.status == .ok else { throw IDTokenError.keysUnavailable }
        return try await response.body.collect(upTo: 1 << 20)
    }

    private func collection(forceRefresh: Bool) async throws(IDTokenError) -> JWTKeyCollection {
        let now = Date()
        if let keys, let fetchedAt {
            if !forceRefresh, now.timeIntervalSince(fetchedAt) < Self.maximumAge { return keys }
            if forceRefresh, let forcedAt, now.timeIntervalSince(forcedAt) < Self.leastRefetchInterval { return keys }
        }
        if forceRefresh { forcedAt = now }
        let task =
            fetching
            ?? Task { [url] in
                let body = try await Self.get(url)
                let jwks = try JSONDecoder().decode(JWKS.self, from: Data(buffer: body))
                let kids = Set(jwks.keys.compactMap { $0.keyIdentifier?.string })
                return (try await JWTKeyCollection().add(jwks: jwks), kids)
            }
        fetching = task
        defer { fetching = nil }
        do {
            let (fresh, kids) = try await task.value
            keys = fresh
            known = kids
            fetchedAt = Date()
            return fresh
        } catch {
            // An outage keeps the keys we had rather than refusing every sign-in.
            if let keys { return keys }
            throw .keysUnavailable
        }
    }
}

/// Verifies one provider's id tokens: the signature against its keys, the issuer (any of its spellings), the
/// audience (one of the configured client ids), expiry, and the nonce.
struct IDTokenVerifier: Sendable {
    let provider: String
    let issuers: [String]
    let audiences: [String]
    let keys: JWKSCache
    let acceptsRawNonce: Bool
    /// A custom provider's `skip_nonce_check`: the nonce is not compared (GoTrue's option for providers that mangle it).
    var skipsNonce = false

    static func apple(audiences: [String], keys: JWKSCache) -> IDTokenVerifier {
        IDTokenVerifier(
            provider: "apple", issuers: ["https://appleid.apple.com"], audiences: audiences, keys: keys,
            acceptsRawNonce: true)
    }

    static func google(audiences: [String], jwksURL: String) -> IDTokenVerifier {
        IDTokenVerifier(
            provider: "google", issuers: ["https://accounts.google.com", "accounts.google.com"], audiences: audiences,
            keys: JWKSCache(url: jwksURL), acceptsRawNonce: false)
    }

    func verify(_ token: String, nonce: String?) async throws(IDTokenError) -> ExternalIdentity {
        let claims = try await keys.verify(token, as: IDTokenClaims.self)
        guard issuers.contains(claims.iss.value) else { throw .issuer }
        guard claims.aud.value.contains(where: audiences.contains) else { throw .audience }
        if !skipsNonce {
            try IDTokenRules.checkNonce(token: claims.nonce, request: nonce, acceptsRawNonce: acceptsRawNonce)
        }
        return ExternalIdentity(
            provider: provider, subject: claims.sub.value, email: claims.email,
            emailVerified: claims.email_verified?.value ?? false,
            isPrivateEmail: claims.is_private_email?.value ?? false, expiresAt: claims.exp.value,
            profile: IDTokenRules.profile(claims))
    }
}

/// The providers an id token may name, as `POST /auth/v1/token?grant_type=id_token` resolves them: a provider
/// configured here, a provider GoTrue knows that is not configured (400 `provider_disabled`), or a name nobody knows
/// (400 `validation_failed`, as GoTrue's "Custom OIDC provider … not allowed"). `custom:<slug>` names an OIDC provider
/// the operator registered (`CustomProviders`). Every refusal names the provider.
struct IDTokenProviders: Sendable {
    let verifiers: [String: IDTokenVerifier]
    let store: Store
    let custom = CustomProviderKeys()

    /// GoTrue's built-in provider names: known, so "not enabled" rather than "not allowed" when not configured.
    static let known: Set<String> = [
        "apple", "azure", "bitbucket", "discord", "facebook", "figma", "fly", "github", "gitlab", "google", "kakao",
        "keycloak", "linkedin", "linkedin_oidc", "notion", "slack", "slack_oidc", "snapchat", "spotify", "twitch",
        "twitter", "workos", "zoom",
    ]

    init(settings: AuthSettings, appleKeys: JWKSCache, store: Store) {
        self.store = store
        var verifiers: [String: IDTokenVerifier] = [:]
        if !settings.appleAudiences.isEmpty {
            verifiers["apple"] = .apple(audiences: settings.appleAudiences, keys: appleKeys)
        }
        if !settings.googleClientIDs.isEmpty {
            verifiers["google"] = .google(audiences: settings.googleClientIDs, jwksURL: settings.googleJWKSURL)
        }
        self.verifiers = verifiers
    }

    /// Whether `provider` signs in here.
    func enabled(_ provider: String) -> Bool { verifiers[provider] != nil }

    func verifier(for provider: String) async throws -> IDTokenVerifier {
        if let verifier = verifiers[provider] { return verifier }
        if provider.hasPrefix("custom:"), provider.count <= 72 {
            return try await custom.verifier(provider, store: store)
        }
        if Self.known.contains(provider) { throw Self.notEnabled(provider) }
        throw Self.notAllowed(provider)
    }

    static func notEnabled(_ provider: String) -> APIError {
        APIError(
            .badRequest, code: .providerDisabled,
            message: "Provider \(String(provider.prefix(72)).debugDescription) is not enabled on this server")
    }

    static func notAllowed(_ provider: String) -> APIError {
        APIError(
            .badRequest, code: .validationFailed,
            message: "Custom OIDC provider \(String(provider.prefix(72)).debugDescription) not allowed")
    }
}

extension APIError {
    /// An id token refused, in GoTrue's OAuth error shape (`error`, `error_description`) beside our stable code.
    static func idToken(_ error: IDTokenError, provider: String) -> APIError {
        let name = error == .nonceMismatch ? "invalid nonce" : "invalid request"
        let message = "The \(provider) id token was refused: \(error.description)"
        return APIError(
            .badRequest, code: .badJwt, message: message,
            details: ["error": .string(name), "error_description": .string(error.description)])
    }
}
