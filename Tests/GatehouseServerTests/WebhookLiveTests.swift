import Foundation
import Testing

/// Outbound webhooks against real peers: the `gatehouse` binary delivering to `Tests/webhooks/receiver.py`, which
/// checks every signature with the PyPI `standardwebhooks` package, killed with SIGKILL in the middle of deliveries,
/// and facing endpoints that fail in each of the ways the design names.
@Suite("Webhooks against real receivers")
struct WebhookLiveTests {
    @Test("every delivery verifies with the standardwebhooks package and names the event and the user it is about")
    func verifiedDeliveries() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let server = try await WebhookBinary.start()
        defer { server.stop() }
        let admin = try await server.admin()
        let users = try await admin.register(receiver.url("/users"), events: ["user.created"])
        try receiver.configure(path: "/users", behaviour: .ok, secret: users.secret)
        let everything = try await admin.register(receiver.url("/everything"), events: ["*"])
        try receiver.configure(path: "/everything", behaviour: .ok, secret: everything.secret)
        #expect(users.secret.hasPrefix("whsec_") && users.secret != everything.secret)

        var created: Set<String> = []
        for _ in 0..<5 { created.insert(try await admin.createUser()) }
        let deliveries = try await receiver.waitFor(count: 5, path: "/users")
        #expect(deliveries.count == 5)
        for delivery in deliveries {
            #expect(delivery.verified, "\(delivery.error ?? "")")
            #expect(delivery.signatures == 1)
            #expect(delivery.type == "user.created")
            #expect(delivery.contentType?.hasPrefix("application/json") == true)
            #expect(delivery.body["timestamp"] is String)
        }
        #expect(Set(deliveries.compactMap { $0.data["user_id"] as? String }) == created)
        #expect(Set(deliveries.compactMap(\.webhookID)).count == 5)
        // The endpoint for every event type gets the same five sign-ups, each verified with its own secret.
        let everyType = try await receiver.waitUntil { received in
            let userIDs = received.filter { $0.path == "/everything" && $0.type == "user.created" }
                .compactMap { $0.data["user_id"] as? String }
            return created.isSubset(of: Set(userIDs))
        }
        #expect(everyType)
        #expect(receiver.received(path: "/everything").allSatisfy { $0.verified })

