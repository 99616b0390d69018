import AsyncHTTPClient
import Foundation
import GatehouseServer
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// A Gatehouse a test talks to: on a port (`LiveServer`) or through its router in this process (`RouterServer`).
protocol TestServer: Sendable {
    var services: GatehouseServices { get }
    /// The server's public URL: where its mailed links and pages point.
    var baseURL: String { get }
    func stop() async throws
}

/// How a test's requests reach Gatehouse: over a socket (`HTTPClient`) or through the router (`RouterServer`).
protocol Transport: Sendable {
    /// Sends one request and reads the whole answer. `body` is JSON (sent with its content type); `rawBody` is sent
    /// as it is, with whatever content type the caller names.
    func send(
        _ method: HTTPMethod, _ url: String, body: String?, rawBody: String?, headers: [(String, String)]
    ) async throws -> HTTPReply
}

extension Transport {
    func send(
        _ method: HTTPMethod, _ url: String, body: String? = nil, rawBody: String? = nil,
        headers: [(String, String)] = []
    ) async throws -> HTTPReply {
        try await send(method, url, body: body, rawBody: rawBody, headers: headers)
    }
}

/// A Gatehouse application running on a loopback port in this process, as `gatehouse serve` runs it: for what needs
/// the socket (the live event stream, the SDK over URLSession, slow or dropped connections).
struct LiveServer: TestServer {
    let port: Int
    let services: GatehouseServices
    let group: ServiceGroup
    let run: Task<Void, any Error>

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts the application (with any extra test routes) and returns once it listens.
    static func start(
        _ configuration: GatehouseConfiguration,
        logger: Logger = TestStore.quietLogger,
        clock: any GatehouseClock = SystemClock(), mailTransport: (any MailTransport)? = nil,
        routes: (Router<AppRequestContext>) -> Void = { _ in }
    ) async throws -> LiveServer {
        let services = try GatehouseServices(configuration, logger: logger, clock: clock, mailTransport: mailTransport)
        let router = try buildRouter(services)
        routes(router)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildApplication(services, router: router) { port in continuation.yield(port) }
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
        // A server that cannot start (its port was taken meanwhile) ends the stream, so the caller fails instead of
        // waiting for a port that never comes.
        let run = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await run.value
            throw CancellationError()
        }
        return LiveServer(port: port, services: services, group: group, run: run)
    }

    /// Shuts down gracefully and waits until the application has stopped.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await run.value
    }

    /// Polls `condition` until it holds or `timeout` passes: a deadline for a loaded machine, never a measure.
    static func eventually(
        timeout: Duration = .seconds(60), _ condition: () async throws -> Bool
    ) async throws -> Bool {
        try await firstValue(within: timeout) { try await condition() ? true : nil } ?? false
    }
}

/// Polls `produce` every `interval` until it gives a value, or nil once `timeout` has passed: every wait of the
/// suite for state is this one loop, with a deadline for a loaded machine, never a measure.
func firstValue<Value>(
    within timeout: Duration = .seconds(60), every interval: Duration = .milliseconds(20),
    _ produce: () async throws -> Value?
) async throws -> Value? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let value = try await produce() { return value }
        try await Task.sleep(for: interval)
    }
    return nil
}

/// A response read whole.
struct HTTPReply {
    let status: Int
    let headers: [String: String]
    let body: String

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }

    /// The body as a JSON array of objects (empty when it is not one).
    var jsonArray: [[String: Any]] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [[String: Any]] ?? []
    }
}

extension HTTPClient: Transport {
    func send(
        _ method: HTTPMethod, _ url: String, body: String?, rawBody: String?, headers: [(String, String)]
    ) async throws -> HTTPReply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        } else if let rawBody {
            // The caller names the content type (or leaves it out on purpose).
            request.body = .bytes(ByteBuffer(string: rawBody))
        }
        let response = try await execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        var fields: [String: String] = [:]
        for header in response.headers { fields[header.name.lowercased()] = header.value }
        return HTTPReply(status: Int(response.status.code), headers: fields, body: String(buffer: bytes))
    }
}

/// A plain Hummingbird server on a loopback port, for the stand-ins of other parties' servers (a provider's keys,
/// Apple's token endpoint): their routes only, no Gatehouse and no store to migrate.
struct FakeHTTPServer: Sendable {
    let port: Int
    let group: ServiceGroup
    let run: Task<Void, any Error>

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start(_ routes: (Router<BasicRequestContext>) -> Void) async throws -> FakeHTTPServer {
        let router = Router()
        routes(router)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: TestStore.quietLogger)
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: TestStore.quietLogger)
        let run = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await run.value
            throw CancellationError()
        }
        return FakeHTTPServer(port: port, group: group, run: run)
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await run.value
    }
}
