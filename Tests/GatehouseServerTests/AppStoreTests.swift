import Crypto
import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// Company tiers bought in the app, through the router: a purchase the owner's app reports, App Store Server
/// Notifications V2 of every type Gatehouse acts on, replays and out-of-order deliveries, an operator's override, and
/// signed data that must be refused (each with its code, changing nothing).
@Suite("App Store: purchases, notifications, refusals")
struct AppStoreTests {
    static let fixtures = AppStoreFixtures.shared

    /// A harness with purchases on, and a Free company whose owner is logged in to it.
    static func withCompany(
        environments: [String] = ["Production", "Sandbox"],
        _ body: (AccountHarness, _ owner: Person, _ cid: String, _ token: String) async throws -> Void
    ) async throws {
        try await AccountHarness.with({ fixtures.configure(&$0, environments: environments) }) { h in
            var owner = try await h.person("buyer")
            let cid = try await h.company("Paying Co", owner: &owner, tier: .free)
            let detail = try await h.client.get("/v1/companies/\(cid)", bearer: try #require(owner.company?.access))
            let token = try #require(detail.json["app_account_token"] as? String)
            #expect(UUID(uuidString: token) != nil)
            #expect((detail.json["subscription"] as? [String: Any])?["tier"] as? String == "free")
            try await body(h, owner, cid, token)
        }
    }

    static func report(_ h: AccountHarness, _ cid: String, _ jws: String, bearer: String?) async throws -> HTTPReply {
        try await h.client.post("/v1/companies/\(cid)/subscription", ["signed_transaction": jws], bearer: bearer)
    }

    static func notify(_ h: AccountHarness, _ jws: String) async throws -> HTTPReply {
        try await h.client.post("/v1/app-store/notifications", ["signedPayload": jws])
    }

    /// The company's subscription as its detail shows it.
    static func subscription(_ h: AccountHarness, _ cid: String, _ owner: Person) async throws -> [String: Any] {
        let detail = try await h.client.get("/v1/companies/\(cid)", bearer: try #require(owner.company?.access))
        #expect(detail.status == 200)
        #expect((detail.json["subscription"] as? [String: Any])?["tier"] as? String == detail.json["tier"] as? String)
        return try #require(detail.json["subscription"] as? [String: Any])
    }

    @Test("a purchase the owner's app reports makes the company Business, and sharing opens")
    func purchase() async throws {
        try await Self.withCompany { h, owner, cid, token in
            let bearer = try #require(owner.company?.access)
            #expect(try await h.client.createShare(cid, permission: "read_write", bearer: bearer).status == 403)
            let jws = try Self.fixtures.sign(AppStoreFixtures.transaction(token: token.uppercased()))
            let reply = try await Self.report(h, cid, jws, bearer: bearer)
            #expect(reply.status == 200, "\(reply.body)")
            #expect(reply.json["tier"] as? String == "business")
            #expect(reply.json["tier_source"] as? String == "app_store")
            #expect(reply.json["state"] as? String == "active")
            #expect(reply.json["product_id"] as? String == AppStoreFixtures.business)
            #expect(reply.json["expires_at"] is String)
            let subscription = try await Self.subscription(h, cid, owner)
            #expect(subscription["tier"] as? String == "business")
            #expect(try await h.client.createShare(cid, permission: "read_write", bearer: bearer).status == 201)
            // Reporting it again changes nothing and still answers the subscription.
            #expect(try await Self.report(h, cid, jws, bearer: bearer).json["tier"] as? String == "business")
            let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: bearer)
            let actions = (audit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            #expect(actions.contains("subscription_reported") && actions.contains("tier_changed"))
            #expect(!audit.body.contains(jws.prefix(40)), "the audit trail never holds signed data")
        }
    }

    /// Signed data that must be refused, with the code each gets.
    enum Bad: String, CaseIterable, Sendable {
        case leafWithoutMarker, intermediateWithoutMarker, expiredLeaf, chainOfTwo, chainOfFour, foreignRoot
        case badSignature, algNone, hs256, wrongBundle, sandboxOnlyProduction, otherCompanysToken, unknownProduct
        case garbage, upgraded

        var expected: (status: Int, code: String) {
            switch self {
            case .wrongBundle: (400, "app_store_wrong_app")
            case .sandboxOnlyProduction: (400, "app_store_wrong_environment")
            case .otherCompanysToken: (403, "app_store_other_company")
            case .unknownProduct: (422, "app_store_product_unknown")
            case .garbage: (400, "app_store_malformed")
            case .upgraded: (409, "app_store_transaction_superseded")
            default: (400, "app_store_untrusted")
            }
        }

        func jws(token: String) throws -> String {
            let f = AppStoreTests.fixtures
            let good = AppStoreFixtures.transaction(token: token)
            switch self {
            case .leafWithoutMarker: return try f.sign(good, with: f.leafWithoutMarker)
            case .intermediateWithoutMarker: return try f.sign(good, with: f.intermediateWithoutMarker)
            case .expiredLeaf: return try f.sign(good, with: f.expiredLeaf)
            case .chainOfTwo: return try f.sign(good, chain: Array(f.apple.chain.prefix(2)))
            case .chainOfFour: return try f.sign(good, chain: f.apple.chain + [f.apple.chain[2]])
            case .foreignRoot: return try f.sign(good, with: f.foreign)
            case .badSignature:
                let parts = try f.sign(good).split(separator: ".")
                let other = try f.sign(AppStoreFixtures.transaction(token: token, product: AppStoreFixtures.enterprise))
                return [parts[0], other.split(separator: ".")[1], parts[2]].joined(separator: ".")
            case .algNone:
                let parts = try f.sign(good, alg: "none").split(separator: ".")
                return parts[0] + "." + parts[1] + "."
            case .hs256: return try f.sign(good, alg: "HS256")
            case .wrongBundle: return try f.sign(AppStoreFixtures.transaction(token: token, bundleID: "com.evil.app"))
            case .sandboxOnlyProduction:
                return try f.sign(AppStoreFixtures.transaction(token: token, environment: "Sandbox"))
            case .otherCompanysToken: return try f.sign(AppStoreFixtures.transaction(token: UUID().uuidString))
            case .unknownProduct: return try f.sign(AppStoreFixtures.transaction(token: token, product: "com.other"))
            case .garbage: return "not.a-jws"
            case .upgraded: return try f.sign(AppStoreFixtures.transaction(token: token, upgraded: true))
            }
        }
    }

    @Test("bad signed data gets a clear error with a stable code and changes nothing", arguments: Bad.allCases)
    func refusals(_ bad: Bad) async throws {
        try await Self.withCompany(environments: ["Production"]) { h, owner, cid, token in
            let reply = try await Self.report(h, cid, try bad.jws(token: token), bearer: owner.company?.access)
            #expect(reply.status == bad.expected.status, "\(bad): \(reply.body)")
            #expect(reply.json["code"] as? String == bad.expected.code, "\(bad): \(reply.body)")
            #expect(try await Self.subscription(h, cid, owner)["tier"] as? String == "free")
            // Sent as a notification instead, the same data changes nothing either.
            let notification = try Self.fixtures.sign([
                "notificationType": "SUBSCRIBED", "notificationUUID": UUID().uuidString, "version": "2.0",
                "signedDate": AppStoreFixtures.milliseconds(Date()),
                "data": [
                    "appAppleId": AppStoreFixtures.appAppleID, "bundleId": AppStoreFixtures.bundleID,
                    "environment": "Production", "signedTransactionInfo": try bad.jws(token: token),
                ],
            ])
            let notified = try await Self.notify(h, notification)
            #expect(notified.status == 200 || notified.status == 400, "\(bad): \(notified.body)")
            #expect(try await Self.subscription(h, cid, owner)["tier"] as? String == "free")
        }
    }

    @Test("what else is refused: a member reporting, a second company presenting the same purchase, 1 MiB, no setup")
    func otherRefusals() async throws {
        try await Self.withCompany { h, owner, cid, token in
            var member = try await h.person("member")
            #expect(try await Operator(store: h.server.services.store).setTier(cid, .business))
            try await h.join(cid, &member, owner: owner)
            let jws = try Self.fixtures.sign(AppStoreFixtures.transaction(token: token, original: "777"))
            let byMember = try await Self.report(h, cid, jws, bearer: member.company?.access)
            #expect(byMember.status == 403 && byMember.json["code"] as? String == "forbidden")
            #expect(try await Self.report(h, cid, jws, bearer: owner.company?.access).status == 200)

            // A second company presenting the same original transaction, even with its own token, gets 409.
            var other = try await h.person("other")
            let second = try await h.company("Second Co", owner: &other, tier: .free)
            let secondToken = try #require(
                try await h.client.get("/v1/companies/\(second)", bearer: other.company?.access).json[
                    "app_account_token"] as? String)
            let stolen = try Self.fixtures.sign(AppStoreFixtures.transaction(token: secondToken, original: "777"))
            let claimed = try await Self.report(h, second, stolen, bearer: other.company?.access)
            #expect(claimed.status == 409 && claimed.json["code"] as? String == "app_store_transaction_claimed")
            #expect(try await Self.subscription(h, second, other)["tier"] as? String == "free")

            let huge = String(repeating: "a", count: 1 << 20)
            let tooLarge = try await Self.report(h, cid, huge, bearer: owner.company?.access)
            #expect(tooLarge.status == 413 && tooLarge.json["code"] as? String == "payload_too_large")
            let largeNotification = try await Self.notify(h, String(repeating: "b", count: 100_000))
            #expect(largeNotification.status == 413)
        }
        try await AccountHarness.with { h in
            let off = try await Self.notify(h, "x.y.z")
            #expect(off.status == 404 && off.json["code"] as? String == "app_store_disabled")
        }
    }

    @Test(
        "notifications carry the tier through renewal, billing retry with a grace period, expiry, refund and revocation"
    )
    func lifecycle() async throws {
        try await Self.withCompany { h, owner, cid, token in
            let f = Self.fixtures
            let day: TimeInterval = 86_400
            var signed = h.clock.now.addingTimeInterval(-3600)
            func next() -> Date {
                signed = signed.addingTimeInterval(60)
                return signed
            }
            func send(
                _ type: String, subtype: String? = nil, product: String = AppStoreFixtures.business,
                expires: Date? = Date().addingTimeInterval(30 * day), renewal: [String: Any]? = nil,
                revoked: Date? = nil, reason: Int? = nil
            ) async throws -> [String: Any] {
                let at = next()
                let transaction = AppStoreFixtures.transaction(
                    token: token, product: product, expires: expires, signed: at, revoked: revoked,
                    revocationReason: reason)
                let reply = try await Self.notify(
                    h,
                    try f.notification(type, subtype: subtype, transaction: transaction, renewal: renewal, signed: at))
                #expect(reply.status == 200, "\(type): \(reply.body)")
                return try await Self.subscription(h, cid, owner)
            }
            // The first notification arrives before the app's report: the purchase token finds the company.
            var state = try await send("SUBSCRIBED", subtype: "INITIAL_BUY")
            #expect(state["tier"] as? String == "business" && state["state"] as? String == "active")
            state = try await send("DID_RENEW", expires: Date().addingTimeInterval(60 * day))
            #expect(state["state"] as? String == "active")
            state = try await send("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED")
            #expect(state["tier"] as? String == "business")
            // Billing fails with a grace period: the tier holds until it ends.
            let grace = h.clock.now.addingTimeInterval(6 * day)
            state = try await send(
                "DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", expires: h.clock.now.addingTimeInterval(-60),
                renewal: AppStoreFixtures.renewalInfo(grace: grace, billingRetry: true, signed: signed))
            #expect(state["state"] as? String == "grace_period" && state["tier"] as? String == "business")
            #expect(state["grace_period_expires_at"] is String)
            state = try await send(
                "GRACE_PERIOD_EXPIRED", expires: h.clock.now.addingTimeInterval(-60),
                renewal: AppStoreFixtures.renewalInfo(billingRetry: true, signed: signed))
            #expect(state["state"] as? String == "billing_retry" && state["tier"] as? String == "free")
            #expect(state["tier_source"] as? String == "app_store")
            _ = try await h.mail(to: owner.email, subject: "The payment for Paying Co failed")
            // Recovered, then upgraded to Enterprise.
            state = try await send("DID_RENEW", subtype: "BILLING_RECOVERY")
            #expect(state["tier"] as? String == "business" && state["state"] as? String == "active")
            state = try await send("DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", product: AppStoreFixtures.enterprise)
            #expect(state["tier"] as? String == "enterprise")
            state = try await send("RENEWAL_EXTENDED", product: AppStoreFixtures.enterprise)
            #expect(state["tier"] as? String == "enterprise")
            // Refunded, the refund reversed, then revoked.
            state = try await send(
                "REFUND", product: AppStoreFixtures.enterprise, revoked: h.clock.now.addingTimeInterval(-1), reason: 0)
            #expect(state["state"] as? String == "refunded" && state["tier"] as? String == "free")
            _ = try await h.mail(to: owner.email, subject: "The subscription of Paying Co was refunded")
            state = try await send("REFUND_REVERSED", product: AppStoreFixtures.enterprise)
            #expect(state["state"] as? String == "active" && state["tier"] as? String == "enterprise")
            state = try await send(
                "REVOKE", product: AppStoreFixtures.enterprise, revoked: h.clock.now.addingTimeInterval(-1))
            #expect(state["state"] as? String == "revoked" && state["tier"] as? String == "free")
            state = try await send("DID_RENEW", product: AppStoreFixtures.enterprise)
            state = try await send("EXPIRED", subtype: "VOLUNTARY", expires: h.clock.now.addingTimeInterval(-60))
            #expect(state["state"] as? String == "expired" && state["tier"] as? String == "free")
            _ = try await h.mail(to: owner.email, subject: "The subscription of Paying Co has ended")
            // Every member and record stays: the owner is still a member and the company still answers.
            let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: owner.company?.access)
            #expect(members.status == 200)
        }
    }

