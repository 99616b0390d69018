import Foundation
import HTTPTypes
import SQLKit
import Testing

@testable import GatehouseServer

@Suite("Console: the overview's series and charts")
struct ConsoleOverviewTests {
    // MARK: Pure: the chart, the histogram, the rules

    @Test("a chart escapes its words, draws a bar per counted point scaled to the largest, and names itself")
    func chartDrawing() {
        let svg = ConsoleChart.svg(
            points: [0, 5, 10, 0], summary: "Sign-ins <script>alert(\"x\")</script> & 'more'", maxLabel: "<b>10</b>",
            startLabel: "a&b", endLabel: "\"end\"")
        #expect(!svg.contains("<script>") && !svg.contains("<b>"))
        #expect(svg.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;more&#39;"))
        #expect(svg.contains("role=\"img\"") && svg.contains("<title>Sign-ins &lt;script&gt;"))
        #expect(svg.contains(">&lt;b&gt;10&lt;/b&gt;</text>") && svg.contains(">a&amp;b</text>"))
        #expect(svg.contains(">&quot;end&quot;</text>"))
        // Two bars: the largest fills the plot's height (86), the other half of it, each in its quarter of the width.
        #expect(svg.components(separatedBy: "<rect ").count - 1 == 2)
        #expect(svg.contains("<rect x=\"160\" y=\"14\" width=\"79\" height=\"86\"/>"))
        #expect(svg.contains("<rect x=\"80\" y=\"57\" width=\"79\" height=\"43\"/>"))
    }

    @Test("an empty series is a chart without bars; a single point fills the width")
    func chartEdges() {
        for empty in [[Int64](), [0, 0, 0]] {
            let svg = ConsoleChart.svg(points: empty, summary: "none", maxLabel: "0", startLabel: "s", endLabel: "e")
            #expect(!svg.contains("<rect") && svg.hasPrefix("<svg") && svg.hasSuffix("</svg>"))
            #expect(!svg.contains("nan") && !svg.contains("inf"))
        }
        let one = ConsoleChart.svg(points: [7], summary: "one", maxLabel: "7", startLabel: "s", endLabel: "e")
        #expect(one.contains("<rect x=\"0\" y=\"14\" width=\"319\" height=\"86\"/>"))
    }

    @Test("p99 is the bound of the bucket the 99th percentile request falls in")
    func p99FromHistogram() {
        func histogram(_ counts: [Int: Int64]) -> [Int64] {
            (0...LatencyBuckets.bounds.count).map { counts[$0] ?? 0 }
        }
        #expect(LatencyBuckets.p99(histogram([:])) == nil)
        // 100 requests within 10 ms (bucket 3).
        #expect(LatencyBuckets.p99(histogram([3: 100])) == 10)
        // 99 within 1 ms and one slow: the 99th is still fast.
        #expect(LatencyBuckets.p99(histogram([0: 99, 11: 1])) == 1)
        // 98 fast and two at 100 ms: the 99th is one of the slow ones.
        #expect(LatencyBuckets.p99(histogram([0: 98, 6: 2])) == 100)
        // Past the last bound: read as the last bound or longer.
        #expect(LatencyBuckets.p99(histogram([12: 5])) == 5000)
        #expect(LatencyBuckets.index(milliseconds: 0.3) == 0 && LatencyBuckets.index(milliseconds: 1) == 0)
        #expect(LatencyBuckets.index(milliseconds: 1.01) == 1 && LatencyBuckets.index(milliseconds: 9000) == 12)

        // Summed over slots, as the page does for the whole range.
        let totals: [Int: [String: Int64]] = [
            0: ["latency_le_1": 50, "sign_ins": 2], 3: ["latency_le_1": 48, "latency_le_250": 2, "sign_ins": 1],
        ]
        #expect(LatencyBuckets.p99(SeriesRollup.histogram(totals, slot: nil)) == 250)
        #expect(SeriesRollup.p99Points(totals, slots: 4) == [1, 0, 0, 250])
        #expect(SeriesRollup.points(totals, series: "sign_ins", slots: 4) == [2, 0, 0, 1])
    }