        // The delivery log says what the receiver saw: delivered on the first attempt, with its 204.
        let logged = try await firstValue { () -> [[String: Any]]? in
            let log = try await admin.deliveries(users.id)
            return log.count == 5 && log.allSatisfy { $0["status"] as? String == "delivered" } ? log : nil
        }
        let log = try #require(logged, "the delivery log never showed five deliveries delivered")
        #expect(Set(log.compactMap { $0["event_id"] as? String }) == Set(deliveries.compactMap(\.webhookID)))
        for entry in log {
            #expect(entry["event_type"] as? String == "user.created")
            #expect((entry["attempts"] as? NSNumber)?.intValue == 1)
            #expect((entry["last_status_code"] as? NSNumber)?.intValue == 204)
            #expect(entry["delivered_at"] is String)
        }
    }

    @Test("a rotated secret signs beside the old one: two signatures, each verifying alone with standardwebhooks")
    func rotation() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let server = try await WebhookBinary.start()
        defer { server.stop() }
        let admin = try await server.admin()
        let endpoint = try await admin.register(receiver.url("/rotating"), events: ["user.created"])
        try receiver.configure(path: "/rotating", behaviour: .ok, secret: endpoint.secret)
        _ = try await admin.createUser()
        try await receiver.waitFor(count: 1, path: "/rotating")

        let rotated = try await admin.send(.post, "/auth/v1/admin/webhooks/\(endpoint.id)/rotate-secret", [:])
        #expect(rotated.status == 200, "\(rotated.body)")
        let newSecret = try #require(rotated.json["secret"] as? String)
        #expect(newSecret.hasPrefix("whsec_") && newSecret != endpoint.secret)
        // The receiver knows both; it notes which of them verify each delivery.
        try receiver.configure(path: "/rotating", behaviour: .ok, secrets: [newSecret, endpoint.secret])
        let user = try await admin.createUser()
        let deliveries = try await receiver.waitFor(count: 2, path: "/rotating")
        let after = try #require(deliveries.first { $0.data["user_id"] as? String == user })
        #expect(after.signatures == 2)
        #expect(after.verifiedBy == [0, 1], "\(after.error ?? "")")
        // Before the rotation: one signature, by the secret the receiver then knew alone.
        let before = try #require(deliveries.first)
        #expect(before.signatures == 1 && before.verifiedBy == [0])
    }

    @Test("kill -9 while deliveries are in flight: after the restart every committed event arrives, none invented")
    func killNine() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let server = try await WebhookBinary.start()
        defer { server.stop() }
        let admin = try await server.admin()
        let endpoint = try await admin.register(receiver.url("/slow"), events: ["user.created"])
        // Each answer takes 0.3 s, so deliveries are still going when the kill lands.
        try receiver.configure(path: "/slow", behaviour: .slow(0.3), secret: endpoint.secret)

        var created: Set<String> = []
        for _ in 0..<12 { created.insert(try await admin.createUser()) }
        // Every creation was answered 200, so its event is committed; the kill lands once the first delivery is in.
        try await receiver.waitFor(count: 1, path: "/slow")
        server.sigkill()
        #expect(server.process.terminationReason == .uncaughtSignal)
        let atTheKill = Set(receiver.received(path: "/slow").compactMap { $0.data["user_id"] as? String })

        try await server.restart()
        // Events committed after the restart go too.
        for _ in 0..<3 { created.insert(try await admin.createUser()) }
        // A delivery that was in flight at the kill stays leased for a while, then goes again.
        let all = try await receiver.waitUntil(deadline: .seconds(120)) { received in
            let delivered = received.filter { $0.path == "/slow" }.compactMap { $0.data["user_id"] as? String }
            return created.isSubset(of: Set(delivered))
        }
        let deliveries = receiver.received(path: "/slow")
        let delivered = Set(deliveries.compactMap { $0.data["user_id"] as? String })
        #expect(all, "never delivered: \(created.subtracting(delivered).sorted()); before the kill: \(atTheKill.count)")
        // None invented: every delivery is about a user this test created, signed, and is a user.created.
        #expect(delivered.isSubset(of: created), "unknown users: \(delivered.subtracting(created).sorted())")
        #expect(deliveries.allSatisfy { $0.verified && $0.type == "user.created" })
        // At least once, under one id per event: a delivery sent again after the restart keeps its webhook-id.
        var ids: [String: Set<String>] = [:]
        for delivery in deliveries {
            if let user = delivery.data["user_id"] as? String {
                ids[user, default: []].insert(delivery.webhookID ?? "")
            }
        }
        for (user, webhookIDs) in ids { #expect(webhookIDs.count == 1, "user \(user) came under \(webhookIDs)") }
        #expect(Set(deliveries.compactMap(\.webhookID)).count == created.count)
        // The server's own log agrees: every event delivered, those cut off by the kill sent again.
        let logged = try await firstValue(within: .seconds(120)) { () -> [[String: Any]]? in
            let log = try await admin.deliveries(endpoint.id)
            return log.count == created.count && log.allSatisfy { $0["status"] as? String == "delivered" } ? log : nil
        }
        let statuses = try await admin.deliveries(endpoint.id).map { $0["status"] as? String ?? "" }
        #expect(logged != nil, "the delivery log shows \(statuses)")
    }

    @Test("a hanging endpoint with as many deliveries open as it may have holds up no endpoint on the same host")
    func hangingNeighbour() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let server = try await WebhookBinary.start()
        defer { server.stop() }
        let admin = try await server.admin()
        let hang = try await admin.register(receiver.url("/hang"), events: ["user.created"])
        try receiver.configure(path: "/hang", behaviour: .hang, secret: hang.secret)
        // Eight deliveries to the hanging endpoint (as many as one endpoint may have in flight), all open at once.
        for _ in 0..<8 { _ = try await admin.createUser() }
        let open = try await receiver.waitFor(count: 8, path: "/hang")
        #expect(open.count == 8)

        // Another integration on the same host: its deliveries go while those still hang.
        let ok = try await admin.register(receiver.url("/ok"), events: ["user.created"])
        try receiver.configure(path: "/ok", behaviour: .ok, secret: ok.secret)
        var created: Set<String> = []
        for _ in 0..<3 { created.insert(try await admin.createUser()) }
        let prompt = try await receiver.waitFor(count: 3, path: "/ok")
        #expect(
            receiver.closedHangs(path: "/hang").isEmpty,
            "/ok's deliveries waited for the hanging endpoint's connections to time out")
        #expect(Set(prompt.compactMap { $0.data["user_id"] as? String }) == created)
        let log = try await admin.deliveries(ok.id)
        #expect(log.allSatisfy { $0["last_error"] is NSNull || $0["last_error"] == nil }, "\(log)")
    }

    @Test(
        "failing receivers: 500 retried after 5 s, 410 disables, redirects not followed, 10 MiB answers and hangs fail, and an endpoint that answers gets its deliveries meanwhile"
    )
    func faultyReceivers() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let server = try await WebhookBinary.start()
        defer { server.stop() }
        let admin = try await server.admin()
        // The failing endpoints first, so a dispatcher that works through endpoints in order meets them before /ok.
        let behaviours: [(String, WebhookReceiver.Behaviour)] = [
            ("/hang", .hang), ("/huge", .huge(chunked: false)), ("/huge-chunked", .huge(chunked: true)),
            ("/error", .status(500)), ("/gone", .status(410)), ("/private", .redirect("http://10.0.0.1/x")),
            ("/loop", .redirect(receiver.url("/redirected"))), ("/ok", .ok),
        ]
        var endpoints: [String: LiveEndpoint] = [:]
        for (path, behaviour) in behaviours {
            let endpoint = try await admin.register(receiver.url(path), events: ["user.created"])
            try receiver.configure(path: path, behaviour: behaviour, secret: endpoint.secret)
            endpoints[path] = endpoint
        }
        // Were the redirect followed, the receiver would see it here.
        try receiver.configure(path: "/redirected", behaviour: .ok, secret: try #require(endpoints["/loop"]).secret)
        let ok = try #require(endpoints["/ok"])

        var created: Set<String> = []
        for _ in 0..<2 { created.insert(try await admin.createUser()) }

        // Other endpoints unaffected: /ok has both while the hanging endpoint's first attempt is still open.
        let prompt = try await receiver.waitFor(count: 2, path: "/ok")
        #expect(receiver.closedHangs(path: "/hang").isEmpty, "/ok waited for the hanging endpoint to time out")
        #expect(Set(prompt.compactMap { $0.data["user_id"] as? String }) == created)

        // 500: a failure, retried 5 s later under the same webhook-id.
        let error = try #require(endpoints["/error"])
        let firstFailure = try await admin.waitForDelivery(error.id) {
            ($0["last_status_code"] as? NSNumber)?.intValue == 500
        }
        #expect(firstFailure["status"] as? String == "pending")
        if (firstFailure["attempts"] as? NSNumber)?.intValue == 1 {
            let wait = try #require(seconds(from: firstFailure["created_at"], to: firstFailure["next_attempt_at"]))
            #expect(wait >= 4 && wait < 60, "next attempt \(wait) s after the event, not about 5 s")
        }
        let retried = try await receiver.waitUntil { received in
            let ids = received.filter { $0.path == "/error" }.compactMap(\.webhookID)
            return ids.count > Set(ids).count
        }
        #expect(retried, "the 500 endpoint was not tried again")
        let afterRetry = try await admin.waitForDelivery(error.id) { ($0["attempts"] as? NSNumber)?.intValue == 2 }
        #expect(afterRetry["status"] as? String == "pending")
        #expect((afterRetry["last_status_code"] as? NSNumber)?.intValue == 500)
        let nextWait = try #require(seconds(from: afterRetry["created_at"], to: afterRetry["next_attempt_at"]))
        #expect(nextWait > 240, "the third attempt is due \(nextWait) s after the event, not about 5 min")

        // 410: the endpoint is disabled at once, and says why; what it had not been sent yet waits in its log.
        let gone = try #require(endpoints["/gone"])
        let disabled = try await firstValue { () -> [String: Any]? in
            let listed = try await admin.endpoint(gone.id)
            return listed?["enabled"] as? Bool == false ? listed : nil
        }
        #expect(disabled != nil, "the 410 endpoint is still enabled")
        #expect((disabled?["disabled_reason"] as? String)?.isEmpty == false)
        #expect(try await admin.endpoint(ok.id)?["enabled"] as? Bool == true)
        let gone410 = try await admin.waitForDelivery(gone.id) { ($0["last_status_code"] as? NSNumber) != nil }
        #expect((gone410["last_status_code"] as? NSNumber)?.intValue == 410)
        #expect(gone410["status"] as? String == "failed")
        // Once the receiver works again, the operator turns the endpoint on (what waited is sent) and replays the
        // deliveries that failed for good: every sign-up reaches it, a replay under its first webhook-id.
        try receiver.configure(path: "/gone", behaviour: .ok, secret: gone.secret)
        let enabled = try await admin.send(.post, "/auth/v1/admin/webhooks/\(gone.id)/enable", [:])
        #expect(enabled.status == 200 && enabled.json["enabled"] as? Bool == true, "\(enabled.body)")
        let failed = try await admin.deliveries(gone.id).filter { $0["status"] as? String == "failed" }
        for delivery in failed {
            let replay = try await admin.send(
                .post, "/auth/v1/admin/webhooks/\(gone.id)/deliveries/\(delivery["id"] as? String ?? "")/replay", [:])
            #expect(replay.status == 202, "\(replay.body)")
        }
        let caughtUp = try await receiver.waitUntil { received in
            let answered = received.filter { $0.path == "/gone" && $0.answer == "204" }
            return created.isSubset(of: Set(answered.compactMap { $0.data["user_id"] as? String }))
        }
        let seen = receiver.received(path: "/gone").map { "\($0.webhookID ?? "") \($0.answer)" }
        #expect(caughtUp, "the re-enabled endpoint's receiver saw \(seen)")
        for delivery in failed {
            let tries = receiver.received(path: "/gone").filter { $0.webhookID == delivery["event_id"] as? String }
            #expect(tries.map(\.answer) == ["410", "204"], "\(seen)")
        }

        // Redirects are failures and are not followed, to a private address or anywhere else.
        for path in ["/private", "/loop"] {
            let endpoint = try #require(endpoints[path])
            let delivery = try await admin.waitForDelivery(endpoint.id) { ($0["last_status_code"] as? NSNumber) != nil }
            #expect((delivery["last_status_code"] as? NSNumber)?.intValue == 302, "\(path)")
            #expect(delivery["status"] as? String == "pending", "\(path)")
        }

        // 10 MiB answers: failures for their size, read no further than the cap.
        for path in ["/huge", "/huge-chunked"] {
            let endpoint = try #require(endpoints[path])
            let delivery = try await admin.waitForDelivery(endpoint.id) { $0["last_error"] is String }
            let message = (delivery["last_error"] as? String ?? "").lowercased()
            #expect(message.contains("large") || message.contains("size"), "\(path): \(message)")
            #expect(delivery["status"] as? String == "pending", "\(path)")
        }

        // A hanging endpoint fails by timeout (the whole request's 15 s).
        let hang = try #require(endpoints["/hang"])
        let timedOut = try await admin.waitForDelivery(hang.id) { $0["last_error"] is String }
        let message = (timedOut["last_error"] as? String ?? "").lowercased()
        #expect(message.contains("time"), "/hang: \(message)")
        #expect(timedOut["status"] as? String == "pending")
        #expect(receiver.received(path: "/hang").count >= 1)

        // Nothing crashed, every request was signed, and the redirect target was never asked.
        #expect(server.process.isRunning)
        #expect(try await admin.admin.client.get("/health/ready").status == 200)
        #expect(receiver.received(path: "/redirected").isEmpty)
        let unverified = receiver.received().filter { !$0.verified }
        #expect(unverified.isEmpty, "\(unverified.map { "\($0.path): \($0.error ?? "")" })")
        // And /ok still answers at once: a later event reaches it.
        let late = try await admin.createUser()
        let lateDelivered = try await receiver.waitUntil { received in
            received.contains { $0.path == "/ok" && $0.data["user_id"] as? String == late }
        }
        #expect(lateDelivered)
    }

    @Test(
        "without --webhooks-allow-private-targets, loopback, private and link-local targets are refused 400",
        arguments: [
            "http://127.0.0.1:8080/hook", "http://10.0.0.1/hook", "http://169.254.169.254/latest/meta-data",
            "http://192.168.1.20/hook", "http://[::1]:9000/hook",
        ])
    func privateTargetRefused(url: String) async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let reply = try await admin.send(
                .post, "/auth/v1/admin/webhooks", ["url": url, "events": ["user.created"]])
            #expect(reply.status == 400, "\(reply.body)")
            let code = reply.json["error_code"] as? String ?? reply.json["code"] as? String
            #expect(code == "webhook_target_refused", "\(reply.body)")
            let listed = try await admin.get("/auth/v1/admin/webhooks")
            #expect((listed.json["webhooks"] as? [Any])?.isEmpty == true, "\(listed.body)")
        }
    }
}

