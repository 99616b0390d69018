import Crypto
import Foundation

/// Recovery codes, in GoTrue's form: ten codes of sixteen characters of the lower-case base32 alphabet (80 bits
/// each), shown once, stored only as keyed digests. Pure: what the codes are, how one typed is read, what is stored.
enum RecoveryCodes {
    static let count = 10
    static let length = 16
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")

    /// A fresh set, all different.
    static func generate() -> [String] {
        var generator = SystemRandomNumberGenerator()
        var codes: [String] = []
        while codes.count < count {
            let code = String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
            if !codes.contains(code) { codes.append(code) }
        }
        return codes
    }

    /// A code as typed (any case, with spaces or dashes, as apps show them in groups) in its stored form, or nil when
    /// it cannot be one.
    static func normalized(_ typed: String) -> String? {
        let code = String(typed.lowercased().filter { $0 != "-" && !$0.isWhitespace })
        guard code.count == length, code.allSatisfy(alphabet.contains) else { return nil }
        return code
    }

    /// A code shown in groups of four, easier to copy by hand (`abcd-efgh-…`); `normalized` reads it back.
    static func grouped(_ code: String) -> String {
        stride(from: 0, to: code.count, by: 4).map { start in
            let from = code.index(code.startIndex, offsetBy: start)
            return String(code[from..<code.index(from, offsetBy: min(4, code.distance(from: from, to: code.endIndex)))])
        }.joined(separator: "-")
    }

    /// The stored form of a code of set `factorID`: an HMAC under one of the server's digest keys, salted with the
    /// set's id, so a copy of the database neither holds the codes nor lets anyone test guesses offline.
    static func digest(_ code: String, factorID: String, key: SymmetricKey) -> String {
        Secrets.hex(HMAC<SHA256>.authenticationCode(for: Data("\(factorID):\(code)".utf8), using: key))
    }
}
