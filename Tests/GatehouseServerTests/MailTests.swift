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

@Suite("Mail templates")
struct MailTemplateTests {
    static let templates = Result { try Templates.load(overrides: nil) }

    static func preview(_ name: String, locale: String = "en") throws -> MailMessage {
        try Mailer.preview(name: name, locale: locale, templates: try templates.get())
    }

    @Test("every mail has a subject, a text and an HTML part in English and German, with its code in both bodies")
    func everyMailRenders() throws {
        #expect(Mailer.names.count == 8)
        #expect(Mailer.names.contains("account_deleted"))
        for name in Mailer.names {
            for locale in ["en", "de"] {
                let message = try Self.preview(name, locale: locale)
                #expect(!message.subject.isEmpty && !message.subject.contains("\n"), "\(locale)/\(name)")
                #expect(message.text.hasSuffix("— Gatehouse\n"), "\(locale)/\(name)")
                #expect(message.html.contains("<html lang=\"\(locale)\">"), "\(locale)/\(name)")
                #expect(message.html.contains("</html>") && !message.html.contains("{{"), "\(locale)/\(name)")
                if ["signup_confirmation", "magic_link", "recovery", "email_change", "reauthentication"].contains(name)
                {
                    #expect(message.text.contains("\n123456\n"), "\(locale)/\(name)")
                    #expect(message.html.contains(">123456</p>"), "\(locale)/\(name)")
                }
            }
        }
    }

