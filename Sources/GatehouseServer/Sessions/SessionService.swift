import Crypto
import Foundation
import GatehouseAPI
import JWTKit
import SQLKit
import Synchronization

/// Who is calling, established from a verified access token whose session is still live.
public struct Identity: Sendable, Equatable {
    public let accountID: String
    public let sessionID: String
    public let email: String
    /// The company this session is logged in to, if any (from the session row, not only the token).
    public let companyID: String?
    /// For a company session, the account session it was opened from (it ends with it).
    public let parentSessionID: String?
    let claims: AccessTokenClaims

    /// Whether this is an account session rather than a company login.
    var isAccountSession: Bool { companyID == nil }
}

/// What scopes a session to one company: a company login.
struct CompanyScope: Sendable {
    let companyID: String
    let username: String?
    let idleTimeout: TimeInterval
    let lifetime: TimeInterval
}

/// A session just started or refreshed: what the client is given.
struct IssuedSession {
    let accountID: String
    let sessionID: String
    let refreshToken: String
    let amr: [AuthenticationMethod]
    var companyID: String? = nil
    var username: String? = nil
}

/// Sessions: starting them, rotating refresh tokens, checking access tokens, ending them.
final class SessionService: Sendable {
    let store: Store
    let keys: SigningKeys
    let secrets: ServerSecrets
    let clock: any GatehouseClock
    let settings: AuthSettings
    let issuer: String

    init(
        store: Store, keys: SigningKeys, secrets: ServerSecrets, clock: any GatehouseClock, settings: AuthSettings,
        issuer: String
    ) {
        self.store = store
        self.keys = keys
        self.secrets = secrets
        self.clock = clock
        self.settings = settings
        self.issuer = issuer
    }

    /// Records an audit event in its own transaction; a failure to record is logged, never the request's failure.
    func audit(_ event: AuditEvent) async {
        do {
            try await store.transaction { [clock] db in try await AuditLog(db: db, clock: clock).record(event) }
        } catch {
            store.logger.warning(
                "audit event not recorded", metadata: ["action": "\(event.action)", "error": "\(error)"])
        }
    }

    // MARK: Starting

    /// Starts a session for `accountID` on one device, within the caller's transaction. A company session is a child
    /// of the account session `parent`: it ends with it, never outlives it, and its timeouts are capped by the
    /// server's.
    func start(
        accountID: String, method: String, ip: String?, userAgent: String?, db: any SQLDatabase,
        company: CompanyScope? = nil, parent: String? = nil
    ) async throws -> IssuedSession {
        let now = clock.now
        var expiresAt = now.addingTimeInterval(
            company.map { min($0.lifetime, settings.sessionLifetime) } ?? settings.sessionLifetime
        ).epochMilliseconds
        if let parent {
            guard
                let parentEnd = try await db.select().column("expires_at").from("sessions").where("id", .equal, parent)
                    .first(decodingColumn: "expires_at", as: Int64.self)
            else { throw RefreshFailure.sessionEnded }
            expiresAt = min(expiresAt, parentEnd)
        }
        let idleTimeout = company.map { Int64(min($0.idleTimeout, settings.sessionIdleTimeout)) }
        let sessionID = Secrets.identifier()
        let amr = [AuthenticationMethod(method: method, timestamp: Int64(now.timeIntervalSince1970))]
        let refreshToken = Secrets.token()
        try await db.insert(into: "sessions")
            .columns(
                "id", "account_id", "created_at", "refreshed_at", "expires_at", "user_agent", "ip", "aal", "amr",
                "company_id", "username", "idle_timeout", "parent_id"
            )
            .values(
                SQLBind(sessionID), SQLBind(accountID), SQLBind(now.epochMilliseconds), SQLBind(now.epochMilliseconds),
                SQLBind(expiresAt),
                SQLBind(userAgent.map { String($0.prefix(512)) }), SQLBind(ip), SQLBind("aal1"),
                SQLBind(String(decoding: try JSONEncoder().encode(amr), as: UTF8.self)),
                SQLBind(company?.companyID), SQLBind(company?.username), SQLBind(idleTimeout), SQLBind(parent)
            )
            .run()
        try await insertRefreshToken(refreshToken, sessionID: sessionID, now: now, db: db)
        return IssuedSession(
            accountID: accountID, sessionID: sessionID, refreshToken: refreshToken, amr: amr,
            companyID: company?.companyID, username: company?.username)
    }

