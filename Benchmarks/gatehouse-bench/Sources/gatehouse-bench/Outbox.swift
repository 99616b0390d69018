import Foundation

/// Reads one-time codes out of the server's outbox folder, where it writes every mail as an `.eml` file.
actor Outbox {
    let directory: String
    private var parsed: Set<String> = []
    private var codes: [String: String] = [:]

    /// An outbox reader for `directory` (`<data-dir>/outbox`).
    init(directory: String) {
        self.directory = directory
    }

    /// Waits until a mail to `email` with a code appears and returns the code, each code handed out once.
    func code(for email: String, within timeout: Duration) async throws -> String {
        let recipient = email.lowercased()
        let deadline = ContinuousClock.now + timeout
        while true {
            scan()
            if let code = codes.removeValue(forKey: recipient) { return code }
            guard ContinuousClock.now < deadline else {
                throw BenchError("no mail with a code to \(email) in \(directory) within \(timeout)")
            }
            // The server fsyncs each mail before answering, so a short poll finds it soon after the answer.
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Parses every mail not seen before.
    private func scan() {
        // The server writes under a hidden name and renames, so a visible `.eml` file is always complete.
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(".eml") && !name.hasPrefix(".") && !parsed.contains(name) {
            parsed.insert(name)
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path),
                let mail = Self.parse(String(decoding: data, as: UTF8.self)),
                let code = mail.code
            else { continue }
            codes[mail.to.lowercased()] = code
        }
    }

    /// The recipient and the code of a message: the first six-digit run of its decoded text/plain part.
    static func parse(_ message: String) -> (to: String, code: String?)? {
        let (headerBlock, body) = split(message)
        let headers = headerLines(headerBlock)
        guard let to = headers["to"] else { return nil }
        guard let contentType = headers["content-type"], contentType.lowercased().hasPrefix("multipart/"),
            let boundary = parameter("boundary", in: contentType)
        else {
            // A single-part message: the body itself.
            let encoding = headers["content-transfer-encoding"]?.lowercased()
            let text = encoding == "quoted-printable" ? decodeQuotedPrintable(body) : body
            return (to, firstSixDigits(in: text))
        }
        for part in body.components(separatedBy: "--" + boundary).dropFirst() {
            let (partHeaderBlock, partBody) = split(part)
            let partHeaders = headerLines(partHeaderBlock)
            guard partHeaders["content-type"]?.lowercased().hasPrefix("text/plain") == true else { continue }
            let encoding = partHeaders["content-transfer-encoding"]?.lowercased()
            let text = encoding == "quoted-printable" ? decodeQuotedPrintable(partBody) : partBody
            return (to, firstSixDigits(in: text))
        }
        return (to, nil)
    }

    /// Splits at the first empty line: headers before, body after (CRLF or bare LF).
    static func split(_ text: String) -> (headers: String, body: String) {
        let normalized = text.replacingOccurrences(of: "\r\n", with: "\n")
        let trimmed = normalized.hasPrefix("\n") ? String(normalized.dropFirst()) : normalized
        guard let range = trimmed.range(of: "\n\n") else { return (trimmed, "") }
        return (String(trimmed[..<range.lowerBound]), String(trimmed[range.upperBound...]))
    }

    /// Header names (lowercased) to values, with folded lines joined.
    static func headerLines(_ block: String) -> [String: String] {
        var headers: [String: String] = [:]
        var last: String?
        for line in block.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.first == " " || line.first == "\t", let name = last {
                headers[name, default: ""] += " " + line.trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            // The first occurrence wins, as a mail reader shows it.
            if headers[name] == nil {
                headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            last = name
        }
        return headers
    }

    /// A `name=value` or `name="value"` parameter of a header value.
    static func parameter(_ name: String, in value: String) -> String? {
        for piece in value.split(separator: ";").dropFirst() {
            let pair = piece.trimmingCharacters(in: .whitespaces)
            guard pair.lowercased().hasPrefix(name.lowercased() + "=") else { continue }
            var result = pair.dropFirst(name.count + 1)
            if result.hasPrefix("\""), result.hasSuffix("\""), result.count >= 2 {
                result = result.dropFirst().dropLast()
            }
            return String(result)
        }
        return nil
    }

    /// Decodes quoted-printable text (RFC 2045): `=XX` escapes and `=` soft line breaks.
    static func decodeQuotedPrintable(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "=") else {
                output.append(byte)
                index += 1
                continue
            }
            if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") {
                index += 2
            } else if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "\r"),
                bytes[index + 2] == UInt8(ascii: "\n")
            {
                index += 3
            } else if index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The value of one hexadecimal digit, or nil.
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// The first run of exactly six ASCII digits, so parts of longer numbers are never taken for a code.
    static func firstSixDigits(in text: String) -> String? {
        var run: [UInt8] = []
        for byte in Array(text.utf8) + [0] {
            if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                run.append(byte)
                continue
            }
            if run.count == 6 { return String(decoding: run, as: UTF8.self) }
            run.removeAll(keepingCapacity: true)
        }
        return nil
    }
}
