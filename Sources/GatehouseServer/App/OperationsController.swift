import Foundation
import GatehouseAPI
import Hummingbird
import Prometheus

/// Liveness, readiness, metrics and the API contract: what operators and load balancers ask.
struct OperationsController {
    let store: Store
    let metrics: PrometheusCollectorRegistry
    /// The bearer token `/metrics` asks for; nil refuses every request.
    let metricsToken: String?
    let openAPIDocument: ByteBuffer

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("/health/live", use: live)
        router.get("/health/ready", use: ready)
        router.get("/metrics", use: emitMetrics)
        router.get("/openapi.yaml", use: document)
        router.get("/", use: noop)
    }

    /// The process is up and answering.
    @Sendable func live(_ request: Request, context: AppRequestContext) async throws -> Components.Schemas.HealthStatus
    {
        .init(status: .ok)
    }

    /// The store answers and its schema is current; 503 `not_ready` otherwise.
    @Sendable func ready(_ request: Request, context: AppRequestContext) async throws -> Components.Schemas.Readiness {
        guard await store.isReady(), let version = store.schemaVersion else {
            throw APIError(
                .serviceUnavailable, code: .notReady, message: "The store is not reachable or not migrated yet")
        }
        return .init(status: .ready, store: .init(rawValue: store.location.kind) ?? .sqlite, schemaVersion: version)
    }

    /// Prometheus text exposition of every metric the process records, for a scraper holding the metrics token.
    @Sendable func emitMetrics(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let metricsToken else {
            throw APIError(
                .forbidden, code: .metricsDisabled,
                message: "Metrics are served only with a token: start the server with --metrics-token")
        }
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
            Secrets.constantTimeEquals(String(header.dropFirst("bearer ".count)), metricsToken)
        else {
            var error = APIError.noAuthorization
            error.headers[.wwwAuthenticate] = "Bearer"
            throw error
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 * 1024)
        metrics.emit(into: &bytes)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The OpenAPI document the server and SDK are generated from.
    @Sendable func document(_ request: Request, context: AppRequestContext) async throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: openAPIDocument))
    }

    /// A route that does nothing: the baseline later benchmarks compare against.
    @Sendable func noop(_ request: Request, context: AppRequestContext) async throws -> Components.Schemas.ServiceInfo {
        .init(name: "gatehouse", version: GatehouseVersion.current)
    }
}

/// The release this binary was built as.
public enum GatehouseVersion {
    public static let current = "0.1.0"
}

extension Components.Schemas.HealthStatus: ResponseGenerator {}
extension Components.Schemas.HealthStatus: ResponseEncodable {}
extension Components.Schemas.Readiness: ResponseGenerator {}
extension Components.Schemas.Readiness: ResponseEncodable {}
extension Components.Schemas.ServiceInfo: ResponseGenerator {}
extension Components.Schemas.ServiceInfo: ResponseEncodable {}
