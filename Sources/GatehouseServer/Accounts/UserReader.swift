import Crypto
import Foundation
import GatehouseAPI
import SQLKit

/// Users as their owners see them: read through the session cache, and the decoy a sign-up answers for a taken
/// address.
struct UserReader: Sendable {
    let store: Store
    /// Whose cache holds users.
    let sessions: SessionService
    let secrets: ServerSecrets

    /// The user object a sign-up answers for an address that already has a confirmed account: shaped exactly like
    /// a new sign-up's, with ids derived from the address under a server key, so asking twice gives the same ids
    /// (as it does for an address that is new or unconfirmed).
    func decoyUser(email: String, metadata: [String: JSONValue], now: Date) async throws -> Schemas.User {
        let key = try await secrets.key("decoy_key")
        func id(_ label: String) -> String {
            let mac = Array(HMAC<SHA256>.authenticationCode(for: Data("\(label):\(email)".utf8), using: key))
            var bytes = Array(mac.prefix(16))
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            return UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                    bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                )
            ).uuidString.lowercased()
        }
        let accountID = id("account")
        let identity = IdentityRecord(
            id: id("identity"), accountID: accountID, provider: "email", providerID: accountID, email: email,
            createdAt: now, lastSignInAt: nil)
        return AccountRecord(
            id: accountID, email: email, emailConfirmedAt: nil, passwordHash: nil, userMetadata: metadata,
            createdAt: now,
            updatedAt: now, lastSignInAt: nil, disabledAt: nil
        ).wire(identities: [identity], confirmationSentAt: now)
    }

    /// The account with its identities and second factors, as its owner sees it.
    func user(_ account: AccountRecord, db: any SQLDatabase) async throws -> Schemas.User {
        account.wire(
            identities: try await AccountRepository(db: db).identities(accountID: account.id),
            factors: try await AccountFactors(db: db).all(accountID: account.id))
    }

    /// The account as its owner sees it, from the cache while it holds it; nil when there is no such account.
    func user(id: String) async throws -> Schemas.User? {
        try await cached(id: id)?.user
    }

    /// The same, with its JSON as `GET /auth/v1/user` answers it: encoded when the cache was filled.
    func cached(id: String) async throws -> AuthCache.CachedUser? {
        if let user = sessions.cache.user(id) { return user }
        return try await read(id: id)
    }

    /// Reads the account from the store and keeps it in the cache, encoded.
    private func read(id: String) async throws -> AuthCache.CachedUser? {
        let cache = sessions.cache
        let ticket = cache.ticket()
        guard let account = try await AccountRepository(db: store.database).find(id: id) else { return nil }
        let cached = try AuthCache.CachedUser(try await user(account, db: store.database))
        cache.keep(user: cached, accountID: id, ticket: ticket)
        return cached
    }
}
