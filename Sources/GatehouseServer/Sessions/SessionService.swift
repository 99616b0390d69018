import Crypto
import Foundation
import GatehouseAPI
import JWTKit
import SQLKit

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
    /// The effective level: the lower of the token's `aal` claim and the session's as stored now (a removed factor
    /// lowers it before its tokens expire; a step-up does not raise tokens issued before it).
    var aal: AssuranceLevel = .aal1
    /// The factor that raised it to aal2.
    var factorID: String? = nil

    /// The OAuth client this session was issued to (`OAuthServer/`), nil for the account's own sessions.
    var oauthClientID: String? = nil

    /// Whether this is the account's own session: neither a company login nor an OAuth client's.
    var isAccountSession: Bool { companyID == nil && oauthClientID == nil }
}

/// What scopes a session to one company: a company login.
struct CompanyScope: Sendable {
    let companyID: String
    let username: String?
    let idleTimeout: TimeInterval
    let lifetime: TimeInterval
}

/// A session just started or refreshed: what the client is given.
struct IssuedSession: Sendable {
    let accountID: String
    let sessionID: String
    let refreshToken: String
    let amr: [AuthenticationMethod]
    var aal: AssuranceLevel = .aal1
    var companyID: String? = nil
    var username: String? = nil
    /// When the session itself ends (epoch milliseconds), however often it refreshes.
    var endsAt: Int64? = nil
    /// Whether this came from a refresh (a custom access token hook is told `token_refresh`).
    var refreshed = false
    /// An OAuth client's session: its client and granted scopes, carried in the token as `client_id` and `scope`.
    var oauthClientID: String? = nil
    var oauthScope: String? = nil
}

/// Sessions: starting them, rotating refresh tokens, checking access tokens, ending them.
final class SessionService: Sendable {
    let store: Store
    let keys: SigningKeys
    let secrets: ServerSecrets
    let clock: any GatehouseClock
    let settings: AuthSettings
    let issuer: String
    /// Session rows and users, so that a protected request usually reads nothing from the store.
    let cache: AuthCache
    /// Refresh rotations written in batches.
    let rotations: RotationQueue
    /// Refresh tokens read in batches.
    let refreshTokens: RefreshTokenReader
    /// The audit trail (refresh replays are recorded through it).
    let trail: AuditTrail
    /// The auth hooks; the custom access token hook shapes every token signed here when it is on.
    let hooks: AuthHooks?

    init(
        store: Store, keys: SigningKeys, secrets: ServerSecrets, clock: any GatehouseClock, settings: AuthSettings,
        issuer: String, trail: AuditTrail, cache: AuthCache = AuthCache(), hooks: AuthHooks? = nil
    ) {
        self.trail = trail
        self.hooks = hooks
        self.store = store
        self.keys = keys
        self.secrets = secrets
        self.clock = clock
        self.settings = settings
        self.issuer = issuer
        self.cache = cache
        rotations = RotationQueue(store: store, clock: clock)
        refreshTokens = RefreshTokenReader(store: store)
        // Whatever commits here, or another instance announces, drops what it changed from the cache.
        store.onCommit { [cache] changes in cache.forget(changes) }
    }

    // MARK: Starting