    @Test("each request counts in the series its route and status say")
    func rules() {
        func counted(
            _ path: String, grant: Substring? = nil, _ status: Int, method: HTTPRequest.Method = .post
        ) -> [ConsoleSeries] {
            ConsoleSeries.counted(method: method, path: path, grantType: grant, status: status)
        }
        #expect(counted("/auth/v1/token", grant: "password", 200) == [.signIns])
        #expect(counted("/auth/v1/token", grant: "password", 400) == [.responses4xx, .failedSignIns])
        #expect(counted("/auth/v1/token", grant: "password", 429) == [.responses4xx])
        #expect(counted("/auth/v1/token", grant: "refresh_token", 200) == [.refreshes])
        #expect(counted("/auth/v1/token", grant: "refresh_token", 400) == [.responses4xx])
        #expect(counted("/auth/v1/verify", 200) == [.signIns])
        #expect(counted("/account/sign-in", 303) == [.signIns])
        #expect(counted("/auth/v1/signup", 200) == [.signUps])
        #expect(counted("/v1/companies/c1/sync/push", 200) == [.syncPushes])
        #expect(counted("/nowhere", 404, method: .get) == [.responses4xx])
        #expect(counted("/auth/v1/user", 500, method: .get) == [.responses5xx])
        #expect(counted("/auth/v1/token", 200, method: .get).isEmpty)
    }

    // MARK: Through the router

    /// Every series' sum over all minutes in the store.
    static func sums(_ h: AccountHarness) async throws -> [String: Int64] {
        let rows = try await h.server.services.store.database.raw(
            "SELECT series, CAST(SUM(value) AS BIGINT) AS total FROM console_series GROUP BY series"
        ).all()
        var sums: [String: Int64] = [:]
        for row in rows {
            sums[try row.decode(column: "series", as: String.self)] = try row.decode(column: "total", as: Int64.self)
        }
        return sums
    }

    /// The counts so far, flushed.
    static func flushed(_ h: AccountHarness) async throws -> [String: Int64] {
        try await h.server.services.series.flush(to: h.server.services.store)
        return try await sums(h)
    }

    @Test("sign-ins, failed sign-ins, refreshes, 4xx and latency are counted into the store by the flush")
    func requestsCounted() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let before = try await Self.flushed(h)

            let signedIn = try await h.client.password(email, "correct horse battery")
            #expect(signedIn.status == 200)
            #expect(try await h.client.password(email, "wrong horse battery").status == 400)
            #expect(try await h.client.refresh(account.refresh).status == 200)
            #expect(try await h.client.get("/no-such-path").status == 404)
            // A load balancer's probe is not traffic.
            #expect(try await h.client.get("/health/ready").status == 200)
            let after = try await Self.flushed(h)

