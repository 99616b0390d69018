import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// An expected failure, answered with a stable code. The message is for people and never carries a secret.
public struct APIError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// Extra response headers, such as `Retry-After`.
    public var headers: HTTPFields
    /// Extra body fields, such as `weak_password: {reasons}`.
    public var details: [String: JSONValue]

    public init(
        _ status: HTTPResponse.Status, code: ErrorCode, message: String, headers: HTTPFields = [:],
        details: [String: JSONValue] = [:]
    ) {
        self.status = status
        self.code = code.rawValue
        self.message = message
        self.headers = headers
        self.details = details
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    /// The answer to a path nothing serves; the console answers it to everyone but its operators (`ConsoleKit`).
    static let noRoute = APIError.notFound("No route matches this method and path")

    public static func notFound(_ message: String = "No such resource") -> APIError {
        APIError(.notFound, code: .notFound, message: message)
    }
    public static func badJSON(_ message: String) -> APIError {
        APIError(.badRequest, code: .badJson, message: message)
    }
    public static func payloadTooLarge(limit: Int) -> APIError {
        APIError(.contentTooLarge, code: .payloadTooLarge, message: "The request body is larger than \(limit) bytes")
    }
    public static func validation(_ message: String) -> APIError {
        APIError(.badRequest, code: .validationFailed, message: message)
    }
    /// Too many requests: the answer says when to come back.
    public static func rateLimited(_ code: ErrorCode, retryAfter seconds: Int, message: String? = nil) -> APIError {
        APIError(
            .tooManyRequests, code: code,
            message: message ?? "Too many requests: try again in \(seconds) seconds",
            headers: [.retryAfter: String(seconds)])
    }
    public static let noAuthorization = APIError(
        .unauthorized, code: .noAuthorization, message: "This endpoint requires a Bearer token")
    public static let badJWT = APIError(
        .forbidden, code: .badJwt,
        message: "invalid JWT: unable to parse or verify signature, token is expired or invalid")
    public static let sessionNotFound = APIError(
        .forbidden, code: .sessionNotFound, message: "Session from session_id claim in JWT does not exist")
    /// A company session used where only the account session may act (`/auth/v1/user`, company login, …).
    public static let accountSessionRequired = APIError(
        .forbidden, code: .accountSessionRequired,
        message: "This needs the account session; a company session cannot change or read the account")
    public static let unsupportedMediaType = APIError(
        .unsupportedMediaType, code: .unsupportedMediaType, message: "The request body must be application/json")
    public static let internalError = APIError(
        .internalServerError, code: .unexpectedFailure, message: "Something went wrong on the server")
    /// The store cannot be reached: nothing was decided, and the client tries again after `Retry-After`.
    public static let storeUnavailable = APIError(
        .serviceUnavailable, code: .storeUnavailable,
        message: "The data store is unreachable: try again in \(StoreOutage.retryAfterSeconds) seconds",
        headers: [.retryAfter: String(StoreOutage.retryAfterSeconds)])

    /// The Supabase API version header that selects the newer error format on `/auth/v1`.
    static let supabaseVersionHeader = HTTPField.Name("X-Supabase-Api-Version")!

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        var body = details
        if request.uri.path.hasPrefix("/auth/v1"), request.headers[Self.supabaseVersionHeader] == nil {
            // GoTrue's legacy shape, which older Supabase clients parse.
            body["code"] = .int(Int64(status.code))
            body["error_code"] = .string(code)
            body["msg"] = .string(message)
        } else {
            if let version = request.headers[Self.supabaseVersionHeader], request.uri.path.hasPrefix("/auth/v1") {
                headers[Self.supabaseVersionHeader] = version
            }
            body["code"] = .string(code)
            body["message"] = .string(message)
        }
        let data = try JSONEncoder.sortedKeys.encode(body)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension JSONEncoder {
    static let sortedKeys: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}