    /// Signs an access token for `issued` and wraps it with the user into Supabase's session object. A company
    /// session's token also carries the company, the member's role and masks, and the credential's username.
    func response(for issued: IssuedSession, user: AuthUser, membership: Membership? = nil) async throws -> AuthSession
    {
        let now = clock.now
        let lifetime = Int(settings.accessTokenLifetime)
        let issuedAt = Int64(now.timeIntervalSince1970)
        let claims = AccessTokenClaims(
            iss: issuer, aud: "authenticated", sub: issued.accountID, exp: issuedAt + Int64(lifetime), iat: issuedAt,
            nbf: issuedAt, email: user.email, phone: "", role: "authenticated", aal: "aal1", amr: issued.amr,
            sessionID: issued.sessionID, sid: issued.sessionID, isAnonymous: false,
            cid: membership?.companyID, companyRole: membership?.role.rawValue, deptMask: membership?.deptMask,
            managerMask: membership?.managerMask, username: issued.username)
        let token = try await keys.sign(claims)
        return AuthSession(
            accessToken: token, expiresIn: lifetime, expiresAt: claims.exp, refreshToken: issued.refreshToken,
            user: user)
    }

    // MARK: Refreshing

    /// Why a refresh was refused.
    enum RefreshFailure: Error, Equatable {
        case notFound
        case alreadyUsed(sessionID: String, accountID: String)
        case sessionEnded
    }

    /// Rotates `token`: a fresh token normally, the current one for a race inside the grace window, and the end of
    /// the whole session for an old token presented again.
    func refresh(_ token: String, audit event: @escaping @Sendable (IssuedSession) -> AuditEvent) async throws
        -> IssuedSession
    {
        let key = try await refreshDerivationKey()
        let now = clock.now
        let grace = settings.refreshReuseGrace
        let outcome: Result<IssuedSession, RefreshFailure> = try await store.transaction { db in
            guard let presented = try await self.tokenRow(Secrets.digest(token), db: db) else {
                return .failure(.notFound)
            }
            guard let session = try await self.liveSession(presented.sessionID, now: now, db: db) else {
                return .failure(.sessionEnded)
            }
            var current = token
            var state = presented
            for _ in 0..<64 {
                switch RefreshRotation.decide(rotatedAt: state.rotatedAt, now: now, grace: grace) {
                case .rotate:
                    let won = try await db.update("refresh_tokens").set("rotated_at", to: now.epochMilliseconds)
                        .where("token_hash", .equal, Secrets.digest(current))
                        .where("rotated_at", .is, SQLLiteral.null)
                        .returning("token_hash").all()
                    if won.isEmpty {
                        // Another request rotated it first; read what it did and decide again.
                        guard let reread = try await self.tokenRow(Secrets.digest(current), db: db) else {
                            return .failure(.notFound)
                        }
                        state = reread
                        continue
                    }
                    let next = RefreshRotation.successor(of: current, key: key)
                    try await self.insertRefreshToken(next, sessionID: state.sessionID, now: now, db: db)
                    // Using a company session is using its account session too: both stay out of the idle timeout.
                    try await db.update("sessions").set("refreshed_at", to: now.epochMilliseconds)
                        .where {
                            $0.where("id", .equal, state.sessionID).orWhere("id", .equal, SQLBind(session.parentID))
                        }
                        .run()
                    let issued = IssuedSession(
                        accountID: session.accountID, sessionID: state.sessionID, refreshToken: next,
                        amr: session.amr, companyID: session.companyID, username: session.username)
                    // The audit event goes in the same transaction: one turn at the write lock per refresh.
                    try await AuditLog(db: db, clock: self.clock).record(event(issued))
                    return .success(issued)
                case .replayWithinGrace:
                    let next = RefreshRotation.successor(of: current, key: key)
                    guard let successor = try await self.tokenRow(Secrets.digest(next), db: db) else {
                        return .failure(.notFound)
                    }
                    if successor.rotatedAt == nil {
                        let issued = IssuedSession(
                            accountID: session.accountID, sessionID: state.sessionID, refreshToken: next,
                            amr: session.amr, companyID: session.companyID, username: session.username)
                        try await AuditLog(db: db, clock: self.clock).record(event(issued))
                        return .success(issued)
                    }
                    current = next
                    state = successor
                case .reuseDetected:
                    try await db.update("sessions").set("revoked_at", to: now.epochMilliseconds)
                        .where("id", .equal, state.sessionID).where("revoked_at", .is, SQLLiteral.null).run()
                    return .failure(.alreadyUsed(sessionID: state.sessionID, accountID: session.accountID))
                }
            }
            return .failure(.notFound)
        }
        return try outcome.get()
    }

