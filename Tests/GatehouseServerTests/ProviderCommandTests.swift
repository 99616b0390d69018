import Foundation
import Testing

@testable import GatehouseServer

/// `gatehouse providers`: the binary, run as an operator runs it, on the store and key file a server uses; the admin
/// API's custom providers, with its rules and messages, the client secret never on the command line nor shown.
@Suite("gatehouse providers")
struct ProviderCommandTests {
    static let oidcSecret = "oidc secret, not for shell history"
    static let oauthSecret = "oauth2 secret from a pipe"

    /// A scratch folder: the data folder the commands use, and a 0600 file holding the OIDC provider's secret.
    struct Install {
        let folder: URL
        var dataDir: String { folder.appendingPathComponent("data").path }
        var secretFile: String { folder.appendingPathComponent("acme-secret").path }

        init() throws {
            folder = try CommandLineTests.scratchFolder()
            let written = FileManager.default.createFile(
                atPath: folder.appendingPathComponent("acme-secret").path,
                contents: Data((ProviderCommandTests.oidcSecret + "\n").utf8), attributes: [.posixPermissions: 0o600])
            guard written else { throw CocoaError(.fileWriteUnknown) }
        }

        /// `gatehouse providers <arguments> --data-dir …`, with `stdin` (or nothing) on its standard input.
        func providers(_ arguments: [String], stdin: String? = nil) async throws -> ProcessOutcome {
            let process = CommandLineTests.process(
                ["providers"] + arguments + ["--data-dir", dataDir], environment: [:], in: folder)
            if let stdin {
                let pipe = Pipe()
                pipe.fileHandleForWriting.write(Data(stdin.utf8))
                try pipe.fileHandleForWriting.close()
                process.standardInput = pipe
            } else {
                process.standardInput = FileHandle.nullDevice
            }
            return try await process.runToEnd()
        }

        /// Registers `custom:acme`, an OIDC provider, its secret from the file.
        func addAcme() async throws -> ProcessOutcome {
            try await providers([
                "add", "--type", "oidc", "--identifier", "custom:acme", "--name", "Acme SSO", "--client-id",
                "acme-web", "--client-secret-file", secretFile, "--issuer", "https://id.acme.test", "--scope", "openid",
                "--scope", "email", "--acceptable-client-id", "acme-ios", "--attribute-mapping", #"{"email":"mail"}"#,
            ])
        }

        /// Registers `custom:beta`, an OAuth 2.0 provider, disabled and without PKCE, its secret piped in.
        func addBeta() async throws -> ProcessOutcome {
            try await providers(
                [
                    "add", "--type", "oauth2", "--identifier", "custom:beta", "--name", "Beta", "--client-id", "beta",
                    "--client-secret-stdin", "--authorization-url", "https://beta.test/authorize", "--token-url",
                    "https://beta.test/token", "--userinfo-url", "https://beta.test/me", "--no-pkce", "--disabled",
                    "--authorization-params", #"{"prompt":"consent"}"#,
                ], stdin: ProviderCommandTests.oauthSecret + "\n")
        }

        /// `show ID` as JSON.
        func shown(_ identifier: String) async throws -> [String: Any] {
            let shown = try await providers(["show", identifier])
            #expect(shown.status == 0, "\(shown.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        }

        /// Every byte the store keeps: the database and its journal files.
        func storedBytes() throws -> Data {
            let files = try FileManager.default.contentsOfDirectory(atPath: dataDir).filter { $0.contains("sqlite") }
            #expect(!files.isEmpty)
            return try files.reduce(into: Data()) {
                $0 += try Data(contentsOf: URL(fileURLWithPath: dataDir).appendingPathComponent($1))
            }
        }
    }

    /// The failure of a command: one line on standard error, nothing on standard output.
    static func oneLine(_ outcome: ProcessOutcome, status: Int32, _ message: String) {
        #expect(outcome.status == status, "\(outcome.stdout) \(outcome.stderr)")
        #expect(outcome.stdout.isEmpty)
        #expect(outcome.stderr.split(separator: "\n").count == 1, "\(outcome.stderr)")
        #expect(outcome.stderr.contains(message), "\(outcome.stderr)")
    }

