import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// `gatehouse users import`: the exports read without I/O, then written into a store and signed in to.
@Suite("Importing users from Supabase and Firebase")
struct ImportTests {
    /// The OpenBSD / crypt_blowfish test vector: "U*U".
    static let bcrypt = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"
    /// Made by argon2-cffi for "correct horse battery".
    static let argon2 =
        "$argon2id$v=19$m=19456,t=2,p=1$ZAdAb1Q7BFiqjmWiWY8BeQ$51+AhSj/kFkhR1FgfNid0HfbbAhloKIpMCjkkdQu+WI"
    /// github.com/firebase/scrypt's README example: its project's parameters, and one exported user's salt and hash
    /// of "user1password".
    static let firebaseParameters = FirebaseHashParameters(
        signerKey: "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
        saltSeparator: "Bw==", rounds: 8, memoryCost: 14)
    static var firebaseUser: [String: Any] {
        [
            "localId": "fbUser1", "email": "Fire@Example.com", "emailVerified": true,
            "passwordHash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
            "salt": "42xEC+ixf3L2lw==", "displayName": "Fire Base", "createdAt": "1609459200000",
            "customAttributes": "{\"role\":\"admin\"}",
            "providerUserInfo": [["providerId": "password"], ["providerId": "apple.com", "rawId": "apple-sub-1"]],
        ]
    }

    /// `auth.users` as `COPY … TO STDOUT WITH CSV HEADER` writes it.
    static func supabaseCSV(_ ada: String, _ grace: String) -> String {
        """
        id,email,encrypted_password,email_confirmed_at,created_at,updated_at,last_sign_in_at,raw_app_meta_data,raw_user_meta_data,deleted_at,is_anonymous
        \(ada),Ada@Example.com,\(bcrypt),2024-01-02 03:04:05.123456+00,2024-01-01 00:00:00+00,2024-01-02 03:04:05+00,,"{""provider"":""email"",""plan"":""pro""}","{""name"":""Ada, \\""the\\"" first""}",,f
        \(grace),grace@example.com,"\(argon2)",,2024-01-01 00:00:00+00,,,{},{},,f
        \(UUID().uuidString),gone@example.com,,,2024-01-01 00:00:00+00,,,{},{},2024-02-01 00:00:00+00,f

        """
    }

    @Test("CSV as PostgreSQL writes it: quoted commas, doubled quotes and line breaks; an empty unquoted field is NULL")
    func csv() {
        let records = CSV.records("a,b,c\n1,\"x, \"\"y\"\"\nz\",\n\"\",2,3\n")
        #expect(records.count == 3)
        #expect(records[1] == CSV.Record(line: 2, fields: ["1", "x, \"y\"\nz", nil]))
        #expect(records[2] == CSV.Record(line: 4, fields: ["", "2", "3"]))
    }

    @Test("timestamps as PostgreSQL and ISO 8601 write them")
    func timestamps() throws {
        let expected = try #require(ImportFormats.timestamp("2024-01-02T03:04:05.123Z"))
        #expect(ImportFormats.timestamp("2024-01-02 03:04:05.123456+00") == expected)
        #expect(ImportFormats.timestamp("2024-01-02 05:04:05.123+02") == expected)
        #expect(ImportFormats.timestamp("2024-01-02T03:04:05Z") == expected.addingTimeInterval(-0.123))
        #expect(ImportFormats.timestamp("yesterday") == nil)
    }

    @Test("a Supabase export keeps ids, times, metadata and hashes; deleted users are left out with a note")
    func supabaseRows() throws {
        let ada = UUID().uuidString
        let grace = UUID().uuidString.lowercased()
        let read = ImportFormats.supabase(users: Data(Self.supabaseCSV(ada, grace).utf8), identities: nil)
        #expect(read.problems.isEmpty, "\(read.problems)")
        #expect(read.notes.map(\.line) == [4])
        let first = try #require(read.users.first)
        #expect(first.id == ada.lowercased() && first.email == "ada@example.com" && first.passwordHash == Self.bcrypt)
        #expect(first.userMetadata == ["name": .string("Ada, \"the\" first")])
        #expect(first.appMetadata == ["plan": .string("pro")])
        #expect(first.emailConfirmedAt == ImportFormats.timestamp("2024-01-02T03:04:05.123Z"))
        #expect(read.users.last?.emailConfirmedAt == nil && read.users.last?.id == grace)
        // JSON rows read the same.
        let json = try JSONSerialization.data(withJSONObject: [
            [
                "id": ada, "email": "ada@example.com", "encrypted_password": Self.bcrypt,
                "created_at": "2024-01-01T00:00:00Z",
                "raw_user_meta_data": ["name": "Ada"],
            ]
        ])
        let fromJSON = ImportFormats.supabase(users: json, identities: nil)
        #expect(fromJSON.users.first?.userMetadata == ["name": .string("Ada")])
    }

