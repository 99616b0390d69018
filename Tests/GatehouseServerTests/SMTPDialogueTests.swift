import Foundation
import Testing

@testable import GatehouseServer

/// The SMTP conversation's rules, tested on the state machine alone: no socket, no server, no clock.
@Suite("SMTP dialogue")
struct SMTPDialogueTests {
    static let envelope = SMTPDialogue.Envelope(
        from: "no-reply@gatehouse.local", to: "ada@example.com", content: "Subject: Hi\r\n\r\nHello\r\n",
        credentials: nil)
    static let credentials = SMTPDialogue.Credentials(username: "mailer", password: "s3cret")

    static func reply(_ code: Int, _ lines: String...) -> SMTPReply {
        SMTPReply(code: code, lines: lines.isEmpty ? [""] : lines)
    }

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    static func dialogue(
        _ purpose: SMTPDialogue.Purpose = .deliver(envelope), security: SMTPConfiguration.Security = .startTLS,
        loopback: Bool = false
    ) -> SMTPDialogue {
        SMTPDialogue(purpose: purpose, security: security, heloName: "gatehouse.test", peerIsLoopback: loopback)
    }

    /// A delivery in plain text to a server on this machine with credentials, as far as its `step`th reply.
    static let plainSteps: [(stage: String, reply: SMTPReply)] = [
        ("greeting", reply(220, "mx ESMTP")), ("EHLO", reply(250, "mx", "AUTH PLAIN")), ("AUTH", reply(235)),
        ("MAIL FROM", reply(250)), ("RCPT TO", reply(250)), ("DATA", reply(354)), ("end of data", reply(250)),
    ]

    static func plainDialogue(upTo step: Int) -> SMTPDialogue {
        var envelope = envelope
        envelope.credentials = credentials
        var dialogue = dialogue(.deliver(envelope), security: .none, loopback: true)
        for (_, reply) in plainSteps.prefix(step) {
            guard case .send = dialogue.receivedReply(reply) else {
                Issue.record("the dialogue stopped before \(plainSteps[step].stage)")
                return dialogue
            }
        }
        return dialogue
    }

