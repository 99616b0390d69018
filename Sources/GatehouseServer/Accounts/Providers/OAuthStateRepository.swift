import Foundation
import SQLKit

/// One trip to an upstream provider and back, as `oauth_states` keeps it.
struct OAuthStateRecord: Codable, Sendable {
    var id: String
    var stateHash: String
    var provider: String
    var redirectTo: String
    /// The app's PKCE challenge: the trip ends in an authorization code rather than a session in the fragment.
    var codeChallenge: String?
    /// The account the identity is linked to, when the trip links rather than signs in.
    var linkAccountID: String?
    /// `app` (a redirect to `redirectTo`) or `account` (back to the account page, which started the link).
    var returnsTo: String
    /// The digest of the browser's cookie; nil until the browser opens the continue URL.
    var browserHash: String?
    /// The digest of the continue URL's token (`skip_http_redirect`), which binds the first browser that opens it.
    var continueHash: String?
    /// The nonce and PKCE verifier sent upstream, sealed (`OAuthFlow.context(id:)`).
    var sealed: String
    var createdAt: Int64
    var expiresAt: Int64
    var usedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case id, provider, sealed
        case stateHash = "state_hash"
        case redirectTo = "redirect_to"
        case codeChallenge = "code_challenge"
        case linkAccountID = "link_account_id"
        case returnsTo = "returns_to"
        case browserHash = "browser_hash"
        case continueHash = "continue_hash"
        case createdAt = "created_at"
        case expiresAt = "expires_at"
        case usedAt = "used_at"
    }
}

/// The SQL of the redirect flow's states.
struct OAuthStateRepository {
    let db: any SQLDatabase

    func insert(_ record: OAuthStateRecord) async throws {
        try await db.insert(into: "oauth_states").model(record).run()
    }

    /// Binds the trip whose continue token digests to `continueHash` to the browser, once; nil when there is no such
    /// trip, it was bound already, or it expired.
    func bindBrowser(continueHash: String, browserHash: String, now: Int64) async throws -> OAuthStateRecord? {
        try await db.update("oauth_states").set("browser_hash", to: browserHash).set(
            "continue_hash", to: SQLLiteral.null
        )
        .where("continue_hash", .equal, continueHash).where("browser_hash", .is, SQLLiteral.null)
        .where("expires_at", .greaterThan, now)
        .returning(SQLLiteral.all).first(decoding: OAuthStateRecord.self)
    }

    /// Gives the trip a new `state`: the continue URL sends the browser upstream with a state made then.
    func replaceState(id: String, stateHash: String) async throws {
        try await db.update("oauth_states").set("state_hash", to: stateHash).where("id", .equal, id).run()
    }

    /// Marks the trip used at `now` and returns it, when `state` names an unused trip of this browser.
    func use(stateHash: String, browserHash: String, now: Int64) async throws -> OAuthStateRecord? {
        try await db.update("oauth_states").set("used_at", to: now)
            .where("state_hash", .equal, stateHash).where("browser_hash", .equal, browserHash)
            .where("used_at", .is, SQLLiteral.null)
            .returning(SQLLiteral.all).first(decoding: OAuthStateRecord.self)
    }

    /// The trip `state` names, used or not: to say why it was refused.
    func find(stateHash: String) async throws -> OAuthStateRecord? {
        try await db.select().column(SQLLiteral.all).from("oauth_states").where("state_hash", .equal, stateHash)
            .first(decoding: OAuthStateRecord.self)
    }
}
