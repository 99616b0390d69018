import Foundation
import SQLKit

/// A session row as it is written.
struct NewSession {
    let id: String
    let accountID: String
    let now: Date
    let expiresAt: Int64
    let userAgent: String?
    let ip: String?
    let amr: [AuthenticationMethod]
    var aal: AssuranceLevel = .aal1
    /// The factor that raised it to aal2 (a company session keeps its account session's).
    var factorID: String? = nil
    let companyID: String?
    let username: String?
    let idleTimeout: Int64?
    let parentID: String?
    /// An OAuth client's session (`OAuthServer/`): the client and the scopes the user granted it.
    var oauthClientID: String? = nil
    var oauthScope: String? = nil
}

/// A session row with its account's state and, for a company session, its parent's.
struct SessionRow: Sendable {
    let accountID: String
    let refreshedAt: Int64
    let expiresAt: Int64
    let revokedAt: Int64?
    let amr: [AuthenticationMethod]
    let aal: AssuranceLevel
    let factorID: String?
    let companyID: String?
    let username: String?
    let idleTimeout: Int64?
    let parentID: String?
    let accountDisabledAt: Int64?
    /// The parent's times, when it has one and it still exists.
    let parent: (refreshedAt: Int64, expiresAt: Int64, revokedAt: Int64?)?
    /// The OAuth client the session was issued to, and the scopes granted; nil for the account's own sessions.
    var oauthClientID: String? = nil
    var oauthScope: String? = nil
}

/// One refresh token to rotate into its successor, with the audit event that records it.
struct PendingRotation: Sendable {
    let token: String
    let successor: String
    let sessionID: String
    let parentID: String?
    let at: Date
    let audit: AuditEvent
}

/// An account session as its owner's list shows it, with the times that say whether it is still usable.
struct AccountSessionRow: Decodable, Sendable {
    let id: String
    let userAgent: String?
    let ip: String?
    let createdAt: Int64
    let refreshedAt: Int64
    let expiresAt: Int64
    let revokedAt: Int64?
    let idleTimeout: Int64?

    enum CodingKeys: String, CodingKey {
        case id, ip
        case userAgent = "user_agent"
        case createdAt = "created_at"
        case refreshedAt = "refreshed_at"
        case expiresAt = "expires_at"
        case revokedAt = "revoked_at"
        case idleTimeout = "idle_timeout"
    }
}

/// A refresh token's row: which session it belongs to and when it was rotated.
struct RefreshTokenRow {
    let sessionID: String
    let rotatedAt: Date?
}

/// All SQL on sessions and refresh tokens: creating, rotating, checking, listing, and every way a session ends. A
/// session that ends takes its company sessions (children) with it.
struct SessionRepository {
    let db: any SQLDatabase

    // MARK: Creating and rotating

    func insert(_ session: NewSession) async throws {
        try await db.insert(into: "sessions")
            .columns(
                "id", "account_id", "created_at", "refreshed_at", "expires_at", "user_agent", "ip", "aal", "amr",
                "company_id", "username", "idle_timeout", "parent_id", "factor_id", "oauth_client_id", "oauth_scope"
            )
            .values(
                SQLBind(session.id), SQLBind(session.accountID), SQLBind(session.now.epochMilliseconds),
                SQLBind(session.now.epochMilliseconds), SQLBind(session.expiresAt),
                SQLBind(session.userAgent.map { String($0.prefix(512)) }), SQLBind(session.ip),
                SQLBind(session.aal.rawValue),
                SQLBind(try Self.amrText(session.amr)),
                SQLBind(session.companyID), SQLBind(session.username), SQLBind(session.idleTimeout),
                SQLBind(session.parentID), SQLBind(session.factorID), SQLBind(session.oauthClientID),
                SQLBind(session.oauthScope)
            )
            .run()
    }

    /// When the session ends at the latest, or nil when there is no such session.
    func expiresAt(_ sessionID: String) async throws -> Int64? {
        try await db.select().column("expires_at").from("sessions").where("id", .equal, sessionID)
            .first(decodingColumn: "expires_at", as: Int64.self)
    }