    @Test("English keeps the wording the mails always had; links are buttons with the address under them")
    func englishWording() throws {
        let magic = try Self.preview("magic_link")
        #expect(magic.subject == "Your sign-in code")
        let link =
            "https://auth.example.com/auth/v1/verify?token=sample-link-token&type=magiclink"
            + "&redirect_to=https%3A%2F%2Fapp.example.com"
        #expect(
            magic.text == """
                Enter this code in the app to sign in:

                123456

                Or open the link below on this device. The code and link expire in 10 minutes.

                Sign in: \(link)

                — Gatehouse

                """)
        let escaped = link.replacingOccurrences(of: "&", with: "&amp;")
        #expect(magic.html.contains("<a href=\"\(escaped)\" style="))
        #expect(magic.html.contains(">\(escaped)</a>"))
        #expect(try Self.preview("signup_confirmation").subject == "Confirm your email")
        #expect(try Self.preview("email_change").text.contains("Confirm that new@example.com is the new address"))
        let deleted = try Self.preview("account_deleted")
        #expect(deleted.subject == "Your account was deleted")
        #expect(deleted.text.contains("Gatehouse account for ada@example.com was deleted"))
        #expect(deleted.text.contains("sign up again"))
    }

    @Test("a value is HTML-escaped in the HTML part and left as it is in the text and the subject")
    func escaping() throws {
        let hostile = "<script>alert('x')</script>@example.com"
        let message = Mailer.render(
            .emailChange(code: "654321", link: "https://auth.example.com/v?a=1&b=2", newEmail: hostile),
            from: "no-reply@gatehouse.test", to: "ada@example.com", locale: "en", templates: try Self.templates.get(),
            expiresMinutes: 10)
        #expect(message.text.contains("Confirm that \(hostile) is the new address"))
        #expect(!message.html.contains("<script>"))
        #expect(message.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;@example.com"))
        #expect(message.html.contains("https://auth.example.com/v?a=1&amp;b=2"))
        #expect(message.text.contains("https://auth.example.com/v?a=1&b=2"))
        #expect(message.text.contains("expire in 10 minutes"))
    }

    @Test(
        "the locale's language picks the mails, English when there are none in it",
        arguments: [
            ("de", "de"), ("de-AT", "de"), ("de_CH", "de"), ("DE-de", "de"), ("en-GB", "en"), ("fr", "en"),
            ("xx-YY", "en"), ("", "en"), ("../de", "en"), ("de/", "en"),
        ])
    func language(tag: String, expected: String) throws {
        #expect(Mailer.language(tag, in: try Self.templates.get()) == expected)
    }

    @Test("a German locale gets the German mail; an unknown one the English mail")
    func germanPreview() throws {
        let german = try Self.preview("magic_link", locale: "de-AT")
        #expect(german.subject == "Ihr Anmeldecode")
        #expect(german.text.contains("Geben Sie diesen Code in der App ein, um sich anzumelden:\n\n123456"))
        #expect(german.html.contains("Anmelden</a>"))
        #expect(Mailer.language(nil, in: try Self.templates.get()) == "en")
        #expect(try Self.preview("magic_link", locale: "tlh") == Self.preview("magic_link", locale: "en"))
    }

    @Test("an override folder replaces only the files it has; other parts and languages stay built in")
    func overrideOneFile() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/en"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "Sign in to {{product_name}} & more\n".write(
            toFile: folder + "/magic_link.subject.mustache", atomically: true, encoding: .utf8)
        let templates = try Templates.load(overrides: base.path)
        let builtIn = try Self.preview("magic_link")
        let message = try Mailer.preview(name: "magic_link", locale: "en", templates: templates)
        #expect(message.subject == "Sign in to Gatehouse & more")
        #expect(message.text == builtIn.text)
        #expect(message.html == builtIn.html)
        #expect(try Mailer.preview(name: "magic_link", locale: "de", templates: templates).subject == "Ihr Anmeldecode")
        #expect(
            try Mailer.preview(name: "recovery", locale: "en", templates: templates).subject == "Reset your password")
    }

    @Test("a language with only some files falls back to English file by file")
    func partialLanguage() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/fr"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "Votre code de connexion\n".write(
            toFile: folder + "/magic_link.subject.mustache", atomically: true, encoding: .utf8)
        let templates = try Templates.load(overrides: base.path)
        let message = try Mailer.preview(name: "magic_link", locale: "fr-CA", templates: templates)
        #expect(message.subject == "Votre code de connexion")
        #expect(message.text == (try Self.preview("magic_link")).text)
        #expect(
            try Mailer.preview(name: "recovery", locale: "fr", templates: templates).subject == "Reset your password")
    }

    @Test("a template that does not parse stops the load, naming its file")
    func brokenTemplate() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/de"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "<p>{{#code}}never closed</p>\n".write(
            toFile: folder + "/recovery.html.mustache", atomically: true, encoding: .utf8)
        let error = #expect(throws: TemplateError.self) { try Templates.load(overrides: base.path) }
        #expect(error?.file == "de/recovery.html.mustache")
        #expect(error?.description.contains("de/recovery.html.mustache") == true)
    }

    @Test("an unknown mail name is an error that lists the mails")
    func unknownName() throws {
        let error = #expect(throws: UnknownMail.self) { try Self.preview("welcome") }
        #expect(error?.description.contains("no mail named welcome") == true)
        for name in Mailer.names { #expect(error?.description.contains(name) == true) }
    }

    @Test("an account whose profile says German gets its sign-in mail in German")
    func germanAccountEndToEnd() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("deutsch")
            let signUp = try await h.client.signUp(email, password: "correct horse battery", data: ["locale": "de"])
            #expect(signUp.status == 200)
            // The sign-up's own choice of language already writes its confirmation.
            let confirm = try #require(try await h.mail(to: email, subject: "Bestätigen Sie Ihre E-Mail-Adresse").code)
            #expect(try await h.client.verify(email, code: confirm, type: "signup").status == 200)

            #expect(try await h.client.otp(email).status == 200)
            let mail = try await h.mail(to: email, subject: "Ihr Anmeldecode")
            #expect(mail.text.contains("Geben Sie diesen Code in der App ein, um sich anzumelden:"))
            #expect(mail.text.contains("<html lang=\"de\">"))
            let code = try #require(mail.code)
            let verified = try await h.client.verify(email, code: code, type: "email")
            #expect(verified.status == 200)

            // The new address has no account yet: its confirmation goes out in the account's language.
            let access = try #require(verified.json["access_token"] as? String)
            let newEmail = AccountHarness.newEmail("neu")
            let change = try await h.client.put(
                "/auth/v1/user", ["email": newEmail, "current_password": "correct horse battery"], bearer: access)
            #expect(change.status == 200)
            _ = try await h.mail(to: newEmail, subject: "Bestätigen Sie Ihre neue E-Mail-Adresse")
        }
    }
}

