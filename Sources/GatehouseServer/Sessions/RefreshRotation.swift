import Crypto
import Foundation

/// What to do with a presented refresh token, decided from its stored state alone.
enum RefreshDecision: Equatable {
    /// Never rotated: rotate it now.
    case rotate
    /// Rotated moments ago (a client race): answer with the token it was rotated into.
    case replayWithinGrace
    /// Rotated longer ago than the grace window: someone holds an old token, so the whole session ends.
    case reuseDetected
}

/// The refresh rotation rule (docs/security.md), with the clock passed in.
enum RefreshRotation {
    static func decide(rotatedAt: Date?, now: Date, grace: TimeInterval) -> RefreshDecision {
        guard let rotatedAt else { return .rotate }
        return now.timeIntervalSince(rotatedAt) <= grace ? .replayWithinGrace : .reuseDetected
    }

    /// The token a refresh token rotates into: an HMAC of it under the server's secret. Deterministic, so a client
    /// racing within the grace window gets the same successor without any token being stored in the clear.
    static func successor(of token: String, key: SymmetricKey) -> String {
        Secrets.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: key)))
    }
}
