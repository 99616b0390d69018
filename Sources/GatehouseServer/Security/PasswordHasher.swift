import HummingbirdBcrypt
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(CCrypt) && os(Linux)
    import CCrypt
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif
#endif

/// The outcome of checking a password against a stored hash.
public enum PasswordVerification: Sendable, Equatable {
    /// Wrong password, or a stored hash this hasher does not recognise.
    case invalid
    /// The password matches; `needsRehash` asks the caller to store a fresh hash made with the current settings.
    case valid(needsRehash: Bool)
}

/// Why a password could not be hashed. No case holds the password, so logging one is safe.
public enum PasswordHashingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// libxcrypt refuses passphrases of `CRYPT_MAX_PASSPHRASE_SIZE` bytes or more.
    case passwordTooLong(maximumBytes: Int)
    /// C strings end at the first NUL, so hashing would silently drop the rest of the password.
    case passwordContainsNUL
    /// crypt_gensalt_rn failed, usually because the system's random source could not be read.
    case saltGenerationFailed(errno: Int32)
    /// crypt_rn returned NULL or a failure token.
    case hashingFailed(errno: Int32)
    /// This platform has no libxcrypt, so yescrypt hashes cannot be made here.
    case unsupportedPlatform

    /// A fixed sentence with at most a number in it, safe for logs and error bodies.
    public var description: String {
        switch self {
        case .passwordTooLong(let maximumBytes):
            return "Password is longer than \(maximumBytes) bytes in UTF-8 and cannot be hashed"
        case .passwordContainsNUL:
            return "Password contains a NUL character and cannot be hashed"
        case .saltGenerationFailed(let errno):
            return "Could not generate a yescrypt salt (errno \(errno))"
        case .hashingFailed(let errno):
            return "yescrypt hashing failed (errno \(errno))"
        case .unsupportedPlatform:
            return "yescrypt password hashing needs libxcrypt, which this platform does not have"
        }
    }
}

/// Hashes passwords with yescrypt (libxcrypt) and verifies them against stored yescrypt or imported hashes (bcrypt,
/// argon2, Firebase's scrypt).
///
/// All hashing runs off the event loop and the cooperative pool, because one hash takes tens of milliseconds and
/// megabytes of memory: yescrypt on `NIOThreadPool.singleton`, whose fixed size also bounds that memory, and imported
/// hashes on `importedHashPool`, a quarter of the cores, so that a sign-in with a yescrypt hash never waits behind
/// them (each may take 0.4 s, and rows stored before `ImportedHashBounds` longer).
///
/// A failed check takes as long whatever the account, or when there is none (`FailureTiming`).
public struct PasswordHasher: Sendable {
    /// libxcrypt's `count` for "$y$"; each step up roughly doubles time and memory.
    public let yescryptCost: Int

    /// Costs libxcrypt's crypt_gensalt_rn accepts for yescrypt; 0 would mean "its default", which we spell out.
    public static let supportedYescryptCosts: ClosedRange<Int> = 1...11

    /// The longest password, in UTF-8 bytes, that libxcrypt hashes (`CRYPT_MAX_PASSPHRASE_SIZE` less its NUL).
    public static let maximumPasswordBytes = 511

    /// Stored bcrypt hashes above this cost are refused: cost 16 already takes seconds, and a corrupt or hostile
    /// row with cost 31 would occupy a pool thread for days.
    static let maximumBcryptCost = 16

    /// A well-formed hash with this hasher's parameters whose password nobody knows; see `dummyVerify`.
    let dummyHash: String

    /// How long failed checks take; shared by every copy of this hasher.
    let failures: FailureTiming

    /// Creates a hasher whose new hashes use `yescryptCost` (1...11). Cost 5 is libxcrypt's own default.
    public init(yescryptCost: Int = 5) {
        precondition(
            Self.supportedYescryptCosts.contains(yescryptCost),
            "yescrypt cost must be in \(Self.supportedYescryptCosts)")
        self.yescryptCost = yescryptCost
        // Built rather than hashed so that init stays cheap and cannot fail: crypt_rn only reads the parameters
        // and salt of a setting, so any checksum gives the same work as a real stored hash.
        self.dummyHash =
            "$y$" + YescryptParameters(cost: yescryptCost).field
            + "$ZIgtwzSwGYvh9pWTbkBk30$7LjqIUw8VjEnm66U2wg67lp71/RQ9aZP9jviaEsmJh3"
        self.failures = FailureTiming(
            measuring: ImportedHashBounds.referenceHashes
                + (yescryptCost > ImportedHashBounds.yescryptCost ? [dummyHash] : []))
    }