    /// Starts a session for `accountID` on one device, within the caller's transaction. A company session is a child
    /// of the account session `parent`: it ends with it, never outlives it, and its timeouts are capped by the
    /// server's, and it has the level its account session had when it was opened (`parentAssurance`).
    func start(
        accountID: String, method: String, ip: String?, userAgent: String?, db: any SQLDatabase,
        company: CompanyScope? = nil, parent: String? = nil,
        parentAssurance: (aal: AssuranceLevel, factorID: String?) = (.aal1, nil),
        oauth: (clientID: String, scope: String)? = nil, amr given: [AuthenticationMethod]? = nil
    ) async throws -> IssuedSession {
        let now = clock.now
        var expiresAt = now.addingTimeInterval(
            company.map { min($0.lifetime, settings.sessionLifetime) } ?? settings.sessionLifetime
        ).epochMilliseconds
        let sessions = SessionRepository(db: db)
        if let parent {
            guard let parentEnd = try await sessions.expiresAt(parent) else { throw RefreshFailure.sessionEnded }
            expiresAt = min(expiresAt, parentEnd)
        }
        let idleTimeout = company.map { Int64(min($0.idleTimeout, settings.sessionIdleTimeout)) }
        let sessionID = Secrets.identifier()
        let amr = given ?? [AuthenticationMethod(method: method, timestamp: Int64(now.timeIntervalSince1970))]
        let refreshToken = Secrets.token()
        try await sessions.insert(
            NewSession(
                id: sessionID, accountID: accountID, now: now, expiresAt: expiresAt, userAgent: userAgent, ip: ip,
                amr: amr, aal: parentAssurance.aal, factorID: parentAssurance.factorID,
                companyID: company?.companyID, username: company?.username, idleTimeout: idleTimeout,
                parentID: parent, oauthClientID: oauth?.clientID, oauthScope: oauth?.scope))
        try await sessions.insertRefreshToken(refreshToken, sessionID: sessionID, now: now)
        return IssuedSession(
            accountID: accountID, sessionID: sessionID, refreshToken: refreshToken, amr: amr,
            aal: parentAssurance.aal, companyID: company?.companyID, username: company?.username, endsAt: expiresAt,
            oauthClientID: oauth?.clientID, oauthScope: oauth?.scope)
    }

    /// Signs an access token for `issued` and wraps it with the user into Supabase's session object. A company
    /// session's token also carries the company, the member's role and masks, and the credential's username.
    func response(for issued: IssuedSession, user: Schemas.User, membership: Membership? = nil) async throws
        -> Schemas.Session
    {
        let access = try await accessToken(
            for: issued, user: user, metadata: Self.metadataClaims(app: user.appMetadata, user: user.userMetadata),
            membership: membership)
        return Schemas.Session(
            accessToken: access.token, tokenType: .bearer, expiresIn: access.lifetime, expiresAt: access.expiresAt,
            refreshToken: issued.refreshToken, user: user, sessionExpiresAt: issued.endsAt.map { $0 / 1000 })
    }

    /// The same session as the generated serializer writes it (keys sorted), with the user's JSON as the cache keeps
    /// it rather than encoded again: a refresh's answer (`FastPath`).
    func responseJSON(for issued: IssuedSession, user: AuthCache.CachedUser, membership: Membership? = nil)
        async throws -> [UInt8]
    {
        let access = try await accessToken(
            for: issued, user: user.user, metadata: user.metadataClaims, membership: membership)
        var out = JSONWriter(capacity: user.json.count + access.token.utf8.count + 256)
        out.raw("{\"access_token\":")
        out.string(access.token)
        out.raw(",\"expires_at\":")
        out.integer(access.expiresAt)
        out.raw(",\"expires_in\":")
        out.integer(Int64(access.lifetime))
        out.raw(",\"refresh_token\":")
        out.string(issued.refreshToken)
        if let endsAt = issued.endsAt {
            out.raw(",\"session_expires_at\":")
            out.integer(endsAt / 1000)
        }
        out.raw(",\"token_type\":\"bearer\",\"user\":")
        out.bytes(user.json)
        out.raw("}")
        return out.bytes
    }

