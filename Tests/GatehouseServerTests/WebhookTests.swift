import Foundation
import Testing

@testable import GatehouseServer

/// Webhooks' pure rules: Standard Webhooks signatures, the address check, and which audited changes become which
/// events.
@Suite("Webhooks: signatures, target addresses, events")
struct WebhookRuleTests {
    @Test("a signature matches the Standard Webhooks specification's own example")
    func specificationVector() throws {
        // From the specification's reference libraries' tests (standard-webhooks/standard-webhooks).
        let key = try #require(WebhookSecret.key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let body = Array(#"{"test": 2432232314}"#.utf8)
        let signature = StandardWebhooks.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body, key: key)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("during a rotation both keys sign, separated by one space, and either verifies")
    func rotationSignsTwice() throws {
        let new = try #require(WebhookSecret.key(WebhookSecret.generate()))
        let old = try #require(WebhookSecret.key(WebhookSecret.generate()))
        let body = Array(#"{"type":"user.created"}"#.utf8)
        let headers = StandardWebhooks.headers(id: "msg_1", timestamp: 1_700_000_000, body: body, keys: [new, old])
        let signature = try #require(headers.first { $0.0 == "webhook-signature" }?.1)
        #expect(signature.split(separator: " ").count == 2)
        #expect(!signature.contains(", "))
        for key in [new, old] {
            #expect(
                StandardWebhooks.verify(header: signature, id: "msg_1", timestamp: 1_700_000_000, body: body, key: key))
        }
        let stranger = try #require(WebhookSecret.key(WebhookSecret.generate()))
        #expect(
            !StandardWebhooks.verify(
                header: signature, id: "msg_1", timestamp: 1_700_000_000, body: body, key: stranger))
        #expect(
            !StandardWebhooks.verify(header: signature, id: "msg_2", timestamp: 1_700_000_000, body: body, key: new))
    }

    @Test("a secret is whsec_ and at least 16 bytes of base64")
    func secrets() {
        #expect(WebhookSecret.key("whsec_" + Data(count: 15).base64EncodedString()) == nil)
        #expect(WebhookSecret.key("wh_" + Data(count: 32).base64EncodedString()) == nil)
        #expect(WebhookSecret.key("whsec_not base64!") == nil)
        #expect(WebhookSecret.key(WebhookSecret.generate())?.count == 32)
    }

    @Test(
        "loopback, link-local, private and reserved addresses are told from public ones",
        arguments: [
            ("127.0.0.1", TargetAddress.Range.loopback), ("127.9.9.9", .loopback), ("::1", .loopback),
            ("169.254.169.254", .linkLocal), ("fe80::1", .linkLocal), ("10.0.0.1", .privateOrReserved),
            ("172.16.0.1", .privateOrReserved), ("172.31.255.255", .privateOrReserved),
            ("192.168.1.1", .privateOrReserved), ("100.64.0.1", .privateOrReserved), ("0.0.0.0", .privateOrReserved),
            ("::", .privateOrReserved), ("fd00::1", .privateOrReserved), ("224.0.0.1", .privateOrReserved),
            ("::ffff:127.0.0.1", .loopback), ("::ffff:10.1.2.3", .privateOrReserved),
            ("64:ff9b::a00:1", .privateOrReserved),
            ("[::1]", .loopback), ("8.8.8.8", .global), ("172.32.0.1", .global), ("2606:4700::1111", .global),
        ])
    func ranges(address: String, range: TargetAddress.Range) throws {
        #expect(try #require(TargetAddress(address)).range == range)
    }

    @Test("a target URL is refused when it is not http(s), carries a user, or names a private address")
    func targetChecks() throws {
        let strict = WebhookTargets(allowPrivate: false)
        for refused in [
            "ftp://hooks.example.com/x", "hooks.example.com/x", "https://user:pw@hooks.example.com/x",
            "http://127.0.0.1:9000/x", "http://[::1]/x", "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.5/x", "http://localhost:8080/x", "http://api.localhost/x",
        ] {
            #expect(throws: WebhookTargetRefusal.self, "\(refused)") { try strict.check(url: refused) }
        }
        #expect(try strict.check(url: "https://hooks.example.com/gatehouse").host == "hooks.example.com")
        let open = WebhookTargets(allowPrivate: true)
        #expect(try open.check(url: "http://127.0.0.1:9000/x").port == 9000)
    }

    @Test("a name that resolves to a private address is refused at delivery")
    func resolvedPrivateRefused() async throws {
        let strict = WebhookTargets(allowPrivate: false)
        await #expect(throws: WebhookTargetRefusal.self) {
            _ = try await strict.client(for: URL(string: "http://localhost.:9/x")!)
        }
        await strict.shutdown()
    }

    @Test("audited changes become the events an endpoint takes; the rest become none")
    func eventsFromAudit() {
        func types(_ event: AuditEvent) -> [String] { WebhookEvent.from(event).map(\.type.rawValue) }
        #expect(types(AuditEvent(.signup, accountID: "u1", detail: ["account": "new"])) == ["user.created"])
        #expect(types(AuditEvent(.signup, accountID: "u1", detail: ["account": "unconfirmed"])).isEmpty)
        #expect(types(AuditEvent(.identityLinked, accountID: "u1", detail: ["account": "new"])) == ["user.created"])
        #expect(types(AuditEvent(.identityLinked, accountID: "u1", detail: ["account": "existing"])).isEmpty)
        #expect(
            types(AuditEvent(.adminUserUpdated, accountID: "u1", detail: ["changed": "banned,user_metadata"]))
                == ["user.banned", "user.updated"])
        #expect(types(AuditEvent(.signedIn, accountID: "u1")) == ["session.created"])
        #expect(
            types(AuditEvent(.invitationAccepted, accountID: "u1", companyID: "c1"))
                == ["invitation.accepted", "company.member_added"])
        #expect(types(AuditEvent(.tokenRefreshed, accountID: "u1")).isEmpty)
        #expect(types(AuditEvent(.signInFailed)).isEmpty)
        let removed = WebhookEvent.from(
            AuditEvent(.memberRemoved, accountID: "owner", companyID: "c1", detail: ["member": "u2"]))
        #expect(removed.first?.data["user_id"] == "u2")
        #expect(removed.first?.data["actor_id"] == "owner")
        #expect(removed.first?.type == .memberRemoved)
    }

    @Test("a payload is {type, timestamp, data}, counts as numbers, fields only when asked for")
    func payloads() throws {
        var event = WebhookEvent(type: .recordsChanged, data: ["company_id": "c1"])
        event.counts = ["created": 2]
        event.fields = #"[{"id":"r1"}]"#
        let time = Date(timeIntervalSince1970: 1_700_000_000)
        let bare =
            try JSONSerialization.jsonObject(
                with: Data(try WebhookOutbox.payload(event, at: time, withFields: false).utf8)) as? [String: Any]
        #expect(bare?["type"] as? String == "records.changed")
        #expect(bare?["timestamp"] as? String == "2023-11-14T22:13:20.000Z")
        let data = bare?["data"] as? [String: Any]
        #expect(data?["created"] as? Int == 2)
        #expect(data?["records"] == nil)
        let full =
            try JSONSerialization.jsonObject(
                with: Data(try WebhookOutbox.payload(event, at: time, withFields: true).utf8)) as? [String: Any]
        #expect(((full?["data"] as? [String: Any])?["records"] as? [[String: Any]])?.first?["id"] as? String == "r1")
    }
}
