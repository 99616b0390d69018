import Foundation
import Testing

@testable import GatehouseServer

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
