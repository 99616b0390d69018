import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// One count the overview charts, per minute (`console_series`).
///
/// Every series is counted from the request and its answer's status, in one place (`ConsoleSeriesMiddleware`), so
/// the rule is the route, not where each feature happens to audit:
/// - sign-ins: a session given for a password, an identity token or a PKCE code (`POST /auth/v1/token`), a mailed
///   code or link (`POST /auth/v1/verify`) or a passkey (`POST /auth/v1/passkeys/authentication/verify`), answered
///   200; and the account pages' sign-in by password or by code, answered 303 (the way on to the account).
/// - failed sign-ins: the same routes refused with 400, 401 or 403 (a wrong password or code, a banned or unconfirmed
///   account). A rate limit (429) is not a sign-in that failed: it counts in 4xx only.
/// - sign-ups: `POST /auth/v1/signup` answered 200. An address that already has an account is answered alike (the
///   answer must not tell), so it counts too.
/// - refreshes: `POST /auth/v1/token?grant_type=refresh_token` answered 200.
/// - sync pushes: `POST /v1/companies/{cid}/sync/push` answered 200.
/// - 4xx and 5xx: every answer of that class.
/// Latency is a histogram (`LatencyBuckets`) of every request's time to its answer's head.
/// Probes (`/health/live`, `/health/ready`) and scrapes (`/metrics`) are not traffic and count nowhere: a load balancer
/// asking every few seconds would fill the charts, and readiness's 503s while a store migrates are not failures.
enum ConsoleSeries: String, CaseIterable, Sendable {
    case signIns = "sign_ins"
    case signUps = "sign_ups"
    case failedSignIns = "failed_sign_ins"
    case refreshes
    case syncPushes = "sync_pushes"
    case responses4xx = "responses_4xx"
    case responses5xx = "responses_5xx"

    /// The probes and scrapes, which count nowhere.
    static let uncounted: Set<String> = ["/health/live", "/health/ready", "/metrics"]

    /// The grants of `POST /auth/v1/token` that sign in.
    static let signInGrants: Set<Substring> = ["password", "id_token", "pkce"]

    /// What one request adds to (besides its latency); `grantType` is the token endpoint's query parameter.
    static func counted(method: HTTPRequest.Method, path: String, grantType: Substring?, status: Int) -> [ConsoleSeries]
    {
        var series: [ConsoleSeries] = []
        if (400..<500).contains(status) { series.append(.responses4xx) }
        if status >= 500 { series.append(.responses5xx) }
        guard method == .post else { return series }
        let refused = status == 400 || status == 401 || status == 403
        switch path {
        case "/auth/v1/token":
            if grantType == "refresh_token" {
                if status == 200 { series.append(.refreshes) }
            } else if let grantType, signInGrants.contains(grantType) {
                if status == 200 { series.append(.signIns) } else if refused { series.append(.failedSignIns) }
            }
        case "/auth/v1/verify", "/auth/v1/passkeys/authentication/verify":
            if status == 200 { series.append(.signIns) } else if refused { series.append(.failedSignIns) }
        case "/account/sign-in", "/account/code/verify":
            if status == 303 { series.append(.signIns) } else if refused { series.append(.failedSignIns) }
        case "/auth/v1/signup":
            if status == 200 { series.append(.signUps) }
        default:
            if status == 200, path.hasPrefix("/v1/companies/"), path.hasSuffix("/sync/push") {
                series.append(.syncPushes)
            }
        }
        return series
    }
}

/// The latency histogram's buckets: each request counts in the first whose bound (milliseconds) its time does not
/// exceed, or in the last, unbounded one. Stored as series `latency_le_<ms>` (`latency_le_inf`), each counting its
/// own slice only (not cumulative, as Prometheus's are), so buckets summed over any minutes and instances still give
/// the p99 of all of them.
enum LatencyBuckets {
    static let bounds = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]
    static let names = bounds.map { "latency_le_\($0)" } + ["latency_le_inf"]

    /// The bucket of a request that took `milliseconds`.
    static func index(milliseconds: Double) -> Int {
        bounds.firstIndex { milliseconds <= Double($0) } ?? bounds.count
    }

    /// The 99th percentile of a histogram (`counts` by bucket): the bound of the bucket the 99th percentile request
    /// falls in, so "at most this many milliseconds". Nil without requests. One past the last bound answers the last
    /// bound: read it as that long or longer.
    static func p99(_ counts: [Int64]) -> Int? {
        let total = counts.reduce(0, +)
        guard total > 0 else { return nil }
        // The rank of the 99th percentile request, 1-based: ceil(0.99 × total) in integers.
        let rank = (total * 99 + 99) / 100
        var seen: Int64 = 0
        for (index, count) in counts.enumerated() {
            seen += count
            if seen >= rank { return bounds[min(index, bounds.count - 1)] }
        }
        return bounds[bounds.count - 1]
    }
}