    /// A signed access token for `issued`, with its lifetime and expiry (epoch seconds).
    func accessToken(
        for issued: IssuedSession, user: Schemas.User, metadata: (app: JSONFields?, user: JSONFields?),
        membership: Membership?
    ) async throws -> (token: String, lifetime: Int, expiresAt: Int64) {
        let now = clock.now
        let lifetime = Int(settings.accessTokenLifetime)
        let issuedAt = Int64(now.timeIntervalSince1970)
        // GoTrue's tokens carry both metadata objects, which apps read (get_claims, row-level security). The web
        // pages keep the token in a cookie, whose 4 KB they must fit: larger metadata is read from /user instead.
        // An OAuth client's token carries what its scopes grant: the address under `email`, the user's own metadata
        // under `profile` (the app's metadata always, as resource servers read roles from it).
        let granted = issued.oauthClientID == nil ? nil : Set(OAuthScopes.list(issued.oauthScope))
        let email = granted.map { $0.contains(OAuthScopes.email) } ?? true ? user.email : ""
        let userMetadata = granted.map { $0.contains(OAuthScopes.profile) } ?? true ? metadata.user : nil
        let claims = AccessTokenClaims(
            iss: issuer, aud: "authenticated", sub: issued.accountID, exp: issuedAt + Int64(lifetime), iat: issuedAt,
            nbf: issuedAt, email: email, phone: "", role: "authenticated", aal: issued.aal.rawValue,
            amr: issued.amr,
            sessionID: issued.sessionID, sid: issued.sessionID, isAnonymous: user.isAnonymous,
            appMetadata: metadata.app, userMetadata: userMetadata, cid: membership?.companyID,
            companyRole: membership?.role.rawValue, deptMask: membership?.deptMask,
            managerMask: membership?.managerMask, username: issued.username, clientID: issued.oauthClientID,
            scope: issued.oauthScope)
        if let hooks, hooks.isOn(.customAccessToken) {
            let method = issued.refreshed ? "token_refresh" : issued.amr.last?.method ?? "password"
            let customized = try await hooks.customizeClaims(claims, method: method)
            return (try await keys.sign(HookClaims(customized)), lifetime, claims.exp)
        }
        return (try await keys.sign(claims), lifetime, claims.exp)
    }

    /// The most bytes the two metadata objects may take, encoded, to ride in an access token.
    static let metadataClaimLimit = 1024

    /// The metadata objects for the token's claims: `app_metadata` (only the admin API writes it) while it fits the
    /// limit alone, `user_metadata` while both together fit. What the user writes never pushes out what the app set.
    static func metadataClaims(app: JSONFields, user: JSONFields) -> (app: JSONFields?, user: JSONFields?) {
        let encoder = JSONEncoder()
        guard let appSize = try? encoder.encode(app).count, appSize <= metadataClaimLimit else { return (nil, nil) }
        guard let userSize = try? encoder.encode(user).count, appSize + userSize <= metadataClaimLimit else {
            return (app, nil)
        }
        return (app, user)
    }

    // MARK: Refreshing

    /// Why a refresh was refused.
    enum RefreshFailure: Error, Equatable {
        case notFound
        case alreadyUsed(sessionID: String, accountID: String)
        /// Past its idle timeout or lifetime.
        case sessionEnded
        /// Signed out, or ended by a password change, a reuse or an operator: GoTrue deletes such a session with its
        /// tokens, so it answers as for a token it never issued.
        case signedOut
        /// The account is disabled.
        case banned
    }

