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
        try await create(json: try JSONEncoder().encode(verified), challenge: challenge)
    }

    /// Stores the account a trip through a provider found, bound to the app's challenge; returns the code.
    func create(for grant: ProviderGrant, challenge: String) async throws -> String {
        try await create(json: try JSONEncoder().encode(grant), challenge: challenge)
    }

    private func create(json: Data, challenge: String) async throws -> String {
        let code = Secrets.token()
        let now = clock.now
        try await FlowStateRepository(db: db).insert(
            id: Secrets.identifier(), authCodeHash: Secrets.digest(code), challenge: challenge,
            verified: String(decoding: json, as: UTF8.self), createdAt: now,
            expiresAt: now.addingTimeInterval(Self.lifetime))
        return code
    }

    /// Remembers which session the code's exchange started, in the transaction that starts it. A replay that came
    /// first marked the code, and then the session is not started at all.
    func bind(_ authCode: String, sessionID: String) async throws {
        guard try await FlowStateRepository(db: db).bind(Secrets.digest(authCode), sessionID: sessionID) else {
            throw Refusal.notFound.apiError
        }
    }

    /// The mark a replay leaves on a code whose exchange has not started its session yet.
    static let replayed = "replayed"

    /// Uses up the authorization code when the verifier matches, returning what it stands for. A wrong verifier
    /// also uses it up: a code is never worth a second guess.
    func redeem(_ authCode: String, verifier: String) async throws -> Result<FlowGrant, Refusal> {
        let now = clock.now
        let hash = Secrets.digest(authCode)
        let flows = FlowStateRepository(db: db)
        guard let flow = try await flows.use(hash, at: now) else {
            guard let used = try await flows.exchange(hash) else { return .failure(.notFound) }
            guard let sessionID = used.sessionID else {
                // The first exchange is still starting its session: mark the code so that it never does.
                try await flows.bindIfUnbound(hash, sessionID: Self.replayed)
                return .failure(.reused(sessionID: nil))
            }
            return .failure(.reused(sessionID: sessionID == Self.replayed ? nil : sessionID))
        }
        guard flow.expiresAt > now.epochMilliseconds else { return .failure(.expired) }
        guard PKCE.verifies(verifier, challenge: flow.codeChallenge) else { return .failure(.badVerifier) }
        let json = Data(flow.verified.utf8)
        if let grant = try? JSONDecoder().decode(ProviderGrant.self, from: json) { return .success(.provider(grant)) }
        return .success(.link(try JSONDecoder().decode(ConsumedCode.self, from: json)))
    }
}

/// What an authorization code stands for: a mailed link that was verified, or a trip through a provider.
enum FlowGrant: Sendable {
    case link(ConsumedCode)
    case provider(ProviderGrant)
}

/// The account a trip through a provider signed in to (or linked an identity to); its session starts when the app
/// exchanges the code.
struct ProviderGrant: Codable, Sendable {
    let accountID: String
    let provider: String
    let linked: Bool

    enum CodingKeys: String, CodingKey {
        case provider, linked
        case accountID = "provider_account_id"
    }
}