    private struct TokenRow {
        let sessionID: String
        let rotatedAt: Date?
    }

    private func tokenRow(_ hash: String, db: any SQLDatabase) async throws -> TokenRow? {
        guard
            let row = try await db.select().columns("session_id", "rotated_at").from("refresh_tokens")
                .where("token_hash", .equal, hash).first()
        else { return nil }
        return TokenRow(
            sessionID: try row.decode(column: "session_id", as: String.self),
            rotatedAt: try row.decode(column: "rotated_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
    }

    private func insertRefreshToken(_ token: String, sessionID: String, now: Date, db: any SQLDatabase) async throws {
        try await db.insert(into: "refresh_tokens").columns("token_hash", "session_id", "created_at")
            .values(SQLBind(Secrets.digest(token)), SQLBind(sessionID), SQLBind(now.epochMilliseconds)).run()
    }

    /// The secret successor tokens are derived under; made once per store, sealed at rest.
    private func refreshDerivationKey() async throws -> SymmetricKey {
        try await secrets.key("refresh_derivation_key")
    }

    // MARK: Checking

    struct LiveSession {
        let accountID: String
        let amr: [AuthenticationMethod]
        let companyID: String?
        let username: String?
        let parentID: String?
    }

    /// The session when it is neither revoked, idle too long, past its lifetime, nor its account disabled; a company
    /// session also needs its account session to be live.
    func liveSession(_ sessionID: String, now: Date, db: any SQLDatabase) async throws -> LiveSession? {
        guard
            let row = try await db.raw(
                """
                SELECT s.account_id, s.refreshed_at, s.expires_at, s.revoked_at, s.amr, s.company_id, s.username,
                       s.idle_timeout, s.parent_id, a.disabled_at,
                       p.id AS p_id, p.refreshed_at AS p_refreshed_at, p.expires_at AS p_expires_at,
                       p.revoked_at AS p_revoked_at
                FROM sessions s
                JOIN accounts a ON a.id = s.account_id
                LEFT JOIN sessions p ON p.id = s.parent_id
                WHERE s.id = \(bind: sessionID)
                """
            ).first()
        else { return nil }
        let now = now.epochMilliseconds
        let serverIdle = Int64(settings.sessionIdleTimeout)
        let idle = min(try row.decode(column: "idle_timeout", as: Int64?.self) ?? serverIdle, serverIdle)
        guard try row.decode(column: "disabled_at", as: Int64?.self) == nil,
            SessionLiveness.isLive(
                revokedAt: try row.decode(column: "revoked_at", as: Int64?.self),
                expiresAt: try row.decode(column: "expires_at", as: Int64.self),
                refreshedAt: try row.decode(column: "refreshed_at", as: Int64.self), idleSeconds: idle, now: now)
        else { return nil }
        let parentID = try row.decode(column: "parent_id", as: String?.self)
        if parentID != nil {
            guard try row.decode(column: "p_id", as: String?.self) != nil,
                SessionLiveness.isLive(
                    revokedAt: try row.decode(column: "p_revoked_at", as: Int64?.self),
                    expiresAt: try row.decode(column: "p_expires_at", as: Int64.self),
                    refreshedAt: try row.decode(column: "p_refreshed_at", as: Int64.self), idleSeconds: serverIdle,
                    now: now)
            else { return nil }
        }
        let amr =
            (try? JSONDecoder().decode(
                [AuthenticationMethod].self, from: Data(try row.decode(column: "amr", as: String.self).utf8))) ?? []
        return LiveSession(
            accountID: try row.decode(column: "account_id", as: String.self), amr: amr,
            companyID: try row.decode(column: "company_id", as: String?.self),
            username: try row.decode(column: "username", as: String?.self), parentID: parentID)
    }

    /// Why an access token was refused.
    enum TokenFailure: Error {
        case malformed
        case sessionEnded
    }

    /// Verifies an access token (signature, algorithm, issuer, audience, time) and that its session is still live.
    func identify(bearer token: String) async throws(TokenFailure) -> Identity {
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token)
        } catch {
            throw .malformed
        }
        let now = Int64(clock.now.timeIntervalSince1970)
        guard TokenTimes.acceptable(claims, now: now, maximumLifetime: Int64(settings.accessTokenLifetime)),
            claims.iss == issuer, claims.aud == "authenticated"
        else {
            throw .malformed
        }
        let live: LiveSession?
        do {
            live = try await liveSession(claims.sessionID, now: clock.now, db: store.database)
        } catch {
            throw .sessionEnded
        }
        guard let live, live.accountID == claims.sub, live.companyID == claims.cid else { throw .sessionEnded }
        return Identity(
            accountID: claims.sub, sessionID: claims.sessionID, email: claims.email, companyID: live.companyID,
            parentSessionID: live.parentID, claims: claims)
    }

