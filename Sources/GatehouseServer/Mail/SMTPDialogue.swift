import Foundation

/// One SMTP conversation (RFC 5321, with STARTTLS from RFC 3207, AUTH from RFC 4954 and SMTPUTF8 from RFC 6531) as
/// a state machine: it is told what the server replied and what became of the connection, and answers with what to
/// do next. It does no I/O, so its rules are tested without a socket, as postgres-nio tests its connection state
/// machine; `SMTPTransport` carries out its actions on a channel.
struct SMTPDialogue {
    /// What the conversation is for.
    enum Purpose: Equatable {
        /// Hand one message to the server.
        case deliver(Envelope)
        /// Learn what the server offers (after STARTTLS when it is offered), then say goodbye.
        case probe
    }

    /// A message on its way: who it is from and to, its RFC 5322 text (CRLF line endings), and how to sign in.
    struct Envelope: Equatable {
        var from: String
        var to: String
        var content: String
        var credentials: Credentials?
    }

    /// A user name and password for AUTH; described without the password.
    struct Credentials: Equatable, CustomStringConvertible {
        var username: String
        var password: String

        var description: String { "Credentials(username: \(username), password: <redacted>)" }
    }

    /// What the transport does next.
    enum Action: Equatable {
        /// Write this text (a command with its CRLF, or the message with its final "."); then `receivedReply`.
        case send(String)
        /// Write STARTTLS and, on its 220, start TLS; then `tlsEstablished()`, or `receivedReply` with any other reply.
        case startTLS
        /// Close the connection: the conversation failed with this error.
        case fail(MailError)
        /// Close the connection: the conversation succeeded, and the server offers these EHLO extensions.
        case done(capabilities: [String: [String]])
    }

    private enum State: Equatable {
        case greeting
        case ehlo(afterTLS: Bool)
        case helo
        case startTLS
        case authPlain
        case authLogin
        case authLoginUsername
        case authLoginPassword
        case mailFrom
        case recipient
        case data
        case endOfData
        case quit
        case finished
    }

    private let purpose: Purpose
    private let security: SMTPConfiguration.Security
    private let heloName: String
    /// Plain text and credentials without TLS are allowed only to a server on this machine.
    private let peerIsLoopback: Bool
    private var state = State.greeting
    private var secure: Bool
    private var upgraded = false
    private var capabilities: [String: [String]] = [:]

    /// A conversation that starts by waiting for the server's greeting.
    init(purpose: Purpose, security: SMTPConfiguration.Security, heloName: String, peerIsLoopback: Bool) {
        self.purpose = purpose
        self.security = security
        self.heloName = heloName
        self.peerIsLoopback = peerIsLoopback
        self.secure = security == .implicitTLS
    }

    /// The step a failure is reported at.
    var stage: String {
        switch state {
        case .greeting: "greeting"
        case .ehlo(let afterTLS): afterTLS ? "EHLO after STARTTLS" : "EHLO"
        case .helo: "HELO"
        case .startTLS: "STARTTLS"
        case .authPlain, .authLogin, .authLoginUsername, .authLoginPassword: "AUTH"
        case .mailFrom: "MAIL FROM"
        case .recipient: "RCPT TO"
        case .data: "DATA"
        case .endOfData: "end of data"
        case .quit, .finished: "QUIT"
        }
    }

    /// The server answered the last command (or greeted).
    mutating func receivedReply(_ reply: SMTPReply) -> Action {
        switch state {
        case .greeting:
            guard reply.code == 220 else { return fail(reply) }
            return hello(afterTLS: false)
        case .ehlo:
            if reply.code == 250 {
                capabilities = reply.capabilities
                return afterHello()
            }
            // A server that predates ESMTP: HELO, and no extensions.
            guard [500, 502, 504, 550].contains(reply.code) else { return fail(reply) }
            state = .helo
            return .send("HELO \(heloName)\r\n")
        case .helo:
            guard reply.code == 250 else { return fail(reply) }
            capabilities = [:]
            return afterHello()
        case .startTLS:
            // The go-ahead arrives as `tlsEstablished()`; any reply here refuses the upgrade.
            return fail(reply)
        case .authPlain, .authLoginPassword:
            guard reply.code == 235 else { return fail(reply) }
            return mailFrom()
        case .authLogin:
            guard reply.code == 334, let credentials = envelope?.credentials else { return fail(reply) }
            state = .authLoginUsername
            return .send(Self.base64(credentials.username) + "\r\n")
        case .authLoginUsername:
            guard reply.code == 334, let credentials = envelope?.credentials else { return fail(reply) }
            state = .authLoginPassword
            return .send(Self.base64(credentials.password) + "\r\n")
        case .mailFrom:
            guard reply.code == 250, let envelope else { return fail(reply) }
            state = .recipient
            return .send("RCPT TO:<\(envelope.to)>\r\n")
        case .recipient:
            guard [250, 251].contains(reply.code) else { return fail(reply) }
            state = .data
            return .send("DATA\r\n")
        case .data:
            guard reply.code == 354, let envelope else { return fail(reply) }
            state = .endOfData
            return .send(Self.dataPayload(envelope.content))
        case .endOfData:
            guard reply.code == 250 else { return fail(reply) }
            state = .quit
            return .send("QUIT\r\n")
        case .quit, .finished:
            // The message was accepted (or the probe is over) before QUIT; its answer changes nothing.
            state = .finished
            return .done(capabilities: capabilities)
        }
    }

