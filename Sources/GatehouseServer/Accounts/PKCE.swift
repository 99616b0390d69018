import Crypto
import Foundation
import SQLKit

/// PKCE (RFC 7636), supabase-swift's default flow: the app sends a challenge when it asks for a mail; the link then
/// yields an authorization code instead of a session, and only the app holding the verifier can exchange it.
enum PKCE {
    /// A challenge is base64url without padding, 43 to 128 characters (RFC 7636 4.2).
    static let challengeCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// The challenge to store, nil when the request is not PKCE, or a `validation_failed` error. Only S256 is
    /// accepted (clients send `s256`; `plain` would put the verifier itself in a mail request).
    static func challenge(_ challenge: String?, method: String?) throws -> String? {
        switch (challenge, method) {
        case (nil, nil):
            return nil
        case (let challenge?, let method?):
            guard method.lowercased() == "s256" else {
                throw APIError.validation("code_challenge_method must be s256")
            }
            guard (43...128).contains(challenge.count), challenge.allSatisfy(challengeCharacters.contains) else {
                throw APIError.validation("code_challenge must be 43 to 128 base64url characters")
            }
            return challenge
        default:
            throw APIError.validation("code_challenge and code_challenge_method go together")
        }
    }

    /// The S256 challenge of `verifier`: base64url (no padding) of its SHA-256.
    static func s256(_ verifier: String) -> String {
        Secrets.base64URL(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    /// Whether `verifier` is the one `challenge` was made from (compared in constant time).
    static func verifies(_ verifier: String, challenge: String) -> Bool {
        (43...128).contains(verifier.count) && Secrets.constantTimeEquals(s256(verifier), challenge)
    }
}

/// Authorization codes waiting for their verifier: stored as digests, five minutes, single use.
struct FlowStates {
    let db: any SQLDatabase
    let clock: any GatehouseClock

    static let lifetime: TimeInterval = 5 * 60

    /// Why an exchange was refused, in GoTrue's codes.
    enum Refusal: Error {
        case notFound, expired, badVerifier
        /// The code was exchanged before; the session that exchange started (if any) must end (RFC 9700 4.2.1).
        case reused(sessionID: String?)

        var reason: String {
            switch self {
            case .notFound: "not_found"
            case .expired: "expired"
            case .badVerifier: "bad_verifier"
            case .reused: "reused"
            }
        }

        var apiError: APIError {
            switch self {
            case .notFound, .reused:
                APIError(.notFound, code: .flowStateNotFound, message: "Invalid flow state, no valid flow state found")
            case .expired:
                APIError(
                    .unprocessableContent, code: .flowStateExpired,
                    message: "Flow state has expired; ask for a new link")
            case .badVerifier:
                APIError(
                    .badRequest, code: .badCodeVerifier,
                    message: "code challenge does not match previously saved code verifier")
            }
        }
    }

    /// Stores what the verified link proved, bound to its challenge; returns the authorization code.
    func create(for verified: ConsumedCode, challenge: String) async throws -> String {
        let code = Secrets.token()
        let now = clock.now
        try await db.insert(into: "flow_states")
            .columns("id", "auth_code_hash", "code_challenge", "verified", "created_at", "expires_at")
            .values(
                SQLBind(Secrets.identifier()), SQLBind(Secrets.digest(code)), SQLBind(challenge),
                SQLBind(String(decoding: try JSONEncoder().encode(verified), as: UTF8.self)),
                SQLBind(now.epochMilliseconds), SQLBind(now.addingTimeInterval(Self.lifetime).epochMilliseconds)
            )
            .run()
        return code
    }

    /// Remembers which session the code's exchange started, in the transaction that starts it. A replay that came
    /// first marked the code, and then the session is not started at all.
    func bind(_ authCode: String, sessionID: String) async throws {
        let bound = try await db.update("flow_states").set("session_id", to: sessionID)
            .where("auth_code_hash", .equal, Secrets.digest(authCode)).where("session_id", .is, SQLLiteral.null)
            .returning("id").all()
        guard !bound.isEmpty else { throw Refusal.notFound.apiError }
    }

    /// The mark a replay leaves on a code whose exchange has not started its session yet.
    static let replayed = "replayed"

    /// Uses up the authorization code when the verifier matches, returning what its link proved. A wrong verifier
    /// also uses it up: a code is never worth a second guess.
    func redeem(_ authCode: String, verifier: String) async throws -> Result<ConsumedCode, Refusal> {
        let now = clock.now.epochMilliseconds
        let hash = Secrets.digest(authCode)
        guard
            let row = try await db.update("flow_states").set("used_at", to: now)
                .where("auth_code_hash", .equal, hash).where("used_at", .is, SQLLiteral.null)
                .returning("code_challenge", "verified", "expires_at").first()
        else {
            guard
                let used = try await db.select().column("session_id").from("flow_states")
                    .where("auth_code_hash", .equal, hash).first()
            else { return .failure(.notFound) }
            guard let sessionID = try used.decode(column: "session_id", as: String?.self) else {
                // The first exchange is still starting its session: mark the code so that it never does.
                try await db.update("flow_states").set("session_id", to: Self.replayed)
                    .where("auth_code_hash", .equal, hash).where("session_id", .is, SQLLiteral.null).run()
                return .failure(.reused(sessionID: nil))
            }
            return .failure(.reused(sessionID: sessionID == Self.replayed ? nil : sessionID))
        }
        guard try row.decode(column: "expires_at", as: Int64.self) > now else { return .failure(.expired) }
        guard PKCE.verifies(verifier, challenge: try row.decode(column: "code_challenge", as: String.self)) else {
            return .failure(.badVerifier)
        }
        let verified = try JSONDecoder().decode(
            ConsumedCode.self, from: Data(try row.decode(column: "verified", as: String.self).utf8))
        return .success(verified)
    }
}
