import Foundation

/// An outgoing email with a plain-text and an HTML alternative of the same content. Codable, so the mail queue can
/// keep it (sealed) until it is sent.
public struct MailMessage: Sendable, Equatable, Codable {
    /// The sender's bare address (`name@example.com`, no display name).
    public var from: String
    /// The recipient's bare address (`name@example.com`, no display name).
    public var to: String
    public var subject: String
    public var text: String
    public var html: String

    /// Makes a message; addresses are checked when it is rendered or sent.
    public init(from: String, to: String, subject: String, text: String, html: String) {
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
    }

    /// Renders the complete message (headers and a multipart/alternative body) with CRLF line endings, ready for
    /// SMTP DATA; throws `MailError.invalidAddress` for addresses or a message ID that could inject headers.
    public func rfc5322(messageID: String, date: Date) throws -> String {
        try rfc5322(messageID: messageID, date: date, boundary: Self.makeBoundary())
    }

    func rfc5322(messageID: String, date: Date, boundary: String) throws -> String {
        let from = try Self.validatedAddress(from, field: "From")
        let to = try Self.validatedAddress(to, field: "To")
        let messageID = try Self.validatedMessageID(messageID)
        var lines = [
            "From: \(from)",
            "To: \(to)",
            Self.subjectHeader(subject),
            "Date: \(Self.rfc5322Date(date))",
            "Message-ID: <\(messageID)>",
            "MIME-Version: 1.0",
            // Folded so that every line of the message stays within 78 characters.
            "Content-Type: multipart/alternative;\r\n boundary=\"\(boundary)\"",
            "",
        ]
        for (type, body) in [("text/plain", text), ("text/html", html)] {
            lines += [
                "--\(boundary)",
                "Content-Type: \(type); charset=utf-8",
                "Content-Transfer-Encoding: quoted-printable",
                "",
                Self.quotedPrintable(body),
            ]
        }
        lines.append("--\(boundary)--")
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// A fresh globally unique message ID in the sender's domain.
    func makeMessageID() -> String {
        let domain = from.split(separator: "@").last.map(String.init) ?? "gatehouse.local"
        return "\(UUID().uuidString.lowercased())@\(domain)"
    }

    /// The domain of the recipient's address, which is all of it that logs may show.
    var recipientDomain: String {
        guard let at = to.lastIndex(of: "@") else { return "" }
        return String(to[to.index(after: at)...])
    }

    // MARK: - Headers

    /// Starts with "=_", which quoted-printable output can never contain, so no body line can match the boundary.
    static func makeBoundary() -> String {
        "=_gatehouse_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// Accepts only a bare ASCII addr-spec: anything that could end the header, start another address or a
    /// display name is refused rather than cleaned, since a silently altered address would deliver elsewhere.
    static func validatedAddress(_ address: String, field: String) throws -> String {
        let forbidden: Set<UInt8> = Set(" <>(),;:\"\\".utf8)
        let bytes = Array(address.utf8)
        let ats = bytes.filter { $0 == UInt8(ascii: "@") }.count
        guard !bytes.isEmpty, bytes.count <= 254, ats == 1,
            bytes.first != UInt8(ascii: "@"), bytes.last != UInt8(ascii: "@"),
            bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7F && !forbidden.contains($0) })
        else {
            // Bytes above 0x7F are UTF-8 (a Swift string is valid UTF-8): RFC 6532 addresses, sent with SMTPUTF8.
            throw MailError(.invalidAddress, stage: field, detail: "not a plain address of the form name@domain")
        }
        return address
    }

    /// Accepts `id@host` or `<id@host>` made of visible ASCII, so the Message-ID header cannot be broken.
    static func validatedMessageID(_ messageID: String) throws -> String {
        var id = Substring(messageID)
        if id.hasPrefix("<") && id.hasSuffix(">") && id.count >= 2 { id = id.dropFirst().dropLast() }
        guard !id.isEmpty, id.contains("@"),
            id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") })
        else {
            throw MailError(.invalidAddress, stage: "Message-ID", detail: "not of the form id@host")
        }
        return String(id)
    }

