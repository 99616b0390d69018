import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import NIOTLS

/// A command for the handler: bytes to send (none for the greeting), whether a 220 reply starts TLS, and where
/// the outcome goes.
struct SMTPRequest: Sendable {
    struct TLSUpgrade: Sendable {
        var context: NIOSSLContext
        var serverHostname: String?
    }

    var bytes: ByteBuffer?
    var upgrade: TLSUpgrade?
    var reply: EventLoopPromise<SMTPClientHandler.Response>
}

/// Splits inbound bytes into (multi-line) replies and hands each to the oldest waiting request, bounding every wait
/// by the timeout. Any failure fails every waiter and closes the connection.
final class SMTPClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = SMTPRequest
    typealias OutboundOut = ByteBuffer

    /// What a request led to: the server's reply, or (for an upgrade whose go-ahead came) a completed handshake.
    enum Response: Sendable, Equatable {
        case reply(SMTPReply)
        case tlsEstablished
    }

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
    private var parser = SMTPReplyParser()
    private var waiting: [(request: SMTPRequest, timer: Scheduled<Void>)] = []
    private var unclaimed: [SMTPReply] = []
    /// The STARTTLS request, answered when the handshake completes so TLS failures belong to that step.
    private var upgrading: (promise: EventLoopPromise<Response>, timer: Scheduled<Void>)?
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
        let reply: SMTPReply?
        do {
            reply = try parser.parse(bytes)
        } catch {
            fail(Failure.malformedReply, context: context)
            return
        }
        guard let reply else { return }
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
            upgrading = (request.reply, startTimer(context: context))
            do {
                let tls = try NIOSSLClientHandler(context: upgrade.context, serverHostname: upgrade.serverHostname)
                try context.pipeline.syncOperations.addHandler(tls, position: .first)
            } catch {
                fail(error, context: context)
            }
            return
        }
        request.reply.succeed(.reply(reply))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event, let upgrading {
            self.upgrading = nil
            upgrading.timer.cancel()
            upgrading.promise.succeed(.tlsEstablished)
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
