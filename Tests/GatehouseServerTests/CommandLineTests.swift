import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseServer
import Testing

/// The `gatehouse` binary, run as a user runs it.
@Suite("gatehouse command line")
struct CommandLineTests {
    /// The executable SwiftPM built next to this test bundle.
    static let executable: URL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("gatehouse")

    /// The binary with `arguments`, in `folder`, with none of the caller's `GATEHOUSE_*` variables but `environment`.
    static func process(_ arguments: [String], environment: [String: String], in folder: URL?) -> Process {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GATEHOUSE_") }
            .merging(environment) { $1 }
        if let folder { process.currentDirectoryURL = folder }
        return process
    }

    static func run(_ arguments: [String], environment: [String: String] = [:], in folder: URL? = nil) async throws
        -> ProcessOutcome
    {
        try await process(arguments, environment: environment, in: folder).runToEnd()
    }

    /// Starts the binary with `arguments` (a `serve`), returning it and its standard error a line at a time.
    static func serve(
        _ arguments: [String], environment: [String: String] = [:], in folder: URL? = nil
    ) throws -> (Process, AsyncStream<String>) {
        let process = process(arguments, environment: environment, in: folder)
        let err = Pipe()
        process.standardError = err
        let lines = err.lines()
        try process.start()
        return (process, lines)
    }

    static func scratchFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test(
        "bad flags and settings print one line and exit 2",
        arguments: [
            (["serve", "--no-such-flag"], [String: String](), "Unknown option '--no-such-flag'"),
            (["serve", "--port", "99999"], [:], "--port must be a port number"),
            (["serve"], ["GATEHOUSE_LOG_FORMAT": "xml"], "GATEHOUSE_LOG_FORMAT must be text or json"),
            (["migrate", "--database-url", "mysql://x"], [:], "--database-url must start with"),
            (["frobnicate"], [:], "Unexpected argument 'frobnicate'"),
        ])
    func badInput(arguments: [String], environment: [String: String], message: String) async throws {
        let outcome = try await Self.run(arguments, environment: environment, in: try Self.scratchFolder())
        #expect(outcome.status == 2)
        let lines = outcome.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(outcome.stderr.contains(message))
        #expect(!outcome.stderr.contains("Fatal error") && !outcome.stderr.contains("Stack"))
    }

    @Test("gatehouse mail preview prints a mail in the asked language; an unknown name fails listing the mails")
    func mailPreview() async throws {
        let german = try await Self.run(["mail", "preview", "magic_link", "--locale", "de"])
        #expect(german.status == 0)
        #expect(german.stdout.hasPrefix("Subject: Ihr Anmeldecode\n"))
        #expect(german.stdout.contains("Geben Sie diesen Code in der App ein, um sich anzumelden:\n\n123456\n"))
        #expect(german.stdout.contains("<html lang=\"de\">"))
        let text = try await Self.run(["mail", "preview", "account_deleted", "--format", "text"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("Your Gatehouse account for ada@example.com was deleted"))
        #expect(!text.stdout.contains("<html"))
        let unknown = try await Self.run(["mail", "preview", "welcome"])
        #expect(unknown.status == 1)
        #expect(unknown.stdout.isEmpty)
        #expect(unknown.stderr.contains("no mail named welcome"))
        #expect(unknown.stderr.contains("magic_link") && unknown.stderr.contains("account_deleted"))
    }

    @Test("gatehouse migrate applies the schema once, then reports it current")
    func migrate() async throws {
        let folder = try Self.scratchFolder()
        let first = try await Self.run(["migrate"], in: folder)
        #expect(first.status == 0)
        #expect(first.stdout.contains("applied migrations 1"))
        #expect(
            FileManager.default.fileExists(
                atPath: folder.appendingPathComponent("gatehouse-data/gatehouse.sqlite").path))
        let second = try await Self.run(["migrate"], in: folder)
        #expect(second.status == 0)
        #expect(second.stdout.contains("schema already at version"))
    }

