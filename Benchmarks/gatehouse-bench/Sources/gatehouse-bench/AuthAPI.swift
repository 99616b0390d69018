import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Hands out a different `X-Forwarded-For` address for every request, so the server's per-IP limits never trip.
final class ForwardedAddresses: Sendable {
    private let next: Atomic<UInt32>

    /// Starts at a random point of 10.0.0.0/8 so that runs in a row against one server do not reuse addresses.
    init() {
        next = Atomic(UInt32.random(in: 0..<(1 << 24)))
    }

    /// The next address; after 2^24 requests it wraps, by when the limit windows of the first are long over.
    func take() -> String {
        let n = next.wrappingAdd(1, ordering: .relaxed).oldValue & 0xFF_FFFF
        return "10.\(n >> 16).\((n >> 8) & 0xFF).\(n & 0xFF)"
    }
}

/// One answer: its status and its whole body.
struct Reply: Sendable {
    let status: Int
    let body: ByteBuffer

    var isSuccess: Bool { (200..<300).contains(status) }

    /// The status with Gatehouse's `error_code` and `msg`, never the rest of the body, which could hold tokens.
    var problem: String {
        struct ErrorBody: Decodable {
            let errorCode: String?
            let message: String?

            enum CodingKeys: String, CodingKey {
                case errorCode = "error_code"
                case message = "msg"
            }
        }
        let parsed = try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView))
        let code = parsed?.errorCode ?? "-"
        let message = (parsed?.message ?? "").prefix(160)
        return "HTTP \(status) \(code) \(message)"
    }

    /// The session's tokens, or a `BenchError` naming the status.
    func sessionTokens() throws -> SessionTokens {
        guard isSuccess else { throw BenchError(problem) }
        do {
            return try JSONDecoder().decode(SessionTokens.self, from: Data(body.readableBytesView))
        } catch {
            throw BenchError("HTTP \(status) but the body is not a session")
        }
    }
}

/// The fields of a session answer that the benchmark uses.
struct SessionTokens: Decodable, Sendable {
    let accessToken: String
    let refreshToken: String

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
    }
}

/// A thin client for Gatehouse's auth endpoints over one pooled `HTTPClient`.
struct AuthAPI: Sendable {
    let http: HTTPClient
    let base: String
    let timeout: TimeAmount
    let addresses = ForwardedAddresses()

    /// Runs `body` with a pooled client on the process-wide event loop group and shuts the client down after.
    static func with<Result: Sendable>(
        base: String, connections: Int, timeout seconds: Double,
        _ body: (AuthAPI) async throws -> Result
    ) async throws -> Result {
        // One connection per worker, so no request ever waits for a free connection and skews its latency.
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .http1Only
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(connections, 1))
        let timeout = TimeAmount.nanoseconds(Int64(seconds * 1e9))
        configuration.timeout = .init(connect: .seconds(5), read: timeout)
        return try await HTTPClient.withHTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration
        ) { http in
            try await body(AuthAPI(http: http, base: base, timeout: timeout))
        }
    }

    /// Sends one request from a fresh forwarded address and reads the whole answer.
    func send(_ method: HTTPMethod, _ path: String, json: ByteBuffer? = nil, bearer: String? = nil) async throws
        -> Reply
    {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "X-Forwarded-For", value: addresses.take())
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(json)
        }
        if let bearer {
            request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        }
        let response = try await http.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 4 << 20)
        return Reply(status: Int(response.status.code), body: body)
    }

    /// A JSON object of strings, ready to send.
    static func json(_ fields: [String: String]) -> ByteBuffer {
        // Encoding a [String: String] cannot fail.
        ByteBuffer(bytes: (try? JSONEncoder().encode(fields)) ?? Data("{}".utf8))
    }

    /// `POST /auth/v1/signup`.
    func signUp(email: String, password: String) async throws -> Reply {
        try await send(.POST, "/auth/v1/signup", json: Self.json(["email": email, "password": password]))
    }

    /// `POST /auth/v1/verify` with a mailed sign-up code.
    func verifySignUp(email: String, code: String) async throws -> Reply {
        try await send(.POST, "/auth/v1/verify", json: Self.json(["type": "signup", "email": email, "token": code]))
    }

    /// `POST /auth/v1/token?grant_type=password` with a body made once by `passwordBody`.
    func signIn(body: ByteBuffer) async throws -> Reply {
        try await send(.POST, "/auth/v1/token?grant_type=password", json: body)
    }

    /// The body of a password sign-in.
    static func passwordBody(email: String, password: String) -> ByteBuffer {
        json(["email": email, "password": password])
    }

    /// `POST /auth/v1/token?grant_type=refresh_token`.
    func refresh(_ refreshToken: String) async throws -> Reply {
        try await send(
            .POST, "/auth/v1/token?grant_type=refresh_token", json: Self.json(["refresh_token": refreshToken]))
    }

    /// `GET /auth/v1/user`.
    func user(accessToken: String) async throws -> Reply {
        try await send(.GET, "/auth/v1/user", bearer: accessToken)
    }

    /// `GET /`, the server's no-op route.
    func noop() async throws -> Reply {
        try await send(.GET, "/")
    }
}
