import Foundation
import GatehouseAPI
import JWTKit
import NIOConcurrencyHelpers
import SQLKit

/// The ES256 keys that sign access tokens. They live in the store so every instance signs and verifies alike;
/// `gatehouse keys rotate` adds a new one, and a retired key stays published until its last token expires.
public actor SigningKeys {
    private let store: Store
    private let box: SecretBox
    private let clock: any GatehouseClock
    private let tokenLifetime: TimeInterval
    private var collection = JWTKeyCollection()
    private var activeKid: String?
    private var published: [JWK] = []
    private var loadedAt: Date?

    /// How long a loaded key set is trusted before the store is read again (a rotation elsewhere shows up then).
    static let refreshInterval: TimeInterval = 30

    public init(store: Store, box: SecretBox, clock: any GatehouseClock, tokenLifetime: TimeInterval) {
        self.store = store
        self.box = box
        self.clock = clock
        self.tokenLifetime = tokenLifetime
    }

    /// Signs `claims` with the newest key.
    func sign(_ claims: some JWTPayload) async throws -> String {
        try await loadIfStale()
        guard let activeKid else { throw SigningKeyError.noActiveKey }
        return try await collection.sign(claims, kid: JWKIdentifier(string: activeKid))
    }

    /// Verifies the signature of `token` against the published keys, re-reading them once for an unknown key id.
    /// A token whose signature verified before is answered from a small cache until it expires: a token never
    /// changes, and whether its session is still live is checked on every request anyway.
    /// The cache is read outside the actor, so a request whose token verified before never queues behind others.
    nonisolated func verify(_ token: String) async throws -> AccessTokenClaims {
        let now = Int64(clock.now.timeIntervalSince1970)
        if let cached = verified.withLockedValue({ $0[token] }), cached.exp > now { return cached }
        return try await verifyAndRemember(token, now: now)
    }

    private func verifyAndRemember(_ token: String, now: Int64) async throws -> AccessTokenClaims {
        guard Self.headerAlgorithm(of: token) == "ES256" else { throw SigningKeyError.algorithmNotAllowed }
        try await loadIfStale()
        let claims: AccessTokenClaims
        do {
            claims = try await collection.verify(token, as: AccessTokenClaims.self)
        } catch let error as JWTError where error.errorType == .unknownKID {
            try await load()
            claims = try await collection.verify(token, as: AccessTokenClaims.self)
        }
        verified.withLockedValue { verified in
            if verified.count >= Self.verifiedCapacity {
                verified = verified.filter { $0.value.exp > now }
                if verified.count >= Self.verifiedCapacity { verified.removeAll(keepingCapacity: true) }
            }
            verified[token] = claims
        }
        return claims
    }

    /// Verifies the signature of a token of another shape these keys signed (an id token given back as
    /// `id_token_hint`, a client credentials token at introspection), ES256 only; its claims are the caller's to
    /// check. Nothing is cached: these are rare.
    func verify<Payload: JWTPayload>(_ token: String, as _: Payload.Type) async throws -> Payload {
        guard Self.headerAlgorithm(of: token) == "ES256" else { throw SigningKeyError.algorithmNotAllowed }
        try await loadIfStale()
        do {
            return try await collection.verify(token, as: Payload.self)
        } catch let error as JWTError where error.errorType == .unknownKID {
            try await load()
            return try await collection.verify(token, as: Payload.self)
        }
    }

    private let verified = NIOLockedValueBox<[String: AccessTokenClaims]>([:])

    /// The `alg` of a compact JWS header: only ES256 is ever considered, whatever keys are loaded.
    static func headerAlgorithm(of token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1).first else { return nil }
        var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["alg"] as? String
    }

    private static let verifiedCapacity = 10_000

    /// The public keys, for `/.well-known/jwks.json`.
    public func jwks() async throws -> JWKS {
        try await loadIfStale()
        return JWKS(keys: published)
    }

    private func loadIfStale() async throws {
        if let loadedAt, clock.now.timeIntervalSince(loadedAt) < Self.refreshInterval, activeKid != nil { return }
        try await load()
    }

    private func load() async throws {
        var rows = try await Self.publishedRows(store.database, now: clock.now, tokenLifetime: tokenLifetime)
        if !rows.contains(where: { $0.retiredAt == nil }) {
            try await Self.createKey(store, box: box, now: clock.now)
            rows = try await Self.publishedRows(store.database, now: clock.now, tokenLifetime: tokenLifetime)
        }
        let fresh = JWTKeyCollection()
        var jwks: [JWK] = []
        for row in rows {
            let pem = try Self.openPEM(row.pem, kid: row.kid, box: box)
            if !row.pem.hasPrefix(SecretBox.prefix) {
                // Written in the clear by an older release: seal it now.
                try await SigningKeyRepository(db: store.database)
                    .reseal(row.kid, privateKey: try Self.sealPEM(pem, kid: row.kid, box: box))
            }
            let key = try ES256PrivateKey(pem: pem)
            await fresh.add(ecdsa: key, kid: JWKIdentifier(string: row.kid))
            if let parameters = key.parameters {
                jwks.append(
                    .ecdsa(
                        .es256, identifier: JWKIdentifier(string: row.kid), x: parameters.x, y: parameters.y,
                        curve: .p256))
            }
        }
        collection = fresh
        published = jwks
        activeKid = rows.last(where: { $0.retiredAt == nil })?.kid
        loadedAt = clock.now
    }

    /// The keys tokens may still carry: the active ones, and those retired less than a token's lifetime (and a
    /// minute) ago.
    static func publishedRows(_ db: any SQLDatabase, now: Date, tokenLifetime: TimeInterval) async throws
        -> [SigningKeyRow]
    {
        try await SigningKeyRepository(db: db).keys(retiredAfter: now.addingTimeInterval(-tokenLifetime - 60))
    }

    /// Adds a key when none is active. Concurrent instances may race; the loser's insert is harmless.
    static func createKey(_ store: Store, box: SecretBox, now: Date) async throws {
        let kid = String(Secrets.token().prefix(16))
        try await SigningKeyRepository(db: store.database)
            .insert(
                kid, privateKey: try sealPEM(ES256PrivateKey().pemRepresentation, kid: kid, box: box),
                createdAt: now.epochMilliseconds)
    }

    /// The private key as stored: sealed with the key-encryption key, bound to its key id.
    static func sealPEM(_ pem: String, kid: String, box: SecretBox) throws -> String {
        try box.seal(pem, context: "signing_key:\(kid)")
    }

    /// The PEM of a stored key; one stored in the clear by an older release is returned as it is.
    static func openPEM(_ stored: String, kid: String, box: SecretBox) throws -> String {
        stored.hasPrefix(SecretBox.prefix) ? try box.open(stored, context: "signing_key:\(kid)") : stored
    }

    /// Retires the active keys and adds a new one. Returns the new key id and the retired ones.
    public static func rotate(_ store: Store, box: SecretBox, now: Date = Date()) async throws -> (
        new: String, retired: [String]
    ) {
        try await store.transaction { db in
            let keys = SigningKeyRepository(db: db)
            let retired = try await keys.retireActive(at: now)
            let kid = String(Secrets.token().prefix(16))
            // A millisecond after the retirement, so the new key sorts last.
            try await keys.insert(
                kid, privateKey: try sealPEM(ES256PrivateKey().pemRepresentation, kid: kid, box: box),
                createdAt: now.epochMilliseconds + 1)
            return (kid, retired)
        }
    }
}

