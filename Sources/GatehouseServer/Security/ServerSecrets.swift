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
        let context = "server_secret:\(name)"
        let secrets = SecretRepository(db: store.database)
        try await secrets.insertUnlessPresent(name, value: try box.seal(Secrets.token(), context: context))
        guard let stored = try await secrets.value(name) else { throw SecretBoxError.corrupt }
        let clear: String
        if stored.hasPrefix(SecretBox.prefix) {
            clear = try box.open(stored, context: context)
        } else {
            clear = stored
            try await secrets.replace(name, stored: stored, with: try box.seal(clear, context: context))
        }
        let key = SymmetricKey(data: Data(clear.utf8))
        cache.withLockedValue { $0[name] = key }
        return key
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
