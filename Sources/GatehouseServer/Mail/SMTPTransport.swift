import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Where and how to reach the SMTP server (the "smarthost") that delivers Gatehouse's mail.
public struct SMTPConfiguration: Sendable, Equatable {
    /// How the connection to the server is protected.
    public enum Security: String, Sendable, Equatable {
        /// Plain text throughout; credentials are then only sent to a loopback server.
        case none
        /// Upgrade with STARTTLS, and fail if the server does not offer it.
        case startTLS
        /// Upgrade with STARTTLS when the server offers it; continue in plain text only to a loopback server (a
        /// relay on the same machine), since anyone on a network path could otherwise strip the offer and read codes.
        case startTLSIfOffered
        /// TLS from the first byte (SMTPS, usually port 465).
        case implicitTLS
    }

    public var host: String
    public var port: Int
    public var security: Security
    public var username: String?
    public var password: String?
    /// The name this client gives itself in EHLO.
    public var heloName: String
    /// The longest any single step (connecting, or waiting for one reply) may take.
    public var timeout: Duration
    /// Whether the server's certificate must chain to the system's trust roots and match `host`; only tests turn
    /// this off.
    public var certificateVerification: Bool

    /// Makes a configuration; by default it upgrades to TLS when offered, on the submission port.
    public init(
        host: String,
        port: Int = 587,
        security: Security = .startTLSIfOffered,
        username: String? = nil,
        password: String? = nil,
        heloName: String = "gatehouse.local",
        timeout: Duration = .seconds(15),
        certificateVerification: Bool = true
    ) {
        self.host = host
        self.port = port
        self.security = security
        self.username = username
        self.password = password
        self.heloName = heloName
        self.timeout = timeout
        self.certificateVerification = certificateVerification
    }
}

extension SMTPConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Names everything but the password, so the configuration can be logged or dumped safely.
    public var description: String {
        "SMTPConfiguration(host: \(host), port: \(port), security: \(security.rawValue), "
            + "username: \(username ?? "nil"), password: \(password == nil ? "nil" : "<redacted>"), "
            + "heloName: \(heloName), timeout: \(timeout), certificateVerification: \(certificateVerification))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "host": host, "port": port, "security": security, "username": username as Any,
                "password": password == nil ? "nil" : "<redacted>", "heloName": heloName, "timeout": timeout,
                "certificateVerification": certificateVerification,
            ])
    }
}

/// Sends each message over its own SMTP connection (RFC 5321), with STARTTLS (RFC 3207) and AUTH PLAIN or LOGIN
/// (RFC 4954) as configured.
public struct SMTPTransport: MailTransport {
    public let configuration: SMTPConfiguration
    private let group: any EventLoopGroup
    private let internationalSupport = SharedCache()

    final class SharedCache: Sendable {
        private let state = NIOLockedValueBox<(value: Bool, at: Date)?>(nil)
        func withLock<T>(_ body: (inout (value: Bool, at: Date)?) -> T) -> T { state.withLockedValue { body(&$0) } }
    }

    /// Makes a transport that connects on `eventLoopGroup` (the process-wide NIO group unless told otherwise).
    public init(
        configuration: SMTPConfiguration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.group = eventLoopGroup
    }

    /// Connects, delivers `message` to its one recipient and disconnects; throws `MailError` on any failure.
    public func send(_ message: MailMessage) async throws {
        // Rendering first validates the addresses, so a bad one never reaches the server.
        let content = try message.rfc5322(messageID: message.makeMessageID(), date: Date())
        let credentials = try credentials()
        let tlsContext = try makeTLSContext()
        let outcome = SMTPClientHandler.Outcome()
        let channel = try await connect(tlsContext: tlsContext, outcome: outcome)
        do {
            try await withTaskCancellationHandler {
                let session = SMTPSession(
                    channel: channel, outcome: outcome, configuration: configuration, tlsContext: tlsContext,
                    serverHostname: serverHostname)
                try await session.deliver(
                    from: message.from, to: message.to, content: content, credentials: credentials)
            } onCancel: {
                channel.close(promise: nil)
            }
        } catch {
            channel.close(promise: nil)
            try Task.checkCancellation()
            throw error
        }
        try? await channel.close()
    }

