import Crypto
import Foundation
import NIOConcurrencyHelpers
import SQLKit

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
        let candidate = try box.seal(Secrets.token(), context: context)
        try await store.database.insert(into: "server_secrets").columns("name", "value")
            .values(SQLBind(name), SQLBind(candidate)).ignoringConflicts(with: "name").run()
        guard
            let stored = try await store.database.select().column("value").from("server_secrets")
                .where("name", .equal, name).first(decodingColumn: "value", as: String.self)
        else { throw SecretBoxError.corrupt }
        let clear: String
        if stored.hasPrefix(SecretBox.prefix) {
            clear = try box.open(stored, context: context)
        } else {
            clear = stored
            try await store.database.update("server_secrets").set("value", to: try box.seal(clear, context: context))
                .where("name", .equal, name).where("value", .equal, stored).run()
        }
        let key = SymmetricKey(data: Data(clear.utf8))
        cache.withLockedValue { $0[name] = key }
        return key
    }

    /// Seals every server secret and signing key with the newest key-encryption key; returns how many were rewritten.
    public static func reencrypt(_ store: Store, box: SecretBox) async throws -> Int {
        // Each sealed column: its table, key column, value column, and the context its values are bound to.
        let columns = [
            ("server_secrets", "name", "value", "server_secret:"),
            ("signing_keys", "kid", "private_key", "signing_key:"),
            ("mail_queue", "id", "message", "mail:"),
        ]
        return try await store.transaction { db in
            var rewritten = 0
            for (table, keyColumn, valueColumn, contextPrefix) in columns {
                for row in try await db.select().columns(keyColumn, valueColumn).from(table).all() {
                    let key = try row.decode(column: keyColumn, as: String.self)
                    let value = try row.decode(column: valueColumn, as: String.self)
                    guard !box.isCurrent(value) else { continue }
                    // A value an older release stored in the clear is sealed now.
                    let context = contextPrefix + key
                    let clear = value.hasPrefix(SecretBox.prefix) ? try box.open(value, context: context) : value
                    try await db.update(table).set(valueColumn, to: try box.seal(clear, context: context))
                        .where(keyColumn, .equal, key).run()
                    rewritten += 1
                }
            }
            return rewritten
        }
    }
}
