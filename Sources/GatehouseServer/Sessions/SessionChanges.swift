import Foundation
import SQLKit

/// What another feature may do to sessions, inside its own transaction: end them, raise the caller's to aal2, lower
/// those a removed factor raised, count an account's. The small interface Sessions exports, so that no feature
/// reaches into `SessionRepository` (docs/architecture.md, "Who may use whom").
struct SessionChanges {
    private let sessions: SessionRepository

    init(db: any SQLDatabase) { sessions = SessionRepository(db: db) }

    /// Ends the sessions `ending` names that are still live, and every company session opened from one of them;
    /// returns the ids that ended.
    @discardableResult
    func end(_ ending: SessionRepository.Ending, now: Date) async throws -> [String] {
        try await sessions.revoke(ending, now: now)
    }

    /// Raises `sessionID` to aal2 by `factorID` (`method` joins its `amr`) with a new refresh token, which it
    /// returns: the one its client holds is retired. The account's other sessions below aal2 end.
    func raise(
        _ sessionID: String, accountID: String, factorID: String, method: String, now: Date
    ) async throws -> String {
        try await sessions.raise(sessionID, factorID: factorID, method: method, now: now)
        let refreshToken = Secrets.token()
        try await sessions.insertRefreshToken(refreshToken, sessionID: sessionID, now: now)
        try await sessions.revoke(.accountBelowAAL2(accountID, keeping: sessionID), now: now)
        return refreshToken
    }

    /// Lowers to aal1 the sessions that `factorIDs` raised (those factors were removed).
    func lower(factorIDs: [String], now: Date) async throws {
        try await sessions.lower(factorIDs: factorIDs, now: now)
    }

    /// How many of the account's sessions have not expired.
    func countUnexpired(_ accountID: String, now: Int64) async throws -> Int {
        try await sessions.countUnexpired(accountID, now: now)
    }
}
