import Crypto
import CryptoExtras
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An imported argon2i or argon2id hash as a PHC string, `$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>` (unpadded
/// base64), held to GoTrue's limits but for memory: version 19, at most 256 MiB (GoTrue allows 1 GiB; each check
/// holds its memory on a pool thread, so a hostile hash must not take gigabytes), 20 passes and 16 lanes, no key
/// id or associated data. Verified by the reference implementation (libargon2), loaded when first needed
/// (`Argon2Library`): a machine without it still builds and serves, and refuses argon2 hashes with a clear error.
struct Argon2Hash: Sendable, Equatable {
    let encoded: String
    let isArgon2id: Bool
    /// Memory in KiB (`m`), passes (`t`) and lanes (`p`).
    let memory: Int
    let passes: Int
    let lanes: Int

    init?(_ stored: String) {
        let fields = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 6, fields[0].isEmpty, ["argon2i", "argon2id"].contains(fields[1]),
            fields[2] == "v=19"
        else { return nil }
        var parameters: [Substring: Int] = [:]
        for pair in fields[3].split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, ["m", "t", "p"].contains(parts[0]), let value = Int(parts[1]), value > 0,
                parameters[parts[0]] == nil
            else { return nil }
            parameters[parts[0]] = value
        }
        guard let memory = parameters["m"], memory <= 262_144, let passes = parameters["t"], passes <= 20,
            let lanes = parameters["p"], lanes <= 16, memory >= 8 * lanes,
            Self.isUnpaddedBase64(fields[4]), Self.isUnpaddedBase64(fields[5])
        else { return nil }
        encoded = stored
        isArgon2id = fields[1] == "argon2id"
        (self.memory, self.passes, self.lanes) = (memory, passes, lanes)
    }

    private static func isUnpaddedBase64(_ text: Substring) -> Bool {
        (4...1024).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte) || byte == 43
                    || byte == 47
            }
    }

    /// Whether `password` is the one hashed (constant time in libargon2).
    func matches(_ password: String) -> Bool {
        guard let verify = Argon2Library.verify else { return false }
        let bytes = Array(password.utf8)
        return bytes.withUnsafeBytes { buffer in
            // argon2_type: Argon2_i = 1, Argon2_id = 2; ARGON2_OK = 0 (argon2.h, stable since 2016).
            verify(encoded, buffer.baseAddress, buffer.count, isArgon2id ? 2 : 1) == 0
        }
    }
}

/// libargon2's `argon2_verify`, looked up in the shared library at run time instead of linked: Debian's image ships
/// the library (libargon2-1) but not its header or link name (libargon2-dev), and the server must build and start
/// from a fresh checkout with nothing installed by hand. Where the library is missing, argon2 hashes are refused at
/// import and by the admin API (`HashImportRefusal.argon2Unavailable`) and an account holding one cannot sign in
/// with its password.
enum Argon2Library {
    /// `int argon2_verify(const char *encoded, const void *pwd, size_t pwdlen, argon2_type type)`.
    typealias Verify = @convention(c) (UnsafePointer<CChar>, UnsafeRawPointer?, Int, Int32) -> Int32

    /// The function, or nil where no libargon2 can be loaded.
    static let verify: Verify? = {
        for name in ["libargon2.so.1", "libargon2.so", "libargon2.1.dylib", "libargon2.dylib"] {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else { continue }
            if let symbol = dlsym(handle, "argon2_verify") {
                return unsafeBitCast(symbol, to: Verify.self)
            }
            dlclose(handle)
        }
        return nil
    }()

    /// Whether argon2 hashes can be verified here.
    static var isAvailable: Bool { verify != nil }
}

/// A hash exported from Firebase Authentication: its modified scrypt, stored as GoTrue stores it,
/// `$fbscrypt$v=1,n=<log2 N>,r=<r>,p=<p>,ss=<salt separator>,sk=<signer key>$<salt>$<hash>` (padded base64). The
/// key is scrypt(password, salt + separator, N = 2^n, r, p, 32 bytes); the hash is the project's signer key encrypted
/// with it by AES-256-CTR from a zero counter.
struct FirebaseScryptHash: Sendable, Equatable {
    let logN: Int
    let rounds: Int
    let parallelism: Int
    let saltSeparator: Data
    let signerKey: Data
    let salt: Data
    let hash: Data

    init(logN: Int, rounds: Int, parallelism: Int, saltSeparator: Data, signerKey: Data, salt: Data, hash: Data) {
        self.logN = logN
        self.rounds = rounds
        self.parallelism = parallelism
        self.saltSeparator = saltSeparator
        self.signerKey = signerKey
        self.salt = salt
        self.hash = hash
    }