    func insertRefreshToken(_ token: String, sessionID: String, now: Date) async throws {
        try await db.insert(into: "refresh_tokens").columns("token_hash", "session_id", "created_at")
            .values(SQLBind(Secrets.digest(token)), SQLBind(sessionID), SQLBind(now.epochMilliseconds)).run()
    }

    /// Rotates what the rule allows of `rotations` (`RefreshRotation.checked`), and answers each one's outcome in
    /// order; call it inside a transaction. The presented tokens and their sessions are read, the tokens locked (on
    /// PostgreSQL; on SQLite the transaction holds the write lock), so parallel presentations of one token are decided
    /// by the store: the first to commit rotates, the others then read it rotated. Those allowed are written by one
    /// statement (`insert`); its trigger checks the same again, and fails only when a session was revoked between the
    /// check and the statement, and then the caller checks again.
    func rotate(_ rotations: [PendingRotation]) async throws -> [RefreshRotation.Outcome] {
        guard !rotations.isEmpty else { return [] }
        let presented = rotations.map { (digest: Secrets.digest($0.token), sessionID: $0.sessionID) }
        let outcomes = RefreshRotation.checked(presented, stored: try await stored(presented.map(\.digest)))
        let allowed = zip(rotations, outcomes).filter { $0.1 == .rotated }.map(\.0)
        if !allowed.isEmpty { try await insert(allowed) }
        return outcomes
    }

    /// The rotations' one statement, unchecked: the trigger refuses a token rotated already or a session ended by
    /// failing it whole. Rows go in digest order, the order the check locks tokens in on PostgreSQL.
    func insert(_ rotations: [PendingRotation]) async throws {
        let rotations = rotations.map { (digest: Secrets.digest($0.token), rotation: $0) }.sorted {
            $0.digest < $1.digest
        }
        var insert = db.insert(into: "refresh_rotations")
            .columns(
                "old_hash", "new_hash", "session_id", "parent_id", "at", "action", "account_id", "company_id", "ip",
                "user_agent", "detail"
            )
        for (digest, rotation) in rotations {
            let audit = rotation.audit
            insert = insert.values(
                SQLBind(digest), SQLBind(Secrets.digest(rotation.successor)),
                SQLBind(rotation.sessionID), SQLBind(rotation.parentID), SQLBind(rotation.at.epochMilliseconds),
                SQLBind(audit.action), SQLBind(audit.accountID), SQLBind(audit.companyID), SQLBind(audit.ip),
                SQLBind(audit.userAgent.map { String($0.prefix(512)) }),
                SQLBind(audit.detailJSON))
        }
        try await insert.run()
    }

    /// A presented token's row and its session's revocation, as the rotation check reads them.
    private struct PresentedToken: Decodable {
        let tokenHash: String
        let rotatedAt: Int64?
        let sessionID: String
        let sessionRevokedAt: Int64?

        enum CodingKeys: String, CodingKey {
            case tokenHash = "token_hash"
            case rotatedAt = "rotated_at"
            case sessionID = "session_id"
            case sessionRevokedAt = "session_revoked_at"
        }
    }

    /// The presented tokens' rows and their sessions' revocations, keyed by digest, as the rotation check reads
    /// them. On PostgreSQL the tokens stay locked until the transaction ends (in digest order, so two batches never
    /// wait on each other in a circle), so a parallel rotation of the same token waits for this one and then reads
    /// its outcome. Sessions are read, not locked: a revocation never waits for a refresh.
    private func stored(_ digests: [String]) async throws -> [String: RefreshRotation.Stored] {
        let lock = db.dialect.name == "postgresql" ? "FOR NO KEY UPDATE OF rt" : ""
        let rows = try await db.raw(
            """
            SELECT rt.token_hash, rt.rotated_at, s.id AS session_id, s.revoked_at AS session_revoked_at
            FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id
            WHERE rt.token_hash IN (\(binds: digests))
            ORDER BY rt.token_hash \(unsafeRaw: lock)
            """
        ).all(decoding: PresentedToken.self)
        return Dictionary(
            rows.map {
                (
                    $0.tokenHash,
                    RefreshRotation.Stored(
                        rotatedAt: $0.rotatedAt, sessionID: $0.sessionID, sessionRevokedAt: $0.sessionRevokedAt)
                )
            },
            uniquingKeysWith: { first, _ in first })
    }

