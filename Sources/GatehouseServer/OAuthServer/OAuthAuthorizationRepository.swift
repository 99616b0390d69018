import Foundation
import SQLKit

/// One request to sign in to a client (`oauth_authorizations`): a browser's (`code`) or a device's (`device`).
struct OAuthAuthorizationRow: Sendable, Equatable {
    enum Kind: String, Sendable { case code, device }
    enum Status: String, Sendable {
        /// Waiting for its user: claimed by the first signed-in user who opens it.
        case pending
        case approved
        case denied
        /// Its code or device code was exchanged for a session (a second exchange ends that session).
        case exchanged
    }

    let id: String
    let kind: Kind
    let clientID: String
    var accountID: String?
    let redirectURI: String?
    let scope: String
    let state: String?
    let nonce: String?
    let codeChallenge: String?
    /// The level the client asked for (`acr_values`): `aal2`, or nil.
    let acr: String?
    let maxAge: Int64?
    let prompt: String?
    var status: Status
    var sessionID: String?
    /// The company chosen under the `company` scope, and the credential's username it was logged in with.
    var companyID: String?
    var username: String?
    /// When the approving user signed in (epoch seconds), the level and methods of the session that approved.
    var authTime: Int64?
    var aal: String?
    var amr: String?
    let userCode: String?
    var pollInterval: Int64?
    var polledAt: Int64?
    let createdAt: Int64
    var expiresAt: Int64
}