    /// Hashes `password` with yescrypt at this hasher's cost and a fresh random salt, giving a "$y$…" string.
    public func hash(_ typed: String) async throws -> String {
        let password = PasswordPolicy.normalized(typed)
        try Self.checkHashable(password)
        #if canImport(CCrypt) && os(Linux)
            let cost = yescryptCost
            return try await NIOThreadPool.singleton.runIfActive {
                try Self.yescryptHash(password, cost: cost)
            }
        #else
            throw PasswordHashingError.unsupportedPlatform
        #endif
    }

    /// Checks `password` against a stored yescrypt or imported hash; anything unrecognised is `.invalid`.
    /// The password is NFKC-normalised first; a hash made before normalisation existed still verifies with the
    /// password as typed, and is then due for a rehash. A failed check returns no sooner than `FailureTiming` asks.
    public func verify(_ typed: String, against stored: String) async -> PasswordVerification {
        let started = ContinuousClock.now
        let password = PasswordPolicy.normalized(typed)
        let result = await verifyExactly(password, against: stored)
        if case .invalid = result, password != typed, case .valid = await verifyExactly(typed, against: stored) {
            return .valid(needsRehash: true)
        }
        if case .invalid = result {
            await failures.wait(since: started)
        }
        return result
    }

    private func verifyExactly(_ password: String, against stored: String) async -> PasswordVerification {
        guard !password.utf8.contains(0), let hash = StoredHash(stored) else { return .invalid }
        if case .yescrypt = hash, password.utf8.count > Self.maximumPasswordBytes { return .invalid }
        if hash.isImported { failures.noteImportedHash() }
        guard await Self.offLoop(on: Self.pool(for: hash), { Self.matches(password, hash, stored: stored) }) else {
            return .invalid
        }
        // Any other family is an imported legacy hash: move it to yescrypt at the next sign-in.
        guard case .yescrypt(let cost) = hash else { return .valid(needsRehash: true) }
        return .valid(needsRehash: cost != yescryptCost)
    }

    /// Checks `password` against `hash` (parsed from `stored`) on the calling thread.
    private static func matches(_ password: String, _ hash: StoredHash, stored: String) -> Bool {
        switch hash {
        case .yescrypt: yescryptMatches(password, stored: stored)
        case .bcrypt(let normalized, _): Bcrypt.verify(password, hash: normalized)
        case .argon2(let argon2): argon2.matches(password)
        case .firebaseScrypt(let scrypt): scrypt.matches(password)
        }
    }

    /// yescrypt (ours) on the shared pool; imported families on their own.
    private static func pool(for hash: StoredHash) -> NIOThreadPool {
        hash.isImported ? importedHashPool : .singleton
    }

    /// The longest one check of any of `stored` takes here, each timed on the thread that runs it (so not counting
    /// a queue), and a quarter more for the spread between one check and the next; at most
    /// `FailureTiming.maximumWait`.
    static func slowestCheck(among stored: [String]) async -> Duration {
        var slowest = Duration.zero
        for (text, hash) in stored.compactMap({ text in StoredHash(text).map { (text, $0) } }) {
            let took = try? await pool(for: hash).runIfActive {
                let start = ContinuousClock.now
                _ = matches("", hash, stored: text)
                return ContinuousClock.now - start
            }
            slowest = max(slowest, took ?? .zero)
        }
        return min(slowest * 5 / 4, FailureTiming.maximumWait)
    }

    /// Whether an import or the admin API may store `hash` as given: `importRefusal(of:)` has nothing against it.
    static func isImportable(_ hash: String) -> Bool { importRefusal(of: hash) == nil }

