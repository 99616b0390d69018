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
    let claims: AccessTokenClaims
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
    let clock: any GatehouseClock
    let settings: AuthSettings
    let issuer: String
    private let refreshKey = Mutex<SymmetricKey?>(nil)

    init(store: Store, keys: SigningKeys, clock: any GatehouseClock, settings: AuthSettings, issuer: String) {
        self.store = store
        self.keys = keys
        self.clock = clock
        self.settings = settings
        self.issuer = issuer
    }

    // MARK: Starting

    /// Starts a session for `accountID` on one device, within the caller's transaction.
    func start(
        accountID: String, method: String, ip: String?, userAgent: String?, db: any SQLDatabase,
        company: CompanyScope? = nil
    ) async throws -> IssuedSession {
        let now = clock.now
        let lifetime = company.map { min($0.lifetime, settings.sessionLifetime) } ?? settings.sessionLifetime
        let sessionID = Secrets.identifier()
        let amr = [AuthenticationMethod(method: method, timestamp: Int64(now.timeIntervalSince1970))]
        let refreshToken = Secrets.token()
        try await db.insert(into: "sessions")
            .columns(
                "id", "account_id", "created_at", "refreshed_at", "expires_at", "user_agent", "ip", "aal", "amr",
                "company_id", "username", "idle_timeout")
            .values(
                SQLBind(sessionID), SQLBind(accountID), SQLBind(now.epochMilliseconds), SQLBind(now.epochMilliseconds),
                SQLBind(now.addingTimeInterval(lifetime).epochMilliseconds),
                SQLBind(userAgent.map { String($0.prefix(512)) }), SQLBind(ip), SQLBind("aal1"),
                SQLBind(String(decoding: try JSONEncoder().encode(amr), as: UTF8.self)),
                SQLBind(company?.companyID), SQLBind(company?.username),
                SQLBind(company.map { Int64($0.idleTimeout) })
            )
            .run()
        try await insertRefreshToken(refreshToken, sessionID: sessionID, now: now, db: db)
        return IssuedSession(
            accountID: accountID, sessionID: sessionID, refreshToken: refreshToken, amr: amr,
            companyID: company?.companyID, username: company?.username)
    }

    /// Signs an access token for `issued` and wraps it with the user into Supabase's session object. A company
    /// session's token also carries the company, the member's role and masks, and the credential's username.
    func response(for issued: IssuedSession, user: AuthUser, membership: Membership? = nil) async throws -> AuthSession {
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
            accessToken: token, expiresIn: lifetime, expiresAt: claims.exp, refreshToken: issued.refreshToken, user: user)
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
    func refresh(_ token: String, audit event: @escaping @Sendable (IssuedSession) -> AuditEvent) async throws -> IssuedSession {
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
                    try await db.update("sessions").set("refreshed_at", to: now.epochMilliseconds)
                        .where("id", .equal, state.sessionID).run()
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

    /// The secret successor tokens are derived under; made once per store.
    private func refreshDerivationKey() async throws -> SymmetricKey {
        if let key = refreshKey.withLock({ $0 }) { return key }
        let name = "refresh_derivation_key"
        let candidate = Secrets.token()
        try await store.database.insert(into: "server_secrets").columns("name", "value")
            .values(SQLBind(name), SQLBind(candidate)).ignoringConflicts(with: "name").run()
        let stored = try await store.database.select().column("value").from("server_secrets")
            .where("name", .equal, name).first(decodingColumn: "value", as: String.self) ?? candidate
        let key = SymmetricKey(data: Data(stored.utf8))
        refreshKey.withLock { $0 = key }
        return key
    }

    // MARK: Checking

    struct LiveSession {
        let accountID: String
        let amr: [AuthenticationMethod]
        let companyID: String?
        let username: String?
    }

    /// The session when it is neither revoked, idle too long, past its lifetime, nor its account disabled.
    func liveSession(_ sessionID: String, now: Date, db: any SQLDatabase) async throws -> LiveSession? {
        guard
            let row = try await db.select()
                .column(SQLColumn("account_id", table: "sessions"))
                .columns(
                    SQLColumn("refreshed_at"), SQLColumn("expires_at"), SQLColumn("revoked_at"), SQLColumn("amr"),
                    SQLColumn("company_id"), SQLColumn("username"), SQLColumn("idle_timeout"))
                .column(SQLColumn("disabled_at", table: "accounts"))
                .from("sessions")
                .join("accounts", on: SQLColumn("account_id", table: "sessions"), .equal, SQLColumn("id", table: "accounts"))
                .where(SQLColumn("id", table: "sessions"), .equal, SQLBind(sessionID))
                .first()
        else { return nil }
        let now = now.epochMilliseconds
        let idle = try row.decode(column: "idle_timeout", as: Int64?.self) ?? Int64(settings.sessionIdleTimeout)
        guard try row.decode(column: "revoked_at", as: Int64?.self) == nil,
            try row.decode(column: "disabled_at", as: Int64?.self) == nil,
            try row.decode(column: "expires_at", as: Int64.self) > now,
            try row.decode(column: "refreshed_at", as: Int64.self) + idle * 1000 > now
        else { return nil }
        let amr = (try? JSONDecoder().decode(
            [AuthenticationMethod].self, from: Data(try row.decode(column: "amr", as: String.self).utf8))) ?? []
        return LiveSession(
            accountID: try row.decode(column: "account_id", as: String.self), amr: amr,
            companyID: try row.decode(column: "company_id", as: String?.self),
            username: try row.decode(column: "username", as: String?.self))
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
        guard claims.iss == issuer, claims.aud == "authenticated", claims.exp > now, claims.nbf <= now + 30 else {
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
            claims: claims)
    }

    // MARK: Ending and listing

    /// Which of an account's sessions a logout ends.
    enum Scope: String {
        case local, global, others
    }

    /// Revokes sessions by scope, relative to `current`; returns how many ended.
    @discardableResult
    func revoke(accountID: String, current: String, scope: Scope, db: any SQLDatabase) async throws -> Int {
        var query = db.update("sessions").set("revoked_at", to: clock.now.epochMilliseconds)
            .where("account_id", .equal, accountID).where("revoked_at", .is, SQLLiteral.null)
        switch scope {
        case .local: query = query.where("id", .equal, current)
        case .global: break
        case .others: query = query.where("id", .notEqual, current)
        }
        return try await query.returning("id").all().count
    }

    /// The account's live sessions, newest first.
    func list(accountID: String, current: String) async throws -> [SessionInfo] {
        let now = clock.now.epochMilliseconds
        return try await store.database.select()
            .columns("id", "user_agent", "ip", "created_at", "refreshed_at")
            .from("sessions")
            .where("account_id", .equal, accountID)
            .where("revoked_at", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now)
            .where("refreshed_at", .greaterThan, now - Int64(settings.sessionIdleTimeout * 1000))
            .orderBy("created_at", .descending)
            .all()
            .map { row in
                let id = try row.decode(column: "id", as: String.self)
                return SessionInfo(
                    id: id, userAgent: try row.decode(column: "user_agent", as: String?.self),
                    ip: try row.decode(column: "ip", as: String?.self),
                    createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)).iso8601,
                    refreshedAt: Date(epochMilliseconds: try row.decode(column: "refreshed_at", as: Int64.self)).iso8601,
                    current: id == current)
            }
    }
}
