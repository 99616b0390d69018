import Foundation
import GatehouseClientAPI
import HTTPTypes
import OpenAPIRuntime

/// The bearer token a call carries, set around each call by the client.
enum Bearer {
    @TaskLocal static var current: String?
}

/// Added to every request: the error format the SDK reads, and the caller's bearer token. A refusal becomes a
/// `GatehouseError` before the generated client parses the answer; its `Retry-After` counts from `clock`'s time.
struct GatehouseMiddleware: ClientMiddleware {
    static let apiVersion = HTTPField.Name("X-Supabase-Api-Version")!
    /// The error format the SDK reads (`{code, message}` under /auth/v1 too).
    static let apiVersionValue = "2024-01-01"
    /// The time a refusal's `Retry-After` counts from.
    let clock: any SessionClock

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[Self.apiVersion] = Self.apiVersionValue
        if let bearer = Bearer.current { request.headerFields[.authorization] = "Bearer \(bearer)" }
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status.code >= 400 else { return (response, responseBody) }
        var data = Data()
        if let responseBody { data = try await Data(collecting: responseBody, upTo: 1 << 20) }
        throw ErrorBody.error(
            status: response.status.code, body: data, retryAfter: response.headerFields[.retryAfter],
            receivedAt: clock.now)
    }
}

/// Runs one generated call with `bearer`, and turns what it throws into a `GatehouseError`: a refusal as the
/// middleware typed it, anything that never reached the server as `network`.
func call<T: Sendable>(bearer: String? = nil, _ body: () async throws -> T) async throws(GatehouseError) -> T {
    do {
        return try await Bearer.$current.withValue(bearer) { try await body() }
    } catch let error as GatehouseError {
        throw error
    } catch let error as ClientError {
        if let typed = error.underlyingError as? GatehouseError { throw typed }
        throw .network(String(describing: error.underlyingError))
    } catch {
        throw .network(String(describing: error))
    }
}