/// The names every count is kept under, in one order: the series, then the latency buckets.
enum SeriesNames {
    static let all = ConsoleSeries.allCases.map(\.rawValue) + LatencyBuckets.names
    static let latencyOffset = ConsoleSeries.allCases.count
    static let index: [String: Int] = Dictionary(uniqueKeysWithValues: all.enumerated().map { ($1, $0) })

    static func index(of series: ConsoleSeries) -> Int {
        ConsoleSeries.allCases.firstIndex(of: series) ?? 0
    }
}

/// This instance's counts since its last flush, by epoch minute: counting takes one lock and a few additions, cheap
/// beside any request; `flush` adds them to `console_series`, where every instance's counts of a minute meet.
final class ConsoleSeriesRecorder: Sendable {
    private let counts = NIOLockedValueBox<[Int64: [Int64]]>([:])
    let clock: any GatehouseClock

    init(clock: any GatehouseClock) {
        self.clock = clock
    }

    /// The epoch minute of `date`.
    static func minute(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 / 60).rounded(.down)) }

    /// Counts one answered request.
    func record(series: [ConsoleSeries], milliseconds: Double) {
        let minute = Self.minute(clock.now)
        let bucket = SeriesNames.latencyOffset + LatencyBuckets.index(milliseconds: milliseconds)
        counts.withLockedValue { counts in
            counts[minute, default: Array(repeating: 0, count: SeriesNames.all.count)][bucket] += 1
            for one in series {
                counts[minute, default: Array(repeating: 0, count: SeriesNames.all.count)][
                    SeriesNames.index(of: one)] += 1
            }
        }
    }

    /// Takes the counts waiting, leaving none.
    func take() -> [Int64: [Int64]] {
        counts.withLockedValue { counts in
            defer { counts = [:] }
            return counts
        }
    }

    /// Gives back counts a failed flush took, to go with the next.
    func restore(_ taken: [Int64: [Int64]]) {
        counts.withLockedValue { counts in
            for (minute, values) in taken {
                var sum = counts[minute] ?? Array(repeating: 0, count: SeriesNames.all.count)
                for index in values.indices { sum[index] += values[index] }
                counts[minute] = sum
            }
        }
    }

    /// Adds the counts waiting to the store (each minute and series to what other instances added); on failure they
    /// wait for the next flush.
    func flush(to store: Store) async throws {
        let taken = take()
        let rows = taken.sorted { $0.key < $1.key }.flatMap { minute, values in
            values.enumerated().filter { $0.element > 0 }.map {
                ConsoleSeriesRepository.Row(minute: minute, series: SeriesNames.all[$0.offset], value: $0.element)
            }
        }
        guard !rows.isEmpty else { return }
        do {
            try await store.transaction { db in try await ConsoleSeriesRepository(db: db).add(rows) }
        } catch {
            restore(taken)
            throw error
        }
    }
}

/// Counts every request into the overview's series: placed near the top of the router, so the fast paths and the
/// refusals count too, and below the error middleware's shaping, so the status is the one the client saw.
struct ConsoleSeriesMiddleware<Context: RequestContext>: RouterMiddleware {
    let recorder: ConsoleSeriesRecorder

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        let status: Int
        do {
            let response = try await next(request, context)
            status = response.status.code
            count(request, status: status, started: started)
            return response
        } catch {
            count(request, status: (error as? any HTTPResponseError)?.status.code ?? 500, started: started)
            throw error
        }
    }

    private func count(_ request: Request, status: Int, started: ContinuousClock.Instant) {
        let path = request.uri.path
        guard !ConsoleSeries.uncounted.contains(path) else { return }
        let grant = path == "/auth/v1/token" ? request.uri.queryParameters["grant_type"] : nil
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        recorder.record(
            series: ConsoleSeries.counted(method: request.method, path: path, grantType: grant, status: status),
            milliseconds: milliseconds)
    }
}

/// Adds this instance's counts to the store every minute, and once more when the server stops.
struct ConsoleSeriesFlusher: Service {
    let recorder: ConsoleSeriesRecorder
    let store: Store
    let logger: Logger
    var interval: Duration = .seconds(60)

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            await flush()
        }
    }

    private func flush() async {
        do {
            try await recorder.flush(to: store)
        } catch {
            logger.warning("console series not flushed", metadata: ["error": "\(String(reflecting: error))"])
        }
    }
}