    @Test("gatehouse serve with no flags: ./gatehouse-data, one start line, ready, and a clean stop on SIGTERM")
    func serve() async throws {
        let folder = try Self.scratchFolder()
        // Port 0 stands in for 8080 so parallel runs do not collide; everything else is default.
        let (process, lines) = try Self.serve(["serve"], environment: ["GATEHOUSE_PORT": "0"], in: folder)
        var iterator = lines.makeAsyncIterator()
        let startLine = await iterator.next() ?? ""
        #expect(startLine.contains("gatehouse listening on http://127.0.0.1:"))
        #expect(startLine.contains("using sqlite at ./gatehouse-data/gatehouse.sqlite"))
        let port = try #require(startLine.firstMatch(of: /port=(\d+)/).map { String($0.1) })

        let client = HTTPClient()
        let ready = try await LiveServer.eventually {
            (try? await client.send(.GET, "http://127.0.0.1:\(port)/health/ready").status) == 200
        }
        #expect(ready)
        try await client.shutdown()

        process.terminate()  // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        var rest = ""
        while let line = await iterator.next() { rest += line + "\n" }
        #expect(!rest.contains("error"))

        let store = try Store(
            location: .sqlite(path: folder.appendingPathComponent("gatehouse-data/gatehouse.sqlite").path),
            logger: TestStore.quietLogger)
        let mode = try await store.database.raw("PRAGMA journal_mode").first(
            decodingColumn: "journal_mode", as: String.self)
        #expect(mode == "wal")
        await store.close()
    }
}