    @Test("an OIDC and an OAuth 2.0 provider added, listed and shown in the admin API's shape; no secret shown or kept")
    func addListShow() async throws {
        let install = try Install()
        let acme = try await install.addAcme()
        #expect(acme.status == 0, "\(acme.stderr)")
        #expect(acme.stdout == "added custom:acme  oidc  enabled  Acme SSO\n")
        let beta = try await install.addBeta()
        #expect(beta.status == 0, "\(beta.stderr)")
        #expect(beta.stdout == "added custom:beta  oauth2  disabled  Beta\n")

        let list = try await install.providers(["list"])
        #expect(list.status == 0)
        #expect(list.stdout == "custom:acme  oidc  enabled  Acme SSO\ncustom:beta  oauth2  disabled  Beta\n")

        let shownAcme = try await install.providers(["show", "custom:acme"])
        #expect(!shownAcme.stdout.contains(Self.oidcSecret) && !shownAcme.stdout.contains("client_secret"))
        let oidc = try await install.shown("custom:acme")
        #expect(oidc["provider_type"] as? String == "oidc" && oidc["identifier"] as? String == "custom:acme")
        #expect(oidc["name"] as? String == "Acme SSO" && oidc["client_id"] as? String == "acme-web")
        #expect(oidc["issuer"] as? String == "https://id.acme.test")
        #expect(oidc["scopes"] as? [String] == ["openid", "email"])
        #expect(oidc["acceptable_client_ids"] as? [String] == ["acme-ios"])
        #expect(oidc["attribute_mapping"] as? [String: String] == ["email": "mail"])
        #expect(oidc["pkce_enabled"] as? Bool == true && oidc["enabled"] as? Bool == true)
        #expect((oidc["created_at"] as? String)?.hasSuffix("Z") == true && oidc["id"] is String)

        let oauth = try await install.shown("custom:beta")
        #expect(oauth["provider_type"] as? String == "oauth2" && oauth["enabled"] as? Bool == false)
        #expect(oauth["pkce_enabled"] as? Bool == false)
        #expect(oauth["token_url"] as? String == "https://beta.test/token")
        #expect(oauth["authorization_params"] as? [String: String] == ["prompt": "consent"])
        #expect(oauth["issuer"] == nil)

        // Sealed in the store, never in the clear.
        let stored = try install.storedBytes()
        #expect(stored.range(of: Data(Self.oidcSecret.utf8)) == nil)
        #expect(stored.range(of: Data(Self.oauthSecret.utf8)) == nil)
    }

    @Test("update changes only the options given; remove removes; a missing provider fails in one line")
    func updateRemove() async throws {
        let install = try Install()
        #expect(try await install.addAcme().status == 0)
        let before = try await install.shown("custom:acme")

        let updated = try await install.providers([
            "update", "custom:acme", "--name", "Acme", "--disabled", "--scope", "profile", "--jwks-uri",
            "https://id.acme.test/jwks", "--skip-nonce-check",
        ])
        #expect(updated.status == 0, "\(updated.stderr)")
        #expect(updated.stdout == "updated custom:acme  oidc  disabled  Acme\n")
        let after = try await install.shown("custom:acme")
        #expect(after["name"] as? String == "Acme" && after["enabled"] as? Bool == false)
        #expect(after["scopes"] as? [String] == ["profile"] && after["skip_nonce_check"] as? Bool == true)
        #expect(after["jwks_uri"] as? String == "https://id.acme.test/jwks")
        for unchanged in ["client_id", "issuer", "id", "created_at"] {
            #expect(after[unchanged] as? String == before[unchanged] as? String, "\(unchanged)")
        }
        #expect(after["acceptable_client_ids"] as? [String] == ["acme-ios"])

        // Back on, its keys from discovery again (an empty URL removes it), and a new secret from standard input.
        let again = try await install.providers(
            ["update", "custom:acme", "--enabled", "--jwks-uri", "", "--client-secret-stdin"], stdin: "rotated")
        #expect(again.stdout == "updated custom:acme  oidc  enabled  Acme\n")
        #expect(try await install.shown("custom:acme")["jwks_uri"] == nil)

        Self.oneLine(try await install.providers(["show", "custom:nope"]), status: 1, "no provider custom:nope")
        Self.oneLine(
            try await install.providers(["update", "custom:nope", "--name", "x"]), status: 1, "no provider custom:nope")
        let removed = try await install.providers(["remove", "custom:acme"])
        #expect(removed.status == 0 && removed.stdout == "removed custom:acme\n")
        Self.oneLine(try await install.providers(["remove", "custom:acme"]), status: 1, "no provider custom:acme")
        #expect(try await install.providers(["list"]).stdout == "no custom provider\n")
    }

