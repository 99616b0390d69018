import ArgumentParser
import GatehouseServer

/// `gatehouse keys`: the access-token signing keys.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the keys that sign access tokens and the key that encrypts secrets at rest.",
        subcommands: [Rotate.self, Reencrypt.self])

    /// `gatehouse keys rotate`: sign with a new key from now on; the old one stays published until its tokens expire.
    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start signing with a new key.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let configuration = try options.resolve()
            let rotated = try await withStore(configuration) { store, _ in
                let rotated = try await SigningKeys.rotate(store, box: try SecretBox.load(configuration))
                try await store.recordAudit(
                    AuditEvent(
                        .signingKeyRotated,
                        detail: ["new": rotated.new, "retired": rotated.retired.joined(separator: ",")]))
                return rotated
            }
            print(
                "signing with key \(rotated.new); retired \(rotated.retired.isEmpty ? "none" : rotated.retired.joined(separator: ", "))"
            )
        }
    }

    /// `gatehouse keys reencrypt`: seal every stored secret with the first encryption key (after a new one was put
    /// in front of `GATEHOUSE_ENCRYPTION_KEYS` or gatehouse.key); the old key can be removed afterwards.
    struct Reencrypt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt stored secrets with the newest encryption key.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let configuration = try options.resolve()
            let box = try SecretBox.load(configuration)
            let count = try await withStore(configuration) { store, _ in
                let count = try await ServerSecrets.reencrypt(store, box: box)
                try await store.recordAudit(AuditEvent(.secretsReencrypted, detail: ["count": String(count)]))
                return count
            }
            print("re-encrypted \(count) stored secret\(count == 1 ? "" : "s") with the newest key")
        }
    }
}
