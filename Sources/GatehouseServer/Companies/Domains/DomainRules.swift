import Foundation

/// What a company's domain is and how its proof is judged: pure, tested without a store or a resolver.
///
/// An owner adds a domain and publishes `gatehouse-verification=<token>` as a TXT record at
/// `_gatehouse-challenge.<domain>`. Only a verified domain counts, and one company at a time holds a domain verified.
/// A verified domain is looked at again every `recheckInterval`; `failuresAllowed` answers in a row without the record
/// (an hour apart) drop it. A resolver that does not answer counts for nothing either way: our outage is not the
/// company's.
enum DomainRules {
    /// The label the challenge record lives under.
    static let challengeLabel = "_gatehouse-challenge"
    /// What the record's value starts with.
    static let valuePrefix = "gatehouse-verification="
    static let recheckInterval: TimeInterval = 24 * 3600
    /// After a failed re-check, the next one comes sooner.
    static let retryInterval: TimeInterval = 3600
    /// A resolver that did not answer is asked again after this.
    static let unreachableRetry: TimeInterval = 15 * 60
    static let failuresAllowed = 3
    /// Domains one company may hold, pending or verified.
    static let perCompany = 50

    /// Names no company may claim: this machine, and the names RFC 6761 and 6762 reserve for local use.
    static let reservedSuffixes = ["localhost", "local", "invalid", "home.arpa", "internal"]

    /// `raw` lowercased and without a trailing dot, when it is a domain a company can own: two or more labels of
    /// letters, digits and hyphens (1 to 63 each, no hyphen at either end), at most 253 bytes, a top-level label that
    /// is not all digits (no IP address), and no reserved name. Internationalized names are given in their `xn--`
    /// form. No public-suffix list is consulted: a bare top-level domain is refused, `co.uk` is not.
    static func normalized(_ raw: String) -> String? {
        var name = raw.trimmingCharacters(in: .whitespaces).lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty, name.utf8.count <= 253 else { return nil }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return nil }
        for label in labels {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                label.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
            else { return nil }
        }
        guard let top = labels.last, !top.allSatisfy(\.isNumber) else { return nil }
        for reserved in reservedSuffixes where name == reserved || name.hasSuffix("." + reserved) { return nil }
        return name
    }

    /// The name the challenge record is published at.
    static func recordName(_ domain: String) -> String { "\(challengeLabel).\(domain)" }

    /// The value the record must hold for `token`.
    static func recordValue(_ token: String) -> String { valuePrefix + token }

    /// Whether an answer proves the domain: one of its TXT records is exactly the expected value (surrounding
    /// spaces aside; other records may sit beside it).
    static func proves(_ answer: DNSMessage.Answer, expected: String) -> Bool {
        guard case .records(let records) = answer else { return false }
        return records.contains { $0.trimmingCharacters(in: .whitespaces) == expected }
    }

    /// What a scheduled re-check of a verified domain leads to.
    enum Recheck: Equatable {
        /// Still proven: look again in a day.
        case confirmed(next: Date)
        /// The record was missing: counted, looked at again in an hour.
        case failed(failures: Int, next: Date)
        /// The last failure allowed: the domain is no longer verified.
        case lost(failures: Int)
        /// The resolver did not answer: nothing counted, asked again soon.
        case unanswered(next: Date)
    }

    /// The outcome of a re-check at `now` after `failures` failures in a row, `answer` nil when none came.
    static func recheck(_ answer: DNSMessage.Answer?, expected: String, failures: Int, now: Date) -> Recheck {
        guard let answer else { return .unanswered(next: now.addingTimeInterval(unreachableRetry)) }
        if proves(answer, expected: expected) { return .confirmed(next: now.addingTimeInterval(recheckInterval)) }
        let count = failures + 1
        if count >= failuresAllowed { return .lost(failures: count) }
        return .failed(failures: count, next: now.addingTimeInterval(retryInterval))
    }
}
