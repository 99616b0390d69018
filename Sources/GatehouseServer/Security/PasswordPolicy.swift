import Foundation

/// A reason a new password is refused. The raw value is the reason code sent to clients.
public enum PasswordProblem: String, Sendable, CaseIterable {
    case tooShort = "length"
    case tooLong = "too_long"
    case matchesIdentity = "matches_identity"
    case repetitive = "repetitive"
    case common = "common"

    /// A sentence for people, worded for the default policy.
    public var message: String {
        message(for: PasswordPolicy())
    }

    /// A sentence for people, using the limits of `policy`.
    public func message(for policy: PasswordPolicy) -> String {
        switch self {
        case .tooShort:
            return "Password must be at least \(policy.minimumLength) characters"
        case .tooLong:
            let byteLimit = PasswordPolicy.maximumUTF8Length
            if policy.maximumLength < byteLimit {
                return "Password must be at most \(policy.maximumLength) characters"
            }
            // The byte limit is the one people reach first; in characters it depends on the script.
            return "Password must be at most \(byteLimit) characters, fewer with accented letters, "
                + "non-Latin scripts or emoji"
        case .matchesIdentity:
            return "Password must not be your email address or username"
        case .repetitive:
            return "Password must not be a repeated or sequential pattern such as \"aaaaaaaa\" or \"12345678\""
        case .common:
            return "Password must not be one of the most commonly used passwords"
        }
    }
}

/// The rules a new password must meet, after NIST SP 800-63B and OWASP ASVS 5: a length range, not the
/// account's own identifiers, not trivially repetitive, not one of the most common passwords. There are
/// deliberately no composition rules, and the password is never trimmed or truncated; it is NFKC-normalised
/// (`normalized`) before it is checked and hashed, so the same password typed on two keyboards is one password.
public struct PasswordPolicy: Sendable, Equatable {
    /// NIST SP 800-63B requires that passwords of at least 64 characters be accepted.
    public static let lowestMaximumLength = 64

    /// The hasher's limit in UTF-8 bytes; longer passwords are refused here so that hashing never fails on them.
    public static let maximumUTF8Length = PasswordHasher.maximumPasswordBytes

    /// The fewest characters (Swift `Character`s, so an emoji counts once) a password may have; at least 1.
    public var minimumLength: Int = 8 {
        didSet { minimumLength = max(minimumLength, 1) }
    }

    /// The most characters a password may have, against denial of service; never below `lowestMaximumLength`.
    public var maximumLength: Int = 1024 {
        didSet { maximumLength = max(maximumLength, Self.lowestMaximumLength) }
    }

    /// Creates a policy; a `maximumLength` below 64 is raised to 64 and a `minimumLength` below 1 to 1.
    public init(minimumLength: Int = 8, maximumLength: Int = 1024) {
        self.minimumLength = max(minimumLength, 1)
        self.maximumLength = max(maximumLength, Self.lowestMaximumLength)
    }

    /// Every rule `password` breaks, in declaration order; empty when it is acceptable.
    ///
    /// `forbidden` holds the account's own identifiers (email address, its local part, username); the password
    /// may not equal any non-empty one, ignoring case. A password that is too long is reported alone, because
    /// the other rules are not worth running on megabytes of input.
    public func problems(for typed: String, forbidden: [String] = []) -> [PasswordProblem] {
        // Bytes first: utf8.count is O(1) on native strings, while counting characters walks the whole string.
        guard typed.utf8.count <= Self.maximumUTF8Length else { return [.tooLong] }
        let password = Self.normalized(typed)
        guard password.utf8.count <= Self.maximumUTF8Length else { return [.tooLong] }
        let length = password.count
        guard length <= maximumLength else { return [.tooLong] }

        var found: [PasswordProblem] = []
        if length < minimumLength {
            found.append(.tooShort)
        }
        let lowered = password.lowercased()
        if forbidden.contains(where: { !$0.isEmpty && $0.lowercased() == lowered }) {
            found.append(.matchesIdentity)
        }
        // Case adds almost nothing against guessing "AbCdEfGh", so the patterns are looked for case-blind.
        let characters = Array(lowered)
        if Self.isRepeatedUnit(characters) || Self.isSequenceOfRuns(characters) {
            found.append(.repetitive)
        }
        // The list is the catch-all after the structural rules: one reason is enough for "aaaaaaaa".
        if found.isEmpty, CommonPasswords.contains(lowered) {
            found.append(.common)
        }
        return found
    }