    @Test("bad rows are refused by line with a reason: no UUID, no email, an unknown hash, broken metadata, ragged CSV")
    func supabaseProblems() {
        let csv = """
            id,email,encrypted_password,created_at,raw_user_meta_data
            not-a-uuid,a@example.com,,2024-01-01 00:00:00+00,{}
            \(UUID().uuidString),,,2024-01-01 00:00:00+00,{}
            \(UUID().uuidString),b@example.com,md5:abc,2024-01-01 00:00:00+00,{}
            \(UUID().uuidString),c@example.com,,2024-01-01 00:00:00+00,{nope
            \(UUID().uuidString),d@example.com,,never,{}
            \(UUID().uuidString),e@example.com
            """
        let read = ImportFormats.supabase(users: Data(csv.utf8), identities: nil)
        #expect(read.users.isEmpty)
        #expect(read.problems.map(\.line) == [2, 3, 4, 5, 6, 7])
        #expect(read.problems[0].reason == "id is not a UUID")
        #expect(read.problems[2].reason.contains("not a bcrypt, argon2 or Firebase scrypt hash"))
        #expect(ImportFormats.supabase(users: Data("[1, {".utf8), identities: nil).problems.first?.line == 1)
    }

    @Test("a Firebase export: Firebase's published example hash, a stable UUID, claims and Apple kept")
    func firebaseRows() throws {
        let data = try JSONSerialization.data(withJSONObject: ["users": [Self.firebaseUser]])
        let read = ImportFormats.firebase(data, parameters: Self.firebaseParameters)
        #expect(read.problems.isEmpty)
        let user = try #require(read.users.first)
        #expect(user.id == ImportFormats.firebase(data, parameters: Self.firebaseParameters).users.first?.id)
        #expect(UUID(uuidString: user.id) != nil && user.email == "fire@example.com")
        #expect(user.appMetadata == ["role": .string("admin"), "firebase_uid": .string("fbUser1")])
        #expect(user.userMetadata == ["full_name": .string("Fire Base")])
        #expect(user.identities == [ImportedIdentity(provider: "apple", subject: "apple-sub-1")])
        #expect(user.passwordHash.flatMap(FirebaseScryptHash.init) != nil)
        // Without the project's parameters a user with a hash is refused, not imported without its password.
        let missing = ImportFormats.firebase(data, parameters: nil)
        #expect(missing.users.isEmpty && missing.problems.first?.reason.contains("--hash-key") == true)
        #expect(ImportFormats.firebase(Data("{}".utf8), parameters: nil).problems.count == 1)
        var odd = Self.firebaseUser
        odd["createdAt"] = "1e30"
        let oddTime = ImportFormats.firebase(
            try JSONSerialization.data(withJSONObject: ["users": [odd]]), parameters: Self.firebaseParameters)
        #expect(oddTime.users.isEmpty && oddTime.problems.first?.reason.contains("milliseconds") == true)
    }

