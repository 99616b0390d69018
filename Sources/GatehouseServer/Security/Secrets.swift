import Crypto
import ExtrasBase64
import Foundation

/// Random secrets and their stored digests. Tokens are 256 random bits; only SHA-256 digests are stored.
public enum Secrets {
    /// A URL-safe random token with 256 bits of entropy.
    public static func token() -> String {
        base64URL(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }

    /// The six digits that go with a magic link's `token`, derived from it so that the link's page can show them on
    /// another device without the store keeping either in the clear. The token is 256 random bits: knowing the code
    /// says nothing of it.
    static func sixDigitCode(linkedTo token: String) -> String {
        let bytes = Array(SHA256.hash(data: Data("gatehouse-link-code:\(token)".utf8)))
        let value = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return String(format: "%06d", Int(value % 1_000_000))
    }

    /// Hex SHA-256 of `value`: what the store keeps instead of a secret.
    public static func digest(_ value: String) -> String {
        hex(SHA256.hash(data: Data(value.utf8)))
    }

    /// Lowercase hex of `bytes`, without `String(format:)` per byte (a sixteenth of a refresh's time went there).
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// A digest of an email address for logs and the audit trail, so addresses are never written in the clear.
    public static func emailDigest(_ email: String) -> String {
        String(digest("email:" + email.lowercased()).prefix(16))
    }

    /// Compares two strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8)
        let b = Array(rhs.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// Base64url without padding (RFC 4648 §5).
    public static func base64URL(_ data: Data) -> String {
        Base64.encodeToString(bytes: data, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// A new identifier for a row: a lower-case UUID.
    public static func identifier() -> String { UUID().uuidString.lowercased() }

    /// An identifier as stored, from any spelling of a UUID (lowercased), or nil for anything else.
    static func identifier(_ raw: String) -> String? {
        guard raw.utf8.count == 36, UUID(uuidString: raw) != nil else { return nil }
        return raw.lowercased()
    }
}

/// The time source. Production reads the system clock; tests move their own.
public protocol GatehouseClock: Sendable {
    var now: Date { get }
}

/// The system clock.
public struct SystemClock: GatehouseClock {
    public init() {}
    public var now: Date { Date() }
}

extension Data {
    /// Decodes base64url with or without padding (the inverse of `Secrets.base64URL`). What a browser sends for a
    /// passkey is read by `WebAuthn.base64URLDecoded` instead, which is stricter.
    init?(base64URL: String) {
        guard let bytes = try? Base64.decode(string: base64URL, options: [.base64UrlAlphabet, .omitPaddingCharacter])
        else { return nil }
        self.init(bytes)
    }
}

extension Date {
    /// Milliseconds since 1970: how the store keeps every time.
    var epochMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
    init(epochMilliseconds: Int64) { self.init(timeIntervalSince1970: Double(epochMilliseconds) / 1000) }

    /// ISO 8601 with fractional seconds, as Supabase clients expect.
    var iso8601: String { formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) }
}