    @Test("the admin API's refusals, in its words; an unreadable secret is named; no secret on the command line")
    func refusals() async throws {
        let install = try Install()
        #expect(try await install.addAcme().status == 0)
        let add = [
            "add", "--type", "oidc", "--name", "Other", "--client-id", "other", "--client-secret-file",
            install.secretFile, "--issuer", "https://other.test",
        ]
        Self.oneLine(
            try await install.providers(add + ["--identifier", "acme"]), status: 1,
            "validation_failed: identifier must start with 'custom:' prefix, e.g. 'custom:acme'")
        Self.oneLine(
            try await install.providers(add + ["--identifier", "custom:Upper Case"]), status: 1,
            "identifier must be 'custom:' and 1 to 64 of a-z, 0-9, '-' and '_'")
        Self.oneLine(
            try await install.providers(add + ["--identifier", "custom:acme"]), status: 1,
            "conflict: A custom OAuth provider with this identifier already exists")
        Self.oneLine(
            try await install.providers(add + ["--identifier", "custom:ftp", "--issuer", "ftp://other.test"]),
            status: 1,
            "issuer must be an http:// or https:// URL")
        Self.oneLine(
            try await install.providers(
                add + ["--identifier", "custom:state", "--authorization-params", #"{"state":"x"}"#]),
            status: 1, "authorization_params cannot set 'state'")
        Self.oneLine(
            try await install.providers([
                "add", "--type", "oauth2", "--identifier", "custom:half", "--name", "Half", "--client-id", "half",
                "--client-secret-file", install.secretFile, "--authorization-url", "https://half.test/a",
                "--userinfo-url", "https://half.test/me",
            ]), status: 1, "token_url is required for OAuth2 providers")
        Self.oneLine(
            try await install.providers(["add", "--type", "oidc", "--identifier", "custom:nosecret", "--name", "N"]),
            status: 1, "client_id is required")
        Self.oneLine(
            try await install.providers(["update", "custom:acme", "--type", "oauth2"]), status: 1,
            "provider_type cannot change")
        Self.oneLine(try await install.providers(["show", "acme"]), status: 1, "identifier must start with 'custom:'")

        let missing = install.folder.appendingPathComponent("no-such-secret").path
        Self.oneLine(
            try await install.providers([
                "add", "--type", "oidc", "--identifier", "custom:other", "--name", "Other", "--client-id", "other",
                "--client-secret-file", missing, "--issuer", "https://other.test",
            ]), status: 1, "cannot read the client secret file \(missing): no such file")
        Self.oneLine(
            try await install.providers(["update", "custom:acme", "--client-secret-stdin"], stdin: "\n"), status: 1,
            "the client secret is empty (standard input)")

        // Usage errors exit 2: a secret is never an option's value, and one comes from one place.
        Self.oneLine(
            try await install.providers(["update", "custom:acme", "--client-secret", "visible"]), status: 2,
            "Unknown option '--client-secret'")
        Self.oneLine(
            try await install.providers([
                "update", "custom:acme", "--client-secret-file", install.secretFile, "--client-secret-stdin",
            ]),
            status: 2, "give --client-secret-file or --client-secret-stdin, not both")
        Self.oneLine(
            try await install.providers(["update", "custom:acme", "--attribute-mapping", "[1]"]), status: 2,
            "--attribute-mapping must be a JSON object")
        Self.oneLine(
            try await install.providers(["add", "--type", "saml", "--identifier", "custom:x"]), status: 2,
            "The value 'saml' is invalid for '--type <type>'")
        // Nothing refused was kept, and what was there is unchanged.
        #expect(try await install.providers(["list"]).stdout == "custom:acme  oidc  enabled  Acme SSO\n")
    }

    @Test("the admin API serves what the command added, its secret sealed for the server; the trail says by operator")
    func seenByTheAdminAPI() async throws {
        let install = try Install()
        #expect(try await install.addAcme().status == 0)
        #expect(try await install.addBeta().status == 0)
        try await AccountHarness.with({
            $0.databaseURL = nil
            $0.databaseSearchPath = nil
            $0.dataDirectory = install.dataDir
        }) { h in
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let listed = try await admin.get("/auth/v1/admin/custom-providers")
            #expect(listed.status == 200)
            let providers = listed.json["providers"] as? [[String: Any]] ?? []
            #expect(providers.compactMap { $0["identifier"] as? String } == ["custom:acme", "custom:beta"])
            #expect(!listed.body.contains(Self.oidcSecret) && !listed.body.contains(Self.oauthSecret))
            let acme = try await admin.get("/auth/v1/admin/custom-providers/custom:acme")
            #expect(acme.json["name"] as? String == "Acme SSO" && acme.json["client_id"] as? String == "acme-web")

            // The secrets open with the server's own key, bound to their provider, as its sign-in will read them.
            let services = h.server.services
            for (identifier, secret) in [("custom:acme", Self.oidcSecret), ("custom:beta", Self.oauthSecret)] {
                let record = try #require(
                    try await CustomProviderRepository(db: services.store.database).find(identifier))
                #expect(
                    try services.box.open(record.sealedSecret, context: CustomProviders.context(identifier)) == secret)
            }

            // A change through the API shows on the command line while the server runs.
            let renamed = try await admin.send(
                .put, "/auth/v1/admin/custom-providers/custom:acme", ["name": "Acme (API)"])
            #expect(renamed.status == 200)
            #expect(try await install.shown("custom:acme")["name"] as? String == "Acme (API)")

            let trail = try await admin.get("/auth/v1/admin/audit?query=action:custom_provider_created")
            #expect(trail.headers["x-total-count"] == "2")
            for entry in trail.jsonArray {
                let traits = (entry["payload"] as? [String: Any])?["traits"] as? [String: String] ?? [:]
                #expect(traits["by"] == "operator" && traits["service_key"] == nil, "\(traits)")
            }
        }
    }
}
