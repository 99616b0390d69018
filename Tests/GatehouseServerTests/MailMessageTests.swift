import Foundation
import Testing

@testable import GatehouseServer

@Suite("Mail message rendering")
struct MailMessageTests {
    static let date = Date(timeIntervalSince1970: 1_795_306_500)  // Sun, 22 Nov 2026 00:15:00 UTC

    static func render(
        subject: String = "Hello", text: String = "text", html: String = "<p>html</p>",
        from: String = "noreply@gatehouse.test", to: String = "ada@example.com"
    ) throws -> String {
        try MailMessage(from: from, to: to, subject: subject, text: text, html: html)
            .rfc5322(messageID: "id-1@gatehouse.test", date: date)
    }

    @Test("headers, the two quoted-printable parts and the boundary are in place, all with CRLF")
    func structure() throws {
        let rendered = try Self.render()
        let mail = RenderedMail(rendered)
        #expect(mail.header("From") == "noreply@gatehouse.test")
        #expect(mail.header("To") == "ada@example.com")
        #expect(mail.header("Subject") == "Hello")
        #expect(mail.header("Date") == "Sun, 22 Nov 2026 00:15:00 +0000")
        #expect(mail.header("Message-ID") == "<id-1@gatehouse.test>")
        #expect(mail.header("MIME-Version") == "1.0")
        #expect(mail.header("Content-Type")?.hasPrefix("multipart/alternative; boundary=\"=_") == true)
        #expect(rendered.components(separatedBy: "\r\n").allSatisfy { $0.utf8.count <= 78 })
        #expect(mail.parts.count == 2)
        #expect(
            mail.parts.first?.headers == [
                "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: quoted-printable",
            ])
        #expect(
            mail.parts.last?.headers == [
                "Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: quoted-printable",
            ])
        #expect(mail.parts.first?.body == "text")
        #expect(mail.parts.last?.body == "<p>html</p>")
        #expect(rendered.hasSuffix("--\(mail.boundary)--\r\n"))
        let bytes = Array(rendered.utf8)
        for (index, byte) in bytes.enumerated() where byte == 0x0A {
            #expect(index > 0 && bytes[index - 1] == 0x0D, "bare LF at byte \(index)")
        }
        #expect(bytes.allSatisfy { $0 < 0x80 }, "the message must be 7-bit clean")
    }

    @Test("each message gets its own boundary")
    func randomBoundary() throws {
        #expect(RenderedMail(try Self.render()).boundary != RenderedMail(try Self.render()).boundary)
    }

    @Test(
        "quoted-printable output matches RFC 2045 exactly",
        arguments: [
            ("Hello, world", "Hello, world"),
            ("a=b", "a=3Db"),
            ("caf\u{E9}", "caf=C3=A9"),
            ("trailing  ", "trailing =20"),
            ("tab\t", "tab=09"),
            ("  inner  spaces ok", "  inner  spaces ok"),
            ("one\ntwo\r\nthree\rfour", "one\r\ntwo\r\nthree\r\nfour"),
            ("line end \nnext", "line end=20\r\nnext"),
            ("bell\u{07}", "bell=07"),
            (".starts with a dot", ".starts with a dot"),
            (String(repeating: "a", count: 76), String(repeating: "a", count: 76)),
            (String(repeating: "a", count: 77), String(repeating: "a", count: 75) + "=\r\naa"),
            (String(repeating: "a", count: 74) + "\u{E9}", String(repeating: "a", count: 74) + "=\r\n=C3=A9"),
            (String(repeating: "a", count: 73) + "=", String(repeating: "a", count: 73) + "=3D"),
            (String(repeating: "a", count: 74) + "=", String(repeating: "a", count: 74) + "=\r\n=3D"),
            (String(repeating: "b", count: 75) + " ", String(repeating: "b", count: 75) + "=\r\n=20"),
        ])
    func quotedPrintableExact(input: String, expected: String) throws {
        let mail = RenderedMail(try Self.render(text: input))
        #expect(mail.parts.first?.body == expected)
    }

    @Test("quoted-printable round-trips arbitrary text within the line limits")
    func quotedPrintableRoundTrip() throws {
        var random = SplitMix64(seed: 0x6A7E_4055)
        let pool: [String] = ["a", "Z", "0", " ", " ", "\t", "=", ".", "\n", "\r\n", "é", "€", "😀", "\u{7F}", "?", "_"]
        for _ in 0..<300 {
            let length = Int(random.next() % 240)
            let text = (0..<length).map { _ in pool[Int(random.next() % UInt64(pool.count))] }.joined()
            let body = try #require(RenderedMail(try Self.render(text: text)).parts.first?.body)
            for line in body.components(separatedBy: "\r\n") {
                #expect(line.utf8.count <= 76, "line too long: \(line)")
                #expect(line.last != " " && line.last != "\t", "unencoded trailing whitespace: \(line)")
                #expect(line.utf8.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 })
            }
            // Hard line breaks read back as "\n" (a soft one, "=\r\n", becomes "=\n", which the decoder removes).
            let decoded = ReceivedMail.decodeQuotedPrintable(body.replacingOccurrences(of: "\r\n", with: "\n"))
            #expect(decoded == text.replacingOccurrences(of: "\r\n", with: "\n"))
        }
    }

    @Test("a non-ASCII subject becomes RFC 2047 encoded-words that decode to the original")
    func encodedSubject() throws {
        for subject in ["Votre code : 482913 – café ✓", String(repeating: "Ünïcødé 😀 ", count: 12)] {
            let mail = RenderedMail(try Self.render(subject: subject))
            let lines = mail.headerLines("Subject")
            #expect(lines.allSatisfy { $0.utf8.count <= 78 })
            let words = lines.joined().dropFirst("Subject:".count).split(separator: " ")
            #expect(words.allSatisfy { $0.hasPrefix("=?utf-8?B?") && $0.hasSuffix("?=") && $0.count <= 75 })
            let bytes = words.flatMap { Data(base64Encoded: String($0.dropFirst(10).dropLast(2))) ?? Data([0]) }
            #expect(String(decoding: bytes, as: UTF8.self) == subject)
        }
    }

    @Test("a long ASCII subject is folded at spaces and unfolds to the original")
    func foldedSubject() throws {
        let subject = (1...30).map { "word\($0)" }.joined(separator: " ")
        let lines = RenderedMail(try Self.render(subject: subject)).headerLines("Subject")
        #expect(lines.count > 1)
        #expect(lines.allSatisfy { $0.utf8.count <= 78 })
        #expect(lines.joined() == "Subject: " + subject)
    }

    @Test(
        "addresses that could inject headers or recipients are refused",
        arguments: [
            "ada@example.com\r\nBcc: eve@evil.test", "ada@example.com\nBcc: eve@evil.test", "ada@example.com\r",
            "Ada <ada@example.com>", "<ada@example.com>", "ada.example.com", "", "ada@example.com, eve@evil.test",
            "ada @example.com", "@example.com", "ada@", "a@b@c", "ada\u{7F}@example.com",
        ])
    func invalidAddresses(address: String) throws {
        let toError = #expect(throws: MailError.self) { try MailMessageTests.render(to: address) }
        #expect(toError?.kind == .invalidAddress)
        #expect(toError?.stage == "To")
        let fromError = #expect(throws: MailError.self) { try MailMessageTests.render(from: address) }
        #expect(fromError?.kind == .invalidAddress)
        #expect(fromError?.stage == "From")
    }

    @Test("CR and LF in the subject cannot start another header")
    func subjectInjection() throws {
        let rendered = try Self.render(subject: "Hi\r\nBcc: eve@evil.test\nX-Evil: 1")
        let headerBlock = rendered.components(separatedBy: "\r\n\r\n")[0]
        let names = headerBlock.components(separatedBy: "\r\n").filter { !$0.hasPrefix(" ") }
            .map { $0.split(separator: ":")[0] }
        #expect(names == ["From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"])
        #expect(RenderedMail(rendered).header("Subject") == "Hi  Bcc: eve@evil.test X-Evil: 1")
    }

    @Test("a message ID that could break its header is refused")
    func invalidMessageID() throws {
        let message = MailMessage(from: "a@b.test", to: "c@d.test", subject: "s", text: "t", html: "h")
        for id in ["x@y\r\nBcc: e@f.test", "no-at-sign", "a b@c", "<a>@b"] {
            #expect(throws: MailError(.invalidAddress, stage: "Message-ID", detail: "not of the form id@host")) {
                try message.rfc5322(messageID: id, date: Self.date)
            }
        }
        #expect(RenderedMail(try message.rfc5322(messageID: "<x@y>", date: Self.date)).header("Message-ID") == "<x@y>")
    }

    @Test("errors describe the stage and reply code")
    func errorDescription() {
        #expect(
            MailError(.rejected, stage: "RCPT TO", replyCode: 550, detail: "5.1.1 no such user").description
                == "mail rejected at RCPT TO (SMTP 550): 5.1.1 no such user")
        #expect(MailError(.unavailable, stage: "connect").description == "mail unavailable at connect")
    }

    @Test("the SMTP configuration never shows its password")
    func configurationRedactsPassword() {
        let configuration = SMTPConfiguration(host: "smtp.example.com", username: "mailer", password: "hunter2-secret")
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [configuration.description, String(reflecting: configuration), "\(configuration)", dumped] {
            #expect(!text.contains("hunter2-secret"))
            #expect(text.contains("smtp.example.com"))
        }
    }
}