    /// Rotates `token` as `RefreshRotation` decides: a fresh token into its successor, a late twin into the
    /// successor it was given, and for a reused token the end of the whole session. The token and its session are
    /// read without the write lock (in batches, `RefreshTokenReader`); the rotation is one row of a batched statement
    /// (`RotationQueue`), whose outcome says whether another request rotated the token first (then it is read and
    /// decided again) or the session was revoked since the read.
    ///
    /// A session is refreshed only by whom it was issued to: an OAuth client's (`oauthClient`) by that client, the
    /// account's own (nil) at `/token`; any other token is answered as unknown.
    func refresh(
        _ token: String, oauthClient: String? = nil, audit event: @escaping @Sendable (IssuedSession) -> AuditEvent
    ) async throws -> IssuedSession {
        let key = try await refreshDerivationKey()
        let now = clock.now
        let grace = settings.refreshReuseGrace
        guard var (state, row) = try await refreshTokens.find(token), row.oauthClientID == oauthClient else {
            throw RefreshFailure.notFound
        }
        var current = token
        for _ in 0..<64 {
            let next = RefreshRotation.successor(of: current, key: key)
            func issued(_ session: LiveSession) -> IssuedSession {
                IssuedSession(
                    accountID: session.accountID, sessionID: state.sessionID, refreshToken: next, amr: session.amr,
                    aal: session.aal, companyID: session.companyID, username: session.username,
                    endsAt: session.endsAt, refreshed: true, oauthClientID: session.oauthClientID,
                    oauthScope: session.oauthScope)
            }
            switch RefreshRotation.verdict(
                rotatedAt: state.rotatedAt, session: row, live: liveSession(row, now: now), now: now, grace: grace)
            {
            case .fresh(let session):
                let issued = issued(session)
                let outcome = try await rotations.rotate(
                    PendingRotation(
                        token: current, successor: next, sessionID: issued.sessionID, parentID: session.parentID,
                        at: now, audit: event(issued)))
                switch outcome {
                case .rotated, .rotatedByTwin: return issued
                case .sessionEnded: throw RefreshFailure.signedOut
                case .alreadyRotated:
                    guard let reread = try await refreshTokens.find(current) else { throw RefreshFailure.notFound }
                    (state, row) = reread
                }
            case .lateTwin(let session):
                guard let successor = try await refreshTokens.find(next) else { throw RefreshFailure.notFound }
                if successor.token.rotatedAt == nil {
                    let issued = issued(session)
                    await trail.record(event(issued))
                    return issued
                }
                // Its successor was rotated too: follow the chain.
                current = next
                (state, row) = successor
            case .reuse(let session):
                try await store.transaction { [state] db in
                    try await SessionRepository(db: db).revoke(.session(state.sessionID), now: now)
                }
                throw RefreshFailure.alreadyUsed(sessionID: state.sessionID, accountID: session.accountID)
            case .ended(let failure): throw failure
            case .expired: throw RefreshFailure.sessionEnded
            }
        }
        throw RefreshFailure.notFound
    }

    /// The secret successor tokens are derived under; made once per store, sealed at rest.
    private func refreshDerivationKey() async throws -> SymmetricKey {
        try await secrets.key("refresh_derivation_key")
    }

    // MARK: Checking

    struct LiveSession: Equatable {
        let accountID: String
        let amr: [AuthenticationMethod]
        let aal: AssuranceLevel
        let factorID: String?
        let companyID: String?
        let username: String?
        let parentID: String?
        /// When it ends at the latest (epoch milliseconds): its lifetime, or its account session's when earlier.
        let endsAt: Int64
        var oauthClientID: String? = nil
        var oauthScope: String? = nil
    }

    /// The session when it is neither revoked, idle too long, past its lifetime, nor its account disabled; a company
    /// session also needs its account session to be live.
    func liveSession(_ sessionID: String, now: Date, db: any SQLDatabase) async throws -> LiveSession? {
        try await SessionRepository(db: db).find(sessionID).flatMap { liveSession($0, now: now) }
    }

    /// The session a request names, judged live: from the cache when it holds the row and the row is live, else read
    /// afresh (a cached row can only be staler in its use times, which another instance may have moved on).
    func liveSession(_ sessionID: String, now: Date) async throws -> LiveSession? {
        if let cached = cache.session(sessionID), let live = liveSession(cached, now: now) { return live }
        let ticket = cache.ticket()
        guard let row = try await SessionRepository(db: store.database).find(sessionID) else { return nil }
        cache.keep(session: row, id: sessionID, ticket: ticket)
        return liveSession(row, now: now)
    }