    // MARK: Checking and listing

    /// The session, its account's state and its parent's times.
    func find(_ sessionID: String) async throws -> SessionRow? {
        try await db.raw(
            """
            SELECT \(unsafeRaw: Self.sessionColumns)
            FROM sessions s
            JOIN accounts a ON a.id = s.account_id
            LEFT JOIN sessions p ON p.id = s.parent_id
            WHERE s.id = \(bind: sessionID)
            """
        ).first().map(Self.decodeSession)
    }

    /// A refresh token's row and its session's, in one statement: the first read of every refresh.
    func findByRefreshToken(_ token: String) async throws -> (token: RefreshTokenRow, session: SessionRow)? {
        try await findByRefreshTokens([token])[token]
    }

    /// The same for many tokens in one statement (`RefreshReads`), keyed by token; a token not found is left out.
    func findByRefreshTokens(_ tokens: [String]) async throws -> [String: (token: RefreshTokenRow, session: SessionRow)]
    {
        let byDigest = Dictionary(tokens.map { (Secrets.digest($0), $0) }, uniquingKeysWith: { first, _ in first })
        let rows = try await db.raw(
            """
            SELECT rt.token_hash AS rt_token_hash, rt.session_id AS rt_session_id, rt.rotated_at AS rt_rotated_at,
            \(unsafeRaw: Self.sessionColumns)
            FROM refresh_tokens rt
            JOIN sessions s ON s.id = rt.session_id
            JOIN accounts a ON a.id = s.account_id
            LEFT JOIN sessions p ON p.id = s.parent_id
            WHERE rt.token_hash IN (\(binds: Array(byDigest.keys)))
            """
        ).all()
        var found: [String: (token: RefreshTokenRow, session: SessionRow)] = [:]
        for row in rows {
            guard let token = byDigest[try row.decode(column: "rt_token_hash", as: String.self)] else { continue }
            let state = RefreshTokenRow(
                sessionID: try row.decode(column: "rt_session_id", as: String.self),
                rotatedAt: try row.decode(column: "rt_rotated_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
            found[token] = (state, try Self.decodeSession(row))
        }
        return found
    }

    /// The columns `decodeSession` reads, from `sessions s`, `accounts a` and the parent `sessions p`.
    private static let sessionColumns = """
        s.account_id, s.refreshed_at, s.expires_at, s.revoked_at, s.amr, s.aal, s.factor_id, s.company_id, s.username,
        s.idle_timeout, s.parent_id, s.oauth_client_id, s.oauth_scope, a.disabled_at, p.id AS p_id, p.refreshed_at AS p_refreshed_at, p.expires_at AS p_expires_at,
        p.revoked_at AS p_revoked_at
        """

    private static func decodeSession(_ row: any SQLRow) throws -> SessionRow {
        let parent: (Int64, Int64, Int64?)? =
            try row.decode(column: "p_id", as: String?.self) == nil
            ? nil
            : (
                try row.decode(column: "p_refreshed_at", as: Int64.self),
                try row.decode(column: "p_expires_at", as: Int64.self),
                try row.decode(column: "p_revoked_at", as: Int64?.self)
            )
        return SessionRow(
            accountID: try row.decode(column: "account_id", as: String.self),
            refreshedAt: try row.decode(column: "refreshed_at", as: Int64.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self),
            revokedAt: try row.decode(column: "revoked_at", as: Int64?.self),
            amr: Self.amr(try row.decode(column: "amr", as: String.self)),
            aal: AssuranceLevel(rawValue: try row.decode(column: "aal", as: String.self)) ?? .aal1,
            factorID: try row.decode(column: "factor_id", as: String?.self),
            companyID: try row.decode(column: "company_id", as: String?.self),
            username: try row.decode(column: "username", as: String?.self),
            idleTimeout: try row.decode(column: "idle_timeout", as: Int64?.self),
            parentID: try row.decode(column: "parent_id", as: String?.self),
            accountDisabledAt: try row.decode(column: "disabled_at", as: Int64?.self),
            parent: parent.map { (refreshedAt: $0.0, expiresAt: $0.1, revokedAt: $0.2) },
            oauthClientID: try row.decode(column: "oauth_client_id", as: String?.self),
            oauthScope: try row.decode(column: "oauth_scope", as: String?.self))
    }

    /// The account session a session belongs to: its parent, or itself.
    func family(of sessionID: String) async throws -> String {
        try await db.select().column("parent_id").from("sessions").where("id", .equal, sessionID)
            .first(decodingColumn: "parent_id", as: String?.self).flatMap { $0 } ?? sessionID
    }

    /// The account's unrevoked, unexpired account sessions (not company logins), newest first.
    func accountSessions(_ accountID: String, now: Int64) async throws -> [AccountSessionRow] {
        try await db.select()
            .columns("id", "user_agent", "ip", "created_at", "refreshed_at", "expires_at", "revoked_at", "idle_timeout")
            .from("sessions")
            .where("account_id", .equal, accountID)
            .where("revoked_at", .is, SQLLiteral.null)
            .where("parent_id", .is, SQLLiteral.null)
            .where("oauth_client_id", .is, SQLLiteral.null)
            .where("expires_at", .greaterThan, now)
            .orderBy("created_at", .descending)
            .all(decoding: AccountSessionRow.self)
    }

    /// How many of the account's sessions are neither revoked nor past their lifetime.
    func countUnexpired(_ accountID: String, now: Int64) async throws -> Int {
        try await db.raw(
            """
            SELECT COUNT(*) AS n FROM sessions
            WHERE account_id = \(bind: accountID) AND revoked_at IS NULL AND expires_at > \(bind: now)
            """
        ).first(decodingColumn: "n", as: Int.self) ?? 0
    }

    // MARK: Ending

    /// Which sessions to end.
    enum Ending {
        /// One session and its company sessions; `accountID` when given must own it.
        case session(String, accountID: String? = nil)
        /// Every session of the account.
        case account(String)
        /// Every session of the account but the family (account session and its company sessions) of `keeping`.
        case accountExcept(String, keeping: String)
        /// The account's sessions in one company, but `except`.
        case company(String, accountID: String, except: String?)
        /// Every session in one company.
        case wholeCompany(String)
        /// The company's sessions below aal2 (it now requires a second factor).
        case companyBelowAAL2(String)
        /// The account's sessions below aal2 but the family of `keeping` (its first factor was just verified).
        case accountBelowAAL2(String, keeping: String)
        /// The sessions an OAuth client holds: one account's (its grant was revoked), or every account's (the client
        /// was removed).
        case oauthClient(String, accountID: String?)
    }

    /// Ends the sessions `ending` names that are still live; returns the ids that ended.
    @discardableResult
    func revoke(_ ending: Ending, now: Date) async throws -> [String] {
        var query = db.update("sessions").set("revoked_at", to: now.epochMilliseconds)
            .where("revoked_at", .is, SQLLiteral.null)
        switch ending {
        case .session(let id, let accountID):
            query = query.where { $0.where("id", .equal, id).orWhere("parent_id", .equal, id) }
            if let accountID { query = query.where("account_id", .equal, accountID) }
        case .account(let accountID):
            query = query.where("account_id", .equal, accountID)
        case .accountExcept(let accountID, let keeping):
            let family = try await family(of: keeping)
            query = query.where("account_id", .equal, accountID).where("id", .notEqual, family)
                .where { $0.where("parent_id", .is, SQLLiteral.null).orWhere("parent_id", .notEqual, family) }
        case .company(let companyID, let accountID, let except):
            query = query.where("company_id", .equal, companyID).where("account_id", .equal, accountID)
            if let except { query = query.where("id", .notEqual, except) }
        case .wholeCompany(let companyID):
            query = query.where("company_id", .equal, companyID)
        case .companyBelowAAL2(let companyID):
            query = query.where("company_id", .equal, companyID).where("aal", .equal, AssuranceLevel.aal1.rawValue)
        case .accountBelowAAL2(let accountID, let keeping):
            let family = try await family(of: keeping)
            query = query.where("account_id", .equal, accountID).where("aal", .equal, AssuranceLevel.aal1.rawValue)
                .where("id", .notEqual, family)
                .where { $0.where("parent_id", .is, SQLLiteral.null).orWhere("parent_id", .notEqual, family) }
        case .oauthClient(let clientID, let accountID):
            query = query.where("oauth_client_id", .equal, clientID)
            if let accountID { query = query.where("account_id", .equal, accountID) }
        }
        let ended = try await query.returning("id").all(decodingColumn: "id", as: String.self)
        TransactionChanges.sessionsEnded(ended)
        return ended
    }

    // MARK: Assurance

    /// Raises a session to aal2 by `factorID`, with `method` first in its `amr` (GoTrue keeps one entry per method,
    /// newest first), and retires its refresh tokens: the one the client holds was issued at aal1 and must not
    /// refresh into this session again. The caller issues the next (`insertRefreshToken`).
    func raise(_ sessionID: String, factorID: String, method: String, now: Date) async throws {
        guard
            let stored = try await db.select().column("amr").from("sessions").where("id", .equal, sessionID)
                .first(decodingColumn: "amr", as: String.self)
        else { return }
        var amr = Self.amr(stored)
        amr.removeAll { $0.method == method }
        amr.insert(AuthenticationMethod(method: method, timestamp: Int64(now.timeIntervalSince1970)), at: 0)
        try await db.update("sessions").set("aal", to: AssuranceLevel.aal2.rawValue).set("factor_id", to: factorID)
            .set("amr", to: try Self.amrText(amr))
            .where("id", .equal, sessionID).run()
        try await db.update("refresh_tokens").set("rotated_at", to: now.epochMilliseconds)
            .where("session_id", .equal, sessionID).where("rotated_at", .is, SQLLiteral.null).run()
        TransactionChanges.sessionsEnded([sessionID])
    }

    /// Lowers every session `factorIDs` raised back to aal1, dropping the second factor's `amr` entries, as GoTrue
    /// does when a factor is removed; a company session among them whose company requires a second factor ends.
    /// Their access tokens keep saying aal2 until they expire (minutes); every check of the level reads the row.
    func lower(factorIDs: [String], now: Date) async throws {
        guard !factorIDs.isEmpty else { return }
        let ended = try await db.update("sessions").set("revoked_at", to: now.epochMilliseconds)
            .where("factor_id", .in, factorIDs).where("revoked_at", .is, SQLLiteral.null)
            .where(
                "company_id", .in,
                SQLGroupExpression(
                    db.select().column("id").from("companies").where("requires_mfa", .equal, 1).query)
            )
            .returning("id").all(decodingColumn: "id", as: String.self)
        TransactionChanges.sessionsEnded(ended)
        let rows = try await db.select().columns("id", "amr").from("sessions").where("factor_id", .in, factorIDs)
            .all()
        for row in rows {
            let id = try row.decode(column: "id", as: String.self)
            var amr = Self.amr(try row.decode(column: "amr", as: String.self))
            amr.removeAll { AssuranceLevel.secondFactorMethods.contains($0.method) }
            try await db.update("sessions").set("aal", to: AssuranceLevel.aal1.rawValue)
                .set("factor_id", to: SQLLiteral.null)
                .set("amr", to: try Self.amrText(amr))
                .where("id", .equal, id).run()
            TransactionChanges.sessionsEnded([id])
        }
    }

    /// A session's `amr` as stored: JSON text; a row that does not decode reads as no methods.
    private static func amr(_ text: String) -> [AuthenticationMethod] {
        (try? JSONDecoder().decode([AuthenticationMethod].self, from: Data(text.utf8))) ?? []
    }

    private static func amrText(_ amr: [AuthenticationMethod]) throws -> String {
        String(decoding: try JSONEncoder().encode(amr), as: UTF8.self)
    }
}
