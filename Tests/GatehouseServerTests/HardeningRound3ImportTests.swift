import Dispatch
import Foundation
import GatehouseAPI
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import GatehouseServer

/// Attack review, issue 35: findings 7 (imported hashes amplify cost and leak existence) and 9 (size limits counted
/// in characters).
@Suite("Hardening round 3: imported hashes and sizes")
struct HardeningRound3ImportTests {
    /// The OpenBSD / crypt_blowfish test vector ("U*U") at another cost: only its parameters are read here.
    static func bcrypt(cost: Int) -> String { "$2b$\(cost)$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW" }

    static func argon2(m: Int, t: Int, p: Int = 1) -> String {
        "$argon2id$v=19$m=\(m),t=\(t),p=\(p)$ZAdAb1Q7BFiqjmWiWY8BeQ$51+AhSj/kFkhR1FgfNid0HfbbAhloKIpMCjkkdQu+WI"
    }

    static func scrypt(n: Int, r: Int, p: Int = 1) -> String {
        "$fbscrypt$v=1,n=\(n),r=\(r),p=\(p),ss=Bw==,sk=AAAA$42xEC+ixf3L2lw==$AAAA"
    }

    /// The libxcrypt settings for costs 8 and 9, with a checksum.
    static func yescrypt(cost: Int) -> String {
        "$y$" + YescryptParameters(cost: cost).field
            + "$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3"
    }

    // MARK: Finding 7