/// The SQL of authorization requests and of the consents users gave clients.
struct OAuthAuthorizationRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "kind", "client_id", "account_id", "redirect_uri", "scope", "state", "nonce", "code_challenge", "acr",
        "max_age", "prompt", "status", "session_id", "company_id", "username", "auth_time", "aal", "amr", "user_code",
        "poll_interval", "polled_at", "created_at", "expires_at",
    ]

    /// Writes a new request; `codeHash` and `deviceCodeHash` are digests, never the codes.
    func insert(_ row: OAuthAuthorizationRow, deviceCodeHash: String? = nil) async throws {
        try await db.insert(into: "oauth_authorizations").columns(Self.columns + ["device_code_hash"])
            .values(
                SQLBind(row.id), SQLBind(row.kind.rawValue), SQLBind(row.clientID), SQLBind(row.accountID),
                SQLBind(row.redirectURI), SQLBind(row.scope), SQLBind(row.state), SQLBind(row.nonce),
                SQLBind(row.codeChallenge), SQLBind(row.acr), SQLBind(row.maxAge), SQLBind(row.prompt),
                SQLBind(row.status.rawValue), SQLBind(row.sessionID), SQLBind(row.companyID), SQLBind(row.username),
                SQLBind(row.authTime), SQLBind(row.aal), SQLBind(row.amr), SQLBind(row.userCode),
                SQLBind(row.pollInterval), SQLBind(row.polledAt), SQLBind(row.createdAt), SQLBind(row.expiresAt),
                SQLBind(deviceCodeHash)
            )
            .run()
    }

    func find(id: String) async throws -> OAuthAuthorizationRow? {
        try await select().where("id", .equal, id).first().map(Self.decode)
    }

    func find(codeHash: String) async throws -> OAuthAuthorizationRow? {
        try await select().where("code_hash", .equal, codeHash).first().map(Self.decode)
    }

    func find(deviceCodeHash: String) async throws -> OAuthAuthorizationRow? {
        try await select().where("device_code_hash", .equal, deviceCodeHash).first().map(Self.decode)
    }

    func find(userCode: String) async throws -> OAuthAuthorizationRow? {
        try await select().where("user_code", .equal, userCode).first().map(Self.decode)
    }

    /// Claims a pending request for `accountID`: answers whether it is now that account's (it was nobody's, or
    /// already its own).
    func claim(_ id: String, accountID: String) async throws -> Bool {
        !(try await db.raw(
            """
            UPDATE oauth_authorizations SET account_id = \(bind: accountID)
            WHERE id = \(bind: id) AND status = 'pending' AND (account_id IS NULL OR account_id = \(bind: accountID))
            RETURNING id
            """
        ).all().isEmpty)
    }

    /// Decides a pending request of `accountID`: answers whether it was still pending and its own.
    func decide(_ row: OAuthAuthorizationRow, codeHash: String?) async throws -> Bool {
        !(try await db.raw(
            """
            UPDATE oauth_authorizations SET status = \(bind: row.status.rawValue), code_hash = \(bind: codeHash),
                account_id = \(bind: row.accountID),
                company_id = \(bind: row.companyID), username = \(bind: row.username),
                auth_time = \(bind: row.authTime), aal = \(bind: row.aal), amr = \(bind: row.amr),
                expires_at = \(bind: row.expiresAt)
            WHERE id = \(bind: row.id) AND status = 'pending'
                AND (account_id IS NULL OR account_id = \(bind: row.accountID))
            RETURNING id
            """
        ).all().isEmpty)
    }

    /// Marks an approved request exchanged, once: answers whether this call did it.
    func markExchanged(_ id: String, sessionID: String) async throws -> Bool {
        !(try await db.raw(
            """
            UPDATE oauth_authorizations SET status = 'exchanged', session_id = \(bind: sessionID)
            WHERE id = \(bind: id) AND status = 'approved'
            RETURNING id
            """
        ).all().isEmpty)
    }

    /// Voids the account's approved, not yet exchanged requests for a client (its grant was revoked).
    func denyApproved(clientID: String, accountID: String) async throws {
        try await db.update("oauth_authorizations").set("status", to: SQLBind("denied"))
            .where("client_id", .equal, clientID).where("account_id", .equal, accountID)
            .where("status", .equal, "approved").run()
    }

    /// Records a device's poll, and its interval after a `slow_down`.
    func polled(_ id: String, at time: Int64, interval: Int64) async throws {
        try await db.update("oauth_authorizations").set("polled_at", to: SQLBind(time))
            .set("poll_interval", to: SQLBind(interval)).where("id", .equal, id).run()
    }

    /// Forgets requests past their expiry by more than a day (an exchanged code is kept that long, so a replay still
    /// finds the session it made and ends it).
    func deleteExpired(before time: Int64) async throws {
        try await db.delete(from: "oauth_authorizations").where("expires_at", .lessThan, time).run()
    }

    // MARK: Consents

    /// The scopes `accountID` granted `clientID`, or nil.
    func consent(accountID: String, clientID: String) async throws -> [String]? {
        try await db.select().column("scope").from("oauth_consents").where("account_id", .equal, accountID)
            .where("client_id", .equal, clientID).first(decodingColumn: "scope", as: String.self)
            .map(OAuthScopes.list)
    }

    /// Writes the consent's scopes (all of them, granted before and now): one statement, so two approvals at once
    /// (two tabs) both land rather than one failing on the key; the later one's scopes stand.
    func saveConsent(accountID: String, clientID: String, scope: [String], at time: Int64) async throws {
        try await db.insert(into: "oauth_consents").columns("account_id", "client_id", "scope", "granted_at")
            .values(SQLBind(accountID), SQLBind(clientID), SQLBind(OAuthScopes.text(scope)), SQLBind(time))
            .onConflict(with: ["account_id", "client_id"]) {
                $0.set(excludedValueOf: "scope").set(excludedValueOf: "granted_at")
            }
            .run()
    }

    /// The account's consents, newest first.
    func consents(accountID: String) async throws -> [(clientID: String, scope: [String], grantedAt: Int64)] {
        try await db.select().columns("client_id", "scope", "granted_at").from("oauth_consents")
            .where("account_id", .equal, accountID).orderBy("granted_at", .descending).all()
            .map {
                (
                    try $0.decode(column: "client_id", as: String.self),
                    OAuthScopes.list(try $0.decode(column: "scope", as: String.self)),
                    try $0.decode(column: "granted_at", as: Int64.self)
                )
            }
    }

    /// Removes a consent: answers whether there was one.
    func deleteConsent(accountID: String, clientID: String) async throws -> Bool {
        !(try await db.delete(from: "oauth_consents").where("account_id", .equal, accountID)
            .where("client_id", .equal, clientID).returning("account_id").all().isEmpty)
    }

    private func select() -> SQLSelectBuilder {
        db.select().columns(Self.columns).from("oauth_authorizations")
    }

    private static func decode(_ row: any SQLRow) throws -> OAuthAuthorizationRow {
        OAuthAuthorizationRow(
            id: try row.decode(column: "id", as: String.self),
            kind: OAuthAuthorizationRow.Kind(rawValue: try row.decode(column: "kind", as: String.self)) ?? .code,
            clientID: try row.decode(column: "client_id", as: String.self),
            accountID: try row.decode(column: "account_id", as: String?.self),
            redirectURI: try row.decode(column: "redirect_uri", as: String?.self),
            scope: try row.decode(column: "scope", as: String.self),
            state: try row.decode(column: "state", as: String?.self),
            nonce: try row.decode(column: "nonce", as: String?.self),
            codeChallenge: try row.decode(column: "code_challenge", as: String?.self),
            acr: try row.decode(column: "acr", as: String?.self),
            maxAge: try row.decode(column: "max_age", as: Int64?.self),
            prompt: try row.decode(column: "prompt", as: String?.self),
            status: OAuthAuthorizationRow.Status(rawValue: try row.decode(column: "status", as: String.self))
                ?? .denied,
            sessionID: try row.decode(column: "session_id", as: String?.self),
            companyID: try row.decode(column: "company_id", as: String?.self),
            username: try row.decode(column: "username", as: String?.self),
            authTime: try row.decode(column: "auth_time", as: Int64?.self),
            aal: try row.decode(column: "aal", as: String?.self),
            amr: try row.decode(column: "amr", as: String?.self),
            userCode: try row.decode(column: "user_code", as: String?.self),
            pollInterval: try row.decode(column: "poll_interval", as: Int64?.self),
            polledAt: try row.decode(column: "polled_at", as: Int64?.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self))
    }
}
