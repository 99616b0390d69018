import Crypto
import ExtrasBase64
import Foundation

/// Time-based one-time passwords (RFC 6238 over RFC 4226): HMAC-SHA-1, 30-second steps, six digits, the
/// parameters every authenticator app defaults to and GoTrue uses. Pure: the time is passed in.
enum TOTP {
    static let period: Int64 = 30
    static let digits = 6
    /// Steps accepted either side of the current one, for a phone's clock that is off or a code typed late.
    static let drift: Int64 = 1
    /// The secret's length: 160 bits, RFC 4226's recommendation and GoTrue's (32 base32 characters).
    static let secretBytes = 20

    /// The time step `date` falls in.
    static func step(at date: Date) -> Int64 {
        Int64(floor(date.timeIntervalSince1970)) / period
    }

    /// The code for one time step (RFC 4226 §5.3: dynamic truncation, then modulo 10^6, zero-padded).
    static func code(secret: [UInt8], step: Int64) -> String {
        let counter = withUnsafeBytes(of: UInt64(bitPattern: step).bigEndian) { Array($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: counter, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let binary =
            (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8)
            | UInt32(mac[offset + 3])
        let value = binary % 1_000_000
        let text = String(value)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// The step `code` is valid for, if it is valid at `now` within the drift and later than `lastUsedStep`: a code
    /// once accepted, or any code of an earlier step, is refused, so a code seen over a shoulder or in a log cannot be
    /// used again (RFC 6238 §5.2). Every candidate step is compared, in constant time, whatever matched before.
    static func acceptedStep(code: String, secret: [UInt8], now: Date, lastUsedStep: Int64?) -> Int64? {
        guard code.utf8.count == digits, code.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        let current = step(at: now)
        var accepted: Int64?
        for candidate in (current - drift)...(current + drift)
        where Secrets.constantTimeEquals(Self.code(secret: secret, step: candidate), code) {
            if candidate > (lastUsedStep ?? .min), accepted == nil { accepted = candidate }
        }
        return accepted
    }

    /// A fresh random secret.
    static func newSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<secretBytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The `otpauth://` URI authenticator apps read from the QR code (Google Authenticator's key URI format, as GoTrue
    /// writes it): the label is `issuer:account`, each part percent-encoded, the secret base32 without padding.
    static func uri(secret: [UInt8], issuer: String, account: String) -> String {
        let label = "\(percentEncoded(issuer)):\(percentEncoded(account))"
        return "otpauth://totp/\(label)?secret=\(Base32.encode(secret))&issuer=\(percentEncoded(issuer))"
            + "&algorithm=SHA1&digits=\(digits)&period=\(period)"
    }

    /// RFC 3986's unreserved characters stay, everything else is percent-encoded (a space as %20, never +).
    static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// RFC 4648 base32 (the upper-case alphabet authenticator apps expect), without padding.
enum Base32 {
    static func encode(_ bytes: [UInt8]) -> String {
        ExtrasBase64.Base32.encodeToString(bytes: bytes, options: .omitPaddingCharacter)
    }

    /// The bytes of `text` (case-insensitive, padding and spaces ignored), or nil for any other character.
    static func decode(_ text: String) -> [UInt8]? {
        let characters = text.utf8.filter { $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: " ") }
        // ExtrasBase64 skips tabs, line breaks and `+` in the last eight characters; we refuse them anywhere.
        guard !characters.contains(where: { [0x09, 0x0A, 0x0D, UInt8(ascii: "+")].contains($0) }) else { return nil }
        return try? ExtrasBase64.Base32.decode(bytes: characters)
    }
}
