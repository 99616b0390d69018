/// Something that delivers outgoing mail: an SMTP server, or the development outbox.
public protocol MailTransport: Sendable {
    /// Delivers one message, or throws a `MailError` saying why it could not.
    func send(_ message: MailMessage) async throws
    /// Whether an address with non-ASCII characters can be delivered (SMTPUTF8); asked before such a mail is queued.
    func acceptsInternationalAddresses() async -> Bool
}

extension MailTransport {
    public func acceptsInternationalAddresses() async -> Bool { true }
}

/// Why a message could not be sent; safe to log, as it never carries credentials or message content.
public struct MailError: Error, CustomStringConvertible, Equatable {
    /// Whether retrying later may help, the server refused for good, or the message itself is malformed.
    public enum Kind: String, Sendable, Equatable {
        /// Could not connect, timed out, failed TLS, or got a transient (4xx) reply: retrying later may help.
        case unavailable
        /// The server refused with a permanent (5xx) reply: retrying the same message will not help.
        case rejected
        /// An address or header value is unusable (for example, it would allow header injection).
        case invalidAddress
    }

    /// What went wrong, in the terms callers act on.
    public var kind: Kind
    /// The step that failed, such as "connect", "EHLO", "RCPT TO" or "To".
    public var stage: String
    /// The SMTP reply code, when the server answered.
    public var replyCode: Int?
    /// A short explanation that is safe to log; never credentials or message content.
    public var detail: String?

    /// Makes an error; `detail` must never contain credentials or message content.
    public init(_ kind: Kind, stage: String, replyCode: Int? = nil, detail: String? = nil) {
        self.kind = kind
        self.stage = stage
        self.replyCode = replyCode
        self.detail = detail
    }

    public var description: String {
        var text = "mail \(kind.rawValue) at \(stage)"
        if let replyCode { text += " (SMTP \(replyCode))" }
        if let detail, !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}
