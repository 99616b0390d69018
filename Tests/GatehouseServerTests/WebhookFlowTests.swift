import Foundation
import Testing

@testable import GatehouseServer

/// Webhook endpoints through the admin API, and their deliveries to a real receiver (`WebhookReceiver`, which checks
/// each signature with PyPI's `standardwebhooks`), on the app `buildApplication` makes with a clock the test moves.
@Suite("Webhooks: endpoints, deliveries, retries, rotation")
struct WebhookFlowTests {
    /// A harness whose webhooks may reach the receiver on loopback, with a service key.
    private static func start(allowPrivate: Bool = true) async throws -> (AccountHarness, AdminClient) {
        let h = try await AccountHarness.start { $0.webhooks.allowPrivateTargets = allowPrivate }
        return (h, AdminClient(client: h.client, key: try await AdminClient.mint(h).token))
    }

    /// Registers `url` for `events`; answers the id and the secret.
    private static func register(
        _ admin: AdminClient, _ url: String, _ events: [String], fields: Bool = false
    ) async throws -> (id: String, secret: String) {
        let reply = try await admin.send(
            .post, "/auth/v1/admin/webhooks", ["url": url, "events": events, "include_record_fields": fields])
        #expect(reply.status == 201, "\(reply.body)")
        return (try #require(reply.json["id"] as? String), try #require(reply.json["secret"] as? String))
    }

    private static func deliveries(_ admin: AdminClient, _ id: String) async throws -> [[String: Any]] {
        try await admin.get("/auth/v1/admin/webhooks/\(id)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
    }

    /// Polls until `condition` holds, with a deadline.
    private static func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        try await LiveServer.eventually(timeout: .seconds(30), condition)
    }

    @Test("an endpoint is registered with its secret shown once, listed without it, and removed")
    func endpointLifecycle() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let (id, secret) = try await Self.register(admin, "https://hooks.example.com/a", ["user.created", "*"])
        #expect(secret.hasPrefix("whsec_"))
        #expect(WebhookSecret.key(secret)?.count == 32)
        let list = try await admin.get("/auth/v1/admin/webhooks")
        #expect(list.status == 200)
        let listed = try #require((list.json["webhooks"] as? [[String: Any]])?.first)
        #expect(listed["id"] as? String == id)
        #expect(listed["events"] as? [String] == ["user.created", "*"])
        #expect(listed["enabled"] as? Bool == true)
        #expect(!list.body.contains(secret) && listed["secret"] == nil)
        #expect(
            try await admin.get("/auth/v1/admin/webhooks/\(id)").json["url"] as? String == "https://hooks.example.com/a"
        )
        #expect(try await admin.send(.delete, "/auth/v1/admin/webhooks/\(id)", [:]).status == 204)
        let gone = try await admin.get("/auth/v1/admin/webhooks/\(id)")
        #expect(gone.status == 404)
        #expect(gone.json["error_code"] as? String == "webhook_not_found" || gone.body.contains("webhook_not_found"))
    }

    @Test("a private target, a bad URL and an unknown event are refused with their codes; a user's token is not_admin")
    func refusals() async throws {
        let (h, admin) = try await Self.start(allowPrivate: false)
        defer { Task { try? await h.stop() } }
        for url in ["http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://10.1.2.3/x", "ftp://x.example/"] {
            let reply = try await admin.send(.post, "/auth/v1/admin/webhooks", ["url": url, "events": ["*"]])
            #expect(reply.status == 400)
            #expect(reply.body.contains("webhook_target_refused"), "\(url): \(reply.body)")
        }
        let unknown = try await admin.send(
            .post, "/auth/v1/admin/webhooks", ["url": "https://hooks.example.com/x", "events": ["user.exploded"]])
        #expect(unknown.status == 400)
        #expect(unknown.body.contains("webhook_event_unknown"))
        let person = try await h.person("hooks-user")
        let asUser = try await h.client.post(
            "/auth/v1/admin/webhooks", ["url": "https://hooks.example.com/x", "events": ["*"]],
            bearer: person.account.access)
        #expect(asUser.status == 403)
        #expect(asUser.body.contains("not_admin"))
    }

    @Test("a new user reaches the endpoint once, signed, with its id; the log says delivered")
    func userCreatedDelivered() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let (id, secret) = try await Self.register(admin, receiver.url("/users"), ["user.created"])
        try receiver.configure(path: "/users", behaviour: .ok, secret: secret)
        let person = try await h.person("hooks-created")
        #expect(
            try await Self.eventually {
                receiver.received(path: "/users").contains { $0.data["user_id"] as? String == person.id }
            })
        let delivered = receiver.received(path: "/users").filter { $0.data["user_id"] as? String == person.id }
        #expect(delivered.count == 1)
        #expect(delivered.allSatisfy { $0.verified })
        #expect(delivered.first?.type == "user.created")
        #expect(delivered.first?.contentType?.hasPrefix("application/json") == true)
        // Only the types asked for: signing in sent nothing here.
        #expect(receiver.received(path: "/users").allSatisfy { $0.type == "user.created" })
        #expect(
            try await Self.eventually {
                try await Self.deliveries(admin, id).first?["status"] as? String == "delivered"
            })
        let log = try #require(try await Self.deliveries(admin, id).first)
        #expect(log["attempts"] as? Int == 1)
        #expect(log["last_status_code"] as? Int == 204)
        #expect(log["event_type"] as? String == "user.created")
        #expect(log["event_id"] as? String == delivered.first?.webhookID)
    }

    @Test("a failing endpoint is retried on the schedule, keeps its webhook-id, and a replay sends it again")
    func retriesAndReplay() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let (id, secret) = try await Self.register(admin, receiver.url("/down"), ["user.created"])
        try receiver.configure(path: "/down", behaviour: .status(500), secret: secret)
        _ = try await h.person("hooks-retry")
        #expect(try await Self.eventually { try await Self.deliveries(admin, id).first?["attempts"] as? Int == 1 })
        var log = try #require(try await Self.deliveries(admin, id).first)
        #expect(log["status"] as? String == "pending")
        #expect(log["last_status_code"] as? Int == 500)
        let next = try #require((log["next_attempt_at"] as? String).flatMap(Self.date))
        #expect(abs(next.timeIntervalSince(h.clock.now) - 5) < 1)
        // Nothing more until the clock reaches the next try; then the second try, 5 minutes before the third.
        h.clock.advance(by: 5)
        #expect(try await Self.eventually { try await Self.deliveries(admin, id).first?["attempts"] as? Int == 2 })
        log = try #require(try await Self.deliveries(admin, id).first)
        let third = try #require((log["next_attempt_at"] as? String).flatMap(Self.date))
        #expect(abs(third.timeIntervalSince(h.clock.now) - 300) < 1)
        let tries = receiver.received(path: "/down")
        #expect(tries.count == 2)
        #expect(Set(tries.compactMap(\.webhookID)).count == 1)
        #expect(tries.allSatisfy { $0.verified })
        // The receiver works again; a replay sends the delivery now, with a fresh schedule.
        try receiver.configure(path: "/down", behaviour: .ok, secret: secret)
        let deliveryID = try #require(log["id"] as? String)
        let replay = try await admin.send(
            .post, "/auth/v1/admin/webhooks/\(id)/deliveries/\(deliveryID)/replay", [:])
        #expect(replay.status == 202)
        #expect(
            try await Self.eventually {
                try await Self.deliveries(admin, id).first?["status"] as? String == "delivered"
            })
        #expect(receiver.received(path: "/down").count == 3)
        #expect(receiver.received(path: "/down").last?.webhookID == tries.first?.webhookID)
    }

    @Test("a 410 turns the endpoint off at once and mails the operators; enabling it sends what waited")
    func goneDisables() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let operatorPerson = try await h.person("hooks-operator")
        #expect(
            try await Operator(store: h.server.services.store).addOperator(email: operatorPerson.email) != .noAccount)
        let (id, secret) = try await Self.register(admin, receiver.url("/gone"), ["session.created"])
        try receiver.configure(path: "/gone", behaviour: .status(410), secret: secret)
        let someone = try await h.person("hooks-gone")
        #expect(
            try await Self.eventually {
                try await admin.get("/auth/v1/admin/webhooks/\(id)").json["enabled"] as? Bool == false
            })
        let endpoint = try await admin.get("/auth/v1/admin/webhooks/\(id)").json
        #expect(endpoint["disabled_reason"] as? String == "gone")
        let mail = try await h.mailbox.waitForMail(
            to: operatorPerson.email, subject: "A webhook endpoint was turned off")
        #expect(mail.text.contains(receiver.url("/gone")))
        // Off: a new sign-in sends nothing to it.
        let before = receiver.received(path: "/gone").count
        _ = try await h.client.password(someone.email, "correct horse battery")
        try receiver.configure(path: "/gone", behaviour: .ok, secret: secret)
        let enabled = try await admin.send(.post, "/auth/v1/admin/webhooks/\(id)/enable", [:])
        #expect(enabled.status == 200)
        #expect(enabled.json["enabled"] as? Bool == true)
        // The failed delivery stays failed; new events arrive again.
        _ = try await h.client.password(someone.email, "correct horse battery")
        #expect(try await Self.eventually { receiver.received(path: "/gone").count > before })
        #expect(receiver.received(path: "/gone").dropFirst(before).allSatisfy { $0.answer == "204" && $0.verified })
    }

    @Test("after a rotation both secrets sign, separated by a space, and each verifies")
    func rotation() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let (id, old) = try await Self.register(admin, receiver.url("/rotate"), ["user.created"])
        let rotated = try await admin.send(.post, "/auth/v1/admin/webhooks/\(id)/rotate-secret", [:])
        #expect(rotated.status == 200)
        let new = try #require(rotated.json["secret"] as? String)
        #expect(new != old && new.hasPrefix("whsec_"))
        try receiver.configure(path: "/rotate", behaviour: .ok, secrets: [new, old])
        _ = try await h.person("hooks-rotate")
        #expect(try await Self.eventually { !receiver.received(path: "/rotate").isEmpty })
        let delivery = try #require(receiver.received(path: "/rotate").first)
        #expect(delivery.signatures == 2)
        #expect(Set(delivery.verifiedBy) == [0, 1])
        // A day later the old secret no longer signs. (The receiver's library now refuses the timestamp, a day from
        // its own clock, so only the count of signatures is read here.)
        h.clock.advance(by: Webhooks.rotationOverlap + 1)
        _ = try await h.person("hooks-rotate-later")
        #expect(try await Self.eventually { receiver.received(path: "/rotate").count == 2 })
        #expect(receiver.received(path: "/rotate").last?.signatures == 1)
    }

    @Test("a push reaches records.changed as counts, and with fields only where the endpoint asked for them")
    func recordsChanged() async throws {
        let (h, admin) = try await Self.start()
        defer { Task { try? await h.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        let (_, countsSecret) = try await Self.register(admin, receiver.url("/counts"), ["records.changed"])
        let (_, fieldsSecret) = try await Self.register(
            admin, receiver.url("/fields"), ["records.changed"], fields: true)
        try receiver.configure(path: "/counts", behaviour: .ok, secret: countsSecret)
        try receiver.configure(path: "/fields", behaviour: .ok, secret: fieldsSecret)
        var owner = try await h.person("hooks-records")
        let cid = try await h.company("Hooks Co", owner: &owner)
        let first = newRecordID()
        let second = newRecordID()
        let push = try await h.client.push(
            cid, client: "device-1",
            [upsert(first, base: 0, ["title": "one"]), upsert(second, base: 0, ["title": "two"])],
            bearer: try #require(owner.company?.access))
        #expect(push.status == 200, "\(push.body)")
        #expect(
            try await Self.eventually {
                !receiver.received(path: "/counts").isEmpty && !receiver.received(path: "/fields").isEmpty
            })
        let counts = try #require(receiver.received(path: "/counts").first)
        #expect(counts.data["company_id"] as? String == cid)
        #expect((counts.data["created"] as? NSNumber)?.intValue == 2)
        #expect(counts.data["records"] == nil)
        let fields = try #require(receiver.received(path: "/fields").first)
        let records = try #require(fields.data["records"] as? [[String: Any]])
        #expect(Set(records.compactMap { $0["id"] as? String }) == [first, second])
        #expect(records.contains { ($0["fields"] as? [String: Any])?["title"] as? String == "one" })
        #expect(counts.verified && fields.verified)
    }

    private static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
    }
}
