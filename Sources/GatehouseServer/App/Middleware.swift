import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import OpenAPIRuntime

/// Turns every failure into `{code, message}`: expected ones keep their code, anything else is logged once as a 500.
/// A request that found the store unreachable answers 503 `store_unavailable` with `Retry-After` instead. On the web
/// pages the same failure is a page (`page`), since a person in a browser would otherwise see the JSON.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Logs an outage now and then rather than once per refused request.
    let outages = OutageLog()
    /// The page that answers `error` on a page's route (`PageKit.isPage`), in the language the request's headers ask
    /// for.
    var page: (@Sendable (APIError, HTTPFields) -> WebAnswer)? = nil

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let report = StoreOutage.RequestReport()
        func answer(_ error: APIError) throws -> Response {
            guard let page, PageKit.isPage(method: request.method, path: request.uri.path) else {
                return try error.response(from: request, context: context)
            }
            return try page(error, request.headers).response(from: request, context: context)
        }
        do {
            return try await StoreOutage.$currentRequest.withValue(report) { try await next(request, context) }
        } catch {
            if let outage = Self.outage(answering: error, report: report) {
                outages.record(outage, logger: context.logger)
                return try answer(.storeUnavailable)
            }
            switch error {
            case let error as APIError:
                return try answer(error)
            case let error as ServerError:
                // A generated operation's failure: what the handler threw, or input the generated code could not read.
                if let refusal = error.underlyingError as? APIError { return try answer(refusal) }
                if let answer = error.underlyingError as? any HTTPResponseError {
                    return try answer.response(from: request, context: context)
                }
                guard let translated = Self.translate(error, request: request) else {
                    context.logger.error(
                        "unexpected failure",
                        metadata: [
                            "operation": "\(error.operationID)", "error.type": "\(type(of: error.underlyingError))",
                            "error": "\(error.underlyingError)",
                        ])
                    return try answer(.internalError)
                }
                return try answer(translated)
            case let error as HTTPError:
                return try answer(Self.translate(error))
            default:
                context.logger.error(
                    "unexpected failure", metadata: ["error.type": "\(type(of: error))", "error": "\(error)"])
                return try answer(.internalError)
            }
        }
    }

    /// The unreachable-store failure behind `error`: `error` itself (or what a generated operation wrapped), or one a
    /// query of this request met before the handler answered with an error of its own (say, a session it could not
    /// read answered as ended). A deliberate 503 (`not_ready`) keeps its own code.
    static func outage(answering error: any Error, report: StoreOutage.RequestReport) -> (any Error)? {
        let cause = (error as? ServerError)?.underlyingError ?? error
        if StoreOutage.isUnavailable(cause) { return cause }
        if (cause as? any HTTPResponseError)?.status == .serviceUnavailable { return nil }
        return report.outage
    }

    /// Input the generated code refused, in our shape: a body that is not the operation's JSON (`bad_json`, naming
    /// the field but never echoing a value), a parameter out of the contract (`validation_failed`), a wrong content
    /// type (415), anything else it could not read (400 `bad_request`). Supabase's `unsupported_grant_type` keeps
    /// its code.
    static func translate(_ error: ServerError, request: Request) -> APIError? {
        if error.operationID == Operations.Token.id, error.operationInput == nil,
            request.uri.queryParameters["grant_type"].flatMap({
                Operations.Token.Input.Query.GrantTypePayload(rawValue: String($0))
            }) == nil
        {
            return APIError(
                .badRequest, code: .unsupportedGrantType,
                message: "grant_type must be password, refresh_token, id_token or pkce")
        }
        if let decoding = error.underlyingError as? DecodingError {
            // The generated code reads parameters before the body: without a body, the fault is in a parameter.
            guard request.hasBody else { return .validation("A parameter has a value outside the contract") }
            return .badJSON(DecodingErrors.describe(decoding))
        }
        switch error.httpStatus {
        case .unsupportedMediaType: return .unsupportedMediaType
        case .badRequest where error.causeDescription.contains("request body"):
            return .badJSON("The request body is required")
        case .badRequest, .notAcceptable:
            return APIError(error.httpStatus, code: .badRequest, message: error.causeDescription)
        default: return nil
        }
    }

    /// Hummingbird's own errors (unknown route, oversized body, bad query) in our shape.
    static func translate(_ error: HTTPError) -> APIError {
        var translated: APIError
        switch error.status {
        case .notFound:
            translated = .noRoute
        case .contentTooLarge:
            translated = APIError(.contentTooLarge, code: .payloadTooLarge, message: "The request body is too large")
        case .methodNotAllowed:
            translated = APIError(
                .methodNotAllowed, code: .methodNotAllowed, message: "This method is not allowed here")
        case let status where status.kind == .clientError:
            translated = APIError(status, code: .badRequest, message: error.body ?? "The request could not be read")
        default:
            translated = .internalError
        }
        translated.headers.append(contentsOf: error.headers)
        return translated
    }
}

