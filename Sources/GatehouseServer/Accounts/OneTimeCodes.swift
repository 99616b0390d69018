import Crypto
import Foundation
import GatehouseAPI
import SQLKit

/// What a mailed code or link is for. A code only verifies for its own purpose.
enum CodePurpose: String, Sendable, CaseIterable, Codable {
    case signup, magiclink, recovery
    case emailChange = "email_change"
    case reauthentication

    /// The purposes a `type` given to `/verify` accepts.
    static func accepted(byVerifyType type: String) -> [CodePurpose]? {
        switch type {
        case "signup", "invite": [.signup]
        case "email": [.magiclink, .signup]
        case "magiclink": [.magiclink]
        case "recovery": [.recovery]
        case "email_change": [.emailChange]
        default: nil
        }
    }
}

/// A code just issued: the six digits and the link token go into one mail and nowhere else.
struct IssuedCode {
    let id: String
    let code: String
    let linkToken: String
}

/// What a sign-up chose, held on its own code until that code is verified (no pre-hijacking: docs/security.md).
struct PendingSignup: Codable, Sendable, Equatable {
    var passwordHash: String?
    var metadata: [String: JSONValue]
}

/// A code that verified: what it proves, and what its sign-up left pending.
struct ConsumedCode: Codable, Sendable {
    let email: String
    let purpose: CodePurpose
    let accountID: String?
    let newEmail: String?
    var pending: PendingSignup?
    /// Set when the code was asked for with PKCE: a link then yields an authorization code, not a session.
    var codeChallenge: String?
}

/// The keys mailed codes are digested under, newest first (`SecretBox.digestKeys`).
struct CodeKeys: Sendable {
    let all: [SymmetricKey]
    var newest: SymmetricKey { all[0] }

    init(_ box: SecretBox) { all = box.digestKeys(purpose: "one-time code") }
}

/// What became of a link that no longer works.
enum LinkState: Sendable { case used, expired }

/// Mailed codes and magic links: stored as digests, single use, expiring, bounded wrong tries.
struct OneTimeCodes {
    let db: any SQLDatabase
    let clock: any GatehouseClock
    let settings: AuthSettings

    private var codes: OneTimeCodeRepository { OneTimeCodeRepository(db: db) }

    /// Issues a code and link for `email`. Earlier codes of the address and purpose are void, except sign-up codes:
    /// each sign-up's code carries that sign-up's own choices, so a later sign-up by someone else cannot replace them.
    func issue(
        email: String, purpose: CodePurpose, accountID: String?, newEmail: String? = nil,
        pending: PendingSignup? = nil, codeChallenge: String? = nil, keys: CodeKeys
    ) async throws -> IssuedCode {
        let now = clock.now
        if purpose != .signup {
            try await codes.voidEarlier(email: email, purpose: purpose, accountID: accountID, at: now)
        }
        let linkToken = Secrets.token()
        let issued = IssuedCode(
            id: Secrets.identifier(), code: Secrets.sixDigitCode(linkedTo: linkToken), linkToken: linkToken)
        let pendingJSON = try pending.map {
            String(decoding: try JSONEncoder.sortedKeys.encode($0.metadata), as: UTF8.self)
        }
        try await codes.insert(
            StoredCode(
                id: issued.id, email: email,
                codeHash: Self.codeDigest(id: issued.id, code: issued.code, key: keys.newest),
                purpose: purpose.rawValue, accountID: accountID, newEmail: newEmail,
                pendingPasswordHash: pending?.passwordHash, pendingMetadata: pendingJSON, codeChallenge: codeChallenge),
            linkHash: Secrets.digest(issued.linkToken), createdAt: now,
            expiresAt: now.addingTimeInterval(settings.codeLifetime))
        if let accountID {
            switch purpose {
            case .signup: try await AccountRepository(db: db).stamp(.confirmationSent, accountID: accountID, at: now)
            case .recovery, .magiclink:
                try await AccountRepository(db: db).stamp(.recoverySent, accountID: accountID, at: now)
            case .emailChange, .reauthentication: break
            }
        }
        return issued
    }

    /// Voids every other live code of `email`'s sign-ups once the address is confirmed.
    func voidSignups(email: String) async throws {
        try await codes.voidSignups(email: email, at: clock.now)
    }

