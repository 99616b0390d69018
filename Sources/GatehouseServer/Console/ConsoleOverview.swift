import Foundation
import Hummingbird

/// The stretch of time the overview charts, and how its minutes are rolled into points.
enum OverviewRange: String, CaseIterable, Sendable {
    case hour, day, week

    /// How many points a chart has.
    var slots: Int {
        switch self {
        case .hour: 60
        case .day: 96
        case .week: 168
        }
    }

    /// How many minutes one point sums.
    var step: Int64 {
        switch self {
        case .hour: 1
        case .day: 15
        case .week: 60
        }
    }
}

/// The overview's numbers from the store's sums per slot (`ConsoleSeriesRepository.totals`): a series' points, and
/// the p99 latency from the summed histogram. Pure, so tests give it sums by hand.
enum SeriesRollup {
    /// One series' value in each slot, oldest first; 0 where nothing was counted.
    static func points(_ totals: [Int: [String: Int64]], series: String, slots: Int) -> [Int64] {
        (0..<slots).map { totals[$0]?[series] ?? 0 }
    }

    /// The latency histogram of one slot, or of every slot summed (`slot` nil).
    static func histogram(_ totals: [Int: [String: Int64]], slot: Int?) -> [Int64] {
        let chosen = slot.map { [totals[$0] ?? [:]] } ?? Array(totals.values)
        return LatencyBuckets.names.map { name in chosen.reduce(0) { $0 + ($1[name] ?? 0) } }
    }

    /// Each slot's p99 latency in milliseconds, 0 where there was no request.
    static func p99Points(_ totals: [Int: [String: Int64]], slots: Int) -> [Int64] {
        (0..<slots).map { Int64(LatencyBuckets.p99(histogram(totals, slot: $0)) ?? 0) }
    }
}

/// The console's overview: a chart per series over the last hour, day or week, and the store's health.
struct ConsoleOverview: Sendable {
    let kit: ConsoleKit

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
    }

    /// The charts in the page's order, by series name and the strings key of its heading.
    static let charts: [(series: String, key: String)] = [
        ("sign_ins", "overview_sign_ins"), ("sign_ups", "overview_sign_ups"),
        ("failed_sign_ins", "overview_failed_sign_ins"), ("refreshes", "overview_refreshes"),
        ("sync_pushes", "overview_sync_pushes"), ("responses_4xx", "overview_responses_4xx"),
        ("responses_5xx", "overview_responses_5xx"), ("latency_p99", "overview_latency_p99"),
    ]

    func register(on router: Router<AppRequestContext>) {
        router.get("/console") { request, _ in
            let asked = request.uri.queryParameters["range"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                guard let range = asked.map(OverviewRange.init(rawValue:)) ?? .day else {
                    throw PageInput.invalidParameter
                }
                return try await overview(range, console)
            }
        }
    }

    /// The page for `range`: its points end with the current minute.
    func overview(_ range: OverviewRange, _ console: ConsoleCaller) async throws -> WebAnswer {
        let end = ConsoleSeriesRecorder.minute(kit.clock.now) + 1
        let start = end - range.step * Int64(range.slots)
        let totals = try await ConsoleSeriesRepository(db: kit.store.database)
            .totals(from: start, step: range.step, slots: range.slots)
        let rangeName = kit.text("overview_range_\(range.rawValue)", console)
        let span = kit.text("overview_span_\(range.rawValue)", console)
        let per = kit.text("overview_per_\(range.rawValue)", console)
        let startLabel = Self.time(minute: start)
        let endLabel = Self.time(minute: end)
        var charts: [[String: Any]] = []
        for chart in Self.charts {
            let name = kit.text(chart.key, console)
            let latency = chart.series == "latency_p99"
            let points =
                latency
                ? SeriesRollup.p99Points(totals, slots: range.slots)
                : SeriesRollup.points(totals, series: chart.series, slots: range.slots)
            let largest = points.max() ?? 0
            let total: String
            let summary: String
            if latency {
                let p99 = LatencyBuckets.p99(SeriesRollup.histogram(totals, slot: nil))
                total =
                    p99.map { kit.text("overview_p99_total", console, ["p99": "\($0)"]) }
                    ?? kit.text("overview_no_requests", console)
                summary = kit.text(
                    "overview_summary_latency", console,
                    ["name": name, "range": span, "total": total, "max": "\(largest)", "per": per])
            } else {
                let sum = points.reduce(0, +)
                total = kit.text("overview_total", console, ["total": "\(sum)"])
                summary = kit.text(
                    "overview_summary", console,
                    ["name": name, "range": span, "total": "\(sum)", "max": "\(largest)", "per": per])
            }
            let maxLabel = kit.text(latency ? "overview_max_ms" : "overview_max", console, ["max": "\(largest)"])
            let rows = points.enumerated().map { index, value -> [String: Any] in
                ["time": Self.time(minute: start + Int64(index) * range.step), "value": "\(value)"]
            }
            charts.append([
                "id": chart.series, "name": name, "total": total, "rows": rows,
                "svg": ConsoleChart.svg(
                    points: points, summary: summary, maxLabel: maxLabel, startLabel: startLabel, endLabel: endLabel),
            ])
        }
        let ready = await kit.store.isReady()
        let ranges = OverviewRange.allCases.map { one -> [String: Any] in
            [
                "href": "/console?range=\(one.rawValue)", "name": kit.text("overview_range_\(one.rawValue)", console),
                "current": one == range,
            ]
        }
        return kit.page(
            "overview", title: kit.text("console_nav_overview", console),
            [
                "charts": charts, "ranges": ranges, "range_name": rangeName, "store_ready": ready,
                "store_kind": kit.store.location.kind, "schema_version": kit.store.schemaVersion.map { "\($0)" } ?? "",
            ], for: console, section: "overview")
    }

    /// An epoch minute as the charts label it: `2026-11-29 05:30` (UTC).
    static func time(minute: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(minute) * 60)
        let parts = Calendar(identifier: .gregorian).dateComponents(
            in: TimeZone(identifier: "UTC")!, from: date)
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        return "\(parts.year ?? 0)-\(two(parts.month))-\(two(parts.day)) \(two(parts.hour)):\(two(parts.minute))"
    }
}