enum SigningKeyError: Error {
    case noActiveKey
    case algorithmNotAllowed
}

/// One authentication method and when it was used (`amr`).
struct AuthenticationMethod: Codable, Sendable, Equatable {
    var method: String
    var timestamp: Int64
}

/// How strongly a session's holder proved who they are (NIST's authenticator assurance level, as GoTrue writes it):
/// aal1 for one factor, aal2 once a second factor verified in that session.
enum AssuranceLevel: String, Sendable, Codable {
    case aal1, aal2

    /// The `amr` methods of a second factor (GoTrue's names).
    static let secondFactorMethods: Set<String> = ["totp", "mfa/recovery_code"]

    /// The level a request acts at: aal2 only when both the token was issued at aal2 and its session still is (an
    /// unknown claim counts as aal1).
    static func effective(token claim: String, session: AssuranceLevel) -> AssuranceLevel {
        claim == AssuranceLevel.aal2.rawValue && session == .aal2 ? .aal2 : .aal1
    }
}

/// The claims of a Gatehouse access token (Supabase's shape, plus the company context later).
struct AccessTokenClaims: JWTPayload, Equatable {
    var iss: String
    var aud: String
    var sub: String
    var exp: Int64
    var iat: Int64
    var nbf: Int64
    var email: String
    var phone: String
    var role: String
    var aal: String
    var amr: [AuthenticationMethod]
    var sessionID: String
    var sid: String
    var isAnonymous: Bool
    /// The user's `app_metadata` and `user_metadata` as GoTrue's tokens carry them, when they fit
    /// (`SessionService.metadataClaimLimit`); absent from older tokens.
    var appMetadata: JSONFields? = nil
    var userMetadata: JSONFields? = nil
    /// Company context, present on a company login's tokens.
    var cid: String? = nil
    var companyRole: String? = nil
    var deptMask: Int64? = nil
    var managerMask: Int64? = nil
    var username: String? = nil
    /// An OAuth client's token (`OAuthServer/`): the client it was issued to and the scopes granted, space-separated.
    var clientID: String? = nil
    var scope: String? = nil

    enum CodingKeys: String, CodingKey {
        case iss, aud, sub, exp, iat, nbf, email, phone, role, aal, amr, sid, cid, username, scope
        case clientID = "client_id"
        case sessionID = "session_id"
        case isAnonymous = "is_anonymous"
        case appMetadata = "app_metadata"
        case userMetadata = "user_metadata"
        case companyRole = "company_role"
        case deptMask = "dept_mask"
        case managerMask = "manager_mask"
    }

    /// Time, issuer and audience are checked by `TokenVerifier` against the injected clock, not here.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
