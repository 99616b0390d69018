import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Named random keys the server makes once per store (the refresh-token derivation key, the decoy key), kept in
/// `server_secrets` sealed by the key-encryption key, and cached in memory once read.
public final class ServerSecrets: Sendable {
    let store: Store
    let box: SecretBox
    private let cache = NIOLockedValueBox<[String: SymmetricKey]>([:])

    init(store: Store, box: SecretBox) {
        self.store = store
        self.box = box
    }

    /// The key called `name`, made on first use. Instances racing to make it agree on the first one stored. A value
    /// stored in the clear by an older release is sealed in place.
    func key(_ name: String) async throws -> SymmetricKey {
        if let key = cache.withLockedValue({ $0[name] }) { return key }
        let key = SymmetricKey(data: Data(try await text(name, make: Secrets.token).utf8))
        cache.withLockedValue { $0[name] = key }
        return key
    }

    /// The secret text called `name` (a private key's PEM, say), made by `make` on first use; instances racing to
    /// make it agree on the first one stored. Not cached: callers keep what they build from it.
    func text(_ name: String, make: () throws -> String) async throws -> String {
        let context = "server_secret:\(name)"
        let secrets = SecretRepository(db: store.database)
        if try await secrets.value(name) == nil {
            try await secrets.insertUnlessPresent(name, value: try box.seal(try make(), context: context))
        }
        guard let stored = try await secrets.value(name) else { throw SecretBoxError.corrupt }
        if stored.hasPrefix(SecretBox.prefix) { return try box.open(stored, context: context) }
        // A value an older release stored in the clear is sealed in place.
        try await secrets.replace(name, stored: stored, with: try box.seal(stored, context: context))
        return stored
    }

    /// Seals every server secret and signing key with the newest key-encryption key; returns how many were rewritten.
    public static func reencrypt(_ store: Store, box: SecretBox) async throws -> Int {
        // Each sealed column: its table, key column, value column, and the context its values are bound to.
        return try await store.transaction { db in
            let secrets = SecretRepository(db: db)
            var rewritten = 0
            for column in SecretRepository.SealedColumn.allCases {
                for (key, value) in try await secrets.values(of: column) {
                    guard !box.isCurrent(value) else { continue }
                    // A value an older release stored in the clear is sealed now.
                    let context = column.contextPrefix + key
                    let clear = value.hasPrefix(SecretBox.prefix) ? try box.open(value, context: context) : value
                    try await secrets.reseal(column, key: key, with: try box.seal(clear, context: context))
                    rewritten += 1
                }
            }
            return rewritten
        }
    }
}
