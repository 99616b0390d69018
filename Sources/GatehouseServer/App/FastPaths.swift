import HTTPTypes
import Hummingbird
import NIOCore

/// A route answered with JSON written outside the generated serializer: the same bytes it would write, from what is
/// already encoded (a cached user, stored record fields). The feature that owns the route declares its fast path
/// beside its handler (`Accounts/AuthFastPaths.swift`, `Sync/SyncFastPaths.swift`), and `buildRouter` registers them
/// all from one table (`FastPaths`).
///
/// The contract stays the generated operation's. A fast path takes a request only as it is: `answer` gives nil for
/// anything else (another content type, an `Accept` without JSON, a body that does not decode), and the request goes
/// on to the generated handler, with its body as read, so every refusal keeps its generated answer; a refusal of the
/// caller (no session, wrong company) is thrown as the generated handler throws it.
struct FastPath: Sendable {
    /// The route's method.
    let method: HTTPRequest.Method
    /// Whether the request's path (and query) is the route's.
    let matches: @Sendable (Request) -> Bool
    /// The answer's JSON, or nil to leave the request to the generated handler.
    let answer: @Sendable (inout Request, AppRequestContext) async throws -> [UInt8]?

    /// The request's body, read whole (up to the context's limit) and kept for the generated handler.
    static func body(_ request: inout Request, context: AppRequestContext) async throws -> ByteBuffer {
        try await request.collectBody(upTo: context.maxUploadSize)
    }

    /// The company of `/v1/companies/{cid}/` followed by `rest`; nil for any other path (or an id the generated
    /// router would have to decode).
    static func companyID(_ path: String, _ rest: [Substring]) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4 + rest.count, parts[0].isEmpty, parts[1] == "v1", parts[2] == "companies",
            Array(parts.dropFirst(4)) == rest, !parts[3].isEmpty, !parts[3].contains("%")
        else { return nil }
        return String(parts[3])
    }

    /// `application/json`, with parameters or none.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.prefix { $0 != ";" }.trimmingHTTPWhitespace
        return type.lowercased() == "application/json"
    }

    /// No `Accept`, or one that takes JSON.
    static func acceptsJSON(_ accept: String?) -> Bool {
        guard let accept else { return true }
        return accept.split(separator: ",").contains { range in
            let type = range.prefix { $0 != ";" }.trimmingHTTPWhitespace.lowercased()
            return type == "application/json" || type == "application/*" || type == "*/*"
        }
    }

    /// A request that sends JSON and takes JSON back.
    static func exchangesJSON(_ request: Request) -> Bool {
        isJSON(request.headers[.contentType]) && acceptsJSON(request.headers[.accept])
    }
}

/// The fast paths, tried before the generated router: the first whose route matches answers, or hands the request
/// on to the generated handler.
struct FastPaths: RouterMiddleware {
    typealias Context = AppRequestContext

    let paths: [FastPath]

    init(_ paths: [FastPath]) { self.paths = paths }

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        guard let path = paths.first(where: { $0.method == request.method && $0.matches(request) }) else {
            return try await next(request, context)
        }
        var request = request
        guard let json = try await path.answer(&request, context) else { return try await next(request, context) }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }
}
