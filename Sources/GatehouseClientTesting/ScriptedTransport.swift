import Foundation
import HTTPTypes
import OpenAPIRuntime

/// A server that is only a script, for `GatehouseClient(url:sessionStore:transport:…)` in tests and previews: each
/// operation answers the replies queued for it, in order. A request with none queued is answered 500 and reported to
/// `unscripted` (a test records it as a failure). Every request is recorded.
public final class ScriptedTransport: ClientTransport, @unchecked Sendable {
    /// A request as the server would see it.
    public struct Request: Sendable {
        /// The operation's id in `openapi.yaml` (`token`, `logout`, …).
        public let operationID: String
        /// The request's path and query.
        public let path: String
        /// The body, as UTF-8 text.
        public let body: String
        /// The bearer token sent, if any.
        public let bearer: String?
    }

    /// One answer: a status and JSON body, or a failure to reach the server.
    public enum Reply: Sendable {
        /// A JSON answer with `status`, and headers beside its content type.
        case json(Int, String, headers: [String: String] = [:])
        /// The server cannot be reached: the request throws, as it would offline.
        case unreachable
    }

    /// What an `unreachable` reply throws.
    public struct Offline: Error {}

    private let lock = NSLock()
    private var queued: [String: [Reply]] = [:]
    private var recorded: [Request] = []
    private let unscripted: @Sendable (_ operationID: String) -> Void

    /// A script with nothing queued yet; `unscripted` hears of each request that found no reply.
    public init(unscripted: @escaping @Sendable (_ operationID: String) -> Void = { _ in }) {
        self.unscripted = unscripted
    }

    /// Queues `replies` for `operationID`.
    public func answer(_ operationID: String, _ replies: Reply...) {
        lock.withLock { queued[operationID, default: []] += replies }
    }

    /// Every request so far, oldest first.
    public var requests: [Request] { lock.withLock { recorded } }

    /// The requests so far for `operationID`, oldest first.
    public func requests(_ operationID: String) -> [Request] { requests.filter { $0.operationID == operationID } }

    /// Answers with the next reply queued for `operationID`.
    public func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws
        -> (HTTPResponse, HTTPBody?)
    {
        var text = ""
        if let body { text = String(decoding: try await Data(collecting: body, upTo: 1 << 20), as: UTF8.self) }
        let bearer = request.headerFields[.authorization].map { String($0.dropFirst("Bearer ".count)) }
        let reply: Reply? = lock.withLock {
            recorded.append(.init(operationID: operationID, path: request.path ?? "", body: text, bearer: bearer))
            return queued[operationID]?.isEmpty == false ? queued[operationID]!.removeFirst() : nil
        }
        switch reply {
        case .json(let status, let json, let headers):
            var fields: HTTPFields = [.contentType: "application/json"]
            for (name, value) in headers {
                if let name = HTTPField.Name(name) { fields[name] = value }
            }
            return (HTTPResponse(status: .init(code: status), headerFields: fields), HTTPBody(json))
        case .unreachable:
            throw Offline()
        case nil:
            unscripted(operationID)
            return (HTTPResponse(status: .internalServerError), nil)
        }
    }

    /// The wire session the server answers a sign-in or refresh with, for the user `user-1`.
    public static func session(
        access: String, refresh: String, expiresAt: Date, endsAt: Date? = nil, email: String = "ada@example.com"
    ) -> Reply {
        let ends = endsAt.map { #","session_expires_at":\#(Int64($0.timeIntervalSince1970))"# } ?? ""
        let user = """
            {"id":"user-1","aud":"authenticated","role":"authenticated","email":"\(email)","phone":"",\
            "app_metadata":{},"user_metadata":{},"identities":[],"created_at":"2026-01-01T00:00:00.000Z",\
            "updated_at":"2026-01-01T00:00:00.000Z","is_anonymous":false}
            """
        return .json(
            200,
            """
            {"access_token":"\(access)","token_type":"bearer","expires_in":3600,\
            "expires_at":\(Int64(expiresAt.timeIntervalSince1970)),"refresh_token":"\(refresh)","user":\(user)\(ends)}
            """)
    }

    /// The server's refusal with `status` and its stable `code`.
    public static func refusal(_ status: Int, _ code: String, headers: [String: String] = [:]) -> Reply {
        .json(status, #"{"code":"\#(code)","message":"refused"}"#, headers: headers)
    }
}