    /// Why an import or the admin API may not store `hash`, or nil when it may: a hash this hasher verifies (yescrypt,
    /// bcrypt, argon2i/argon2id, Firebase's scrypt) that asks no more work of a check than `ImportedHashBounds`, and
    /// for argon2 only where libargon2 can be loaded (`argon2Available`, a parameter for tests).
    static func importRefusal(of hash: String, argon2Available: Bool = Argon2Library.isAvailable) -> HashImportRefusal?
    {
        switch StoredHash(hash) {
        case nil:
            return .unrecognised
        case .yescrypt(let cost):
            return cost <= ImportedHashBounds.yescryptCost ? nil : .yescryptCost(cost)
        case .bcrypt(_, let cost):
            return cost <= ImportedHashBounds.bcryptCost ? nil : .bcryptCost(cost)
        case .argon2(let argon2):
            guard argon2Available else { return .argon2Unavailable }
            return argon2.memory * argon2.passes <= ImportedHashBounds.argon2Work
                ? nil : .argon2Work(memory: argon2.memory, passes: argon2.passes)
        case .firebaseScrypt(let scrypt):
            return (1 << scrypt.logN) * scrypt.rounds * scrypt.parallelism <= ImportedHashBounds.scryptWork
                ? nil : .scryptWork(logN: scrypt.logN, rounds: scrypt.rounds, parallelism: scrypt.parallelism)
        }
    }

    /// Spends as long as a failed `verify`, for accounts that do not exist (or have no password), so that "no such
    /// user" cannot be told from "wrong password" by timing: one yescrypt check at this hasher's cost, then the wait
    /// `FailureTiming` asks of every failure.
    public func dummyVerify(_ password: String) async {
        _ = await verify(password, against: dummyHash)
    }

    /// The libxcrypt cost a "$y$" hash was made with, or nil when it is not a yescrypt hash whose parameters
    /// libxcrypt's crypt_gensalt_rn would write for some cost in 1...11.
    ///
    /// The parameter field after "$y$" is three characters of crypt's base-64 alphabet
    /// ("./0-9A-Za-z", values 0–63): the flavor (always "j" = 47, YESCRYPT_DEFAULTS), then log2(N) − 1, then
    /// r − 1. libxcrypt 4.4 derives them from the cost as r = 8, N = 2^(cost+9) for costs 1–2 and
    /// r = 32, N = 2^(cost+7) for costs 3–11, so "j9T" is cost 5 (N = 2^12, r = 32, 16 MiB) and "jAT" cost 6.
    /// Longer fields (values of 48 and above, or optional p/t/g/NROM parameters) are never written by
    /// crypt_gensalt_rn and give nil.
    public static func yescryptCost(of hash: String) -> Int? {
        guard case .yescrypt(let cost) = StoredHash(hash) else { return nil }
        return cost
    }
}

// MARK: - Timing of failures

/// How long a failed check takes, so that its timing tells neither one account from another nor an account from an
/// address with none.
///
/// Alone, a failed check costs what its hash's family costs: one yescrypt check (20–40 ms at cost 5) for an account
/// made here and for an address with no account (`dummyVerify`), but up to 0.4 s for an imported hash within
/// `ImportedHashBounds`. So once a hasher has checked an imported hash (the store holds some), every failed check
/// returns no sooner than the slowest check an import may store takes on this machine, and a quarter more (one check
/// of each family at its bound, and one at the hasher's own cost when that is higher, timed once per process while
/// the first such failure waits; at most `maximumWait`): what its own work did not spend it waits out asleep, holding
/// no thread and no CPU. A store with no imported hashes never waits.
///
/// Not hidden: the first imported hash checked after a start (it turns the wait on), rows stored beyond the bounds
/// before the bounds existed, and the queue of `PasswordHasher.importedHashPool` under load.
final class FailureTiming: Sendable {
    /// A cap on the wait, so that a measure taken on a busy machine cannot slow every failed sign-in for long.
    static let maximumWait: Duration = .seconds(1)

    /// The hashes whose slowest check sets the wait.
    private let references: [String]
    /// Whether this hasher has checked an imported hash.
    private let isOn = NIOLockedValueBox(false)

    /// One measure per set of reference hashes: it is the machine's, not the hasher's.
    private static let measures = NIOLockedValueBox<[[String]: Task<Duration, Never>]>([:])

    init(measuring references: [String]) {
        self.references = references
    }

    /// Turns the wait on: the store holds imported hashes. The first time in the process, the measure starts.
    func noteImportedHash() {
        guard !isOn.withLockedValue({ $0 }) else { return }
        _ = measure
        isOn.withLockedValue { $0 = true }
    }

    /// Returns no sooner than the wait after `started`, once it is on.
    func wait(since started: ContinuousClock.Instant) async {
        guard let floor = await measuredWait else { return }
        try? await Task.sleep(until: started + floor, clock: .continuous)
    }