    /// Whether the server offers SMTPUTF8 (asked once, then remembered for ten minutes); true when it cannot be
    /// reached, so the message is queued and the worker reports the real outcome.
    public func acceptsInternationalAddresses() async -> Bool {
        if let known = internationalSupport.withLock({ $0 }), known.at.timeIntervalSinceNow > -600 {
            return known.value
        }
        let value: Bool
        do {
            let tlsContext = try makeTLSContext()
            let outcome = SMTPClientHandler.Outcome()
            let channel = try await connect(tlsContext: tlsContext, outcome: outcome)
            defer { channel.close(promise: nil) }
            let session = SMTPSession(
                channel: channel, outcome: outcome, configuration: configuration, tlsContext: tlsContext,
                serverHostname: serverHostname)
            value = try await session.capabilities()["SMTPUTF8"] != nil
        } catch {
            return true
        }
        internationalSupport.withLock { $0 = (value, Date()) }
        return value
    }

    private func credentials() throws -> (username: String, password: String)? {
        switch (configuration.username, configuration.password) {
        case (nil, nil): return nil
        case (let username?, let password?): return (username, password)
        default: throw MailError(.unavailable, stage: "AUTH", detail: "username and password must be set together")
        }
    }

    /// Only built when TLS may be used, since loading the system trust roots is not free.
    private func makeTLSContext() throws -> NIOSSLContext? {
        guard configuration.security != .none else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if !configuration.certificateVerification { tls.certificateVerification = .none }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw MailError(.unavailable, stage: "TLS", detail: "could not set up TLS: \(error)")
        }
    }

    /// SNI must be a DNS name; for an IP literal NIOSSL checks the certificate against the peer's address instead.
    private var serverHostname: String? {
        (try? SocketAddress(ipAddress: configuration.host, port: 0)) == nil ? configuration.host : nil
    }

    private func connect(tlsContext: NIOSSLContext?, outcome: SMTPClientHandler.Outcome) async throws -> any Channel {
        let implicitTLS = configuration.security == .implicitTLS ? tlsContext : nil
        let hostname = serverHostname
        let timeout = TimeAmount(configuration.timeout)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let implicitTLS {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: implicitTLS, serverHostname: hostname))
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        SMTPClientHandler(timeout: timeout, outcome: outcome))
                }
            }
        do {
            return try await bootstrap.connect(host: configuration.host, port: configuration.port).get()
        } catch {
            throw MailError(
                .unavailable, stage: "connect",
                detail: "could not connect to \(configuration.host):\(configuration.port): \(Self.summary(of: error))")
        }
    }

    private static func summary(of error: any Error) -> String {
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return summary(of: first.error) }
            if let dnsError = error.dnsAAAAError ?? error.dnsAError { return "name resolution failed: \(dnsError)" }
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return "timed out" }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}

/// One SMTP conversation on a connected channel, step by step.
private struct SMTPSession {
    let channel: any Channel
    let outcome: SMTPClientHandler.Outcome
    let configuration: SMTPConfiguration
    let tlsContext: NIOSSLContext?
    let serverHostname: String?

