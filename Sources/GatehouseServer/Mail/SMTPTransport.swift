import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

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
        let envelope = SMTPDialogue.Envelope(
            from: message.from, to: message.to, content: content, credentials: try credentials())
        let tlsContext = try makeTLSContext()
        let outcome = SMTPClientHandler.Outcome()
        let channel = try await connect(tlsContext: tlsContext, outcome: outcome)
        do {
            try await withTaskCancellationHandler {
                _ = try await converse(.deliver(envelope), on: channel, outcome: outcome, tlsContext: tlsContext)
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
            let capabilities = try await converse(.probe, on: channel, outcome: outcome, tlsContext: tlsContext)
            value = capabilities["SMTPUTF8"] != nil
        } catch {
            return true
        }
        internationalSupport.withLock { $0 = (value, Date()) }
        return value
    }

    private func credentials() throws -> SMTPDialogue.Credentials? {
        switch (configuration.username, configuration.password) {
        case (nil, nil): return nil
        case (let username?, let password?): return SMTPDialogue.Credentials(username: username, password: password)
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

extension SMTPTransport {
    /// Carries out a dialogue on a connected channel: each action it asks for, then what came of it, until it is done
    /// (returning what the server offers) or fails (throwing its `MailError`).
    private func converse(
        _ purpose: SMTPDialogue.Purpose, on channel: any Channel, outcome: SMTPClientHandler.Outcome,
        tlsContext: NIOSSLContext?
    ) async throws -> [String: [String]] {
        var dialogue = SMTPDialogue(
            purpose: purpose, security: configuration.security, heloName: configuration.heloName,
            peerIsLoopback: isLoopbackPeer(channel.remoteAddress))
        // The greeting comes unasked.
        var response = await request(nil, on: channel)
        while true {
            let action: SMTPDialogue.Action
            switch response {
            case .success(.reply(let reply)): action = dialogue.receivedReply(reply)
            case .success(.tlsEstablished): action = dialogue.tlsEstablished()
            // A write that found the channel already closed knows less than the handler about why it closed.
            case .failure(let error): action = dialogue.connectionFailed(describe(outcome.failure ?? error))
            }
            switch action {
            case .send(let text):
                response = await request(text, on: channel)
            case .startTLS:
                guard let tlsContext else {
                    throw MailError(.unavailable, stage: "STARTTLS", detail: "TLS is not set up")
                }
                let upgrade = SMTPRequest.TLSUpgrade(context: tlsContext, serverHostname: serverHostname)
                response = await request("STARTTLS\r\n", upgrade: upgrade, on: channel)
            case .fail(let error):
                throw error
            case .done(let capabilities):
                return capabilities
            }
        }
    }

    /// Writes `text` (nothing, to wait for the greeting) and waits for what the handler makes of it.
    private func request(
        _ text: String?, upgrade: SMTPRequest.TLSUpgrade? = nil, on channel: any Channel
    ) async -> Result<SMTPClientHandler.Response, any Error> {
        let promise = channel.eventLoop.makePromise(of: SMTPClientHandler.Response.self)
        let request = SMTPRequest(
            bytes: text.map { channel.allocator.buffer(string: $0) }, upgrade: upgrade, reply: promise)
        // A write that never reaches the handler (the channel already closed) must still end the wait.
        channel.writeAndFlush(request).whenFailure { promise.fail($0) }
        do {
            return .success(try await promise.futureResult.get())
        } catch {
            return .failure(error)
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
}

/// Whether credentials may go to this peer unencrypted: only if it is this machine.
func isLoopbackPeer(_ address: SocketAddress?) -> Bool {
    guard let ip = address?.ipAddress else { return false }
    return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
}