    @Test("each notification is applied once, and a stale one never undoes a newer state")
    func replaysAndOrder() async throws {
        try await Self.withCompany { h, owner, cid, token in
            let f = Self.fixtures
            let now = h.clock.now
            let older = now.addingTimeInterval(-600)
            let expired = try f.notification(
                "EXPIRED", subtype: "VOLUNTARY",
                transaction: AppStoreFixtures.transaction(token: token, expires: older, signed: older), signed: older)
            let renewed = try f.notification(
                "DID_RENEW", transaction: AppStoreFixtures.transaction(token: token, signed: now), signed: now)
            // Delivered out of order: the renewal (signed later) first, then the older expiry.
            #expect(try await Self.notify(h, renewed).status == 200)
            #expect(try await Self.notify(h, expired).status == 200)
            var state = try await Self.subscription(h, cid, owner)
            #expect(state["state"] as? String == "active" && state["tier"] as? String == "business")
            // A replay of the same notification (Apple retries) is acknowledged and applied once.
            let uuid = UUID().uuidString
            let refund = try f.notification(
                "REFUND", uuid: uuid,
                transaction: AppStoreFixtures.transaction(
                    token: token, signed: now.addingTimeInterval(1), revoked: now, revocationReason: 1),
                signed: now.addingTimeInterval(1))
            #expect(try await Self.notify(h, refund).status == 200)
            #expect(try await Self.notify(h, refund).status == 200)
            state = try await Self.subscription(h, cid, owner)
            #expect(state["state"] as? String == "refunded")
            let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: owner.company?.access)
            let events = audit.json["events"] as? [[String: Any]] ?? []
            let actions = events.compactMap { $0["action"] as? String }
            #expect(actions.filter { $0 == "subscription_notified" }.count == 2)
            #expect(actions.contains("subscription_stale"))
            // TEST and a type Gatehouse does not act on are acknowledged.
            let test = try f.notification("TEST", transaction: nil)
            #expect(try await Self.notify(h, test).status == 200)
            let unknown = try f.notification(
                "CONSUMPTION_REQUEST", transaction: AppStoreFixtures.transaction(token: token))
            #expect(try await Self.notify(h, unknown).status == 200)
            #expect(try await Self.subscription(h, cid, owner)["state"] as? String == "refunded")
            // The sweeper forgets applied notifications after 30 days (Apple retries for about three).
            let count: SQLQueryString = "SELECT COUNT(*) AS n FROM app_store_notifications"
            #expect(try await SweeperTests.count(h, count) >= 3)
            h.clock.advance(by: 31 * 86_400)
            try await SweeperTests.sweeper(h).sweep()
            #expect(try await SweeperTests.count(h, count) == 0)
        }
    }

    @Test("an operator's tier is an override that notifications do not undo")
    func operatorOverride() async throws {
        try await Self.withCompany { h, owner, cid, token in
            let f = Self.fixtures
            let bearer = owner.company?.access
            #expect(
                try await Self.report(h, cid, try f.sign(AppStoreFixtures.transaction(token: token)), bearer: bearer)
                    .status == 200)
            #expect(try await Operator(store: h.server.services.store).setTier(cid, .enterprise))
            var state = try await Self.subscription(h, cid, owner)
            #expect(state["tier"] as? String == "enterprise" && state["tier_source"] as? String == "operator")
            let expired = try f.notification(
                "EXPIRED",
                transaction: AppStoreFixtures.transaction(token: token, expires: h.clock.now.addingTimeInterval(-1)))
            #expect(try await Self.notify(h, expired).status == 200)
            state = try await Self.subscription(h, cid, owner)
            #expect(state["tier"] as? String == "enterprise" && state["tier_source"] as? String == "operator")
            #expect(state["state"] as? String == "expired")
        }
    }

    // MARK: Apple's own library as a peer

    static let peerScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/app_store_peer.py").path

    static func peer(_ arguments: [String]) async throws -> ProcessOutcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", peerScript] + arguments
        return try await process.runToEnd()
    }

    @Test("Apple's Python App Store Server Library verifies the tests' signed data, and the server applies its shape")
    func applesLibrary() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let f = Self.fixtures
        // Our fixtures, given the test root, pass the library's SignedDataVerifier (Production, online checks off).
        let rootDER = folder.path + "/root.der"
        try Data(try AppStoreFixtures.der(f.root)).write(to: URL(fileURLWithPath: rootDER))
        let token = UUID().uuidString.lowercased()
        let transaction = AppStoreFixtures.transaction(token: token, original: "3000000000000001")
        let signed: [String: String] = [
            "transaction": try f.sign(transaction),
            "renewal": try f.sign(AppStoreFixtures.renewalInfo(original: "3000000000000001")),
            "notification": try f.notification("SUBSCRIBED", subtype: "INITIAL_BUY", transaction: transaction),
        ]
        let fixtures = folder.path + "/fixtures.json"
        try JSONSerialization.data(withJSONObject: signed).write(to: URL(fileURLWithPath: fixtures))
        let verified = try await Self.peer(["verify", rootDER, fixtures])
        #expect(verified.status == 0, "\(verified.stderr)")
        let decoded = (try? JSONSerialization.jsonObject(with: Data(verified.stdout.utf8))) as? [String: Any] ?? [:]
        #expect(decoded["appAccountToken"] as? String == token)
        #expect(decoded["productId"] as? String == AppStoreFixtures.business)
        #expect(decoded["notificationType"] as? String == "SUBSCRIBED")
        // And what a chain of the peer's own, signed with PyJWT in the library's shape, says is applied.
        #expect(try await Self.peer(["chain", folder.path]).status == 0)
        try await AccountHarness.with({
            f.configure(&$0)
            $0.appStore.rootCertificateFiles.append(folder.path + "/root.pem")
        }) { h in
            var owner = try await h.person("peer")
            let cid = try await h.company("Peer Co", owner: &owner, tier: .free)
            let detail = try await h.client.get("/v1/companies/\(cid)", bearer: owner.company?.access)
            let token = try #require(detail.json["app_account_token"] as? String)
            let signing = try await Self.peer(["sign", folder.path, token])
            #expect(signing.status == 0, "\(signing.stderr)")
            let notification = try String(contentsOfFile: folder.path + "/notification.jws", encoding: .utf8)
            let reply = try await Self.notify(h, notification)
            #expect(reply.status == 200, "\(reply.body)")
            var state = try await Self.subscription(h, cid, owner)
            #expect(state["tier"] as? String == "business" && state["state"] as? String == "active")
            let transaction = try String(contentsOfFile: folder.path + "/transaction.jws", encoding: .utf8)
            let reported = try await Self.report(h, cid, transaction, bearer: owner.company?.access)
            #expect(reported.status == 200, "\(reported.body)")
            state = try await Self.subscription(h, cid, owner)
            #expect(state["product_id"] as? String == AppStoreFixtures.business)
        }
    }

    @Test("reconcile asks a fake of the App Store Server API, which checks the JWT, and repairs a missed expiry")
    func reconcile() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: folder.path + "/key.p8", atomically: true, encoding: .utf8)
        try key.publicKey.pemRepresentation.write(toFile: folder.path + "/key.pub", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", Self.peerScript, "fake-api", folder.path, folder.path + "/key.pub", "issuer-1", "KEY123",
            AppStoreFixtures.bundleID,
        ]
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        var lines = output.lines().makeAsyncIterator()
        try process.start()
        defer {
            // The fake stops when its stdin closes (a runner may start children with SIGTERM ignored).
            try? input.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
        }
        let port = try #require(Int(await lines.next() ?? ""), "the fake API did not start")
        try await AccountHarness.with({
            Self.fixtures.configure(&$0)
            $0.appStore.issuerID = "issuer-1"
            $0.appStore.keyID = "KEY123"
            $0.appStore.keyFile = folder.path + "/key.p8"
            $0.appStore.apiURL = "http://127.0.0.1:\(port)"
        }) { h in
            var owner = try await h.person("reconciled")
            let cid = try await h.company("Reconciled Co", owner: &owner, tier: .free)
            let detail = try await h.client.get("/v1/companies/\(cid)", bearer: owner.company?.access)
            let token = try #require(detail.json["app_account_token"] as? String)
            let bought = AppStoreFixtures.transaction(token: token, original: "5550001", signed: h.clock.now)
            #expect(
                try await Self.report(h, cid, try Self.fixtures.sign(bought), bearer: owner.company?.access).status
                    == 200)
            // The subscription lapsed and the EXPIRED notification never came; the API knows.
            let now = h.clock.now
            let lapsed = AppStoreFixtures.transaction(
                token: token, original: "5550001", expires: now.addingTimeInterval(-60), signed: now)
            let statuses: [String: Any] = [
                "environment": "Production", "bundleId": AppStoreFixtures.bundleID,
                "appAppleId": AppStoreFixtures.appAppleID,
                "data": [
                    [
                        "subscriptionGroupIdentifier": "21000001",
                        "lastTransactions": [
                            [
                                "originalTransactionId": "5550001", "status": 2,
                                "signedTransactionInfo": try Self.fixtures.sign(lapsed),
                                "signedRenewalInfo": try Self.fixtures.sign(
                                    AppStoreFixtures.renewalInfo(original: "5550001", signed: now)),
                            ]
                        ],
                    ]
                ],
            ]
            try JSONSerialization.data(withJSONObject: statuses).write(
                to: URL(fileURLWithPath: folder.path + "/5550001.json"))
            let report = try await h.server.services.reconcileAppStore()
            #expect(report == ["\(cid)  5550001  expired  repaired (was active)"])
            #expect(await lines.next() == "answered /inApps/v1/subscriptions/5550001", "the fake accepted the JWT")
            let state = try await Self.subscription(h, cid, owner)
            #expect(state["state"] as? String == "expired" && state["tier"] as? String == "free")
            _ = try await h.mail(to: owner.email, subject: "The subscription of Reconciled Co has ended")
            // Run again, nothing is left to repair.
            #expect(try await h.server.services.reconcileAppStore() == ["\(cid)  5550001  expired  unchanged"])
        }
    }
}