extension CommandLineTests {
    /// A usable value for every flag the configuration reference (docs/configuration.md) documents; a flag added there
    /// without one here fails the test below, so the reference and the binary cannot drift apart again.
    static func sampleValues(folder: URL) -> [String: String] {
        // A Sign in with Apple key, as the team's .p8 file holds one.
        let appleKey = P256.Signing.PrivateKey().pemRepresentation
        let appleKeyFile = folder.appendingPathComponent("AuthKey_TEST.p8")
        try? appleKey.write(to: appleKeyFile, atomically: true, encoding: .utf8)
        // Two auth hook keys, as a rotation lists them.
        let hookSecrets = (0..<2).map { _ in
            "v1,whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        }.joined(separator: "|")
        return [
            "--host": "127.0.0.1", "--port": "0", "--data-dir": folder.appendingPathComponent("data").path,
            "--database-url": "sqlite://" + folder.appendingPathComponent("other.sqlite").path,
            "--public-url": "http://127.0.0.1:8080", "--log-level": "info", "--log-format": "text",
            "--max-body-size": "65536", "--smtp-url": "smtp://127.0.0.1:1", "--mail-from": "auth@example.com",
            "--site-url": "https://app.example.com",
            "--redirect-urls": "https://app.example.com/auth/*,myapp://callback",
            "--access-token-ttl": "600", "--session-idle-timeout": "86400", "--session-lifetime": "604800",
            "--apple-audiences": "com.example.app", "--apple-jwks-url": "https://appleid.apple.com/auth/keys",
            "--trusted-proxies": "10.0.0.0/8,127.0.0.1", "--metrics-token": "a-long-metrics-token-1234",
            "--encryption-keys": SecretBox.newKey(), "--code-failures-per-day": "50", "--sync-retention": "86400",
            "--templates-dir": folder.path, "--app-url": "myapp://", "--app-store-url": "https://apps.example.com/app",
            "--idle-timeout": "30", "--live-streams-per-session": "2", "--live-streams-per-instance": "100",
            "--audit-retention": "0", "--session-retention": "86400", "--password-reauthentication": "off",
            "--secure-email-change": "off", "--reveal-accounts": "on", "--anonymous-users": "on",
            "--anonymous-retention": "86400", "--passkeys": "on", "--passkey-rp-id": "127.0.0.1",
            "--passkey-origins": "http://127.0.0.1:8080,https://app.example.com", "--passkey-rp-name": "Example",
            "--apple-app-ids": "ABCDE12345.com.example.app",
            "--app-store-bundle-ids": "com.example.app", "--app-store-app-id": "1234567890",
            "--app-store-environments": "Production,Sandbox",
            "--app-store-products": "com.example.business=business,com.example.enterprise=enterprise",
            "--app-store-root-certificates": AppStoreFixtures.shared.rootFile,
            "--app-store-issuer-id": "57246542-96fe-1a63-e053-0824d011072a", "--app-store-key-id": "2X9R4HXF34",
            "--app-store-key-file": AppStoreFixtures.shared.rootFile, "--app-store-api-url": "http://127.0.0.1:9",
            "--apple-team-id": "ABCDE12345", "--apple-key-id": "KEY1234567",
            "--apple-private-key-file": appleKeyFile.path,
            "--apple-private-key": appleKey, "--apple-client-id": "com.example.app.web",
            "--apple-api-url": "http://127.0.0.1:9", "--google-client-ids": "web.apps.googleusercontent.com",
            "--google-jwks-url": "https://www.googleapis.com/oauth2/v3/certs", "--manual-linking": "on",
            "--dns-resolver": "127.0.0.1:53", "--webhooks-allow-private-targets": "on",
            "--oauth-server": "on", "--oauth-authorization-path": "/oauth/consent",
            "--oauth-allow-dynamic-registration": "on",
            "--hook-custom-access-token-uri": "https://hooks.example.com/custom-access-token",
            "--hook-custom-access-token-secrets": hookSecrets,
            "--hook-before-user-created-uri": "https://hooks.example.com/before-user-created",
            "--hook-before-user-created-secrets": hookSecrets,
            "--hook-send-email-uri": "https://hooks.example.com/send-email",
            "--hook-send-email-secrets": hookSecrets,
            "--hook-password-verification-attempt-uri": "https://hooks.example.com/password-verification-attempt",
            "--hook-password-verification-attempt-secrets": hookSecrets,
            "--hook-mfa-verification-attempt-uri": "https://hooks.example.com/mfa-verification-attempt",
            "--hook-mfa-verification-attempt-secrets": hookSecrets,
        ]
    }

    @Test("F16 the binary starts with every flag in the configuration reference's table")
    func referenceFlags() async throws {
        let reference = try SettingsTests.committedReference()
        let rows = reference.matches(of: /\| `(--[a-z0-9-]+)` \| `(GATEHOUSE_[A-Z0-9_]+)` \|/).map {
            (String($0.1), String($0.2))
        }
        #expect(rows.count >= 20)
        for (flag, variable) in rows {
            let key = try #require(Setting(rawValue: String(flag.dropFirst(2))), "\(flag) is not a setting")
            #expect(key.environmentName == variable)
        }
        let folder = try Self.scratchFolder()
        let samples = Self.sampleValues(folder: folder)
        var arguments = ["serve"]
        for (flag, _) in rows {
            let value = try #require(samples[flag], "no sample value for \(flag)")
            // A value that starts with a dash (a PEM) is given as --name=value, as the reference says.
            arguments += value.hasPrefix("-") ? ["\(flag)=\(value)"] : [flag, value]
        }
        let (process, lines) = try Self.serve(arguments)
        var iterator = lines.makeAsyncIterator()
        let startLine = await iterator.next() ?? ""
        #expect(startLine.contains("gatehouse listening on http://127.0.0.1:"), "\(startLine)")
        #expect(startLine.contains("other.sqlite"))
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}

@Suite("gatehouse operator commands")
struct OperatorCommandTests {
    @Test("keys rotate, companies list/show/set-tier and users list/show/sign-out/disable work on the server's store")
    func operatorCommands() async throws {
        let folder = try CommandLineTests.scratchFolder()
        let dataDir = folder.appendingPathComponent("data").path
        // The commands run on the SQLite file in the data directory, as an operator would on a default install.
        let onDataDir: (inout GatehouseConfiguration) -> Void = {
            $0.databaseURL = nil
            $0.databaseSearchPath = nil
            $0.dataDirectory = dataDir
        }
        let h = try await AccountHarness.start(onDataDir)
        var owner = try await h.person("cli")
        let cid = try await h.company("CLI Co", owner: &owner, tier: .free)
        let before = try #require(owner.company?.access)
        try await h.stop()

        let args = ["--data-dir", dataDir]
        // A custom provider's client secret is sealed too: re-encryption must carry it over.
        let secretFile = folder.appendingPathComponent("hub-secret")
        try "hub-secret\n".write(to: secretFile, atomically: true, encoding: .utf8)
        let added = try await CommandLineTests.run(
            [
                "providers", "add", "--type", "oauth2", "--identifier", "custom:hub", "--name", "Hub", "--client-id",
                "hub", "--client-secret-file", secretFile.path, "--authorization-url", "https://hub.example/authorize",
                "--token-url", "https://hub.example/token", "--userinfo-url", "https://hub.example/user",
            ] + args)
        #expect(added.status == 0, "\(added.stderr)")
        let rotated = try await CommandLineTests.run(["keys", "rotate"] + args)
        #expect(rotated.status == 0)
        #expect(rotated.stdout.hasPrefix("signing with key "))
        // Rotating the key-encryption key: a new key first in the key file, re-encrypt, then drop the old key.
        let keyFile = URL(fileURLWithPath: dataDir).appendingPathComponent("gatehouse.key")
        let oldKey = try String(contentsOf: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let newKey = SecretBox.newKey()
        try "\(newKey)\n\(oldKey)\n".write(to: keyFile, atomically: true, encoding: .utf8)
        let reencrypted = try await CommandLineTests.run(["keys", "reencrypt"] + args)
        #expect(reencrypted.status == 0)
        let count = try #require(
            reencrypted.stdout.firstMatch(of: /re-encrypted (\d+) stored secret/).map { Int($0.1) })
        #expect((count ?? 0) >= 3)  // both signing keys, old and new, and the provider's secret
        try "\(newKey)\n".write(to: keyFile, atomically: true, encoding: .utf8)
        #expect(
            try await CommandLineTests.run(["keys", "reencrypt"] + args).stdout.contains(
                "re-encrypted 0 stored secrets"))
        let list = try await CommandLineTests.run(["companies", "list"] + args)
        #expect(list.stdout.contains(cid) && list.stdout.contains("free") && list.stdout.contains("CLI Co"))
        #expect(try await CommandLineTests.run(["companies", "set-tier", cid, "enterprise"] + args).status == 0)
        let shown = try await CommandLineTests.run(["companies", "show", cid] + args)
        #expect(shown.stdout.contains("tier:                enterprise"))
        #expect(shown.stdout.contains(owner.id) && !shown.stdout.contains("$y$"))
        let badTier = try await CommandLineTests.run(["companies", "set-tier", cid, "platinum"] + args)
        #expect(badTier.status == 2)
        let missing = try await CommandLineTests.run(["companies", "show", "no-such-company"] + args)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no company no-such-company"))
        #expect(try await CommandLineTests.run(["users", "list"] + args).stdout.contains(owner.email))
        #expect(
            try await CommandLineTests.run(["users", "show", owner.email] + args).stdout.contains("sessions:  2 live"))
        let signedOut = try await CommandLineTests.run(["users", "sign-out", owner.email] + args)
        #expect(signedOut.stdout.contains("2 sessions ended"))
        #expect(
            try await CommandLineTests.run(["users", "show", owner.email] + args).stdout.contains("sessions:  0 live"))
        #expect(try await CommandLineTests.run(["users", "disable", owner.email] + args).status == 0)