    /// The form a password is checked and hashed in: Unicode NFKC (NIST SP 800-63B 5.1.1.2).
    public static func normalized(_ password: String) -> String {
        password.precomposedStringWithCompatibilityMapping
    }
}

/// The most used passwords: Django's list and zxcvbn's (scripts/common-passwords.py, licences in NOTICE), over
/// 40,000 entries, lower-cased.
public enum CommonPasswords {
    static let list: Set<String> = {
        guard let url = Bundle.module.url(forResource: "common-passwords", withExtension: "txt"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { return [] }
        return Set(text.split(separator: "\n").map(String.init))
    }()

    /// How many passwords the list holds.
    public static var count: Int { list.count }

    /// Whether `lowered` (a lower-cased password) is on the list, as it is or with trailing digits and symbols taken
    /// off ("password123!" is "password" with a decoration).
    public static func contains(_ lowered: String) -> Bool {
        if list.contains(lowered) { return true }
        let stem = String(lowered.reversed().drop { $0.isNumber || $0.isPunctuation || $0.isSymbol }.reversed())
        return stem.count >= 4 && stem != lowered && list.contains(stem)
    }
}

extension PasswordPolicy {
    /// True when the password is one unit written again and again, the last copy possibly cut short
    /// ("aaaaaaaa", "121212121"): a unit of up to 4 characters at least twice, or any unit at least three times.
    static func isRepeatedUnit(_ characters: [Character]) -> Bool {
        let count = characters.count
        guard count >= 3 else { return false }
        // Knuth–Morris–Pratt failure function: count minus the longest proper border is the smallest period.
        var border = [Int](repeating: 0, count: count)
        var matched = 0
        for index in 1..<count {
            while matched > 0, characters[index] != characters[matched] {
                matched = border[matched - 1]
            }
            if characters[index] == characters[matched] {
                matched += 1
            }
            border[index] = matched
        }
        let period = count - border[count - 1]
        return (period <= 4 && count >= 2 * period) || count >= 3 * period
    }

    /// True when the password, all ASCII letters and digits, splits into runs of at least 3 characters that
    /// each step by +1, −1 or 0 within one class: "12345678", "hgfedcba", "1234567890", "abcd1234", "aaaa1111".
    static func isSequenceOfRuns(_ characters: [Character]) -> Bool {
        let count = characters.count
        guard count >= 3 else { return false }
        var codes: [UInt8] = []
        codes.reserveCapacity(count)
        for character in characters {
            guard let code = character.asciiValue, isDigit(code) || isLetter(code) else { return false }
            codes.append(code)
        }

        // reachable[i]: the first i characters split into runs. Runs are found by extending from each reachable
        // start, which is quadratic at worst; the byte limit keeps that to a few hundred thousand steps.
        var reachable = [Bool](repeating: false, count: count + 1)
        reachable[0] = true
        for start in 0..<count where reachable[start] {
            for direction in [-1, 0, 1] {
                var end = start + 1
                while end < count, step(from: codes[end - 1], to: codes[end]) == direction {
                    end += 1
                    if end - start >= 3 {
                        reachable[end] = true
                    }
                }
            }
        }
        return reachable[count]
    }

    /// The step from one letter or digit to the next, or nil across classes or for a larger jump. Digits wrap,
    /// so that "1234567890" and "3210987" count as runs.
    private static func step(from previous: UInt8, to next: UInt8) -> Int? {
        if isDigit(previous), isDigit(next) {
            switch (Int(next) - Int(previous) + 10) % 10 {
            case 0: return 0
            case 1: return 1
            case 9: return -1
            default: return nil
            }
        }
        if isLetter(previous), isLetter(next) {
            let difference = Int(next) - Int(previous)
            return (-1...1).contains(difference) ? difference : nil
        }
        return nil
    }

    private static func isDigit(_ code: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(code)
    }

    // Only lowercase: the caller lowercases first.
    private static func isLetter(_ code: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(code)
    }
}
