import Foundation
import SQLKit

/// An authorization code just used: its challenge, what its link proved, and when it expires.
struct UsedFlowState: Decodable {
    let codeChallenge: String
    let verified: String
    let expiresAt: Int64

    enum CodingKeys: String, CodingKey {
        case verified
        case codeChallenge = "code_challenge"
        case expiresAt = "expires_at"
    }
}

/// The session an authorization code's exchange started, or the mark a replay left; nil while it is starting.
struct FlowStateExchange: Decodable {
    let sessionID: String?

    enum CodingKeys: String, CodingKey {
        case sessionID = "session_id"
    }
}

/// The SQL of PKCE's authorization codes (`flow_states`), found by their digest.
struct FlowStateRepository {
    let db: any SQLDatabase

    func insert(
        id: String, authCodeHash: String, challenge: String, verified: String, createdAt: Date, expiresAt: Date
    ) async throws {
        try await db.insert(into: "flow_states")
            .columns("id", "auth_code_hash", "code_challenge", "verified", "created_at", "expires_at")
            .values(
                SQLBind(id), SQLBind(authCodeHash), SQLBind(challenge), SQLBind(verified),
                SQLBind(createdAt.epochMilliseconds), SQLBind(expiresAt.epochMilliseconds)
            )
            .run()
    }

    /// Records the session the code's exchange started; false when the code is gone or a session (or a replay's
    /// mark) is recorded already.
    func bind(_ authCodeHash: String, sessionID: String) async throws -> Bool {
        try await !db.update("flow_states").set("session_id", to: sessionID)
            .where("auth_code_hash", .equal, authCodeHash).where("session_id", .is, SQLLiteral.null)
            .returning("id").all().isEmpty
    }

    /// `bind` when nothing cares whether it did.
    func bindIfUnbound(_ authCodeHash: String, sessionID: String) async throws {
        try await db.update("flow_states").set("session_id", to: sessionID)
            .where("auth_code_hash", .equal, authCodeHash).where("session_id", .is, SQLLiteral.null).run()
    }

    /// Marks the code used at `now` and returns it; nil when there is no such code or it was used already.
    func use(_ authCodeHash: String, at now: Date) async throws -> UsedFlowState? {
        try await db.update("flow_states").set("used_at", to: now.epochMilliseconds)
            .where("auth_code_hash", .equal, authCodeHash).where("used_at", .is, SQLLiteral.null)
            .returning("code_challenge", "verified", "expires_at").first(decoding: UsedFlowState.self)
    }

    /// What the code's exchange started, whether or not it was used; nil when there is no such code.
    func exchange(_ authCodeHash: String) async throws -> FlowStateExchange? {
        try await db.select().column("session_id").from("flow_states").where("auth_code_hash", .equal, authCodeHash)
            .first(decoding: FlowStateExchange.self)
    }
}