/// A rendered message taken apart again: its unfolded headers and its MIME parts.
private struct RenderedMail {
    struct Part: Equatable {
        var headers: [String]
        var body: String
    }

    let rendered: String
    let headerBlock: [String]

    init(_ rendered: String) {
        self.rendered = rendered
        headerBlock = rendered.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n")
    }

    /// The header's physical lines, the first with its name.
    func headerLines(_ name: String) -> [String] {
        guard let start = headerBlock.firstIndex(where: { $0.hasPrefix("\(name):") }) else { return [] }
        let rest = headerBlock[(start + 1)...].prefix { $0.hasPrefix(" ") || $0.hasPrefix("\t") }
        return [headerBlock[start]] + rest
    }

    /// The unfolded value (RFC 5322 2.2.3: removing the CRLFs).
    func header(_ name: String) -> String? {
        let lines = headerLines(name)
        guard !lines.isEmpty else { return nil }
        return String(lines.joined().dropFirst(name.count + 2))
    }

    var boundary: String {
        let contentType = header("Content-Type") ?? ""
        return contentType.components(separatedBy: "boundary=\"").last?.replacingOccurrences(of: "\"", with: "") ?? ""
    }

    var parts: [Part] {
        let sections = rendered.components(separatedBy: "\r\n--\(boundary)")
        return sections.dropFirst().filter { !$0.hasPrefix("--") }.map { section in
            // The CRLF that ends the delimiter line goes ("\r\n" is a single Character, hence UTF-8).
            let content = String(decoding: section.utf8.dropFirst(2), as: UTF8.self)
            let pieces = content.components(separatedBy: "\r\n\r\n")
            return Part(
                headers: pieces[0].components(separatedBy: "\r\n"),
                body: pieces.dropFirst().joined(separator: "\r\n\r\n"))
        }
    }
}

/// A small deterministic generator, so a failing round-trip case can be reproduced.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