    /// Consumes the live code for `email` among `purposes` when `code` matches. Every live candidate's try is
    /// counted before the code is compared (one UPDATE … RETURNING), so parallel guesses all use up tries.
    func consume(email: String, code: String, purposes: [CodePurpose], keys: CodeKeys) async throws -> ConsumedCode? {
        let now = clock.now
        let candidates = try await codes.countTry(
            email: email, purposes: purposes, now: now, maxAttempts: settings.codeMaxAttempts)
        var matched: StoredCode?
        for candidate in candidates
        where Self.matches(candidate.codeHash, id: candidate.id, code: code, keys: keys) {
            matched = candidate
        }
        guard let matched else { return nil }
        return try await markConsumed(matched, now: now)
    }

    /// Consumes the live code whose magic-link token is `token`, among `purposes`.
    func consume(linkToken token: String, purposes: [CodePurpose]) async throws -> ConsumedCode? {
        guard let code = try await live(linkToken: token, purposes: purposes) else { return nil }
        return try await markConsumed(code, now: clock.now)
    }

    /// Whether a live link with this token exists (the landing page asks before showing its button).
    func isLive(linkToken token: String, purposes: [CodePurpose]) async throws -> Bool {
        try await live(linkToken: token, purposes: purposes) != nil
    }

    /// Why a link that is not live is not: it was used (or replaced by a newer one), or it expired or never existed.
    func spentState(linkToken token: String) async throws -> LinkState {
        guard let times = try await codes.times(linkHash: Secrets.digest(token)), let consumed = times.consumedAt
        else { return .expired }
        return consumed < times.expiresAt ? .used : .expired
    }

    private func live(linkToken token: String, purposes: [CodePurpose]) async throws -> StoredCode? {
        try await codes.usable(
            linkHash: Secrets.digest(token), purposes: purposes, now: clock.now,
            maxAttempts: settings.codeMaxAttempts)
    }

    /// The pending sign-up password digests of `email`'s live sign-up codes, newest first.
    func pendingPasswordHashes(email: String) async throws -> [String] {
        try await codes.pendingPasswordHashes(email: email, now: clock.now)
    }

    private func markConsumed(_ code: StoredCode, now: Date) async throws -> ConsumedCode? {
        // Single use even under concurrent verification: only the request that flips consumed_at wins.
        guard try await codes.markConsumed(code.id, at: now), let purpose = CodePurpose(rawValue: code.purpose) else {
            return nil
        }
        let metadata = code.pendingMetadata
            .flatMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
        let passwordHash = code.pendingPasswordHash
        return ConsumedCode(
            email: code.email, purpose: purpose, accountID: code.accountID, newEmail: code.newEmail,
            pending: metadata != nil || passwordHash != nil
                ? PendingSignup(passwordHash: passwordHash, metadata: metadata ?? [:]) : nil,
            codeChallenge: code.codeChallenge)
    }

    /// The stored form of a code: an HMAC under the server's code key (`CodeKeys`), salted with its row id so equal
    /// codes never share a digest. Six digits are a million guesses: an unkeyed digest in a log line or a copied
    /// database gives the code away in well under a second.
    static func codeDigest(id: String, code: String, key: SymmetricKey) -> String {
        keyedPrefix + Secrets.hex(HMAC<SHA256>.authenticationCode(for: Data("\(id):\(code)".utf8), using: key))
    }

    /// Marks a keyed code digest; a stored digest without it is an older release's plain SHA-256, which verifies
    /// until its code expires (minutes), so codes mailed just before an upgrade keep working.
    static let keyedPrefix = "hmac:"

    /// Whether `code` is the one `stored` is the digest of.
    static func matches(_ stored: String, id: String, code: String, keys: CodeKeys) -> Bool {
        guard stored.hasPrefix(keyedPrefix) else {
            return Secrets.constantTimeEquals(stored, Secrets.digest("\(id):\(code)"))
        }
        var matched = false
        for key in keys.all where Secrets.constantTimeEquals(stored, codeDigest(id: id, code: code, key: key)) {
            matched = true
        }
        return matched
    }
}