    @Test(
        "an import signs its users in with their old passwords (then rehashed to yescrypt), is idempotent, and writes nothing when a row is refused"
    )
    func importAndSignIn() async throws {
        try await AccountHarness.with { h in
            let store = h.server.services.store
            let importer = UserImporter(store: store, clock: h.clock)
            let ada = UUID().uuidString.lowercased()
            let grace = UUID().uuidString.lowercased()
            let supabase = ImportFormats.supabase(users: Data(Self.supabaseCSV(ada, grace).utf8), identities: nil)
            let dry = try await importer.run(supabase, source: "supabase", dryRun: true)
            #expect(dry.imported == 2 && !dry.written)
            #expect(try await h.client.password("ada@example.com", "U*U").status == 400)
            let report = try await importer.run(supabase, source: "supabase", dryRun: false)
            #expect(report.imported == 2 && report.written)
            let signedIn = try await h.client.password("ada@example.com", "U*U")
            #expect(signedIn.status == 200)
            let user = try #require(signedIn.json["user"] as? [String: Any])
            #expect(user["id"] as? String == ada)
            #expect((user["app_metadata"] as? [String: Any])?["plan"] as? String == "pro")
            let rehashed = try await AccountRepository(db: store.database).find(id: ada)?.passwordHash
            #expect(rehashed?.hasPrefix("$y$") == true)
            // Grace's address was never confirmed in Supabase: the right password says so.
            let unconfirmed = try await h.client.password("grace@example.com", "correct horse battery")
            #expect(unconfirmed.json["error_code"] as? String == "email_not_confirmed")
            let again = try await importer.run(supabase, source: "supabase", dryRun: false)
            #expect(again.imported == 0 && again.unchanged == 2)

            // Firebase's example user, and a file with a clash: refused whole.
            let data = try JSONSerialization.data(withJSONObject: ["users": [Self.firebaseUser]])
            let firebase = ImportFormats.firebase(data, parameters: Self.firebaseParameters)
            #expect(try await importer.run(firebase, source: "firebase", dryRun: false).imported == 1)
            #expect(try await h.client.password("fire@example.com", "user1password").status == 200)
            var clash = ImportFormats.firebase(data, parameters: Self.firebaseParameters)
            clash.users[0].id = UUID().uuidString.lowercased()
            clash.users[0].email = "new@example.com"
            var fresh = clash.users[0]
            fresh.email = "fresh@example.com"
            fresh.id = UUID().uuidString.lowercased()
            fresh.identities = []
            clash.users.append(fresh)
            let refused = try await importer.run(clash, source: "firebase", dryRun: false)
            #expect(!refused.written && refused.problems.count == 1)
            #expect(refused.problems.first?.reason == "its Apple identity is linked to another account here")
            #expect(try await AccountRepository(db: store.database).find(email: "fresh@example.com") == nil)
        }
    }
}

@Suite("Import: identities from Supabase")
struct ImportIdentityTests {
    @Test("Supabase's Apple and Google identities are kept and sign in to the imported account; others are noted")
    func identities() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({ fake.configure(&$0) }) { h in
            let id = UUID().uuidString.lowercased()
            let email = AccountHarness.newEmail("imported")
            let users = """
                [{"id": "\(id)", "email": "\(email)", "encrypted_password": "",
                  "email_confirmed_at": "2024-01-02 03:04:05+00", "created_at": "2024-01-01 00:00:00+00",
                  "updated_at": "2024-01-02 03:04:05+00"}]
                """
            let identities = """
                [{"user_id": "\(id)", "provider": "email", "provider_id": "\(id)"},
                 {"user_id": "\(id)", "provider": "google", "provider_id": "g-imported", "identity_data": {}},
                 {"user_id": "\(id)", "provider": "apple", "identity_data": {"sub": "a-imported"}},
                 {"user_id": "\(id)", "provider": "github", "provider_id": "42"}]
                """
            let read = ImportFormats.supabase(users: Data(users.utf8), identities: Data(identities.utf8))
            #expect(read.problems.isEmpty, "\(read.problems)")
            #expect(
                read.users.first?.identities == [
                    ImportedIdentity(provider: "google", subject: "g-imported"),
                    ImportedIdentity(provider: "apple", subject: "a-imported"),
                ])
            #expect(
                read.notes.map(\.reason) == [
                    "identities: github sign-in is not kept (Gatehouse signs in by email, Apple and Google)"
                ])
            let report = try await UserImporter(store: h.server.services.store, clock: h.clock)
                .run(read, source: "supabase", dryRun: false)
            #expect(report.imported == 1)
            // The Google account signs in to the imported user, whatever address its token carries.
            let reply = try await h.client.post(
                "/auth/v1/token?grant_type=id_token",
                ["provider": "google", "id_token": try await fake.google(sub: "g-imported", email: nil)])
            #expect(reply.status == 200)
            #expect((reply.json["user"] as? [String: Any])?["id"] as? String == id)
        }
    }
}
