import Crypto
import CryptoExtras
import Foundation

#if canImport(CArgon2) && os(Linux)
    import CArgon2
#endif

/// An imported argon2i or argon2id hash as a PHC string, `$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>` (unpadded
/// base64), held to GoTrue's limits but for memory: version 19, at most 256 MiB (GoTrue allows 1 GiB; each check
/// holds its memory on a pool thread, so a hostile hash must not take gigabytes), 20 passes and 16 lanes, no key
/// id or associated data. Verified by the reference implementation (Debian's libargon2).
struct Argon2Hash: Sendable, Equatable {
    let encoded: String
    let isArgon2id: Bool

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
        #if canImport(CArgon2) && os(Linux)
            let bytes = Array(password.utf8)
            return bytes.withUnsafeBytes { buffer in
                argon2_verify(encoded, buffer.baseAddress, buffer.count, isArgon2id ? Argon2_id : Argon2_i)
                    == ARGON2_OK.rawValue
            }
        #else
            return false
        #endif
    }
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
