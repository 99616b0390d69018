import Foundation
import SQLKit

/// The SQL of `console_series`: the overview's counts, one row per epoch minute and series, summed over instances.
struct ConsoleSeriesRepository {
    let db: any SQLDatabase

    /// One count to add: a series' value in one epoch minute.
    struct Row: Sendable, Equatable {
        let minute: Int64
        let series: String
        let value: Int64
    }

    /// Adds each row's value to what the store holds for its minute and series (another instance's, or an earlier
    /// flush's), in statements of at most 200 rows.
    func add(_ rows: [Row]) async throws {
        for start in stride(from: 0, to: rows.count, by: 200) {
            var insert = db.insert(into: "console_series").columns("minute", "series", "value")
            for row in rows[start..<min(start + 200, rows.count)] {
                insert = insert.values(SQLBind(row.minute), SQLBind(row.series), SQLBind(row.value))
            }
            try await insert.onConflict(with: ["minute", "series"]) { conflict in
                conflict.set(
                    "value",
                    to: SQLBinaryExpression(
                        SQLColumn("value", table: "console_series"), .add, SQLExcludedColumn("value")))
            }
            .run()
        }
    }

    /// The counts from minute `start` for `slots` slots of `step` minutes, each series summed per slot (slot 0 is
    /// the oldest): `[slot: [series: total]]`.
    func totals(from start: Int64, step: Int64, slots: Int) async throws -> [Int: [String: Int64]] {
        let end = start + step * Int64(slots)
        let rows = try await db.raw(
            """
            SELECT (minute - \(bind: start)) / \(bind: step) AS slot, series, CAST(SUM(value) AS BIGINT) AS total
            FROM console_series WHERE minute >= \(bind: start) AND minute < \(bind: end)
            GROUP BY 1, 2
            """
        ).all()
        var totals: [Int: [String: Int64]] = [:]
        for row in rows {
            let slot = Int(try row.decode(column: "slot", as: Int64.self))
            totals[slot, default: [:]][try row.decode(column: "series", as: String.self)] =
                try row.decode(column: "total", as: Int64.self)
        }
        return totals
    }
}