            func added(_ series: String) -> Int64 { (after[series] ?? 0) - (before[series] ?? 0) }
            #expect(added("sign_ins") == 1)
            #expect(added("failed_sign_ins") == 1)
            #expect(added("refreshes") == 1)
            #expect(added("responses_4xx") == 2)
            #expect(added("responses_5xx") == 0)
            #expect(added("sign_ups") == 0)
            let latency = LatencyBuckets.names.reduce(Int64(0)) { $0 + added($1) }
            #expect(latency == 4)
            // Flushed counts are not flushed again.
            #expect(try await Self.flushed(h) == after)
        }
    }

    @Test("two instances' counts of one minute add up in the store")
    func instancesSum() async throws {
        try await AccountHarness.with { h in
            let store = h.server.services.store
            // A minute two days back, which no request of this test counts in.
            let clock = TestClock()
            clock.advance(by: -2 * 86_400)
            let minute = ConsoleSeriesRecorder.minute(clock.now)
            let first = ConsoleSeriesRecorder(clock: clock)
            let second = ConsoleSeriesRecorder(clock: clock)
            first.record(series: [.signIns, .responses4xx], milliseconds: 3)
            first.record(series: [.signIns], milliseconds: 30)
            second.record(series: [.signIns], milliseconds: 3)
            try await first.flush(to: store)
            try await second.flush(to: store)
            second.record(series: [.syncPushes], milliseconds: 3)
            try await second.flush(to: store)

            let totals = try await ConsoleSeriesRepository(db: store.database).totals(from: minute, step: 1, slots: 1)
            #expect(totals[0]?["sign_ins"] == 3)
            #expect(totals[0]?["responses_4xx"] == 1)
            #expect(totals[0]?["sync_pushes"] == 1)
            #expect(totals[0]?["latency_le_5"] == 3 && totals[0]?["latency_le_50"] == 1)
        }
    }

    @Test("the sweeper forgets counts older than eight days, and keeps the newer")
    func sweptAfterEightDays() async throws {
        try await AccountHarness.with { h in
            let store = h.server.services.store
            let recorder = ConsoleSeriesRecorder(clock: h.clock)
            let old = ConsoleSeriesRecorder.minute(h.clock.now)
            recorder.record(series: [.signUps], milliseconds: 1)
            try await recorder.flush(to: store)
            h.clock.advance(by: 7 * 86_400)
            let newer = ConsoleSeriesRecorder.minute(h.clock.now)
            recorder.record(series: [.signUps], milliseconds: 1)
            try await recorder.flush(to: store)

            let count: SQLQueryString = "SELECT COUNT(*) AS n FROM console_series WHERE minute = \(bind: old)"
            try await SweeperTests.sweeper(h).sweep()
            #expect(try await SweeperTests.count(h, count) == 2)
            h.clock.advance(by: 1 * 86_400 + 120)
            let report = try await SweeperTests.sweeper(h).sweep()
            #expect(report.deleted[.consoleSeries] ?? 0 >= 2)
            #expect(try await SweeperTests.count(h, count) == 0)
            let kept: SQLQueryString = "SELECT COUNT(*) AS n FROM console_series WHERE minute = \(bind: newer)"
            #expect(try await SweeperTests.count(h, kept) == 2)
        }
    }

    @Test("an idle console session stays while its account session lives, and is swept once that has ended")
    func consoleSessionsSwept() async throws {
        try await AccountHarness.with { h in
            let db = h.server.services.store.database
            // Seen longer ago than the console's idle limit, without moving the clock past the access token's life.
            let idle = Int64((ConsoleKit.idleLimit + 60) * 1000)
            let makeIdle: SQLQueryString = "UPDATE console_sessions SET last_seen_at = last_seen_at - \(bind: idle)"
            let rows: SQLQueryString = "SELECT COUNT(*) AS n FROM console_sessions"

            let op = try await h.consoleOperator()
            #expect(try await h.console("/console", as: op).status == 200)
            #expect(try await SweeperTests.count(h, rows) == 1)
            try await db.raw(makeIdle).run()
            try await SweeperTests.sweeper(h).sweep()
            // Still there: coming back must end the account session, not open a new console session.
            #expect(try await SweeperTests.count(h, rows) == 1)
            let ended = try await h.console("/console", as: op)
            #expect(ended.status == 303 && ended.headers["location"] == "/account/sign-in?notice=console_ended")
            #expect(try await SweeperTests.count(h, rows) == 0)

            let second = try await h.consoleOperator()
            #expect(try await h.console("/console", as: second).status == 200)
            #expect(try await h.client.logout(second.access, scope: "local").status == 204)
            try await SweeperTests.sweeper(h).sweep()
            #expect(try await SweeperTests.count(h, rows) == 1)
            try await db.raw(makeIdle).run()
            let report = try await SweeperTests.sweeper(h).sweep()
            #expect(report.deleted[.consoleSessions] == 1)
            #expect(try await SweeperTests.count(h, rows) == 0)
        }
    }

    @Test("the overview draws a chart of each series for an hour, a day and a week, with their totals")
    func pages() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let sums = try await Self.flushed(h)
            for (range, label) in [("hour", "last hour"), ("day", "last day"), ("week", "last week")] {
                let page = try await h.console("/console?range=\(range)", as: op)
                #expect(page.status == 200, "\(range)")
                #expect(page.body.contains("data-page=\"console-overview\""))
                #expect(page.body.components(separatedBy: "<svg ").count - 1 == 8, "\(range)")
                for id in ConsoleOverview.charts.map(\.series) {
                    #expect(page.body.contains("id=\"chart-\(id)\""), "\(range) \(id)")
                }
                // Everything counted so far happened within the hour.
                let signIns = sums["sign_ins"] ?? 0
                #expect(signIns >= 1)
                #expect(
                    page.body.contains("aria-label=\"Sign-ins, \(label): \(signIns) in all"), "\(range)")
                #expect(page.body.contains("<th scope=\"col\">Time (UTC)</th>"))
                #expect(page.body.contains("Ready: "))
            }
            let standard = try await h.console("/console", as: op)
            #expect(standard.body.contains("aria-label=\"Sign-ins, last day:"))
            #expect(standard.body.contains("href=\"/console?range=day\" aria-current=\"page\""))
        }
    }

    @Test("a range the overview does not know is a 400 page")
    func badRange() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            for bad in ["month", "", "<script>"] {
                let page = try await h.console(
                    "/console?range=\(bad.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")", as: op)
                #expect(page.status == 400, "\(bad)")
                #expect(!page.body.contains("<script>"))
            }
        }
    }
}