    /// The pure rule over one row: `liveSession(_:now:db:)` without the read.
    func liveSession(_ row: SessionRow, now: Date) -> LiveSession? {
        guard row.accountDisabledAt == nil else { return nil }
        let now = now.epochMilliseconds
        let serverIdle = Int64(settings.sessionIdleTimeout)
        guard
            SessionLiveness.isLive(
                revokedAt: row.revokedAt, expiresAt: row.expiresAt, refreshedAt: row.refreshedAt,
                idleSeconds: SessionLiveness.idleSeconds(own: row.idleTimeout, server: serverIdle), now: now)
        else { return nil }
        if row.parentID != nil {
            guard let parent = row.parent,
                SessionLiveness.isLive(
                    revokedAt: parent.revokedAt, expiresAt: parent.expiresAt, refreshedAt: parent.refreshedAt,
                    idleSeconds: serverIdle, now: now)
            else { return nil }
        }
        return LiveSession(
            accountID: row.accountID, amr: row.amr, aal: row.aal, factorID: row.factorID, companyID: row.companyID,
            username: row.username,
            parentID: row.parentID, endsAt: min(row.expiresAt, row.parent?.expiresAt ?? .max),
            oauthClientID: row.oauthClientID, oauthScope: row.oauthScope)
    }

    /// Why an access token was refused.
    enum TokenFailure: Error {
        case malformed
        case sessionEnded
        /// A company session that ended because its member was removed.
        case accessRevoked
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
            live = try await liveSession(claims.sessionID, now: clock.now)
        } catch {
            throw .sessionEnded
        }
        guard let live, live.accountID == claims.sub, live.companyID == claims.cid,
            live.oauthClientID == claims.clientID
        else {
            if let cid = claims.cid,
                (try? await CompanyDirectory(db: store.database).membership(cid, accountID: claims.sub)) == .some(nil)
            {
                throw .accessRevoked
            }
            throw .sessionEnded
        }
        // The lower of the token's level and the session's: a token issued at aal1 stays aal1 after its session
        // steps up (the step-up retires refresh tokens, not access tokens already handed out).
        let aal = AssuranceLevel.effective(token: claims.aal, session: live.aal)
        return Identity(
            accountID: claims.sub, sessionID: claims.sessionID, email: claims.email, companyID: live.companyID,
            parentSessionID: live.parentID, claims: claims, aal: aal, factorID: aal == .aal2 ? live.factorID : nil,
            oauthClientID: live.oauthClientID)
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
        let sessions = SessionRepository(db: db)
        let now = clock.now
        switch scope {
        case .local: return try await sessions.revoke(.session(current, accountID: accountID), now: now).count
        case .global: return try await sessions.revoke(.account(accountID), now: now).count
        case .others: return try await sessions.revoke(.accountExcept(accountID, keeping: current), now: now).count
        }
    }

    /// The account's live sessions (account sessions, one per device; company logins live inside them), newest
    /// first, each judged by its own timeouts exactly as a request would be.
    func list(accountID: String, current: String) async throws -> [Schemas.SessionInfo] {
        let now = clock.now.epochMilliseconds
        let sessions = SessionRepository(db: store.database)
        let root = try await sessions.family(of: current)
        let serverIdle = Int64(settings.sessionIdleTimeout)
        return try await sessions.accountSessions(accountID, now: now)
            .filter { row in
                SessionLiveness.isLive(
                    revokedAt: row.revokedAt, expiresAt: row.expiresAt, refreshedAt: row.refreshedAt,
                    idleSeconds: SessionLiveness.idleSeconds(own: row.idleTimeout, server: serverIdle), now: now)
            }
            .map { row in
                Schemas.SessionInfo(
                    id: row.id, userAgent: row.userAgent, ip: row.ip,
                    createdAt: Date(epochMilliseconds: row.createdAt),
                    refreshedAt: Date(epochMilliseconds: row.refreshedAt), current: row.id == root)
            }
    }
}

/// Whether one session row is still usable: the pure rule behind every check.
enum SessionLiveness {
    static func isLive(revokedAt: Int64?, expiresAt: Int64, refreshedAt: Int64, idleSeconds: Int64, now: Int64) -> Bool
    {
        revokedAt == nil && expiresAt > now && refreshedAt + idleSeconds * 1000 > now
    }

    /// A session's idle timeout: its own (a company's policy), never longer than the server's.
    static func idleSeconds(own: Int64?, server: Int64) -> Int64 {
        min(own ?? server, server)
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