@Suite("Development outbox")
struct OutboxTests {
    @Test("writes a 0600 .eml in a new 0700 folder and logs only the path and the recipient's domain")
    func writesMessage() async throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/nested/outbox"
        let log = CapturedLog()
        let outbox = OutboxTransport(directory: folder, logger: log.logger)
        let message = MailMessage(
            from: "noreply@gatehouse.test", to: "ada.lovelace@example.com", subject: "Your sign-in code 482913",
            text: "Enter this code: 482913\n\n— Gatehouse\n", html: "<p>482913</p>")
        try await outbox.send(message)

        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        try #require(files.count == 1, "expected one file, found \(files)")
        let name = files[0]
        #expect(name.wholeMatch(of: /\d{8}T\d{6}Z-[0-9a-f]{6}\.eml/) != nil, "unexpected name \(name)")
        let path = folder + "/" + name
        #expect(try permissions(of: path) == 0o600)
        #expect(try permissions(of: folder) == 0o700)
        let content = try String(contentsOfFile: path, encoding: .utf8)
        #expect(content.contains("Enter this code: 482913\r\n"))
        #expect(content.contains("To: ada.lovelace@example.com\r\n"))

        let lines = log.entries
        try #require(lines.count == 1 && log.all.count == 1)
        #expect(lines[0]["level"] == "info")
        // The message and its metadata, read back from the JSON line.
        let text = lines[0].filter { $0.key != "time" }.sorted { $0.key < $1.key }.map(\.value).joined(separator: " ")
        #expect(text.contains(path))
        #expect(text.contains("example.com"))
        for secret in ["482913", "sign-in", "ada.lovelace", "Enter this code", "Gatehouse\n"] {
            #expect(!text.contains(secret), "the log line shows \(secret)")
        }
    }

    @Test("an invalid address writes nothing")
    func invalidAddress() async throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let log = CapturedLog()
        let outbox = OutboxTransport(directory: base.path + "/outbox", logger: log.logger)
        let message = MailMessage(from: "a@b.test", to: "x@y.test\r\nBcc: e@f.test", subject: "s", text: "t", html: "h")
        let error = await #expect(throws: MailError.self) { try await outbox.send(message) }
        #expect(error?.kind == .invalidAddress)
        #expect(!FileManager.default.fileExists(atPath: base.path + "/outbox"))
        #expect(log.all.isEmpty)
    }
}

/// These run a real SMTP server (aiosmtpd, through Support/smtp_sink.py) on a loopback port.
@Suite("SMTP transport")
struct SMTPTransportTests {
    static let text = """
        Enter this code: 482913
        .a line that starts with a dot
        ..and one with two
        .
        A long line that certainly exceeds seventy-six characters, so quoted-printable must softly break it.
        Trailing spaces stay \u{20}\u{20}
        Equals = signs, tabs\tand ünïcødé — all intact.

        — Gatehouse

        """
    static let message = MailMessage(
        from: "noreply@gatehouse.test", to: "ada@example.com", subject: "Votre code : 482913 ✓", text: text,
        html: "<p>Code: <b>482913</b></p>\n<p>.dot</p>")

    private static func configuration(_ sink: SMTPSink, _ security: SMTPConfiguration.Security) -> SMTPConfiguration {
        SMTPConfiguration(host: "127.0.0.1", port: sink.port, security: security, timeout: .seconds(10))
    }

    @Test("delivers a message intact through a real SMTP server, without TLS when none is offered")
    func delivers() async throws {
        let sink = try await SMTPSink.start()
        defer { sink.stop() }
        try await SMTPTransport(configuration: Self.configuration(sink, .startTLSIfOffered)).send(Self.message)
        let received = try await sink.records(count: 1)[0]
        #expect(received.mailFrom == "noreply@gatehouse.test")
        #expect(received.rcptTos == ["ada@example.com"])
        #expect(received.from == "noreply@gatehouse.test")
        #expect(received.to == "ada@example.com")
        #expect(received.subject == Self.message.subject)
        #expect(received.contentType == "multipart/alternative")
        #expect(received.mimeVersion == "1.0")
        #expect(received.messageId.hasPrefix("<") && received.messageId.hasSuffix("@gatehouse.test>"))
        #expect(received.normalizedText == Self.text)
        #expect(received.normalizedHTML == Self.message.html)
        #expect(received.defects.isEmpty)
        #expect(received.longestLine <= 78)
        #expect(received.tls == false)
        #expect(received.authLogin == nil)
    }

    @Test(
        "a non-ASCII address is sent with SMTPUTF8 when the server offers it, and refused as invalid when it does not")
    func internationalAddresses() async throws {
        var message = Self.message
        message.to = "adá@exämple.com"
        let offering = try await SMTPSink.start(["--smtputf8"])
        defer { offering.stop() }
        let transport = SMTPTransport(configuration: Self.configuration(offering, .startTLSIfOffered))
        #expect(await transport.acceptsInternationalAddresses())
        try await transport.send(message)
        #expect(try await offering.records(count: 1)[0].rcptTos == ["adá@exämple.com"])

        let plain = try await SMTPSink.start()
        defer { plain.stop() }
        let refusing = SMTPTransport(configuration: Self.configuration(plain, .startTLSIfOffered))
        #expect(await refusing.acceptsInternationalAddresses() == false)
        let error = await #expect(throws: MailError.self) { try await refusing.send(message) }
        #expect(error?.kind == .invalidAddress)
        #expect(error?.stage == "MAIL FROM")
    }

