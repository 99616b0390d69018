import Crypto
import Foundation
import JWTKit

/// What a service key says: GoTrue's `role: service_role`, who issued it, and its id in `service_keys` (`jti`), which
/// the admin API's audit events name.
struct ServiceKeyClaims: JWTPayload, Equatable {
    var iss: String
    var role: String
    var iat: Int64
    var exp: Int64
    var jti: String

    /// Issuer, time and revocation are checked by `ServiceKeys.verify`, on its clock and store, not here.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A minted service key as the store keeps it: its id and when it was minted and revoked, never the token.
struct ServiceKey: Sendable, Equatable {
    let id: String
    let createdAt: Date
    let revokedAt: Date?
}

/// The keys backends call the admin API with: ES256 JWTs of role `service_role`, as Supabase's service key, signed
/// by a key of their own (derived from a server secret, so every instance verifies alike and access-token key
/// rotation leaves them alone). Each minted key has a row in `service_keys`; a revoked row refuses its key on every
/// instance at once, since each admin request reads it.
public struct ServiceKeys: Sendable {
    let store: Store
    let secrets: ServerSecrets
    let clock: any GatehouseClock
    let issuer: String

    /// The `kid` of a service key's header: never one of the access-token keys' ids (those are 16 base64url characters).
    static let keyID = "gatehouse-service-key"
    static let role = "service_role"
    /// How long a minted key is stamped valid for (revocation, not expiry, is what ends one).
    static let lifetime: TimeInterval = 10 * 365 * 24 * 3600

    init(store: Store, secrets: ServerSecrets, clock: any GatehouseClock, issuer: String) {
        self.store = store
        self.secrets = secrets
        self.clock = clock
        self.issuer = issuer
    }

    /// The same, for the command line: `gatehouse keys service-key`.
    public init(store: Store, box: SecretBox, issuer: String) {
        self.init(store: store, secrets: ServerSecrets(store: store, box: box), clock: SystemClock(), issuer: issuer)
    }

    /// The same, with the issuer a server of `configuration` has (its public URL, or one made up from its host and
    /// port): what the command line mints with, from the settings the server is started with.
    public init(store: Store, box: SecretBox, configuration: GatehouseConfiguration) {
        self.init(store: store, box: box, issuer: Self.issuer(configuration))
    }

    /// The issuer of service keys, as of access tokens: `<public URL>/auth/v1`.
    public static func issuer(_ configuration: GatehouseConfiguration) -> String {
        configuration.effectivePublicURL + "/auth/v1"
    }

    /// The signing key, derived from the store's `service_key_signing` secret.
    private func keys() async throws -> JWTKeyCollection {
        let seed = try await secrets.key("service_key_signing")
        let scalar = seed.withUnsafeBytes { Data(SHA256.hash(data: Data($0))) }
        let key = try ES256PrivateKey(pem: try P256.Signing.PrivateKey(rawRepresentation: scalar).pemRepresentation)
        return await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: Self.keyID))
    }

    /// Mints a key, records it, and returns its id and the token (shown once: only its id is stored). With
    /// `revokingOthers`, every earlier key stops working in the same transaction: a rotation.
    public func mint(revokingOthers: Bool) async throws -> (id: String, token: String, revoked: Int) {
        let now = clock.now
        let id = Secrets.identifier()
        let issuedAt = Int64(now.timeIntervalSince1970)
        let claims = ServiceKeyClaims(
            iss: issuer, role: Self.role, iat: issuedAt, exp: issuedAt + Int64(Self.lifetime), jti: id)
        let token = try await keys().sign(claims, kid: JWKIdentifier(string: Self.keyID))
        let revoked = try await store.transaction { db in
            let repository = ServiceKeyRepository(db: db)
            let revoked = revokingOthers ? try await repository.revokeAll(at: now) : 0
            try await repository.insert(id: id, at: now)
            return revoked
        }
        return (id, token, revoked)
    }

    /// Revokes one key by id, or every key; returns how many were live.
    public func revoke(_ id: String?) async throws -> Int {
        let repository = ServiceKeyRepository(db: store.database)
        if let id { return try await repository.revoke(id, at: clock.now) ? 1 : 0 }
        return try await repository.revokeAll(at: clock.now)
    }

    /// The keys minted, newest first, at most `limit` (the console lists them; the tokens were never stored).
    func list(limit: Int = 500) async throws -> [ServiceKey] {
        try await ServiceKeyRepository(db: store.database).all(limit: limit)
    }

    /// The id of the live service key `token` is, or nil: a forged, foreign or revoked key, or any other token.
    ///
    /// A key is this server's only when its `iss` is this server's issuer (one minted for another public URL, by a
    /// server or command started with other settings, is refused) and it has not expired. Every key is minted with
    /// an `exp` (`lifetime` after it), so one without is refused too: its claims do not decode (issue 35, finding 12).
    func verify(_ token: String) async -> String? {
        guard SigningKeys.headerAlgorithm(of: token) == "ES256",
            let claims = try? await keys().verify(token, as: ServiceKeyClaims.self), claims.role == Self.role,
            claims.iss == issuer, Double(claims.exp) > clock.now.timeIntervalSince1970,
            (try? await ServiceKeyRepository(db: store.database).isLive(claims.jti)) == true
        else { return nil }
        return claims.jti
    }
}