    init?(_ stored: String) {
        let fields = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0].isEmpty, fields[1] == "fbscrypt" else { return nil }
        var parameters: [Substring: Substring] = [:]
        for pair in fields[2].split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parameters[parts[0]] == nil else { return nil }
            parameters[parts[0]] = parts[1]
        }
        guard parameters["v"] == "1", let n = parameters["n"].flatMap({ Int($0) }),
            let r = parameters["r"].flatMap({ Int($0) }), let p = parameters["p"].flatMap({ Int($0) }),
            Set(parameters.keys).isSubset(of: ["v", "n", "r", "p", "ss", "sk"]),
            let separator = Data(base64Encoded: String(parameters["ss"] ?? "")),
            let signer = Data(base64Encoded: String(parameters["sk"] ?? "")), !signer.isEmpty,
            let salt = Data(base64Encoded: String(fields[3])), !salt.isEmpty,
            let hash = Data(base64Encoded: String(fields[4])), !hash.isEmpty
        else { return nil }
        self.init(
            logN: n, rounds: r, parallelism: p, saltSeparator: separator, signerKey: signer, salt: salt, hash: hash)
        guard isWithinLimits else { return nil }
    }

    /// Firebase's own parameters are N = 2^14, r = 8, p = 1; these bounds keep one check under 128 MiB.
    var isWithinLimits: Bool {
        (1...17).contains(logN) && (1...32).contains(rounds) && (1...16).contains(parallelism)
            && (1 << logN) * 128 * rounds <= 128 << 20 && signerKey.count <= 1024 && hash.count == signerKey.count
    }

    /// The stored form.
    var encoded: String {
        "$fbscrypt$v=1,n=\(logN),r=\(rounds),p=\(parallelism),ss=\(saltSeparator.base64EncodedString())"
            + ",sk=\(signerKey.base64EncodedString())$\(salt.base64EncodedString())$\(hash.base64EncodedString())"
    }

    /// Whether `password` is the one hashed.
    func matches(_ password: String) -> Bool {
        guard
            let derived = Self.derive(
                password, salt: salt + saltSeparator, logN: logN, rounds: rounds,
                parallelism: parallelism, signerKey: signerKey)
        else { return false }
        return derived.withUnsafeBytes { lhs in
            hash.withUnsafeBytes { rhs in PasswordHasher.constantTimeEquals(lhs, rhs) }
        }
    }

    /// Firebase's hash of `password`.
    static func derive(
        _ password: String, salt: Data, logN: Int, rounds: Int, parallelism: Int, signerKey: Data
    ) -> Data? {
        guard
            let key = try? KDF.Scrypt.deriveKey(
                from: Array(password.utf8), salt: salt, outputByteCount: 32, rounds: 1 << logN, blockSize: rounds,
                parallelism: parallelism, maxMemory: 256 << 20),
            let counter = try? AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16))
        else { return nil }
        return try? AES._CTR.encrypt(signerKey, using: key, nonce: counter)
    }
}

// MARK: - Bounds on imported work

/// The most work an import or the admin API may store in a hash, per family. Each bound costs one check about as much
/// as bcrypt at cost 12 (a quarter to a third of a second on one core), and each is above what the services we import
/// from write by default. The parsers' own limits are wider, for rows stored before these bounds: those still verify,
/// on `PasswordHasher.importedHashPool`, but no new one is stored.
enum ImportedHashBounds {
    /// yescrypt's libxcrypt cost: 8 is N = 2^15, r = 32 (128 MiB). Debian and libxcrypt write 5.
    static let yescryptCost = 8
    /// bcrypt's cost (2^cost rounds). Supabase writes 10.
    static let bcryptCost = 12
    /// argon2's memory in KiB times its passes: 64 MiB × 3, argon2-cffi's default. Lanes share the memory and the
    /// passes, so they do not add work.
    static let argon2Work = 65_536 * 3
    /// scrypt's N · r · p: 2^15 · 8 · 1, twice Firebase's own 2^14 · 8 · 1.
    static let scryptWork = (1 << 15) * 8

    /// One hash at each bound, in its family's usual shape, whose password nobody knows: `FailureTiming` times them.
    static let referenceHashes: [String] = [
        "$y$" + YescryptParameters(cost: yescryptCost).field
            + "$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3",
        "$2b$\(bcryptCost)$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
        "$argon2id$v=19$m=\(argon2Work / 3),t=3,p=1$c29tZXNhbHRzb21lc2FsdA"
            + "$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs",
        FirebaseScryptHash(
            logN: (scryptWork / 8).trailingZeroBitCount, rounds: 8, parallelism: 1, saltSeparator: Data([7]),
            signerKey: Data(repeating: 1, count: 32), salt: Data(repeating: 2, count: 16),
            hash: Data(repeating: 3, count: 32)
        ).encoded,
    ]
}

/// Why an import or the admin API may not store a hash. The description ends "the hash is …" in the import's report
/// and the API's error, and names the hash's parameters, never the rest of it.
enum HashImportRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a hash Gatehouse verifies, or outside what it would ever compute.
    case unrecognised
    case yescryptCost(Int)
    case bcryptCost(Int)
    case argon2Work(memory: Int, passes: Int)
    case scryptWork(logN: Int, rounds: Int, parallelism: Int)
    /// An argon2 hash on a machine where libargon2 cannot be loaded.
    case argon2Unavailable

    var description: String {
        switch self {
        case .unrecognised:
            "not a bcrypt, argon2i/argon2id (PHC), Firebase scrypt ($fbscrypt$) or yescrypt hash"
        case .yescryptCost(let cost):
            "a yescrypt hash of cost \(cost): imported hashes may cost at most \(ImportedHashBounds.yescryptCost)"
        case .bcryptCost(let cost):
            "a bcrypt hash of cost \(cost): imported hashes may cost at most \(ImportedHashBounds.bcryptCost)"
        case .argon2Work(let memory, let passes):
            "an argon2 hash of m=\(memory) KiB and t=\(passes) passes: imported hashes may ask at most m × t = "
                + "\(ImportedHashBounds.argon2Work) (64 MiB × 3)"
        case .scryptWork(let logN, let rounds, let parallelism):
            "a scrypt hash of N = 2^\(logN), r = \(rounds), p = \(parallelism): imported hashes may ask at most "
                + "N · r · p = 2^15 · 8"
        case .argon2Unavailable:
            "an argon2 hash, which this machine cannot check: install libargon2 (Debian's libargon2-1)"
        }
    }
}