    @Test("Finding 7: an imported hash at each family's bound is accepted, one step over it is refused with a reason")
    func bounds() {
        let accepted = [
            Self.bcrypt(cost: 12), Self.bcrypt(cost: 10),
            Self.argon2(m: 65_536, t: 3), Self.argon2(m: 65_536, t: 3, p: 4), Self.argon2(m: 196_608, t: 1),
            Self.scrypt(n: 15, r: 8), Self.scrypt(n: 14, r: 16), Self.scrypt(n: 14, r: 8, p: 2),
            Self.yescrypt(cost: 8), Self.yescrypt(cost: 5),
        ]
        for hash in accepted {
            #expect(PasswordHasher.importRefusal(of: hash) == nil, "\(hash)")
            #expect(PasswordHasher.isImportable(hash))
        }
        let refused: [(String, HashImportRefusal)] = [
            (Self.bcrypt(cost: 13), .bcryptCost(13)),
            (Self.argon2(m: 65_536, t: 4), .argon2Work(memory: 65_536, passes: 4)),
            (Self.argon2(m: 65_544, t: 3), .argon2Work(memory: 65_544, passes: 3)),
            (Self.scrypt(n: 16, r: 8), .scryptWork(logN: 16, rounds: 8, parallelism: 1)),
            (Self.scrypt(n: 15, r: 9), .scryptWork(logN: 15, rounds: 9, parallelism: 1)),
            (Self.scrypt(n: 15, r: 8, p: 2), .scryptWork(logN: 15, rounds: 8, parallelism: 2)),
            (Self.yescrypt(cost: 9), .yescryptCost(9)),
            ("md5:5f4dcc3b5aa765d61d8327deb882cf99", .unrecognised),
        ]
        for (hash, refusal) in refused {
            #expect(PasswordHasher.importRefusal(of: hash) == refusal)
            #expect(!PasswordHasher.isImportable(hash))
        }
        #expect(
            HashImportRefusal.bcryptCost(13).description
                == "a bcrypt hash of cost 13: imported hashes may cost at most 12")
        // Where libargon2 cannot be loaded, argon2 is refused as such, never stored to fail every sign-in.
        #expect(
            PasswordHasher.importRefusal(of: Self.argon2(m: 19_456, t: 2), argon2Available: false)
                == .argon2Unavailable)
        #expect(HashImportRefusal.argon2Unavailable.description.contains("libargon2"))
    }

    @Test("Finding 7: a row stored beyond the bounds before they existed still verifies")
    func olderRowsVerify() async throws {
        let salt = Data("older row salt".utf8)
        let separator = Data([7])
        let key = Data(repeating: 9, count: 32)
        let derived = try #require(
            FirebaseScryptHash.derive(
                "old password", salt: salt + separator, logN: 15, rounds: 9, parallelism: 1, signerKey: key))
        let stored = FirebaseScryptHash(
            logN: 15, rounds: 9, parallelism: 1, saltSeparator: separator, signerKey: key, salt: salt, hash: derived
        ).encoded
        #expect(PasswordHasher.importRefusal(of: stored) == .scryptWork(logN: 15, rounds: 9, parallelism: 1))
        #expect(await PasswordHasher().verify("old password", against: stored) == .valid(needsRehash: true))
    }

    @Test("Finding 7: imported hashes are checked on their own pool, so a yescrypt sign-in never waits behind them")
    func separatePool() async throws {
        let hasher = PasswordHasher()
        let native = try await hasher.hash("a native password")
        // Every thread of the imported-hash pool held until released, or for ten seconds at most.
        let release = DispatchSemaphore(value: 0)
        let threads = PasswordHasher.importedHashThreads
        let holding = NIOLockedValueBox(0)
        let holders = (0..<threads).map { _ in
            Task {
                try await PasswordHasher.importedHashPool.runIfActive {
                    holding.withLockedValue { $0 += 1 }
                    release.wait()
                }
            }
        }
        let released = NIOLockedValueBox(false)
        let watchdog = Task {
            guard (try? await Task.sleep(for: .seconds(10))) != nil else { return }
            released.withLockedValue { $0 = true }
            for _ in 0..<threads { release.signal() }
        }
        // Every thread of the pool is held before the checks start (polled, within the watchdog's ten seconds).
        let deadline = ContinuousClock.now + .seconds(10)
        while holding.withLockedValue({ $0 }) < threads, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(holding.withLockedValue { $0 } == threads)
        let importedDone = NIOLockedValueBox(false)
        let imported = Task {
            let verdict = await hasher.verify("U*U", against: ImportTests.bcrypt)
            importedDone.withLockedValue { $0 = true }
            return verdict
        }
        // The imported check is queued behind the held threads; the yescrypt one answers meanwhile: while the pool is
        // still held (the watchdog never had to let it go) and the imported check has not run.
        #expect(await hasher.verify("a native password", against: native) == .valid(needsRehash: false))
        #expect(!released.withLockedValue { $0 } && !importedDone.withLockedValue { $0 })
        watchdog.cancel()
        for _ in 0..<threads { release.signal() }
        for holder in holders { try await holder.value }
        #expect(await imported.value == .valid(needsRehash: true))
    }

    @Test(
        "Finding 7: once imported hashes are checked, an unknown address and a native account fail as slowly as the slowest importable hash"
    )
    func failuresTakeOneTime() async throws {
        let hasher = PasswordHasher()
        let native = try await hasher.hash("a native password")
        // A store with no imported hashes: no wait, as before.
        #expect(await hasher.failures.measuredWait == nil)
        #expect(await hasher.verify("wrong", against: ImportTests.bcrypt) == .invalid)
        let wait = try #require(await hasher.failures.measuredWait)
        // At least one check at the bcrypt bound, which takes tens of milliseconds on any machine.
        #expect(wait > .milliseconds(20) && wait <= FailureTiming.maximumWait)
        let clock = ContinuousClock()
        let unknown = await clock.measure { await hasher.dummyVerify("wrong") }
        let wrongNative = await clock.measure { #expect(await hasher.verify("wrong", against: native) == .invalid) }
        #expect(unknown >= wait && wrongNative >= wait)
        #expect(await hasher.verify("a native password", against: native) == .valid(needsRehash: false))
    }

    @Test("Finding 7: an import refuses an over-bound hash by line with a clear reason, and writes nothing")
    func importRefusesOverBound() async throws {
        let csv = """
            id,email,encrypted_password,created_at
            \(UUID().uuidString),slow@example.com,\(Self.bcrypt(cost: 13)),2024-01-01 00:00:00+00
            \(UUID().uuidString),heavy@example.com,"\(Self.argon2(m: 131_072, t: 3))",2024-01-01 00:00:00+00
            \(UUID().uuidString),fine@example.com,\(Self.bcrypt(cost: 12)),2024-01-01 00:00:00+00
            """
        let read = ImportFormats.supabase(users: Data(csv.utf8), identities: nil)
        #expect(read.problems.map(\.line) == [2, 3])
        #expect(
            read.problems.first?.reason
                == "encrypted_password is a bcrypt hash of cost 13: imported hashes may cost at most 12")
        #expect(read.problems.last?.reason.contains("m=131072 KiB and t=3 passes") == true)
        #expect(read.users.map(\.email) == ["fine@example.com"])

        // Firebase's project parameters beyond the bound refuse each user with a hash.
        let parameters = try #require(
            FirebaseHashParameters(
                signerKey: "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
                saltSeparator: "Bw==", rounds: 8, memoryCost: 16))
        let firebase = ImportFormats.firebase(
            try JSONSerialization.data(withJSONObject: ["users": [ImportTests.firebaseUser]]), parameters: parameters)
        #expect(firebase.users.isEmpty)
        #expect(firebase.problems.first?.reason.hasPrefix("passwordHash is a scrypt hash of N = 2^16, r = 8") == true)

        // A user made another way is held to the same bound when written.
        try await AccountHarness.with { h in
            let importer = UserImporter(store: h.server.services.store, clock: h.clock)
            var read = ImportRead()
            read.users = [
                ImportedUser(
                    line: 7, id: UUID().uuidString.lowercased(), email: "made@example.com",
                    passwordHash: Self.scrypt(n: 17, r: 8), createdAt: h.clock.now, updatedAt: h.clock.now)
            ]
            let report = try await importer.run(read, source: "test", dryRun: false)
            #expect(!report.written && report.problems.map(\.line) == [7])
            #expect(report.problems.first?.reason.hasPrefix("the password hash is a scrypt hash of N = 2^17") == true)
        }
    }

    @Test("Finding 7: the admin API refuses an over-bound password_hash with validation_failed and the reason")
    func adminRefusesOverBound() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let slow = try await admin.send(
                .post, "/auth/v1/admin/users",
                ["email": AccountHarness.newEmail(), "password_hash": Self.bcrypt(cost: 13)])
            #expect(slow.status == 400 && slow.json["error_code"] as? String == "validation_failed")
            #expect(
                slow.json["msg"] as? String
                    == "password_hash is a bcrypt hash of cost 13: imported hashes may cost at most 12")
            let heavy = try await admin.send(
                .post, "/auth/v1/admin/users",
                ["email": AccountHarness.newEmail(), "password_hash": Self.argon2(m: 65_536, t: 4)])
            #expect(heavy.status == 400 && (heavy.json["msg"] as? String)?.contains("t=4 passes") == true)
            // At the bound it is stored; changed to an over-bound hash later, it is refused the same way.
            let made = try await admin.send(
                .post, "/auth/v1/admin/users",
                ["email": AccountHarness.newEmail(), "password_hash": Self.bcrypt(cost: 12)])
            #expect(made.status == 200)
            let id = try #require(made.json["id"] as? String)
            let changed = try await admin.send(
                .put, "/auth/v1/admin/users/\(id)", ["password_hash": Self.scrypt(n: 16, r: 8)])
            #expect(changed.status == 400 && (changed.json["msg"] as? String)?.contains("N = 2^16") == true)
        }
    }

    // MARK: Finding 9

    /// 128 characters, each a letter under 300 combining marks: 76 KB where 128 characters were meant.
    static let heavyName = String(
        repeating: "e" + String(repeating: "\u{301}", count: 300), count: 128)

    @Test("Finding 9: factor and passkey names are bounded in UTF-8 bytes as well as characters")
    func nameBytes() throws {
        #expect(Self.heavyName.count == 128 && Self.heavyName.utf8.count > 70_000)
        #expect(throws: APIError.self) { try FactorService.friendlyName(Self.heavyName, default: "") }
        #expect(throws: APIError.self) { try PasskeyService.friendlyName(String(Self.heavyName.prefix(120))) }
        // Names of plain characters in any script still fit: 128 (or 120) four-byte characters.
        let emoji = String(repeating: "😀", count: 128)
        #expect(try FactorService.friendlyName(emoji, default: "") == emoji)
        #expect(try PasskeyService.friendlyName(String(emoji.prefix(120))) == String(emoji.prefix(120)))
        #expect(throws: APIError.self) { try FactorService.friendlyName(emoji + "x", default: "") }
        #expect(!FriendlyName.isAcceptable("e\u{301}" + String(repeating: "x", count: 510), maximumCharacters: 600))
        #expect(FriendlyName.isAcceptable("e\u{301}" + String(repeating: "x", count: 509), maximumCharacters: 600))
    }

    @Test("Finding 9: enrolling a factor named with 128 combining-heavy characters is refused")
    func heavyFactorName() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let refused = try await h.enroll(account.access, name: Self.heavyName)
            #expect(refused.status == 400 && refused.json["error_code"] as? String == "validation_failed")
            #expect((refused.json["msg"] as? String)?.contains("512 bytes") == true)
            #expect(try await h.enroll(account.access, name: "Phone").status == 200)
        }
    }

    @Test("Finding 9: an import refuses metadata over the API's 16 KiB by line; a normal row still imports")
    func importMetadataSize() async throws {
        let big = String(repeating: "x", count: UserMetadata.maximumBytes)
        let heavy = UUID().uuidString.lowercased()
        let normal = UUID().uuidString.lowercased()
        let rows: [[String: Any]] = [
            [
                "id": heavy, "email": "heavy@example.com", "created_at": "2024-01-01T00:00:00Z",
                "raw_user_meta_data": ["bio": big],
            ],
            [
                "id": normal, "email": "normal@example.com", "created_at": "2024-01-01T00:00:00Z",
                "raw_user_meta_data": ["name": "Ada"], "raw_app_meta_data": ["plan": "pro"],
            ],
        ]
        let read = ImportFormats.supabase(users: try JSONSerialization.data(withJSONObject: rows), identities: nil)
        #expect(read.problems.isEmpty && read.users.count == 2)
        #expect(UserImporter.refusal(of: read.users[1]) == nil)
        var appHeavy = read.users[1]
        appHeavy.appMetadata = ["claims": .string(big)]
        #expect(UserImporter.refusal(of: appHeavy)?.hasPrefix("app_metadata takes") == true)
        try await AccountHarness.with { h in
            let store = h.server.services.store
            let importer = UserImporter(store: store, clock: h.clock)
            let refused = try await importer.run(read, source: "supabase", dryRun: false)
            #expect(!refused.written && refused.problems.map(\.line) == [1])
            #expect(
                refused.problems.first?.reason
                    == "user_metadata takes 16394 bytes encoded, more than the 16384 a user may carry")
            #expect(try await AccountRepository(db: store.database).find(id: normal) == nil)
            var trimmed = read
            trimmed.users.removeFirst()
            let imported = try await importer.run(trimmed, source: "supabase", dryRun: false)
            #expect(imported.written && imported.imported == 1)
            let account = try #require(try await AccountRepository(db: store.database).find(id: normal))
            #expect(account.userMetadata == ["name": .string("Ada")])
        }
    }
}