        // Back on the server: the disabled account's sessions have ended, and the new key signs.
        let again = try await AccountHarness.start(onDataDir)
        #expect(try await again.client.get("/v1/companies/\(cid)", bearer: before).status == 403)
        // The provider's secret opens under the new key alone: the browser is sent to the provider.
        #expect(try await again.client.get("/auth/v1/authorize?provider=custom%3Ahub").status == 302)
        #expect(try await again.client.password(owner.email, "correct horse battery").status == 400)
        let keys = try await again.client.get("/auth/v1/.well-known/jwks.json")
        #expect((keys.json["keys"] as? [Any])?.count == 2)

        // Service keys: minted by the command while the server runs, printed once, revoked by it at once.
        let minted = try await CommandLineTests.run(["keys", "service-key"] + args)
        #expect(minted.status == 0)
        let serviceKey = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(minted.stderr.contains("shown once"))
        let keyID = try #require(minted.stderr.firstMatch(of: /service key ([0-9a-f-]{36})/).map { String($0.1) })
        let admin = AdminClient(client: again.client, key: serviceKey)
        let listed = try await admin.get("/auth/v1/admin/users")
        #expect(listed.status == 200 && listed.headers["x-total-count"] == "1")
        let rotated2 = try await CommandLineTests.run(["keys", "service-key", "--revoke-others"] + args)
        #expect(rotated2.stderr.contains("revoked 1 earlier key"))
        #expect(try await admin.get("/auth/v1/admin/users").status == 403)
        let next = AdminClient(
            client: again.client, key: rotated2.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(try await next.get("/auth/v1/admin/users").status == 200)
        #expect(try await CommandLineTests.run(["keys", "revoke-service-key", "--id", keyID] + args).status != 0)
        #expect(
            try await CommandLineTests.run(["keys", "revoke-service-key", "--all"] + args).stdout
                == "revoked 1 service key\n"
        )
        #expect(try await next.get("/auth/v1/admin/users").status == 403)
        try await again.stop()
    }
}