    /// The TLS handshake after STARTTLS's go-ahead completed.
    mutating func tlsEstablished() -> Action {
        guard state == .startTLS else {
            return .fail(MailError(.unavailable, stage: stage, detail: "TLS started without STARTTLS"))
        }
        secure = true
        upgraded = true
        // RFC 3207 4.2: everything learned before the upgrade is discarded.
        capabilities = [:]
        return hello(afterTLS: true)
    }

    /// The connection failed: closed, timed out, or TLS did not start; `detail` says which.
    mutating func connectionFailed(_ detail: String) -> Action {
        switch state {
        case .quit, .finished:
            state = .finished
            return .done(capabilities: capabilities)
        default:
            return .fail(MailError(.unavailable, stage: stage, detail: detail))
        }
    }

    private var envelope: Envelope? {
        if case .deliver(let envelope) = purpose { return envelope }
        return nil
    }

    private mutating func hello(afterTLS: Bool) -> Action {
        state = .ehlo(afterTLS: afterTLS)
        return .send("EHLO \(heloName)\r\n")
    }

    private mutating func afterHello() -> Action {
        let mayUpgrade = (security == .startTLS || security == .startTLSIfOffered) && !upgraded
        guard let envelope else {
            if mayUpgrade, capabilities["STARTTLS"] != nil {
                state = .startTLS
                return .startTLS
            }
            state = .quit
            return .send("QUIT\r\n")
        }
        if mayUpgrade {
            if capabilities["STARTTLS"] != nil {
                state = .startTLS
                return .startTLS
            }
            if security == .startTLS || !peerIsLoopback {
                return .fail(
                    MailError(
                        .unavailable, stage: "STARTTLS",
                        detail: "the server does not offer STARTTLS; plain text is used only with a loopback server "
                            + "or an explicit smtp+insecure:// URL"))
            }
        }
        if let credentials = envelope.credentials {
            return authenticate(credentials)
        }
        return mailFrom()
    }

    private mutating func authenticate(_ credentials: Credentials) -> Action {
        guard secure || peerIsLoopback else {
            return .fail(
                MailError(
                    .unavailable, stage: "AUTH",
                    detail: "refusing to send credentials over an unencrypted connection to a non-loopback server"))
        }
        let mechanisms = Set((capabilities["AUTH"] ?? []).map { $0.uppercased() })
        if mechanisms.contains("PLAIN") {
            state = .authPlain
            return .send("AUTH PLAIN \(Self.base64("\0\(credentials.username)\0\(credentials.password)"))\r\n")
        }
        if mechanisms.contains("LOGIN") {
            state = .authLogin
            return .send("AUTH LOGIN\r\n")
        }
        return .fail(
            MailError(.unavailable, stage: "AUTH", detail: "the server offers neither AUTH PLAIN nor AUTH LOGIN"))
    }

    private mutating func mailFrom() -> Action {
        guard let envelope else { return .fail(MailError(.unavailable, stage: "MAIL FROM", detail: "no message")) }
        // RFC 6531: a non-ASCII address travels only to a server that offers SMTPUTF8.
        let international = !(envelope.from + envelope.to).utf8.allSatisfy { $0 < 0x80 }
        if international, capabilities["SMTPUTF8"] == nil {
            return .fail(
                MailError(
                    .invalidAddress, stage: "MAIL FROM",
                    detail: "the server does not offer SMTPUTF8, which a non-ASCII address needs"))
        }
        state = .mailFrom
        return .send("MAIL FROM:<\(envelope.from)>" + (international ? " SMTPUTF8" : "") + "\r\n")
    }

    /// A reply that is not the one the step expects: 5xx is a rejection, anything else means try later. The server's
    /// text is quoted, except where it could echo credentials or the message.
    private func fail(_ reply: SMTPReply) -> Action {
        let kind: MailError.Kind = (500..<600).contains(reply.code) ? .rejected : .unavailable
        var detail = (400..<600).contains(reply.code) ? nil : "unexpected reply"
        let quotesServer = ![.authPlain, .authLogin, .authLoginUsername, .authLoginPassword, .endOfData].contains(state)
        if quotesServer, let text = reply.safeText { detail = detail.map { "\($0): \(text)" } ?? text }
        return .fail(MailError(kind, stage: stage, replyCode: reply.code, detail: detail))
    }

    private static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    /// The message with dot-stuffing (RFC 5321 4.5.2) and the terminating "." line; `content` already uses CRLF.
    static func dataPayload(_ content: String) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(content.utf8.count + 64)
        var atLineStart = true
        for byte in content.utf8 {
            if atLineStart && byte == UInt8(ascii: ".") { output.append(UInt8(ascii: ".")) }
            output.append(byte)
            atLineStart = byte == UInt8(ascii: "\n")
        }
        if !atLineStart { output += Array("\r\n".utf8) }
        output += Array(".\r\n".utf8)
        return String(decoding: output, as: UTF8.self)
    }
}
