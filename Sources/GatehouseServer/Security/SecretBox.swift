import Crypto
import Foundation

/// Encrypts what the store must keep but must not keep in the clear (signing keys, derivation keys, queued mail)
/// with a key-encryption key that lives outside the database: `GATEHOUSE_ENCRYPTION_KEYS`, or a 0600 key file in
/// the data folder made on first start. Several keys may be given, newest first: the first encrypts, any of them
/// decrypts, so a key can be rotated by putting a new one in front and running `gatehouse keys reencrypt`.
public struct SecretBox: Sendable {
    struct Key: Sendable {
        let id: String
        let key: SymmetricKey
    }

    let keys: [Key]

    /// Sealed values start with this, so a value written before encryption existed is recognised and upgraded.
    static let prefix = "gh1:"

    /// A box over base64 keys of 32 bytes each, newest first.
    public init(base64Keys: [String]) throws(ConfigurationError) {
        var keys: [Key] = []
        for (index, text) in base64Keys.enumerated() {
            guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespaces)), data.count == 32 else {
                throw ConfigurationError(
                    "encryption key \(index + 1) must be 32 bytes in base64 (openssl rand -base64 32)")
            }
            let key = SymmetricKey(data: data)
            keys.append(Key(id: String(Secrets.digest(data.base64EncodedString()).prefix(8)), key: key))
        }
        guard !keys.isEmpty else { throw ConfigurationError("at least one encryption key is needed") }
        self.keys = keys
    }

    /// Keys for keyed digests of low-entropy secrets (mailed codes), newest first, derived from the key-encryption
    /// keys (HKDF-SHA256, one `purpose` per use): neither a log nor a copy of the database is enough to test a guess.
    /// A digest made under a key that was rotated out still verifies while that key is listed.
    func digestKeys(purpose: String) -> [SymmetricKey] {
        keys.map {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: $0.key, info: Data("gatehouse digest:\(purpose)".utf8), outputByteCount: 32)
        }
    }

    /// A new random key, base64, for a fresh key file.
    public static func newKey() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString()
    }

    /// The box named by configuration: the keys in `GATEHOUSE_ENCRYPTION_KEYS` (comma-separated), else the key file
    /// `<data-dir>/gatehouse.key`, created 0600 (in a 0700 folder) when missing.
    public static func load(_ configuration: GatehouseConfiguration) throws -> SecretBox {
        if let keys = configuration.encryptionKeys { return try SecretBox(base64Keys: keys) }
        let folder = configuration.dataDirectory
        try DataFolder.prepare(folder)
        let path = (folder as NSString).appendingPathComponent("gatehouse.key")
        if !FileManager.default.fileExists(atPath: path) {
            let created = FileManager.default.createFile(
                atPath: path, contents: Data((newKey() + "\n").utf8), attributes: [.posixPermissions: 0o600])
            guard created else { throw ConfigurationError("cannot create the key file \(path)") }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline)
            .map(String.init).filter { !$0.isEmpty && !$0.hasPrefix("#") }
        return try SecretBox(base64Keys: lines)
    }

    /// `value` sealed with the newest key (AES-256-GCM); `context` binds it to its use, so a sealed value cannot be
    /// moved to another column or row.
    func seal(_ value: String, context: String) throws -> String {
        let key = keys[0]
        let box = try AES.GCM.seal(Data(value.utf8), using: key.key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw SecretBoxError.corrupt }
        return Self.prefix + key.id + ":" + combined.base64EncodedString()
    }

    /// The clear value of something `seal` wrote, with any of the keys.
    func open(_ sealed: String, context: String) throws -> String {
        guard sealed.hasPrefix(Self.prefix) else { throw SecretBoxError.notSealed }
        let parts = sealed.dropFirst(Self.prefix.count).split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let data = Data(base64Encoded: String(parts[1])) else { throw SecretBoxError.corrupt }
        guard let key = keys.first(where: { $0.id == parts[0] }) else { throw SecretBoxError.unknownKey }
        do {
            let box = try AES.GCM.SealedBox(combined: data)
            return String(
                decoding: try AES.GCM.open(box, using: key.key, authenticating: Data(context.utf8)), as: UTF8.self)
        } catch {
            throw SecretBoxError.corrupt
        }
    }

    /// Whether `sealed` was sealed with the newest key (else `keys reencrypt` has work to do).
    func isCurrent(_ sealed: String) -> Bool {
        sealed.hasPrefix(Self.prefix + keys[0].id + ":")
    }
}

/// Why a sealed value could not be opened. Never carries the value.
enum SecretBoxError: Error, CustomStringConvertible {
    case notSealed, unknownKey, corrupt

    var description: String {
        switch self {
        case .notSealed: "the value is not encrypted"
        case .unknownKey:
            "the value was encrypted with a key that is not configured (GATEHOUSE_ENCRYPTION_KEYS or gatehouse.key)"
        case .corrupt: "the value does not decrypt: wrong key or damaged data"
        }
    }
}

/// The data folder: only its owner may enter it (0700), and the files Gatehouse keeps there are 0600.
enum DataFolder {
    /// Creates `folder` (0700) or tightens it to 0700. A shared sticky folder such as /tmp is left as it is.
    static func prepare(_ folder: String) throws {
        let manager = FileManager.default
        if !manager.fileExists(atPath: folder) {
            try manager.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let mode = (try manager.attributesOfItem(atPath: folder)[.posixPermissions] as? NSNumber)?.intValue ?? 0
        if mode & 0o1000 == 0, mode & 0o777 != 0o700 {
            try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: folder)
        }
    }

    /// Creates `path` empty with mode 0600 if missing (SQLite then gives its -wal and -shm files the same mode), and
    /// tightens the mode of it and its companions if they exist. A missing folder is created 0700.
    static func protectDatabase(_ path: String) throws {
        let manager = FileManager.default
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !manager.fileExists(atPath: folder) {
            try manager.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if !manager.fileExists(atPath: path) {
            manager.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for file in [path, path + "-wal", path + "-shm"] where manager.fileExists(atPath: file) {
            try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
    }
}
