import Foundation
import GatehouseAPI
import OpenAPIRuntime
import Prometheus

/// Liveness, readiness, metrics and the API contract: what operators and load balancers ask.
struct OperationsService: Sendable {
    let store: Store
    let metrics: PrometheusCollectorRegistry
    /// The bearer token `/metrics` asks for; nil refuses every request.
    let metricsToken: String?
    let openAPIDocument: Data

    /// The store answers and its schema is current; 503 `not_ready` otherwise.
    func readiness() async throws -> Schemas.Readiness {
        guard await store.isReady(), let version = store.schemaVersion else {
            throw APIError(
                .serviceUnavailable, code: .notReady, message: "The store is not reachable or not migrated yet")
        }
        return .init(status: .ready, store: .init(rawValue: store.location.kind) ?? .sqlite, schemaVersion: version)
    }

    /// Prometheus text exposition of every metric the process records, for a scraper holding the metrics token.
    func exposition(authorization: String?) throws -> [UInt8] {
        guard let metricsToken else {
            throw APIError(
                .forbidden, code: .metricsDisabled,
                message: "Metrics are served only with a token: start the server with --metrics-token")
        }
        guard let authorization, authorization.lowercased().hasPrefix("bearer "),
            Secrets.constantTimeEquals(String(authorization.dropFirst("bearer ".count)), metricsToken)
        else {
            var error = APIError.noAuthorization
            error.headers[.wwwAuthenticate] = "Bearer"
            throw error
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 * 1024)
        metrics.emit(into: &bytes)
        return bytes
    }
}

extension API {
    /// A route that does nothing: the baseline later benchmarks compare against.
    func getServiceInfo(_ input: Operations.GetServiceInfo.Input) async throws -> Operations.GetServiceInfo.Output {
        .ok(.init(body: .json(.init(name: "gatehouse", version: GatehouseVersion.current))))
    }

    func getLiveness(_ input: Operations.GetLiveness.Input) async throws -> Operations.GetLiveness.Output {
        .ok(.init(body: .json(.init(status: .ok))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        .ok(.init(body: .json(try await operations.readiness())))
    }

    func getMetrics(_ input: Operations.GetMetrics.Input) async throws -> Operations.GetMetrics.Output {
        let authorization = RequestScope.current?.head.headerFields[.authorization]
        return .ok(.init(body: .plainText(HTTPBody(try operations.exposition(authorization: authorization)))))
    }

    func getOpenAPIDocument(_ input: Operations.GetOpenAPIDocument.Input) async throws
        -> Operations.GetOpenAPIDocument.Output
    {
        .ok(.init(body: .yaml(HTTPBody(operations.openAPIDocument))))
    }
}

/// The release this binary was built as.
public enum GatehouseVersion {
    public static let current = "0.1.0"
}
