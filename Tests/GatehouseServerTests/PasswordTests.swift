import Foundation
import Testing

@testable import GatehouseServer

@Suite("Password hashing")
struct PasswordHasherTests {
    let hasher = PasswordHasher()

    /// Settings printed by libxcrypt 4.4.33's crypt_gensalt_rn("$y$", cost, NULL, 0, …) for costs 1–11.
    static let libxcryptSettings: [(cost: Int, setting: String)] = [
        (1, "$y$j75$Aww.cBCzTzgfDw5b5d1HC/"),
        (2, "$y$j85$KOQ9YT.ZmVhiMHN4M.74B1"),
        (3, "$y$j7T$HLO50yJHDcg3BZ1Tx95/D0"),
        (4, "$y$j8T$ZaQzf7dsu7uUJpfbec72O1"),
        (5, "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30"),
        (6, "$y$jAT$wG87RvDWg8wdHcoZD5I6n1"),
        (7, "$y$jBT$m/KttXd6sLVl0KQiOVTCq0"),
        (8, "$y$jCT$fVhareBLCW59po9GuvN3l."),
        (9, "$y$jDT$b9gjuvJZT3kNaImYHXa0a0"),
        (10, "$y$jET$bu26Wqnnf5r7L/gdyX0yO/"),
        (11, "$y$jFT$NTAZTwH8utq06pYp6ewj7."),
    ]

    @Test("a hash is yescrypt at the default cost 5 and verifies without needing a rehash")
    func hashThenVerify() async throws {
        let hash = try await hasher.hash("correct horse battery staple")
        #expect(hash.hasPrefix("$y$j9T$"))
        #expect(PasswordHasher.yescryptCost(of: hash) == 5)
        #expect(await hasher.verify("correct horse battery staple", against: hash) == .valid(needsRehash: false))
    }

    @Test("a wrong password is invalid")
    func wrongPassword() async throws {
        let hash = try await hasher.hash("correct horse battery staple")
        #expect(await hasher.verify("correct horse battery stapler", against: hash) == .invalid)
        #expect(await hasher.verify("Correct horse battery staple", against: hash) == .invalid)
        #expect(await hasher.verify("", against: hash) == .invalid)
    }

    @Test("two hashes of one password differ, because each has its own salt")
    func salted() async throws {
        let first = try await hasher.hash("same password")
        let second = try await hasher.hash("same password")
        #expect(first != second)
        #expect(await hasher.verify("same password", against: first) == .valid(needsRehash: false))
        #expect(await hasher.verify("same password", against: second) == .valid(needsRehash: false))
    }

    @Test("leading and trailing spaces are part of the password")
    func spacesAreSignificant() async throws {
        let hash = try await hasher.hash("  secret pass ")
        #expect(await hasher.verify("  secret pass ", against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify("secret pass", against: hash) == .invalid)
        #expect(await hasher.verify("  secret pass", against: hash) == .invalid)
    }

    @Test(
        "long and non-ASCII passwords hash and verify",
        arguments: [
            String(repeating: "0123456789", count: 10),
            "pässwörd-ñ",
            "пароль 密码 كلمة",
            "🔐 family: 👩‍👩‍👧‍👦 flag: 🇳🇿",
            String(repeating: "🔐", count: 64),
        ])
    func unusualPasswords(password: String) async throws {
        let hash = try await hasher.hash(password)
        #expect(await hasher.verify(password, against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify(password + "x", against: hash) == .invalid)
        #expect(await hasher.verify(String(password.dropLast()), against: hash) == .invalid)
    }

    @Test("a hash made by libxcrypt outside Swift verifies")
    func libxcryptInterop() async {
        let hash = "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3"
        #expect(await hasher.verify("correct horse", against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify("correct horse ", against: hash) == .invalid)
    }