    @Test(
        "smtp:// to a server that is not on loopback and offers no STARTTLS fails before sending anything",
        .enabled(if: nonLoopbackAddress() != nil, "needs a non-loopback address on this machine"))
    func plainTextOnlyToLoopback() async throws {
        let address = try #require(nonLoopbackAddress())
        let sink = try await SMTPSink.start(["--bind", address])
        defer { sink.stop() }
        let transport = SMTPTransport(
            configuration: SMTPConfiguration(
                host: address, port: sink.port, security: .startTLSIfOffered, timeout: .seconds(10)))
        let error = await #expect(throws: MailError.self) { try await transport.send(Self.message) }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "STARTTLS")
        #expect(try await sink.records(count: 0).isEmpty)
        // The operator can still say plain text is fine, explicitly.
        try await SMTPTransport(
            configuration: SMTPConfiguration(host: address, port: sink.port, security: .none, timeout: .seconds(10))
        ).send(Self.message)
        #expect(try await sink.records(count: 1)[0].tls == false)
    }

    @Test("sends several messages, one connection each")
    func severalMessages() async throws {
        let sink = try await SMTPSink.start()
        defer { sink.stop() }
        let transport = SMTPTransport(configuration: Self.configuration(sink, .none))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                var message = Self.message
                message.to = "user\(index)@example.com"
                group.addTask { try await transport.send(message) }
            }
            try await group.waitForAll()
        }
        let recipients = try await sink.records(count: 3).flatMap(\.rcptTos)
        #expect(Set(recipients) == ["user0@example.com", "user1@example.com", "user2@example.com"])
    }

    @Test("a refused recipient (550) is a permanent rejection naming the stage and code")
    func rejectedRecipient() async throws {
        let sink = try await SMTPSink.start()
        defer { sink.stop() }
        var message = Self.message
        message.to = "reject-me@example.com"
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: Self.configuration(sink, .startTLSIfOffered)).send(message)
        }
        #expect(error?.kind == .rejected)
        #expect(error?.stage == "RCPT TO")
        #expect(error?.replyCode == 550)
        let description = error?.description ?? ""
        #expect(description.contains("550") && description.contains("RCPT TO"))
        #expect(!description.contains("482913"))
    }

    @Test("a transient refusal (451) means unavailable")
    func deferredRecipient() async throws {
        let sink = try await SMTPSink.start()
        defer { sink.stop() }
        var message = Self.message
        message.to = "defer@example.com"
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: Self.configuration(sink, .none)).send(message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.replyCode == 451)
    }

    @Test("a port where nothing listens fails quickly as unavailable")
    func nothingListens() async throws {
        let port = try freeLoopbackPort()
        // A generous timeout: the refusal itself, not a timeout, must end the attempt, as the detail says.
        let configuration = SMTPConfiguration(host: "127.0.0.1", port: port, timeout: .seconds(60))
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: configuration).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "connect")
        #expect(error?.detail?.contains("refused") == true)
    }

    @Test("a server that never greets times out as unavailable")
    func silentServer() async throws {
        let sink = try await SMTPSink.start(["--silent"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .startTLSIfOffered)
        configuration.timeout = .milliseconds(300)
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: configuration).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "greeting")
        // The configured 0.3 s ended it, not the default 15 s: the detail names the timeout that fired.
        #expect(error?.detail == "no reply within 0.3 seconds")
    }

    @Test("STARTTLS upgrades the connection and then authenticates with AUTH PLAIN")
    func startTLSWithAuth() async throws {
        let sink = try await SMTPSink.start([
            "--tls", "starttls", "--require-starttls", "--auth", "gatehouse:s3cret-pass", "--auth-require-tls",
        ])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .startTLS)
        configuration.certificateVerification = false
        configuration.username = "gatehouse"
        configuration.password = "s3cret-pass"
        try await SMTPTransport(configuration: configuration).send(Self.message)
        let received = try await sink.records(count: 1)[0]
        #expect(received.tls == true)
        #expect(received.authMechanism == "PLAIN")
        #expect(received.authLogin == "gatehouse")
        #expect(received.normalizedText == Self.text)
    }

    @Test("startTLSIfOffered upgrades when the server offers STARTTLS")
    func startTLSIfOffered() async throws {
        let sink = try await SMTPSink.start(["--tls", "starttls"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .startTLSIfOffered)
        configuration.certificateVerification = false
        try await SMTPTransport(configuration: configuration).send(Self.message)
        #expect(try await sink.records(count: 1)[0].tls == true)
    }

    @Test("an untrusted certificate fails the upgrade as unavailable when verification is on")
    func untrustedCertificate() async throws {
        let sink = try await SMTPSink.start(["--tls", "starttls"])
        defer { sink.stop() }
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: Self.configuration(sink, .startTLS)).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "STARTTLS")
        #expect(error?.detail == "TLS handshake failed: certificate verify failed")
        #expect(try await sink.records(count: 0).isEmpty)
    }

    @Test("an untrusted certificate fails implicit TLS as unavailable at the greeting")
    func untrustedCertificateImplicitTLS() async throws {
        let sink = try await SMTPSink.start(["--tls", "implicit"])
        defer { sink.stop() }
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: Self.configuration(sink, .implicitTLS)).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "greeting")
        #expect(error?.detail == "TLS handshake failed: certificate verify failed")
    }

    @Test("plain-text data sent behind the STARTTLS go-ahead is refused, not read as if it came over TLS")
    func startTLSInjection() async throws {
        let sink = try await SMTPSink.start(["--inject-after-starttls"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .startTLS)
        configuration.certificateVerification = false
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: configuration).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "STARTTLS")
        #expect(error?.detail == "unexpected data after the STARTTLS reply")
    }

    @Test("implicit TLS (SMTPS) delivers")
    func implicitTLS() async throws {
        let sink = try await SMTPSink.start(["--tls", "implicit", "--auth", "gatehouse:pw"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .implicitTLS)
        configuration.certificateVerification = false
        configuration.username = "gatehouse"
        configuration.password = "pw"
        try await SMTPTransport(configuration: configuration).send(Self.message)
        let received = try await sink.records(count: 1)[0]
        #expect(received.tls == true)
        #expect(received.authLogin == "gatehouse")
    }

    @Test("requiring STARTTLS from a server that does not offer it fails before sending anything")
    func startTLSRequiredButMissing() async throws {
        let sink = try await SMTPSink.start()
        defer { sink.stop() }
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: Self.configuration(sink, .startTLS)).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "STARTTLS")
        #expect(try await sink.records(count: 0).isEmpty)
    }

    @Test("AUTH LOGIN is used when it is the only mechanism, in plain text only because the server is loopback")
    func authLoginOnLoopback() async throws {
        let sink = try await SMTPSink.start(["--auth", "gatehouse:pw", "--auth-mechanisms", "LOGIN"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .none)
        configuration.username = "gatehouse"
        configuration.password = "pw"
        try await SMTPTransport(configuration: configuration).send(Self.message)
        let received = try await sink.records(count: 1)[0]
        #expect(received.authMechanism == "LOGIN")
        #expect(received.authLogin == "gatehouse")
    }

    @Test("wrong credentials are rejected without the error showing them")
    func wrongPassword() async throws {
        let sink = try await SMTPSink.start(["--auth", "gatehouse:right-password"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .none)
        configuration.username = "gatehouse"
        configuration.password = "wrong-password"
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: configuration).send(Self.message)
        }
        #expect(error?.kind == .rejected)
        #expect(error?.stage == "AUTH")
        #expect(error?.replyCode == 535)
        let description = error?.description ?? ""
        #expect(!description.contains("wrong-password"))
        #expect(!description.contains(Data("\0gatehouse\0wrong-password".utf8).base64EncodedString()))
    }

    @Test("credentials with a server that offers no AUTH fail instead of sending unauthenticated")
    func noAuthOffered() async throws {
        let sink = try await SMTPSink.start(["--auth", "gatehouse:pw", "--auth-require-tls"])
        defer { sink.stop() }
        var configuration = Self.configuration(sink, .startTLSIfOffered)
        configuration.username = "gatehouse"
        configuration.password = "pw"
        let error = await #expect(throws: MailError.self) {
            try await SMTPTransport(configuration: configuration).send(Self.message)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.stage == "AUTH")
        #expect(try await sink.records(count: 0).isEmpty)
    }
}

// MARK: - Helpers

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

private func permissions(of path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}