    func deliver(
        from: String, to: String, content: String, credentials: (username: String, password: String)?
    ) async throws {
        var secure = configuration.security == .implicitTLS
        try await step(nil, stage: "greeting", expecting: [220])
        var capabilities = try await hello()
        if configuration.security == .startTLS || configuration.security == .startTLSIfOffered {
            if capabilities["STARTTLS"] != nil, let tlsContext {
                let upgrade = SMTPRequest.TLSUpgrade(context: tlsContext, serverHostname: serverHostname)
                try await step("STARTTLS", stage: "STARTTLS", expecting: [220], upgrade: upgrade)
                secure = true
                // RFC 3207 4.2: everything learned before the upgrade is discarded.
                capabilities = try await hello(stage: "EHLO after STARTTLS")
            } else if configuration.security == .startTLS || !isLoopbackPeer(channel.remoteAddress) {
                throw MailError(
                    .unavailable, stage: "STARTTLS",
                    detail: "the server does not offer STARTTLS; plain text is used only with a loopback server "
                        + "or an explicit smtp+insecure:// URL")
            }
        }
        if let credentials {
            try await authenticate(credentials, capabilities: capabilities, secure: secure)
        }
        // RFC 6531: a non-ASCII address travels only to a server that offers SMTPUTF8.
        let international = !(from + to).utf8.allSatisfy { $0 < 0x80 }
        if international, capabilities["SMTPUTF8"] == nil {
            throw MailError(
                .invalidAddress, stage: "MAIL FROM",
                detail: "the server does not offer SMTPUTF8, which a non-ASCII address needs")
        }
        try await step("MAIL FROM:<\(from)>" + (international ? " SMTPUTF8" : ""), stage: "MAIL FROM", expecting: [250])
        try await step("RCPT TO:<\(to)>", stage: "RCPT TO", expecting: [250, 251])
        try await step("DATA", stage: "DATA", expecting: [354])
        try await step(
            Self.dataPayload(content), stage: "end of data", expecting: [250], isPayload: true, quotesServer: false)
        // The message is accepted at this point; a failed goodbye changes nothing.
        _ = try? await step("QUIT", stage: "QUIT", expecting: [221])
    }

    /// The greeting and EHLO (after STARTTLS when it is offered), then QUIT: what the server offers.
    func capabilities() async throws -> [String: [String]] {
        try await step(nil, stage: "greeting", expecting: [220])
        var capabilities = try await hello()
        if configuration.security != .none, configuration.security != .implicitTLS, capabilities["STARTTLS"] != nil,
            let tlsContext
        {
            let upgrade = SMTPRequest.TLSUpgrade(context: tlsContext, serverHostname: serverHostname)
            try await step("STARTTLS", stage: "STARTTLS", expecting: [220], upgrade: upgrade)
            capabilities = try await hello(stage: "EHLO after STARTTLS")
        }
        _ = try? await step("QUIT", stage: "QUIT", expecting: [221])
        return capabilities
    }

    /// EHLO, falling back to HELO (and no extensions) for servers that predate ESMTP.
    private func hello(stage: String = "EHLO") async throws -> [String: [String]] {
        let reply = try await exchange("EHLO \(configuration.heloName)", stage: stage)
        if reply.code == 250 { return reply.capabilities }
        if [500, 502, 504, 550].contains(reply.code) {
            try await step("HELO \(configuration.heloName)", stage: "HELO", expecting: [250])
            return [:]
        }
        throw failure(reply, stage: stage, quotesServer: true)
    }

    private func authenticate(
        _ credentials: (username: String, password: String), capabilities: [String: [String]], secure: Bool
    ) async throws {
        guard secure || isLoopbackPeer(channel.remoteAddress) else {
            throw MailError(
                .unavailable, stage: "AUTH",
                detail: "refusing to send credentials over an unencrypted connection to a non-loopback server")
        }
        let mechanisms = Set((capabilities["AUTH"] ?? []).map { $0.uppercased() })
        func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
        if mechanisms.contains("PLAIN") {
            let token = base64("\0\(credentials.username)\0\(credentials.password)")
            try await step("AUTH PLAIN \(token)", stage: "AUTH", expecting: [235], quotesServer: false)
        } else if mechanisms.contains("LOGIN") {
            try await step("AUTH LOGIN", stage: "AUTH", expecting: [334], quotesServer: false)
            try await step(base64(credentials.username), stage: "AUTH", expecting: [334], quotesServer: false)
            try await step(base64(credentials.password), stage: "AUTH", expecting: [235], quotesServer: false)
        } else {
            throw MailError(.unavailable, stage: "AUTH", detail: "the server offers neither AUTH PLAIN nor AUTH LOGIN")
        }
    }

    /// Sends one command (or, with `nil`, just waits for the next reply) and insists on one of `expecting`.
    /// `quotesServer` is false where the reply text could echo credentials or message content.
    @discardableResult
    private func step(
        _ command: String?, stage: String, expecting: Set<Int>, upgrade: SMTPRequest.TLSUpgrade? = nil,
        isPayload: Bool = false, quotesServer: Bool = true
    ) async throws -> SMTPReply {
        let reply = try await exchange(command, stage: stage, upgrade: upgrade, isPayload: isPayload)
        guard expecting.contains(reply.code) else { throw failure(reply, stage: stage, quotesServer: quotesServer) }
        return reply
    }