    @Test("the cost is read back from libxcrypt's parameter field for every cost")
    func costParsing() {
        for (cost, setting) in Self.libxcryptSettings {
            let hash = setting + "$" + String(repeating: "A", count: 43)
            #expect(PasswordHasher.yescryptCost(of: hash) == cost, "cost \(cost)")
        }
        #expect(PasswordHasher.yescryptCost(of: "$2b$10$" + String(repeating: "a", count: 53)) == nil)
        #expect(
            PasswordHasher.yescryptCost(of: "$y$jZT$ZIgtwzSwGYvh9pWTbkBk30$" + String(repeating: "A", count: 43)) == nil
        )
    }

    @Test("hashes at costs 1 to 4 carry their cost")
    func hashAtOtherCosts() async throws {
        for cost in 1...4 {
            let hash = try await PasswordHasher(yescryptCost: cost).hash("pw")
            #expect(PasswordHasher.yescryptCost(of: hash) == cost)
            #expect(hash.hasPrefix(Self.libxcryptSettings[cost - 1].setting.prefix(7)))
        }
    }

    @Test("a yescrypt hash at another cost verifies and asks for a rehash")
    func otherCostNeedsRehash() async throws {
        let cheap = PasswordHasher(yescryptCost: 3)
        let hash = try await cheap.hash("correct horse battery staple")
        #expect(hash.hasPrefix("$y$j7T$"))
        #expect(await cheap.verify("correct horse battery staple", against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify("correct horse battery staple", against: hash) == .valid(needsRehash: true))
        #expect(await hasher.verify("wrong", against: hash) == .invalid)

        let current = try await hasher.hash("correct horse battery staple")
        #expect(await cheap.verify("correct horse battery staple", against: current) == .valid(needsRehash: true))
    }

    @Test(
        "bcrypt hashes ($2a$, $2b$, $2y$) verify and ask for a rehash",
        arguments: [
            // The OpenBSD / crypt_blowfish test vector for "U*U", in each prefix.
            ("U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
            ("U*U", "$2b$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
            ("U*U", "$2y$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
            // Made with libxcrypt's crypt().
            ("correct horse battery staple", "$2b$04$abcdefghijklmnopqrstuu7EJV7kdjBBQxyb0HjTh9KS7.Lah/6CG"),
            ("pässwörd-ñ", "$2y$04$abcdefghijklmnopqrstuu1ZhSqKZ998iDuHC.ScTb3C3nXtXc2Om"),
        ])
    func bcrypt(password: String, hash: String) async {
        #expect(await hasher.verify(password, against: hash) == .valid(needsRehash: true))
        #expect(await hasher.verify(password + "!", against: hash) == .invalid)
        #expect(await hasher.verify(password.uppercased() + "x", against: hash) == .invalid)
    }

    @Test(
        "imported argon2id and argon2i hashes (made by argon2-cffi) verify and ask for a rehash",
        arguments: [
            "$argon2id$v=19$m=19456,t=2,p=1$ZAdAb1Q7BFiqjmWiWY8BeQ$51+AhSj/kFkhR1FgfNid0HfbbAhloKIpMCjkkdQu+WI",
            "$argon2i$v=19$m=4096,t=3,p=2$78NMyGUBXPKImiyd1lAL+Q$7c1xcbt3PhPXuF53jqu/+Qk3zk3k1F76cLAhr3jnRu4",
        ])
    func argon2(hash: String) async {
        #expect(PasswordHasher.isImportable(hash))
        #expect(await hasher.verify("correct horse battery", against: hash) == .valid(needsRehash: true))
        #expect(await hasher.verify("correct horse battery!", against: hash) == .invalid)
    }

    @Test("Firebase's published scrypt example verifies, stored as GoTrue's $fbscrypt$ string; a wrong key does not")
    func firebaseScrypt() async throws {
        // github.com/firebase/scrypt's README: the project's parameters, the exported salt, and the expected hash.
        let signerKey = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
        let expected = "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="
        let stored = "$fbscrypt$v=1,n=14,r=8,p=1,ss=Bw==,sk=\(signerKey)$42xEC+ixf3L2lw==$\(expected)"
        #expect(PasswordHasher.isImportable(stored))
        #expect(await hasher.verify("user1password", against: stored) == .valid(needsRehash: true))
        #expect(await hasher.verify("user2password", against: stored) == .invalid)
        let parsed = try #require(FirebaseScryptHash(stored))
        #expect(parsed.encoded == stored)
        let otherKey = stored.replacingOccurrences(of: "sk=jxspr8", with: "sk=jxspr9")
        #expect(await hasher.verify("user1password", against: otherKey) == .invalid)
    }

    @Test(
        "imported formats outside the limits are not importable",
        arguments: [
            "$argon2d$v=19$m=4096,t=3,p=2$78NMyGUBXPKImiyd1lAL+Q$7c1xcbt3PhPXuF53jqu/+Qk3zk3k1F76cLAhr3jnRu4",
            "$argon2id$v=16$m=4096,t=3,p=2$78NMyGUBXPKImiyd1lAL+Q$7c1xcbt3PhPXuF53jqu/+Qk3zk3k1F76cLAhr3jnRu4",
            "$argon2id$v=19$m=2097152,t=3,p=2$78NMyGUBXPKImiyd1lAL+Q$7c1xcbt3PhPXuF53jqu/+Qk3zk3k1F76cLAhr3jnRu4",
            "$argon2id$v=19$m=4096,t=3,p=2,keyid=x$78NMyGUBXPKImiyd1lAL+Q$7c1xcbt3PhPXuF53jqu/+Qk3zk3k1F76cLAhr3jnRu4",
            "$fbscrypt$v=2,n=14,r=8,p=1,ss=Bw==,sk=AAAA$42xEC+ixf3L2lw==$AAAA",
            "$fbscrypt$v=1,n=30,r=8,p=1,ss=Bw==,sk=AAAA$42xEC+ixf3L2lw==$AAAA",
            "$fbscrypt$v=1,n=14,r=8,p=1,ss=Bw==,sk=AAAA$42xEC+ixf3L2lw==$AAAAAAAA",
            "md5:5f4dcc3b5aa765d61d8327deb882cf99",
        ])
    func notImportable(hash: String) {
        #expect(!PasswordHasher.isImportable(hash))
    }

    @Test(
        "garbage and unsupported stored strings are invalid",
        arguments: [
            "",
            "password",
            "*0",
            "!",
            "$y$",
            "$y$j9T$",
            // A bare setting: crypt_rn would accept it, but it holds no checksum to match.
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30$",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3$",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3 ",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk3ü$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3",
            "$y$j9T$ZIgtwzSwGYvh9pWTbkBk30\u{0}$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3",
            // N = 2^26 with r = 32 would need 8 GiB: not a cost libxcrypt writes, so never computed.
            "$y$jOT$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3",
            "$y$j9T3$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3",
            "$2b$",
            "$2b$05$short",
            "$2x$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
            "$2b$5$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
            // Cost 31 would run for days: refused without hashing.
            "$2b$31$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
            "$1$saltsalt$qjXMvbEw8oaL.CzflDugX/",
            "$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc.eoxqOmSuNp2xS0ktL3nh/",
            "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG",
        ])
    func garbage(stored: String) async {
        #expect(await hasher.verify("U*U", against: stored) == .invalid)
        #expect(await hasher.verify("correct horse", against: stored) == .invalid)
    }

    @Test("a checksum that differs only in its last character is invalid")
    func tamperedChecksum() async throws {
        let hash = try await hasher.hash("tamper")
        let last = hash.last == "A" ? "B" : "A"
        #expect(await hasher.verify("tamper", against: String(hash.dropLast()) + last) == .invalid)
    }

    @Test("a password with a NUL is refused rather than cut short")
    func nul() async throws {
        let password = "before\u{0}after"
        await #expect(throws: PasswordHashingError.passwordContainsNUL) { try await hasher.hash(password) }
        let hash = try await hasher.hash("before")
        #expect(await hasher.verify(password, against: hash) == .invalid)
    }

    @Test("passwords over libxcrypt's 511-byte limit are refused without echoing them")
    func tooLong() async throws {
        let secret = "hunter2-" + String(repeating: "é", count: 260)
        #expect(secret.utf8.count > PasswordHasher.maximumPasswordBytes)
        let error = await #expect(throws: PasswordHashingError.self) { try await hasher.hash(secret) }
        #expect(error == .passwordTooLong(maximumBytes: 511))
        #expect(!String(describing: error).contains("hunter2"))

        let longest = String(repeating: "x", count: PasswordHasher.maximumPasswordBytes)
        let hash = try await hasher.hash(longest)
        #expect(await hasher.verify(longest, against: hash) == .valid(needsRehash: false))
        #expect(await hasher.verify(longest + "x", against: hash) == .invalid)
    }

    @Test("no error description contains anything but fixed text")
    func errorDescriptions() {
        let errors: [PasswordHashingError] = [
            .passwordTooLong(maximumBytes: 511), .passwordContainsNUL, .saltGenerationFailed(errno: 5),
            .hashingFailed(errno: 22), .unsupportedPlatform,
        ]
        for error in errors {
            #expect(!error.description.isEmpty)
        }
    }
}

@Suite("Password policy")
struct PasswordPolicyTests {
    let policy = PasswordPolicy()

    @Test(
        "acceptable passwords have no problems",
        arguments: [
            "correct horse battery staple",
            "Tr0ub4dor&3",
            "pässwörd-ñ",
            "🔐🔑🗝️🧷📎🖇️🔒🔓",
            "Purple-Monkey-Dishwasher",
            "  secret ",
            "9 tails 4 cats",
        ])
    func acceptable(password: String) {
        #expect(policy.problems(for: password, forbidden: ["alice@example.com", "alice"]) == [])
    }

    @Test("length counts characters, spaces included, not bytes")
    func lengthInCharacters() {
        #expect(policy.problems(for: "short") == [.tooShort])
        #expect(policy.problems(for: "") == [.tooShort])
        #expect(policy.problems(for: "1a2b3c4") == [.tooShort])
        #expect(policy.problems(for: "1a2b3c4z") == [])
        // Seven characters, six of them a letter plus a combining accent: still seven.
        #expect(policy.problems(for: "n\u{303}a\u{301}e\u{301}i\u{308}o\u{302}u\u{300}y") == [.tooShort])
        #expect(policy.problems(for: "🙂🙃😉😊") == [.tooShort])
        // Spaces count and are never trimmed.
        #expect(policy.problems(for: " a1b2c3 ") == [])
        #expect(policy.problems(for: "a1b2c3  ") == [])
        #expect(PasswordPolicy(minimumLength: 12).problems(for: "a1b2c3d4e5f") == [.tooShort])
    }

    @Test("too long by characters or by the hasher's byte limit")
    func tooLong() {
        let varied = String((0..<101).map { Character(UnicodeScalar(UInt8(33 + $0 % 90))) })
        #expect(PasswordPolicy(maximumLength: 100).problems(for: varied) == [.tooLong])
        #expect(PasswordPolicy(maximumLength: 101).problems(for: varied) == [])
        // 130 characters but 520 bytes: more than libxcrypt can hash.
        #expect(policy.problems(for: String(repeating: "🔐", count: 130)) == [.tooLong])
        #expect(policy.problems(for: String(repeating: "x", count: 1_000_000)) == [.tooLong])
    }

    @Test("the maximum can never be set below 64")
    func maximumFloor() {
        #expect(PasswordPolicy(maximumLength: 10).maximumLength == 64)
        var policy = PasswordPolicy()
        policy.maximumLength = 5
        #expect(policy.maximumLength == 64)
        let sixtyFour = String((0..<64).map { Character(UnicodeScalar(UInt8(33 + $0 * 7 % 90))) })
        #expect(policy.problems(for: sixtyFour) == [])
        #expect(policy.problems(for: sixtyFour + "!") == [.tooLong])
    }

    @Test("the password may not equal the account's identifiers, ignoring case")
    func identity() {
        let forbidden = ["alice.smith@example.com", "alice.smith", "", "Alice1984"]
        #expect(policy.problems(for: "Alice.Smith@Example.COM", forbidden: forbidden) == [.matchesIdentity])
        #expect(policy.problems(for: "ALICE.SMITH", forbidden: forbidden) == [.matchesIdentity])
        #expect(policy.problems(for: "alice1984", forbidden: forbidden) == [.matchesIdentity])
        #expect(policy.problems(for: "alice.smith!", forbidden: forbidden) == [])
        #expect(policy.problems(for: " alice.smith", forbidden: forbidden) == [])
        #expect(policy.problems(for: "alice", forbidden: ["alice"]) == [.tooShort, .matchesIdentity])
        #expect(policy.problems(for: "", forbidden: [""]) == [.tooShort])
    }

    @Test(
        "trivially repetitive or sequential passwords",
        arguments: [
            "aaaaaaaa", "AAAAAAAAAAAA", "        ", "🙂🙂🙂🙂🙂🙂🙂🙂", "abcabcabc", "121212121", "abababab",
            "hellohellohello", "12345678", "1234567890", "abcdefgh", "ABCDEFGH", "87654321", "hgfedcba",
            "0987654321", "abcd1234", "1234abcd", "aaaa1111", "AbCdEfGhIj",
        ])
    func repetitive(password: String) {
        #expect(policy.problems(for: password) == [.repetitive])
    }

    @Test("short repetitive passwords report both problems")
    func shortAndRepetitive() {
        #expect(policy.problems(for: "aaaa") == [.tooShort, .repetitive])
        #expect(policy.problems(for: "123") == [.tooShort, .repetitive])
    }

    @Test("reason codes and messages")
    func messages() {
        #expect(
            PasswordProblem.allCases.map(\.rawValue) == [
                "length", "too_long", "matches_identity", "repetitive", "common",
            ])
        #expect(PasswordProblem.tooShort.message == "Password must be at least 8 characters")
        #expect(PasswordProblem.tooShort.message(for: PasswordPolicy(minimumLength: 12)).contains("12"))
        #expect(PasswordProblem.tooLong.message(for: PasswordPolicy(maximumLength: 100)).contains("100"))
        for problem in PasswordProblem.allCases {
            #expect(problem.message.hasPrefix("Password must"))
        }
    }
}