    /// The wait, or nil while it is off.
    var measuredWait: Duration? {
        get async {
            guard isOn.withLockedValue({ $0 }) else { return nil }
            return await measure.value
        }
    }

    private var measure: Task<Duration, Never> {
        let references = references
        return Self.measures.withLockedValue { measures in
            if let measure = measures[references] { return measure }
            let measure = Task { await PasswordHasher.slowestCheck(among: references) }
            measures[references] = measure
            return measure
        }
    }
}

// MARK: - Stored hash formats

/// crypt's base-64 alphabet, shared by yescrypt and bcrypt.
private let cryptAlphabet = Array("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

private func cryptBase64Value(_ byte: UInt8) -> Int? {
    cryptAlphabet.firstIndex(of: byte)
}

/// The yescrypt parameters libxcrypt's crypt_gensalt_rn chooses for a cost; see `PasswordHasher.yescryptCost(of:)`.
struct YescryptParameters: Equatable {
    /// YESCRYPT_DEFAULTS (YESCRYPT_RW with its default flags) as it appears in the hash.
    static let defaultFlavor = 47

    var nLog2: Int
    var r: Int

    init(cost: Int) {
        if cost <= 2 {
            (nLog2, r) = (cost + 9, 8)
        } else {
            (nLog2, r) = (cost + 7, 32)
        }
    }

    init?(field: Substring.UTF8View) {
        // Every value libxcrypt writes for costs 1–11 is below 48, which the encoding stores as one character.
        let values = field.compactMap(cryptBase64Value)
        guard values.count == 3, field.count == 3, values.allSatisfy({ $0 < 48 }),
            values[0] == Self.defaultFlavor
        else { return nil }
        (nLog2, r) = (values[1] + 1, values[2] + 1)
    }

    var cost: Int? {
        switch r {
        case 8 where (10...11).contains(nLog2): return nLog2 - 9
        case 32 where (10...18).contains(nLog2): return nLog2 - 7
        default: return nil
        }
    }

    var field: String {
        String(decoding: [Self.defaultFlavor, nLog2 - 1, r - 1].map { cryptAlphabet[$0] }, as: UTF8.self)
    }
}

/// A stored hash this hasher can check, recognised by shape alone (no hashing).
private enum StoredHash: Sendable {
    case yescrypt(cost: Int)
    /// The hash with "$2y$" rewritten to "$2b$", because HummingbirdBcrypt knows only "$2a$" and "$2b$";
    /// crypt_blowfish's "$2y$" and OpenBSD's "$2b$" are the same algorithm.
    case bcrypt(normalized: String, cost: Int)
    /// Imported: an argon2i or argon2id PHC string (`ImportedHashes.swift`).
    case argon2(Argon2Hash)
    /// Imported from Firebase: its modified scrypt, with the project's parameters in the string.
    case firebaseScrypt(FirebaseScryptHash)

    /// Every family but yescrypt came from another service.
    var isImported: Bool {
        if case .yescrypt = self { false } else { true }
    }

    init?(_ stored: String) {
        if let argon2 = Argon2Hash(stored) {
            self = .argon2(argon2)
            return
        }
        if let firebase = FirebaseScryptHash(stored) {
            self = .firebaseScrypt(firebase)
            return
        }
        let bytes = stored.utf8
        // Refusing anything outside printable ASCII up front keeps NULs and odd bytes away from C.
        guard bytes.count <= 256, bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        let fields = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count >= 4, fields[0].isEmpty else { return nil }
        switch fields[1] {
        case "y":
            // "$y$" params "$" salt "$" checksum: 16-byte salts are 22 characters, the 32-byte checksum 43.
            guard fields.count == 5,
                let parameters = YescryptParameters(field: fields[2].utf8),
                let cost = parameters.cost,
                (1...86).contains(fields[3].utf8.count),
                fields[4].utf8.count == 43,
                fields[3].utf8.allSatisfy({ cryptBase64Value($0) != nil }),
                fields[4].utf8.allSatisfy({ cryptBase64Value($0) != nil })
            else { return nil }
            self = .yescrypt(cost: cost)
        case "2a", "2b", "2y":
            // "$2b$" two-digit cost "$" then 22 characters of salt and 31 of checksum.
            guard fields.count == 4,
                fields[2].utf8.count == 2, let cost = Int(fields[2]),
                (4...PasswordHasher.maximumBcryptCost).contains(cost),
                fields[3].utf8.count == 53,
                fields[3].utf8.allSatisfy({ cryptBase64Value($0) != nil })
            else { return nil }
            self = .bcrypt(normalized: fields[1] == "2y" ? "$2b" + stored.dropFirst(3) : stored, cost: cost)
        default:
            return nil
        }
    }
}

// MARK: - Work off the event loop

extension PasswordHasher {
    fileprivate static func checkHashable(_ password: String) throws {
        if password.utf8.contains(0) {
            throw PasswordHashingError.passwordContainsNUL
        }
        if password.utf8.count > maximumPasswordBytes {
            throw PasswordHashingError.passwordTooLong(maximumBytes: maximumPasswordBytes)
        }
    }

    /// Runs a check on a blocking pool; a pool that is shut down or a cancelled task counts as no match.
    fileprivate static func offLoop(
        on pool: NIOThreadPool = .singleton, _ check: @escaping @Sendable () -> Bool
    ) async -> Bool {
        (try? await pool.runIfActive(check)) ?? false
    }

    /// The threads of `importedHashPool`: a quarter of the cores, at least one.
    static let importedHashThreads = max(1, System.coreCount / 4)

    /// The pool imported hashes (bcrypt, argon2, Firebase's scrypt) are checked on, started on first use and kept for
    /// the life of the process as `NIOThreadPool.singleton` is. Those checks queue behind one another here, never in
    /// front of a yescrypt sign-in, and hold at most `importedHashThreads` checks' memory at once (argon2's lanes run
    /// on libargon2's own threads within one check).
    static let importedHashPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: importedHashThreads)
        pool.start()
        return pool
    }()

    /// Compares two byte strings in time that depends only on their lengths, which are public for a hash.
    static func constantTimeEquals(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count {
            difference |= lhs[index] ^ rhs[index]
        }
        return difference == 0
    }
}