/// The warning an outage leaves in the log: the first refused request, then at most one every ten seconds while it
/// lasts, with the store's own error.
final class OutageLog: Sendable {
    private let lastLogged = NIOLockedValueBox<ContinuousClock.Instant?>(nil)

    func record(_ error: any Error, logger: Logger) {
        let now = ContinuousClock.now
        let due = lastLogged.withLockedValue { last in
            guard last.map({ now - $0 >= .seconds(10) }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        logger.warning(
            "store unavailable: answering 503 store_unavailable",
            metadata: ["error.type": "\(type(of: error))", "error": "\(String(reflecting: error))"])
    }
}

/// Applies the configured body limit: refuses a declared oversized body at once, and bounds decoding.
struct BodyLimitMiddleware: RouterMiddleware {
    let limit: Int

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw APIError.payloadTooLarge(limit: limit)
        }
        var context = context
        context.maxUploadSize = limit
        // The generated operations read bodies without a bound: collect it here, within the limit.
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: limit)
        } catch {
            throw APIError.payloadTooLarge(limit: limit)
        }
        // A body must say what it is: one without a type could be a cross-site post that needs no CORS preflight.
        if body.readableBytes > 0, request.headers[.contentType] == nil { throw APIError.unsupportedMediaType }
        if body.readableBytes == 0, Self.takesOptionalJSON(request.head) {
            var head = request.head
            head.headerFields[.contentType] = "application/json"
            head.headerFields[.contentLength] = "2"
            request = Request(head: head, body: .init(buffer: ByteBuffer(string: "{}")))
        }
        return try await next(request, context)
    }

    /// The operations whose JSON body is optional and whose clients may send none: a passkey registration's options
    /// (an optional `RecentProof`). Hummingbird hands the generated code an empty body rather than none, which it
    /// refuses as bad JSON; such a request is read as `{}`, as it was before the body was added.
    static func takesOptionalJSON(_ head: HTTPRequest) -> Bool {
        guard head.method == .post, let path = head.path?.prefix(while: { $0 != "?" }) else { return false }
        return path == "/auth/v1/passkeys/registration/options"
            || (path.hasPrefix("/v1/companies/") && path.hasSuffix("/passkeys/registration/options"))
    }
}

/// HEAD is answered as GET without the body (RFC 9110 9.3.2), around the router (whose routes are GET's): a mail
/// scanner's HEAD of a link's page sees what its GET would, and spends nothing either.
public struct HeadAsGet<Wrapped: HTTPResponder>: HTTPResponder {
    let wrapped: Wrapped

    public func respond(to request: Request, context: Wrapped.Context) async throws -> Response {
        guard request.method == .head else { return try await wrapped.respond(to: request, context: context) }
        var head = request.head
        head.method = .get
        var response = try await wrapped.respond(to: Request(head: head, body: request.body), context: context)
        response.body = ResponseBody()
        return response
    }
}

/// The pages' content security policy, shared by the middleware and the pages that widen it.
enum SecurityHeaders {
    static var contentSecurityPolicy: HTTPField.Name { HTTPField.Name("Content-Security-Policy")! }

