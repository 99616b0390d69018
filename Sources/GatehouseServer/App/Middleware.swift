import Foundation
import Hummingbird
import Logging
import Synchronization

/// Turns every failure into `{code, message}`: expected ones keep their code, anything else is logged once as a 500.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.translate(error).response(from: request, context: context)
        } catch {
            context.logger.error(
                "unexpected failure", metadata: ["error.type": "\(type(of: error))", "error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }

    /// Hummingbird's own errors (unknown route, oversized body, bad query) in our shape.
    static func translate(_ error: HTTPError) -> APIError {
        var translated: APIError
        switch error.status {
        case .notFound:
            translated = .notFound("No route matches this method and path")
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
        return try await next(request, context)
    }
}

/// Headers every answer carries: no MIME sniffing; and nothing under the API may be cached by a browser or proxy,
/// since answers carry tokens and personal data (the JWKS sets its own public caching).
struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        if response.headers[.cacheControl] == nil {
            response.headers[.cacheControl] = "no-store"
        }
        return response
    }
}

extension Request {
    /// Whether the body is declared as JSON (`application/json`, or any `+json` type, with parameters).
    var hasJSONBody: Bool {
        guard
            let type = headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
                .lowercased()
        else { return false }
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }

    /// Decodes a JSON body within the context's size limit, with a stable error for malformed or oversized input.
    /// Anything not declared as JSON is refused with 415: a cross-site form or `text/plain` post cannot reach a
    /// JSON endpoint without a CORS preflight.
    public func decodeJSON<T: Decodable>(as type: T.Type, context: some RequestContext) async throws -> T {
        guard hasJSONBody else { throw APIError.unsupportedMediaType }
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: context.maxUploadSize)
        } catch {
            throw APIError.payloadTooLarge(limit: context.maxUploadSize)
        }
        do {
            return try JSONDecoder().decode(T.self, from: buffer)
        } catch let error as DecodingError {
            throw APIError.badJSON(Self.describe(error))
        }
    }

    /// Decodes an `application/x-www-form-urlencoded` body (the link page's button) within the size limit.
    func decodeForm(context: some RequestContext) async throws -> [String: String] {
        guard let type = headers[.contentType]?.lowercased(), type.hasPrefix("application/x-www-form-urlencoded") else {
            throw APIError(
                .unsupportedMediaType, code: .unsupportedMediaType,
                message: "The request body must be application/x-www-form-urlencoded")
        }
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: context.maxUploadSize)
        } catch {
            throw APIError.payloadTooLarge(limit: context.maxUploadSize)
        }
        var components = URLComponents()
        components.percentEncodedQuery = String(buffer: buffer).replacingOccurrences(of: "+", with: "%20")
        var fields: [String: String] = [:]
        for item in components.queryItems ?? [] where fields[item.name] == nil {
            fields[item.name] = item.value ?? ""
        }
        return fields
    }

    /// Names the field at fault without echoing any value the client sent.
    private static func describe(_ error: DecodingError) -> String {
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
    private let routes = Mutex<[(method: String, segments: [Substring])]>([])

    func record(_ described: [(method: String, path: String)]) {
        routes.withLock { $0 = described.map { ($0.method, $0.path.split(separator: "/")) } }
    }

    /// The methods served on `path`, sorted; empty when no route has this path.
    func methods(for path: String) -> [String] {
        let segments = path.split(separator: "/")
        return routes.withLock { routes in
            routes.filter { route in
                route.segments.count == segments.count
                    && zip(route.segments, segments).allSatisfy { pattern, given in
                        pattern.hasPrefix("{") || pattern.hasPrefix(":") || pattern == given
                    }
            }.map(\.method)
        }.uniqued().sorted()
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