    @Test("a delivery: greeting, EHLO, STARTTLS, EHLO again, AUTH PLAIN, envelope, data with dot-stuffing, QUIT")
    func happyPath() {
        var envelope = Self.envelope
        envelope.content = "Subject: Hi\r\n\r\n.hidden line\r\nbye"
        envelope.credentials = Self.credentials
        var dialogue = Self.dialogue(.deliver(envelope))
        #expect(dialogue.stage == "greeting")
        #expect(dialogue.receivedReply(Self.reply(220, "mx.example.com ESMTP")) == .send("EHLO gatehouse.test\r\n"))
        #expect(dialogue.receivedReply(Self.reply(250, "mx.example.com", "STARTTLS", "SIZE 100")) == .startTLS)
        #expect(dialogue.stage == "STARTTLS")
        #expect(dialogue.tlsEstablished() == .send("EHLO gatehouse.test\r\n"))
        #expect(dialogue.stage == "EHLO after STARTTLS")
        let plain = Self.base64("\0mailer\0s3cret")
        #expect(
            dialogue.receivedReply(Self.reply(250, "mx.example.com", "AUTH LOGIN PLAIN"))
                == .send("AUTH PLAIN \(plain)\r\n"))
        #expect(dialogue.receivedReply(Self.reply(235)) == .send("MAIL FROM:<no-reply@gatehouse.local>\r\n"))
        #expect(dialogue.receivedReply(Self.reply(250)) == .send("RCPT TO:<ada@example.com>\r\n"))
        #expect(dialogue.receivedReply(Self.reply(251)) == .send("DATA\r\n"))
        #expect(
            dialogue.receivedReply(Self.reply(354))
                == .send("Subject: Hi\r\n\r\n..hidden line\r\nbye\r\n.\r\n"))
        #expect(dialogue.receivedReply(Self.reply(250)) == .send("QUIT\r\n"))
        let done = dialogue.receivedReply(Self.reply(221))
        #expect(done == .done(capabilities: ["AUTH": ["LOGIN", "PLAIN"]]))
    }

    @Test("capabilities learned before STARTTLS are forgotten after it (RFC 3207 4.2)")
    func capabilitiesAfterTLS() {
        var dialogue = Self.dialogue(.probe)
        _ = dialogue.receivedReply(Self.reply(220))
        #expect(dialogue.receivedReply(Self.reply(250, "mx", "STARTTLS", "SMTPUTF8")) == .startTLS)
        _ = dialogue.tlsEstablished()
        #expect(dialogue.receivedReply(Self.reply(250, "mx", "AUTH=PLAIN")) == .send("QUIT\r\n"))
        #expect(dialogue.receivedReply(Self.reply(221)) == .done(capabilities: ["AUTH": ["PLAIN"]]))
    }

    @Test("a probe without TLS asks nothing but EHLO, and a goodbye that fails changes nothing")
    func probe() {
        var dialogue = Self.dialogue(.probe, security: .none)
        _ = dialogue.receivedReply(Self.reply(220))
        #expect(dialogue.receivedReply(Self.reply(250, "mx", "STARTTLS", "SMTPUTF8")) == .send("QUIT\r\n"))
        #expect(
            dialogue.connectionFailed("the connection was closed")
                == .done(capabilities: ["STARTTLS": [], "SMTPUTF8": []]))
    }

    @Test("STARTTLS required but not offered fails before anything is sent in plain text")
    func startTLSRequiredNotOffered() {
        var dialogue = Self.dialogue(security: .startTLS, loopback: true)
        _ = dialogue.receivedReply(Self.reply(220))
        guard case .fail(let error) = dialogue.receivedReply(Self.reply(250, "mx", "AUTH PLAIN")) else {
            Issue.record("the dialogue went on without TLS")
            return
        }
        #expect(error.kind == .unavailable)
        #expect(error.stage == "STARTTLS")
        #expect(error.detail?.contains("does not offer STARTTLS") == true)
    }

    @Test("STARTTLS when offered: plain text goes on only to a server on this machine")
    func startTLSIfOffered() {
        var remote = Self.dialogue(security: .startTLSIfOffered, loopback: false)
        _ = remote.receivedReply(Self.reply(220))
        guard case .fail(let error) = remote.receivedReply(Self.reply(250, "mx")) else {
            Issue.record("plain text to a remote server")
            return
        }
        #expect(error.stage == "STARTTLS")
        var local = Self.dialogue(security: .startTLSIfOffered, loopback: true)
        _ = local.receivedReply(Self.reply(220))
        #expect(local.receivedReply(Self.reply(250, "mx")) == .send("MAIL FROM:<no-reply@gatehouse.local>\r\n"))
    }

    @Test("a refused STARTTLS or a failed handshake is reported at STARTTLS")
    func startTLSRefused() {
        var refused = Self.dialogue()
        _ = refused.receivedReply(Self.reply(220))
        _ = refused.receivedReply(Self.reply(250, "mx", "STARTTLS"))
        #expect(
            refused.receivedReply(Self.reply(454, "TLS not available"))
                == .fail(MailError(.unavailable, stage: "STARTTLS", replyCode: 454, detail: "TLS not available")))
        var handshake = Self.dialogue()
        _ = handshake.receivedReply(Self.reply(220))
        _ = handshake.receivedReply(Self.reply(250, "mx", "STARTTLS"))
        #expect(
            handshake.connectionFailed("TLS handshake failed: certificate verify failed")
                == .fail(
                    MailError(
                        .unavailable, stage: "STARTTLS", detail: "TLS handshake failed: certificate verify failed")))
    }

    @Test("a 4xx reply means try later, at every stage", arguments: 0..<7)
    func transient(step: Int) {
        var dialogue = Self.plainDialogue(upTo: step)
        let stage = Self.plainSteps[step].stage
        let quoted = !["AUTH", "end of data"].contains(stage)
        #expect(
            dialogue.receivedReply(Self.reply(451, "try again later"))
                == .fail(
                    MailError(.unavailable, stage: stage, replyCode: 451, detail: quoted ? "try again later" : nil)))
    }

    @Test("a 5xx reply is a rejection naming its stage and code, at every stage", arguments: 0..<7)
    func permanent(step: Int) {
        var dialogue = Self.plainDialogue(upTo: step)
        let stage = Self.plainSteps[step].stage
        let quoted = !["AUTH", "end of data"].contains(stage)
        let reply = Self.reply(554, "5.7.1 no", "really not")
        #expect(
            dialogue.receivedReply(reply)
                == .fail(
                    MailError(.rejected, stage: stage, replyCode: 554, detail: quoted ? "5.7.1 no really not" : nil)))
    }

    @Test("an unexpected 2xx or 3xx reply is a failure to try later, quoting the server")
    func unexpected() {
        var dialogue = Self.plainDialogue(upTo: 3)
        #expect(
            dialogue.receivedReply(Self.reply(354, "go on"))
                == .fail(MailError(.unavailable, stage: "MAIL FROM", replyCode: 354, detail: "unexpected reply: go on"))
        )
    }

    @Test("the connection failing mid-dialogue is unavailable at the step it was on")
    func connectionFailed() {
        var dialogue = Self.plainDialogue(upTo: 4)
        #expect(
            dialogue.connectionFailed("no reply within 15 seconds")
                == .fail(MailError(.unavailable, stage: "RCPT TO", detail: "no reply within 15 seconds")))
    }

    @Test("AUTH LOGIN sends the user name and the password as answers to 334")
    func authLogin() {
        var envelope = Self.envelope
        envelope.credentials = Self.credentials
        var dialogue = Self.dialogue(.deliver(envelope), security: .implicitTLS)
        _ = dialogue.receivedReply(Self.reply(220))
        #expect(dialogue.receivedReply(Self.reply(250, "mx", "AUTH LOGIN")) == .send("AUTH LOGIN\r\n"))
        #expect(dialogue.receivedReply(Self.reply(334, "VXNlcm5hbWU6")) == .send(Self.base64("mailer") + "\r\n"))
        #expect(dialogue.receivedReply(Self.reply(334, "UGFzc3dvcmQ6")) == .send(Self.base64("s3cret") + "\r\n"))
        #expect(
            dialogue.receivedReply(Self.reply(535, "5.7.8 bad credentials s3cret"))
                == .fail(MailError(.rejected, stage: "AUTH", replyCode: 535)))
    }

    @Test("credentials never travel in plain text to another machine, nor without a mechanism both sides know")
    func authRefused() {
        var envelope = Self.envelope
        envelope.credentials = Self.credentials
        var plain = Self.dialogue(.deliver(envelope), security: .none, loopback: false)
        _ = plain.receivedReply(Self.reply(220))
        guard case .fail(let error) = plain.receivedReply(Self.reply(250, "mx", "AUTH PLAIN")) else {
            Issue.record("credentials sent in plain text")
            return
        }
        #expect(error.stage == "AUTH" && error.kind == .unavailable)
        var noMechanism = Self.dialogue(.deliver(envelope), security: .implicitTLS)
        _ = noMechanism.receivedReply(Self.reply(220))
        #expect(
            noMechanism.receivedReply(Self.reply(250, "mx", "AUTH CRAM-MD5"))
                == .fail(
                    MailError(
                        .unavailable, stage: "AUTH", detail: "the server offers neither AUTH PLAIN nor AUTH LOGIN")))
    }

    @Test("a server that refuses EHLO is greeted with HELO and offers nothing")
    func heloFallback() {
        var dialogue = Self.dialogue(security: .none)
        _ = dialogue.receivedReply(Self.reply(220))
        #expect(dialogue.receivedReply(Self.reply(502, "command not implemented")) == .send("HELO gatehouse.test\r\n"))
        #expect(dialogue.stage == "HELO")
        #expect(dialogue.receivedReply(Self.reply(250)) == .send("MAIL FROM:<no-reply@gatehouse.local>\r\n"))
    }

    @Test("a non-ASCII address needs SMTPUTF8 and then says so in MAIL FROM")
    func smtpUTF8() {
        var envelope = Self.envelope
        envelope.to = "zoë@example.com"
        var without = Self.dialogue(.deliver(envelope), security: .implicitTLS)
        _ = without.receivedReply(Self.reply(220))
        #expect(
            without.receivedReply(Self.reply(250, "mx"))
                == .fail(
                    MailError(
                        .invalidAddress, stage: "MAIL FROM",
                        detail: "the server does not offer SMTPUTF8, which a non-ASCII address needs")))
        var with = Self.dialogue(.deliver(envelope), security: .implicitTLS)
        _ = with.receivedReply(Self.reply(220))
        #expect(
            with.receivedReply(Self.reply(250, "mx", "SMTPUTF8"))
                == .send("MAIL FROM:<no-reply@gatehouse.local> SMTPUTF8\r\n"))
    }

    @Test("a multi-line reply is one reply; its lines give the EHLO capabilities")
    func multiLineReply() throws {
        var parser = SMTPReplyParser()
        #expect(try parser.parse(Array("250-mx.example.com greets you".utf8)) == nil)
        #expect(parser.isInsideReply)
        #expect(try parser.parse(Array("250-AUTH PLAIN LOGIN".utf8)) == nil)
        #expect(try parser.parse(Array("250-auth=cram-md5".utf8)) == nil)
        let reply = try #require(try parser.parse(Array("250 SMTPUTF8".utf8)))
        #expect(reply.code == 250)
        #expect(reply.lines == ["mx.example.com greets you", "AUTH PLAIN LOGIN", "auth=cram-md5", "SMTPUTF8"])
        #expect(reply.capabilities == ["AUTH": ["PLAIN", "LOGIN", "cram-md5"], "SMTPUTF8": []])
        #expect(!parser.isInsideReply)
        #expect(try parser.parse(Array("221".utf8)) == SMTPReply(code: 221, lines: [""]))
    }

    @Test("lines that are not replies are malformed", arguments: ["", "25", "2x0 ok", "250_ok", "hello"])
    func malformed(line: String) {
        var parser = SMTPReplyParser()
        #expect(throws: SMTPReplyParser.Malformed.self) { try parser.parse(Array(line.utf8)) }
    }

    @Test("a continuation with another code is malformed")
    func mixedCodes() throws {
        var parser = SMTPReplyParser()
        _ = try parser.parse(Array("250-first".utf8))
        #expect(throws: SMTPReplyParser.Malformed.self) { try parser.parse(Array("251 second".utf8)) }
    }

    @Test("quoted server text is printable ASCII and at most 200 characters")
    func safeText() {
        #expect(SMTPReply(code: 550, lines: ["bad\u{1B}[31m\tthing"]).safeText == "bad[31mthing")
        #expect(SMTPReply(code: 550, lines: [String(repeating: "x", count: 300)]).safeText?.count == 201)
        #expect(SMTPReply(code: 550, lines: [""]).safeText == nil)
    }
}
