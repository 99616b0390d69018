import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse keys`: the access-token signing keys.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the keys that sign access tokens and the key that encrypts secrets at rest.",
        subcommands: [Rotate.self, Reencrypt.self, ServiceKey.self, RevokeServiceKey.self])

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

    /// `gatehouse keys service-key`: mints a key for the admin API (GoTrue's service_role key), printed once.
    struct ServiceKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mint a service key for the admin API (/auth/v1/admin/...); it is printed once.",
            discussion: """
                Backends send it as the bearer token (or apikey) of admin calls; browsers never may. Keep it like a \
                password. --revoke-others makes this a rotation: every earlier key stops working at once. The key \
                names the server's public URL as its issuer, and a server with another one refuses it: give this \
                command the --public-url (or GATEHOUSE_PUBLIC_URL, or without one the --host and --port) the server \
                is started with.
                """)
        @OptionGroup var options: ServerOptions
        @Flag(help: "Revoke every earlier service key in the same step.") var revokeOthers = false

        func run() async throws {
            let configuration = try options.resolve()
            let minted = try await withStore(configuration) { store, _ in
                let keys = ServiceKeys(
                    store: store, box: try SecretBox.load(configuration), configuration: configuration)
                let minted = try await keys.mint(revokingOthers: revokeOthers)
                try await store.recordAudit(
                    AuditEvent(
                        .serviceKeyMinted, detail: ["service_key": minted.id, "revoked": String(minted.revoked)]))
                return minted
            }
            print(minted.token)
            var note = "service key \(minted.id): shown once, keep it secret"
            if revokeOthers { note += "; revoked \(minted.revoked) earlier key\(minted.revoked == 1 ? "" : "s")" }
            if configuration.publicURL == nil {
                note +=
                    "\nno --public-url: the key is for \(ServiceKeys.issuer(configuration)), made up from --host and "
                    + "--port; a server started with another public URL, host or port refuses it"
            }
            FileHandle.standardError.write(Data((note + "\n").utf8))
        }
    }

    /// `gatehouse keys revoke-service-key --id ID | --all`.
    struct RevokeServiceKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a service key by its id, or every one; admin calls with it are refused at once.")
        @OptionGroup var options: ServerOptions
        @Option(help: "The key's id, as `keys service-key` printed it.") var id: String?
        @Flag(help: "Revoke every service key.") var all = false

        func validate() throws {
            guard (id == nil) != (!all) else { throw ValidationError("Give --id ID or --all, one of them") }
        }

        func run() async throws {
            let configuration = try options.resolve()
            let revoked = try await withStore(configuration) { store, _ in
                let keys = ServiceKeys(
                    store: store, box: try SecretBox.load(configuration), configuration: configuration)
                let revoked = try await keys.revoke(all ? nil : id)
                try await store.recordAudit(
                    AuditEvent(.serviceKeyRevoked, detail: ["service_key": id ?? "all", "count": String(revoked)]))
                return revoked
            }
            guard revoked > 0 || all else { throw ValidationError("no live service key has the id \(id ?? "")") }
            print("revoked \(revoked) service key\(revoked == 1 ? "" : "s")")
        }
    }
}