/// Seconds from one ISO 8601 time in a JSON answer to another, when both read as times.
private func seconds(from start: Any?, to end: Any?) -> Double? {
    guard let start = (start as? String).flatMap(parseTime), let end = (end as? String).flatMap(parseTime) else {
        return nil
    }
    return end.timeIntervalSince(start)
}

/// An ISO 8601 time, with or without fractional seconds.
private func parseTime(_ text: String) -> Date? {
    let fractional = ISO8601DateFormatter()
    fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return fractional.date(from: text) ?? ISO8601DateFormatter().date(from: text)
}

/// A registered endpoint: its id and the secret shown once.
struct LiveEndpoint {
    let id: String
    let secret: String
}

/// The admin API calls these tests make, with a service key the CLI minted.
struct WebhookAdmin {
    let admin: AdminClient

    /// Registers `url` for `events`; fails the test unless it is answered 201 with an id and a secret.
    func register(_ url: String, events: [String]) async throws -> LiveEndpoint {
        let reply = try await admin.send(.post, "/auth/v1/admin/webhooks", ["url": url, "events": events])
        #expect(reply.status == 201, "\(reply.body)")
        return LiveEndpoint(
            id: try #require(reply.json["id"] as? String, "\(reply.body)"),
            secret: try #require(reply.json["secret"] as? String, "\(reply.body)"))
    }

    /// Creates a confirmed user with no password (nothing to hash) and returns its id.
    func createUser() async throws -> String {
        let reply = try await admin.send(
            .post, "/auth/v1/admin/users", ["email": AccountHarness.newEmail("hooked"), "email_confirm": true])
        #expect(reply.status == 200, "\(reply.body)")
        return try #require(reply.json["id"] as? String, "\(reply.body)")
    }

    func send(_ method: AdminClient.HTTPMethodName, _ path: String, _ body: [String: Any]) async throws -> HTTPReply {
        try await admin.send(method, path, body)
    }

    /// An endpoint as `GET /auth/v1/admin/webhooks` lists it.
    func endpoint(_ id: String) async throws -> [String: Any]? {
        let reply = try await admin.get("/auth/v1/admin/webhooks")
        #expect(reply.status == 200, "\(reply.body)")
        return (reply.json["webhooks"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    /// An endpoint's delivery log, newest first.
    func deliveries(_ id: String) async throws -> [[String: Any]] {
        let reply = try await admin.get("/auth/v1/admin/webhooks/\(id)/deliveries?limit=50")
        #expect(reply.status == 200, "\(reply.body)")
        return reply.json["deliveries"] as? [[String: Any]] ?? []
    }

    /// Polls an endpoint's log until one of its deliveries (the newest such) satisfies `condition`; fails the test
    /// when none does in time.
    func waitForDelivery(
        _ id: String, sourceLocation: SourceLocation = #_sourceLocation, _ condition: ([String: Any]) -> Bool
    ) async throws -> [String: Any] {
        let found = try await firstValue { () -> [String: Any]? in
            try await deliveries(id).first(where: condition)
        }
        let log = try await deliveries(id)
        return try #require(
            found, "endpoint \(id)'s deliveries never got there: \(log)", sourceLocation: sourceLocation)
    }
}

/// The `gatehouse` binary serving on a loopback port with webhooks allowed to reach loopback (where the receiver is),
/// on a data folder (and, when the run has one, a PostgreSQL database) of its own that outlives a restart.
final class WebhookBinary {
    let port: Int
    let data: URL
    let databaseURL: String?
    let extra: [String]
    private(set) var process: Process

    var base: String { "http://127.0.0.1:\(port)" }
    /// The flags the CLI needs to work on this server's store, and to mint keys for its issuer.
    var storeArguments: [String] {
        ["--data-dir", data.path, "--public-url", base] + (databaseURL.map { ["--database-url", $0] } ?? [])
    }

    private init(port: Int, data: URL, databaseURL: String?, extra: [String], process: Process) {
        self.port = port
        self.data = data
        self.databaseURL = databaseURL
        self.extra = extra
        self.process = process
    }

    /// Starts the binary and returns once it is ready.
    static func start(extra: [String] = ["--webhooks-allow-private-targets", "on"]) async throws -> WebhookBinary {
        let sink = try await SMTPSink.shared()
        let data = try CommandLineTests.scratchFolder().appendingPathComponent("data")
        let databaseURL = try await SyncFaultTests.databaseURL()
        let port = try freeLoopbackPort()
        let process = try await SyncFaultTests.start(
            port: port, data: data, databaseURL: databaseURL, sinkPort: sink.port, extra: extra)
        return WebhookBinary(port: port, data: data, databaseURL: databaseURL, extra: extra, process: process)
    }

    /// The admin API with a service key minted by `gatehouse keys service-key`, as an operator gets one.
    func admin() async throws -> WebhookAdmin {
        let minted = try await CommandLineTests.run(["keys", "service-key"] + storeArguments)
        #expect(minted.status == 0, "\(minted.stderr)")
        let key = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return WebhookAdmin(admin: AdminClient(client: AuthClient(http: AccountHarness.http, base: base), key: key))
    }

    /// SIGKILL, and waits until the process is gone.
    func sigkill() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts the binary again on the same port and store.
    func restart() async throws {
        let sink = try await SMTPSink.shared()
        process = try await SyncFaultTests.start(
            port: port, data: data, databaseURL: databaseURL, sinkPort: sink.port, extra: extra)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
