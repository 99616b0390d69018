import Foundation
import GatehouseServer
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ServiceLifecycle

/// Gatehouse as `buildApplication` makes it, answering through its router in this process: the same middleware and
/// handlers as `gatehouse serve`, the application's services (the store, the mail queue, the sync workers) running
/// beside it, and no socket. Like HummingbirdTesting's `.router` framework, but the requests come from a peer address
/// (a trusted proxy on loopback, as in production behind a load balancer), so per-IP limits and the audit trail see
/// the `X-Forwarded-For` a test sends.
final class RouterServer: TestServer, Transport {
    let services: GatehouseServices
    let baseURL: String
    private let responder: HeadAsGet<RouterResponder<AppRequestContext>>
    private let channel: NIOAsyncTestingChannel
    private let group: ServiceGroup
    private let run: Task<Void, any Error>
    private let logger: Logger

    private init(
        services: GatehouseServices, responder: HeadAsGet<RouterResponder<AppRequestContext>>,
        channel: NIOAsyncTestingChannel, group: ServiceGroup, run: Task<Void, any Error>
    ) {
        self.services = services
        self.baseURL = services.configuration.effectivePublicURL
        self.responder = responder
        self.channel = channel
        self.group = group
        self.run = run
        self.logger = services.logger
    }

    /// Builds the application on `configuration` and returns once it is ready (its store migrated).
    static func start(
        _ configuration: GatehouseConfiguration, logger: Logger = TestStore.quietLogger,
        clock: any GatehouseClock = SystemClock(), mailTransport: (any MailTransport)? = nil
    ) async throws -> RouterServer {
        let services = try GatehouseServices(configuration, logger: logger, clock: clock, mailTransport: mailTransport)
        let app = buildApplication(services, router: try buildRouter(services))
        let group = ServiceGroup(services: app.services, gracefulShutdownSignals: [], logger: logger)
        let run = Task { try await group.run() }
        for process in app.processesRunBeforeServerStart { try await process() }
        let channel = NIOAsyncTestingChannel()
        channel.remoteAddress = try SocketAddress(ipAddress: "127.0.0.1", port: 40_000)
        let server = RouterServer(
            services: services, responder: app.responder, channel: channel, group: group, run: run)
        // A deadline, not a measure: many stores migrate at once when the suite runs in parallel on two cores.
        let ready = try await LiveServer.eventually {
            try await server.send(.GET, server.baseURL + "/health/ready", body: nil, rawBody: nil, headers: [])
                .status == 200
        }
        guard ready else {
            try? await server.stop()
            throw RouterServerError.notReady
        }
        return server
    }

    enum RouterServerError: Error { case notReady }

    /// A response body's parts as the router writes them.
    typealias BodyParts = AsyncThrowingStream<ByteBuffer, any Error>

    /// Stops the application's services and waits until they have.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await run.value
    }

    /// Sends one request through the router, as the server would hand it over from a connection, and reads the whole
    /// answer. `url` may be absolute (a mailed link): only its path and query reach the router.
    func send(
        _ method: NIOHTTP1.HTTPMethod, _ url: String, body: String?, rawBody: String?, headers: [(String, String)]
    ) async throws -> HTTPReply {
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let field = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: field, value: value))
        }
        if body != nil { fields[.contentType] = "application/json" }
        let bytes = (body ?? rawBody).map { ByteBuffer(string: $0) }
        if let bytes { fields[.contentLength] = String(bytes.readableBytes) }
        let target = Self.target(url)
        let (head, parts) = await respond(
            to: HTTPRequest(
                method: HTTPRequest.Method(method.rawValue) ?? .get, scheme: "http", authority: target.authority,
                path: target.path, headerFields: fields),
            body: bytes ?? ByteBuffer())
        var collected = ByteBuffer()
        for try await var part in parts { collected.writeBuffer(&part) }
        var replyHeaders: [String: String] = [:]
        for field in head.headerFields { replyHeaders[field.name.canonicalName] = field.value }
        replyHeaders["server"] = "Gatehouse"
        return HTTPReply(status: head.status.code, headers: replyHeaders, body: String(buffer: collected))
    }

    /// Hands one request to the router, as the server would from a connection, and answers the response's head and
    /// its body as the router writes it: a stream's (the live event stream) part by part, until the reader stops
    /// reading, which stops the writing as a closed connection would.
    func respond(to head: HTTPRequest, body: ByteBuffer) async -> (HTTPResponse, BodyParts) {
        let requestLogger = logger.with(metadataKey: "hb.request.id", value: "\(UUID().uuidString.prefix(8))")
        let context = AppRequestContext(
            source: ApplicationRequestContextSource(channel: channel, logger: requestLogger))
        let response: Response
        do {
            response = try await responder.respond(
                to: Request(head: head, body: RequestBody(buffer: body)), context: context)
        } catch {
            // As the server does: an error no middleware answered is a bare 500.
            response = Response(status: .internalServerError)
        }
        let (parts, feed) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
        let writing = Task {
            do {
                try await response.body.write(BodyFeed(feed))
                feed.finish()
            } catch {
                feed.finish(throwing: error)
            }
        }
        feed.onTermination = { _ in writing.cancel() }
        return (HTTPResponse(status: response.status, headerFields: response.headers), parts)
    }

    /// The authority and the path (with its query) of a URL a test names, absolute or not.
    static func target(_ url: String) -> (authority: String, path: String) {
        guard let scheme = url.range(of: "://") else { return ("localhost", url) }
        let rest = url[scheme.upperBound...]
        let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        var path = String(rest[slash...])
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        return (String(rest[..<slash]), path)
    }
}

/// Hands a response body's parts to a stream as the connection would write them.
private struct BodyFeed: ResponseBodyWriter {
    let feed: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
    init(_ feed: AsyncThrowingStream<ByteBuffer, any Error>.Continuation) { self.feed = feed }
    func write(_ part: ByteBuffer) async throws { feed.yield(part) }
    func finish(_ trailingHeaders: HTTPFields?) async throws { feed.finish() }
}

extension Logger {
    fileprivate func with(metadataKey: String, value: Logger.MetadataValue) -> Logger {
        var logger = self
        logger[metadataKey: metadataKey] = value
        return logger
    }
}