// MARK: - libxcrypt

#if canImport(CCrypt) && os(Linux)
    extension PasswordHasher {
        /// crypt_rn needs a `struct crypt_data` (32 KiB): too big for a pool thread's stack, so it lives on the heap,
        /// zeroed before use as libxcrypt requires and wiped afterwards because it held the hash and key material.
        private static func withCryptData<T>(_ body: (UnsafeMutableRawPointer, Int32) throws -> T) rethrows -> T {
            let size = MemoryLayout<crypt_data>.size
            let data = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<crypt_data>.alignment)
            data.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            defer {
                explicit_bzero(data, size)
                data.deallocate()
            }
            return try body(data, Int32(size))
        }

        private static func yescryptHash(_ password: String, cost: Int) throws -> String {
            var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
            // NULL random bytes: libxcrypt reads the salt from the system's random source itself.
            let generated = setting.withUnsafeMutableBufferPointer { buffer in
                crypt_gensalt_rn("$y$", UInt(cost), nil, 0, buffer.baseAddress, Int32(buffer.count))
            }
            guard generated != nil else {
                throw PasswordHashingError.saltGenerationFailed(errno: errno)
            }
            return try withCryptData { data, size in
                let output = password.withCString { phrase in
                    setting.withUnsafeBufferPointer { crypt_rn(phrase, $0.baseAddress, data, size) }
                }
                guard let output, output.pointee != CChar(UInt8(ascii: "*")) else {
                    throw PasswordHashingError.hashingFailed(errno: errno)
                }
                let hash = String(cString: output)
                guard hash.hasPrefix("$y$") else {
                    throw PasswordHashingError.hashingFailed(errno: 0)
                }
                return hash
            }
        }

        private static func yescryptMatches(_ password: String, stored: String) -> Bool {
            withCryptData { data, size in
                // crypt_rn takes the parameters and salt from the stored hash and ignores its checksum, so the
                // output equals the stored string exactly when the password is right.
                guard
                    let output = password.withCString({ phrase in
                        stored.withCString { crypt_rn(phrase, $0, data, size) }
                    }),
                    output.pointee != CChar(UInt8(ascii: "*"))
                else { return false }
                let computed = UnsafeRawBufferPointer(start: output, count: strlen(output))
                var stored = stored
                return stored.withUTF8 { constantTimeEquals(computed, UnsafeRawBufferPointer($0)) }
            }
        }
    }
#else
    extension PasswordHasher {
        // No libxcrypt here (macOS): the hash method already threw, and yescrypt hashes never match.
        private static func yescryptMatches(_ password: String, stored: String) -> Bool {
            false
        }
    }
#endif
