import Foundation

/// One server reply: its code and the text of each of its lines.
struct SMTPReply: Sendable, Equatable {
    var code: Int
    var lines: [String]

    /// EHLO keywords (upper-cased) and their parameters; `AUTH=PLAIN` is the pre-standard spelling of `AUTH PLAIN`.
    var capabilities: [String: [String]] {
        var result: [String: [String]] = [:]
        for line in lines.dropFirst() {
            var words = line.split(whereSeparator: { $0 == " " || $0 == "=" }).map(String.init)
            guard !words.isEmpty else { continue }
            let keyword = words.removeFirst().uppercased()
            result[keyword, default: []] += words
        }
        return result
    }

    /// The reply text reduced to printable ASCII and a sane length, so it cannot garble a log line.
    var safeText: String? {
        let text = lines.joined(separator: " ")
        let printable = String(
            String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }))
        let trimmed = printable.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        return trimmed.count > 200 ? String(trimmed.prefix(200)) + "…" : trimmed
    }
}

/// Joins reply lines (RFC 5321 4.2: `250-first`, `250-more`, `250 last`) into replies; no I/O.
struct SMTPReplyParser {
    /// A line that is not `DDD`, `DDD text` or `DDD-text`, or a continuation with another code.
    struct Malformed: Error, Equatable {}

    private var partial: (code: Int, lines: [String])?

    /// Whether a multi-line reply has begun and not yet ended.
    var isInsideReply: Bool { partial != nil }

    /// Takes one line without its line ending; returns the reply it completes, or nil when more lines follow.
    mutating func parse(_ bytes: [UInt8]) throws(Malformed) -> SMTPReply? {
        guard bytes.count >= 3, bytes[0...2].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            bytes.count == 3 || bytes[3] == UInt8(ascii: " ") || bytes[3] == UInt8(ascii: "-"),
            let code = Int(String(decoding: bytes[0...2], as: UTF8.self)),
            partial == nil || partial?.code == code
        else {
            throw Malformed()
        }
        let text = bytes.count > 4 ? String(decoding: bytes[4...], as: UTF8.self) : ""
        var lines = partial?.lines ?? []
        lines.append(text)
        if bytes.count > 3 && bytes[3] == UInt8(ascii: "-") {
            partial = (code, lines)
            return nil
        }
        partial = nil
        return SMTPReply(code: code, lines: lines)
    }
}
