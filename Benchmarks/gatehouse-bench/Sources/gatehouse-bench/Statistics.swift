/// Latency percentiles over every recorded request.
struct LatencySummary: Encodable {
    let p50: Double
    let p90: Double
    let p99: Double
    let max: Double
    let mean: Double

    /// Figures in milliseconds from latencies in nanoseconds, sorted ascending.
    init(sorted: [Int64]) {
        p50 = Self.milliseconds(Self.percentile(sorted, 0.50))
        p90 = Self.milliseconds(Self.percentile(sorted, 0.90))
        p99 = Self.milliseconds(Self.percentile(sorted, 0.99))
        max = Self.milliseconds(sorted.last ?? 0)
        let total = sorted.reduce(0.0) { $0 + Double($1) }
        mean = sorted.isEmpty ? 0 : Self.milliseconds(Int64(total / Double(sorted.count)))
    }

    /// The nearest-rank percentile: the smallest sample with at least `fraction` of all at or below it.
    static func percentile(_ sorted: [Int64], _ fraction: Double) -> Int64 {
        // Nearest rank rather than interpolation, so every reported figure is one that was really measured.
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
    }

    /// Milliseconds rounded to two decimals, from nanoseconds.
    private static func milliseconds(_ nanoseconds: Int64) -> Double {
        (Double(nanoseconds) / 1e4).rounded() / 100
    }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating far beyond any benchmark's range).
    var inNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The duration in seconds as a floating-point number.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