    /// Control characters (CR and LF above all) become spaces so the subject can never start a new header; the
    /// rest is sent as plain folded ASCII when that is unambiguous, or as RFC 2047 encoded-words otherwise.
    static func subjectHeader(_ subject: String) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                subject.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
        let plain =
            cleaned.unicodeScalars.allSatisfy { $0.isASCII } && !cleaned.contains("=?")
            && !cleaned.split(separator: " ").contains { $0.utf8.count > 900 }
        return plain ? foldedPlainHeader("Subject", cleaned) : encodedWordHeader("Subject", cleaned)
    }

    /// Folds before spaces to keep lines near 78 characters (RFC 5322 2.2.3); unfolding restores the original.
    static func foldedPlainHeader(_ name: String, _ value: String) -> String {
        var lines: [String] = []
        var current = "\(name):"
        for (index, word) in value.split(separator: " ", omittingEmptySubsequences: false).enumerated() {
            let piece = " " + word
            // Folding only before a non-empty word keeps every continuation line from being whitespace alone.
            if index > 0 && !word.isEmpty && current.utf8.count + piece.utf8.count > 78 {
                lines.append(current)
                current = piece
            } else {
                current += piece
            }
        }
        lines.append(current)
        return lines.joined(separator: "\r\n")
    }

    /// Splits on Unicode scalar boundaries (RFC 2047 6.3 forbids splitting a character across encoded-words) into
    /// words of at most 42 bytes, so each folded line stays within 78 characters.
    static func encodedWordHeader(_ name: String, _ value: String) -> String {
        var chunks: [[UInt8]] = [[]]
        for scalar in value.unicodeScalars {
            let bytes = Array(String(scalar).utf8)
            if chunks[chunks.count - 1].count + bytes.count > 42 { chunks.append([]) }
            chunks[chunks.count - 1] += bytes
        }
        let words = chunks.map { "=?utf-8?B?\(Data($0).base64EncodedString())?=" }
        return "\(name): " + words.joined(separator: "\r\n ")
    }

    /// RFC 5322 3.3 date-time in UTC, computed without locale-dependent formatters.
    static func rfc5322Date(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func padded(_ value: Int?, _ width: Int) -> String {
            let digits = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let day = "\(weekdays[(parts.weekday ?? 1) - 1]), \(padded(parts.day, 2)) \(months[(parts.month ?? 1) - 1])"
        let time = "\(padded(parts.hour, 2)):\(padded(parts.minute, 2)):\(padded(parts.second, 2))"
        return "\(day) \(padded(parts.year, 4)) \(time) +0000"
    }

    // MARK: - Body

    /// Quoted-printable (RFC 2045 6.7) with CRLF hard line breaks: any of CRLF, LF or CR in the input ends a line,
    /// lines are softly broken at 76 characters without splitting an escape, and `=`, non-ASCII bytes, control
    /// characters and whitespace at the end of a line are escaped.
    static func quotedPrintable(_ text: String) -> String {
        let normalized = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
        return normalized.split(separator: "\n", omittingEmptySubsequences: false)
            .map { quotedPrintableLine(Array($0.utf8)) }
            .joined(separator: "\r\n")
    }

    private static func quotedPrintableLine(_ bytes: [UInt8]) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        var lineLength = 0
        for (index, byte) in bytes.enumerated() {
            let isLast = index == bytes.count - 1
            let literal =
                (byte >= 33 && byte <= 126 && byte != UInt8(ascii: "="))
                || ((byte == 0x20 || byte == 0x09) && !isLast)
            let token = literal ? [byte] : [UInt8(ascii: "="), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            // Room must remain for the "=" of a soft break unless this is the line's final token.
            let limit = isLast ? 76 : 75
            if lineLength + token.count > limit {
                output += Array("=\r\n".utf8)
                lineLength = 0
            }
            output += token
            lineLength += token.count
        }
        return String(decoding: output, as: UTF8.self)
    }
}