    private func exchange(
        _ command: String?, stage: String, upgrade: SMTPRequest.TLSUpgrade? = nil, isPayload: Bool = false
    ) async throws -> SMTPReply {
        let promise = channel.eventLoop.makePromise(of: SMTPReply.self)
        // A DATA payload carries its own line endings and terminator; a command is one line.
        let bytes = command.map { channel.allocator.buffer(string: isPayload ? $0 : $0 + "\r\n") }
        let request = SMTPRequest(bytes: bytes, upgrade: upgrade, reply: promise)
        // A write that never reaches the handler (the channel already closed) must still end the wait.
        channel.writeAndFlush(request).whenFailure { promise.fail($0) }
        do {
            return try await promise.futureResult.get()
        } catch {
            // A write that found the channel already closed knows less than the handler about why it closed.
            throw MailError(.unavailable, stage: stage, detail: describe(outcome.failure ?? error))
        }
    }

    private func describe(_ error: any Error) -> String {
        switch error {
        case SMTPClientHandler.Failure.timedOut: "no reply within \(configuration.timeout)"
        case SMTPClientHandler.Failure.closed, ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed:
            "the connection was closed"
        case SMTPClientHandler.Failure.malformedReply: "malformed reply"
        case SMTPClientHandler.Failure.dataAfterSTARTTLS: "unexpected data after the STARTTLS reply"
        case is NIOSSLError, is BoringSSLError: Self.tlsSummary(error)
        default: "connection error: \(error)"
        }
    }

    /// BoringSSL's own reason (such as CERTIFICATE_VERIFY_FAILED) without its source paths and numeric codes.
    static func tlsSummary(_ error: any Error) -> String {
        let text = "\(error)"
        guard let marker = text.range(of: "OPENSSL_internal:") else { return "TLS failure: \(text)" }
        let reason = text[marker.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        return "TLS handshake failed: " + reason.lowercased().replacingOccurrences(of: "_", with: " ")
    }

    private func failure(_ reply: SMTPReply, stage: String, quotesServer: Bool) -> MailError {
        let kind: MailError.Kind = (500..<600).contains(reply.code) ? .rejected : .unavailable
        var detail = (400..<600).contains(reply.code) ? nil : "unexpected reply"
        if quotesServer, let text = reply.safeText { detail = detail.map { "\($0): \(text)" } ?? text }
        return MailError(kind, stage: stage, replyCode: reply.code, detail: detail)
    }

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

/// Whether credentials may go to this peer unencrypted: only if it is this machine.
func isLoopbackPeer(_ address: SocketAddress?) -> Bool {
    guard let ip = address?.ipAddress else { return false }
    return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
}

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

/// A command for the handler: bytes to send (none for the greeting), whether a 220 reply starts TLS, and where
/// the reply goes.
struct SMTPRequest: Sendable {
    struct TLSUpgrade: Sendable {
        var context: NIOSSLContext
        var serverHostname: String?
    }

    var bytes: ByteBuffer?
    var upgrade: TLSUpgrade?
    var reply: EventLoopPromise<SMTPReply>
}

/// Splits inbound bytes into (multi-line) replies and hands each to the oldest waiting request, bounding every wait
/// by the timeout. Any failure fails every waiter and closes the connection.
final class SMTPClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = SMTPRequest
    typealias OutboundOut = ByteBuffer

    enum Failure: Error {
        case timedOut
        case closed
        case malformedReply
        case dataAfterSTARTTLS
    }

    /// The first failure, readable off the event loop once the channel is gone.
    final class Outcome: Sendable {
        private let first = NIOLockedValueBox<(any Error)?>(nil)

        var failure: (any Error)? { first.withLockedValue { $0 } }

        func record(_ error: any Error) {
            first.withLockedValue { if $0 == nil { $0 = error } }
        }
    }

    /// RFC 5321 allows 512 octets per reply line; anything far longer is not an SMTP server.
    private static let maximumLineLength = 4096

    private let timeout: TimeAmount
    private let outcome: Outcome
    private var buffer = ByteBuffer()
    private var partial: (code: Int, lines: [String])?
    private var waiting: [(request: SMTPRequest, timer: Scheduled<Void>)] = []
    private var unclaimed: [SMTPReply] = []
    /// The STARTTLS go-ahead, held back until the handshake completes so TLS failures belong to that step.
    private var upgrading: (reply: SMTPReply, promise: EventLoopPromise<SMTPReply>, timer: Scheduled<Void>)?
    private var failed: (any Error)?

    init(timeout: TimeAmount, outcome: Outcome) {
        self.timeout = timeout
        self.outcome = outcome
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if let failed {
            request.reply.fail(failed)
            promise?.fail(failed)
            return
        }
        waiting.append((request, startTimer(context: context)))
        if let bytes = request.bytes {
            context.writeAndFlush(wrapOutboundOut(bytes), promise: promise)
        } else {
            promise?.succeed()
        }
        // A reply may already be here (the greeting usually is).
        while !unclaimed.isEmpty && !waiting.isEmpty {
            deliver(unclaimed.removeFirst(), context: context)
        }
    }

    private func startTimer(context: ChannelHandlerContext) -> Scheduled<Void> {
        context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] () -> Void in
            self?.fail(Failure.timedOut, context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard failed == nil else { return }
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        while failed == nil, let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            var line = buffer.readBytes(length: newline - buffer.readerIndex) ?? []
            buffer.moveReaderIndex(forwardBy: 1)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            parse(line, context: context)
        }
        if buffer.readableBytes > Self.maximumLineLength { fail(Failure.malformedReply, context: context) }
        buffer.discardReadBytes()
    }