    /// The pages' policy: no script, inline styles, pictures over https (a company's logo), no framing, and forms
    /// that post here, or to `formTargets` too (the origin or custom scheme a link's button redirects to).
    static func pagePolicy(formTargets: [String]) -> String {
        var actions = ["'self'"]
        for target in formTargets {
            guard let url = URLComponents(string: target), let scheme = url.scheme?.lowercased(),
                scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
            else { continue }
            if let host = url.host, !host.isEmpty, ["http", "https"].contains(scheme) {
                guard host.allSatisfy({ $0.isLetter || $0.isNumber || "-.".contains($0) }) else { continue }
                actions.append("\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? ""))
            } else if !["http", "https", "javascript", "data"].contains(scheme) {
                actions.append("\(scheme):")
            }
        }
        return "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' https:; form-action "
            + actions.joined(separator: " ") + "; frame-ancestors 'none'; base-uri 'none'"
    }
}

/// Headers every answer carries: no MIME sniffing; nothing under the API cached by a browser or proxy, since answers
/// carry tokens and personal data (the public keys and members' pictures may be); and on HTML pages a content
/// security policy with no script and forms that post only here, and a same-origin referrer policy (not no-referrer,
/// which would make the link page's post say `Origin: null`).
struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    static var referrerPolicy: HTTPField.Name { HTTPField.Name("Referrer-Policy")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        if response.headers[.cacheControl] == nil {
            response.headers[.cacheControl] = Self.cachePolicy(path: request.uri.path, response: response)
        }
        if response.headers[.contentType]?.hasPrefix("text/html") == true {
            response.headers[Self.referrerPolicy] = "same-origin"
            if response.headers[SecurityHeaders.contentSecurityPolicy] == nil {
                response.headers[SecurityHeaders.contentSecurityPolicy] = SecurityHeaders.pagePolicy(formTargets: [])
            }
        }
        return response
    }

    /// Public keys are public for five minutes; a member's picture is private to the member's browser for five.
    static func cachePolicy(path: String, response: Response) -> String {
        guard response.status == .ok else { return "no-store" }
        if path == "/auth/v1/.well-known/jwks.json" { return "public, max-age=300" }
        if response.headers[.contentType]?.hasPrefix("image/") == true { return "private, max-age=300" }
        return "no-store"
    }
}

extension Request {
    /// Whether the request declares a body.
    var hasBody: Bool {
        headers[.transferEncoding] != nil || (headers[.contentLength].flatMap { Int($0) } ?? 0) > 0
    }
}

/// Decoding failures described for people.
enum DecodingErrors {
    /// Names the field at fault without echoing any value the client sent.
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let names = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return names.isEmpty ? "the body" : "'\(names.joined(separator: "."))'"
        }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "The request body is not valid JSON"
        case .dataCorrupted(let context):
            return "\(path(context)) has an invalid value"
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.map(\.stringValue) + [key.stringValue]
            return "'\(parent.joined(separator: "."))' is required"
        case .typeMismatch(let type, let context):
            return "\(path(context)) must be \(Self.jsonName(of: type))"
        case .valueNotFound(let type, let context):
            return "\(path(context)) must be \(Self.jsonName(of: type)), not null"
        @unknown default:
            return "The request body could not be read"
        }
    }

    private static func jsonName(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

/// The router's routes, recorded once every route is added, so an unknown method on a known path can be told from
/// an unknown path.
final class RouteTable: Sendable {
    private let routes = NIOLockedValueBox<[(method: String, segments: [Substring])]>([])

    func record(_ described: [(method: String, path: String)]) {
        routes.withLockedValue { $0 = described.map { ($0.method, $0.path.split(separator: "/")) } }
    }

    /// The methods served on `path`, sorted; empty when no route has this path. As the router does, a route naming
    /// a segment outright wins over one taking it as a parameter (`/user/identities/authorize` is not an identity).
    func methods(for path: String) -> [String] {
        let segments = path.split(separator: "/")
        let matches: [(method: String, literals: Int)] = routes.withLockedValue { routes in
            routes.compactMap { route in
                guard route.segments.count == segments.count else { return nil }
                var literals = 0
                for (pattern, given) in zip(route.segments, segments) {
                    if pattern.hasPrefix("{") || pattern.hasPrefix(":") { continue }
                    guard pattern == given else { return nil }
                    literals += 1
                }
                return (route.method, literals)
            }
        }
        let most = matches.map(\.literals).max()
        return matches.filter { $0.literals == most }.map(\.method).uniqued().sorted()
    }
}

/// Answers 405 with `Allow` for a method the path does not serve (the router itself only knows "no route").
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let table: RouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = table.methods(for: request.uri.path)
            guard !allowed.isEmpty else { throw error }
            throw APIError(
                .methodNotAllowed, code: .methodNotAllowed, message: "This method is not allowed here",
                headers: [.allow: allowed.joined(separator: ", ")])
        }
    }
}
