import Crypto
import Foundation

/// A `whsec_` secret of the Standard Webhooks specification: `whsec_` and the base64 of the key bytes.
enum WebhookSecret {
    /// A new secret: 32 random bytes.
    static func generate() -> String {
        "whsec_" + Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
    }

    /// The key bytes of `whsec_<base64>`; nil for anything else, or fewer than 16 bytes.
    static func key(_ secret: String) -> [UInt8]? {
        guard secret.hasPrefix("whsec_"), let data = Data(base64Encoded: String(secret.dropFirst(6))),
            data.count >= 16
        else { return nil }
        return Array(data)
    }
}

/// The Standard Webhooks signature scheme (v1, HMAC-SHA256), which webhooks and auth hooks share: the headers a
/// delivery carries, and the check a receiver makes.
enum StandardWebhooks {
    /// The signed content: `id.timestamp.body`.
    static func signature(id: String, timestamp: Int64, body: [UInt8], key: [UInt8]) -> String {
        var message = Array("\(id).\(timestamp).".utf8)
        message += body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }

    /// `webhook-id`, `webhook-timestamp` and `webhook-signature`: one signature per key, separated by a space as the
    /// specification says (during a rotation, the new key's and the old one's).
    static func headers(id: String, timestamp: Int64, body: [UInt8], keys: [[UInt8]]) -> [(String, String)] {
        let signatures = keys.map { signature(id: id, timestamp: timestamp, body: body, key: $0) }
        return [
            ("webhook-id", id), ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", signatures.joined(separator: " ")),
        ]
    }

    /// Whether `header` holds a v1 signature of the content by `key` (a receiver's check; tests use it too).
    static func verify(header: String, id: String, timestamp: Int64, body: [UInt8], key: [UInt8]) -> Bool {
        let expected = Array(signature(id: id, timestamp: timestamp, body: body, key: key).utf8)
        return header.split(separator: " ").contains { candidate in
            let given = Array(candidate.utf8)
            guard given.count == expected.count else { return false }
            return zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
        }
    }
}