    private func parse(_ bytes: [UInt8], context: ChannelHandlerContext) {
        guard bytes.count >= 3, bytes[0...2].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            bytes.count == 3 || bytes[3] == UInt8(ascii: " ") || bytes[3] == UInt8(ascii: "-"),
            let code = Int(String(decoding: bytes[0...2], as: UTF8.self)),
            partial == nil || partial?.code == code
        else {
            fail(Failure.malformedReply, context: context)
            return
        }
        let text = bytes.count > 4 ? String(decoding: bytes[4...], as: UTF8.self) : ""
        var lines = partial?.lines ?? []
        lines.append(text)
        if bytes.count > 3 && bytes[3] == UInt8(ascii: "-") {
            partial = (code, lines)
            return
        }
        partial = nil
        let reply = SMTPReply(code: code, lines: lines)
        if waiting.isEmpty {
            unclaimed.append(reply)
        } else {
            deliver(reply, context: context)
        }
    }

    private func deliver(_ reply: SMTPReply, context: ChannelHandlerContext) {
        let (request, timer) = waiting.removeFirst()
        timer.cancel()
        if let upgrade = request.upgrade, reply.code == 220 {
            // Bytes that arrived with the go-ahead were sent in plain text and must not be read as if they came
            // over TLS (the STARTTLS command-injection attacks).
            guard buffer.readableBytes == 0, unclaimed.isEmpty else {
                request.reply.fail(Failure.dataAfterSTARTTLS)
                fail(Failure.dataAfterSTARTTLS, context: context)
                return
            }
            upgrading = (reply, request.reply, startTimer(context: context))
            do {
                let tls = try NIOSSLClientHandler(context: upgrade.context, serverHostname: upgrade.serverHostname)
                try context.pipeline.syncOperations.addHandler(tls, position: .first)
            } catch {
                fail(error, context: context)
            }
            return
        }
        request.reply.succeed(reply)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event, let upgrading {
            self.upgrading = nil
            upgrading.timer.cancel()
            upgrading.promise.succeed(upgrading.reply)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error, context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(Failure.closed, context: context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        fail(Failure.closed, context: context)
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard failed == nil else { return }
        failed = error
        outcome.record(error)
        if let upgrading {
            self.upgrading = nil
            upgrading.timer.cancel()
            upgrading.promise.fail(error)
        }
        let waiters = waiting
        waiting = []
        for (request, timer) in waiters {
            timer.cancel()
            request.reply.fail(error)
        }
        context.close(promise: nil)
    }
}