    // MARK: Ending and listing

    /// Which of an account's sessions a logout ends.
    enum Scope: String {
        case local, global, others
    }

    /// Revokes sessions by scope, relative to `current`, and every company session opened from one that ends;
    /// returns how many ended. `others` keeps the current session's family (its account session and its company
    /// sessions).
    @discardableResult
    func revoke(accountID: String, current: String, scope: Scope, db: any SQLDatabase) async throws -> Int {
        let family =
            try await db.select().column("parent_id").from("sessions").where("id", .equal, current)
            .first(decodingColumn: "parent_id", as: String?.self).flatMap { $0 } ?? current
        var query = db.update("sessions").set("revoked_at", to: clock.now.epochMilliseconds)
            .where("account_id", .equal, accountID).where("revoked_at", .is, SQLLiteral.null)
        switch scope {
        case .local: query = query.where { $0.where("id", .equal, current).orWhere("parent_id", .equal, current) }
        case .global: break
        case .others:
            query = query.where("id", .notEqual, family)
                .where { $0.where("parent_id", .is, SQLLiteral.null).orWhere("parent_id", .notEqual, family) }
        }
        return try await query.returning("id").all().count
    }

    /// The account's live sessions (account sessions, one per device; company logins live inside them), newest
    /// first, each judged by its own timeouts exactly as a request would be.
    func list(accountID: String, current: String) async throws -> [SessionInfo] {
        let now = clock.now.epochMilliseconds
        let root =
            try await store.database.select().column("parent_id").from("sessions").where("id", .equal, current)
            .first(decodingColumn: "parent_id", as: String?.self).flatMap { $0 } ?? current
        let serverIdle = Int64(settings.sessionIdleTimeout)
        return try await store.database.select()
            .columns("id", "user_agent", "ip", "created_at", "refreshed_at", "expires_at", "revoked_at", "idle_timeout")
            .from("sessions")
            .where("account_id", .equal, accountID)
            .where("revoked_at", .is, SQLLiteral.null)
            .where("parent_id", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now)
            .orderBy("created_at", .descending)
            .all()
            .filter { row in
                SessionLiveness.isLive(
                    revokedAt: try row.decode(column: "revoked_at", as: Int64?.self),
                    expiresAt: try row.decode(column: "expires_at", as: Int64.self),
                    refreshedAt: try row.decode(column: "refreshed_at", as: Int64.self),
                    idleSeconds: min(try row.decode(column: "idle_timeout", as: Int64?.self) ?? serverIdle, serverIdle),
                    now: now)
            }
            .map { row in
                let id = try row.decode(column: "id", as: String.self)
                return SessionInfo(
                    id: id, userAgent: try row.decode(column: "user_agent", as: String?.self),
                    ip: try row.decode(column: "ip", as: String?.self),
                    createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)).iso8601,
                    refreshedAt: Date(epochMilliseconds: try row.decode(column: "refreshed_at", as: Int64.self))
                        .iso8601,
                    current: id == root)
            }
    }
}

/// Whether one session row is still usable: the pure rule behind every check.
enum SessionLiveness {
    static func isLive(revokedAt: Int64?, expiresAt: Int64, refreshedAt: Int64, idleSeconds: Int64, now: Int64) -> Bool
    {
        revokedAt == nil && expiresAt > now && refreshedAt + idleSeconds * 1000 > now
    }
}

/// The time claims of an access token: not expired, not used before `nbf` or issued in the future (30 s of clock
/// skew allowed), and never valid for longer than this server issues tokens for.
enum TokenTimes {
    static let skew: Int64 = 30

    static func acceptable(_ claims: AccessTokenClaims, now: Int64, maximumLifetime: Int64) -> Bool {
        claims.exp > now && claims.nbf <= now + skew && claims.iat <= now + skew
            && claims.exp - claims.iat <= maximumLifetime + skew && claims.iat <= claims.exp
    }
}
