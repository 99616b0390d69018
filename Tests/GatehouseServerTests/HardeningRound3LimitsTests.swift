import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// Issue 35, the attack review's findings 4, 6 and 12: each test failed before its fix.
@Suite("Hardening round 3: address keys, service keys, disable")
struct HardeningRound3LimitsTests {
    // MARK: Finding 6

    @Test("Finding 6: one IPv6 /64 is one limit key, however written; IPv4 and mapped IPv4 are one; garbage is stable")
    func addressKeys() {
        let key = ClientAddress.limitKey
        let spellings = [
            "2001:db8:1:2::1", "2001:0DB8:0001:0002:0000:0000:0000:0001", "[2001:db8:1:2::1]", "2001:db8:1:2:0::1",
            "2001:db8:1:2::1%eth0", " 2001:db8:1:2::1 ",
        ]
        #expect(Set(spellings.map(key)) == ["2001:db8:1:2::/64"])
        // Other hosts of the same /64.
        #expect(key("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64")
        #expect(key("2001:db8:1:2:dead:beef:0:7") == "2001:db8:1:2::/64")
        // Another /64 is another key.
        #expect(key("2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(key("2001:db8:1:3::1") != key("2001:db8:1:2::1"))
        // RFC 5952: the zero groups that end the prefix go into the `::`.
        #expect(key("2001:db8::5") == "2001:db8::/64")
        #expect(key("::1") == "::/64")
        #expect(key("0:1::9") == "0:1::/64")
        // IPv4 by address; IPv4-mapped IPv6 is that address.
        #expect(key("203.0.113.7") == "203.0.113.7")
        #expect(key("::ffff:203.0.113.7") == "203.0.113.7")
        #expect(key("::FFFF:cb00:7107") == "203.0.113.7")
        #expect(key("203.0.113.8") != key("203.0.113.7"))
        // No address, or text that is none: a stable key of its own, never an address's, and bounded.
        #expect(key(nil) == "unknown")
        for garbage in ["not an address", "2001:db8::g", "1.2.3", "", String(repeating: "x:", count: 5_000)] {
            #expect(key(garbage) == key(garbage))
            #expect(key(garbage).hasPrefix("unparsed:"))
            #expect(key(garbage).count <= 80)
        }
        #expect(key("not an address") != key("another"))
    }

    @Test("Finding 6: rotating addresses within one /64 spends one per-IP limit and one audit refusal cap")
    func rotatingWithinSlash64() async throws {
        try await AccountHarness.with({ $0.auth.limits.signInsPerIP = RateLimit(limit: 10, per: 300) }) { h in
            // A /64 of its own, so runs on one store never share it.
            let prefix =
                "2001:db8:" + [0, 1].map { _ in String(Int.random(in: 1...0xfffd), radix: 16) }.joined(separator: ":")
            var statuses: [Int] = []
            for attempt in 0..<40 {
                // A new host in the /64 each time, behind the trusted proxy (the test's peer, 127.0.0.1).
                let client = AuthClient(
                    http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", "\(prefix)::\(attempt + 1)")])
                statuses.append(try await client.password(AccountHarness.newEmail(), "whatever it is").status)
            }
            #expect(statuses.prefix(10).allSatisfy { $0 == 400 })
            #expect(statuses.filter { $0 == 429 }.count == 30)
            // Another /64 has a limit of its own.
            let neighbour = AuthClient(
                http: h.http, base: h.server.baseURL, headers: [("X-Forwarded-For", "2001:db8:ffff:fffe::1")])
            #expect(try await neighbour.password(AccountHarness.newEmail(), "whatever it is").status == 400)

            // The trail keeps each full address, and records the /64's refusals up to its cap (20, then one notice).
            let db = h.server.services.store.database
            let failed = try await db.select().column("ip").from("audit_events")
                .where("action", .equal, "sign_in_failed").where("ip", .like, "\(prefix)::%")
                .all(decodingColumn: "ip", as: String.self)
            #expect(Set(failed) == Set((1...10).map { "\(prefix)::\($0)" }))
            let limited = try await db.select().column("ip").from("audit_events")
                .where("action", .equal, "rate_limited").where("ip", .like, "\(prefix)::%")
                .all(decodingColumn: "ip", as: String.self)
            #expect(limited.count == AuditTrail.refusalsPerAddress.limit)
            #expect(Set(limited).count == limited.count)
            let notices = try await db.select().column("ip").from("audit_events")
                .where("action", .equal, "audit_suppressed").where("ip", .like, "\(prefix)::%")
                .all(decodingColumn: "ip", as: String.self)
            #expect(notices.count == 1)
        }
    }

    // MARK: Finding 12

    @Test("Finding 12: a service key with another server's iss, or past its exp, is refused by the admin API")
    func serviceKeyIssuerAndExpiry() async throws {
        try await AccountHarness.with { h in
            let services = h.server.services
            let (_, own) = try await AdminClient.mint(h)
            #expect(try await AdminClient(client: h.client, key: own).get("/auth/v1/admin/users").status == 200)

            // Signed by this server's key and live in its store, but issued for another public URL.
            let elsewhere = try await ServiceKeys(
                store: services.store, box: services.box, issuer: "https://elsewhere.example/auth/v1"
            ).mint(revokingOthers: false)
            let foreign = try await AdminClient(client: h.client, key: elsewhere.token).get("/auth/v1/admin/users")
            #expect(foreign.status == 403 && foreign.json["error_code"] as? String == "bad_jwt")

            // Minted a lifetime and a minute ago: expired, though never revoked.
            let past = TestClock()
            past.advance(by: -(ServiceKeys.lifetime + 60))
            let old = try await ServiceKeys(
                store: services.store, secrets: ServerSecrets(store: services.store, box: services.box), clock: past,
                issuer: ServiceKeys.issuer(services.configuration)
            ).mint(revokingOthers: false)
            let expired = try await AdminClient(client: h.client, key: old.token).get("/auth/v1/admin/users")
            #expect(expired.status == 403 && expired.json["error_code"] as? String == "bad_jwt")

            // And this server's own key, once its exp has passed on the server's clock.
            // The key was minted on the system clock after the harness clock started: a day past its lifetime, whatever
            // the gap between the two.
            h.clock.advance(by: ServiceKeys.lifetime + 86_400)
            let lapsed = try await AdminClient(client: h.client, key: own).get("/auth/v1/admin/users")
            #expect(lapsed.status == 403 && lapsed.json["error_code"] as? String == "bad_jwt")
        }
    }

    @Test("Finding 12: `keys service-key` mints for the public URL it is given, as the server reads it")
    func commandLineMintsForPublicURL() async throws {
        let folder = try CommandLineTests.scratchFolder()
        let dataDir = folder.appendingPathComponent("data").path
        let publicURL = "https://auth.example.test"
        try await AccountHarness.with({
            $0.databaseURL = nil
            $0.databaseSearchPath = nil
            $0.dataDirectory = dataDir
            $0.publicURL = publicURL
        }) { h in
            let args = ["--data-dir", dataDir]
            func listUsers(_ minted: ProcessOutcome) async throws -> HTTPReply {
                let key = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                return try await AdminClient(client: h.client, key: key).get("/auth/v1/admin/users")
            }
            let byFlag = try await CommandLineTests.run(["keys", "service-key", "--public-url", publicURL] + args)
            #expect(byFlag.status == 0 && !byFlag.stderr.contains("no --public-url"))
            #expect(try await listUsers(byFlag).status == 200)
            let byVariable = try await CommandLineTests.run(
                ["keys", "service-key"] + args, environment: ["GATEHOUSE_PUBLIC_URL": publicURL + "/"])
            #expect(byVariable.status == 0)
            #expect(try await listUsers(byVariable).status == 200)

            // Without it, the key is for the made-up http://127.0.0.1:8080: the command says so, the server refuses.
            let unaware = try await CommandLineTests.run(["keys", "service-key"] + args)
            #expect(unaware.status == 0)
            #expect(unaware.stderr.contains("no --public-url: the key is for http://127.0.0.1:8080/auth/v1"))
            let refused = try await listUsers(unaware)
            #expect(refused.status == 403 && refused.json["error_code"] as? String == "bad_jwt")
        }
    }

    // MARK: Finding 4

    @Test("Finding 4: an operator's disable outlives a timed ban, the sweeper and the admin API's bans; enable ends it")
    func disableOutlivesBan() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let email = AccountHarness.newEmail("disabled")
            let id = try await h.confirmedAccount(email).userID
            let password = "correct horse battery"
            let path = "/auth/v1/admin/users/\(id)"
            func signIn() async throws -> String? {
                let reply = try await h.client.password(email, password)
                return reply.status == 200 ? "signed_in" : reply.json["error_code"] as? String
            }
            #expect(try await admin.send(.put, path, ["ban_duration": "1h"]).status == 200)
            let op = Operator(store: h.server.services.store)
            #expect(try await op.disableUser(email))

            // The ban's hour passes and the sweeper runs: the account stays disabled.
            h.clock.advance(by: 3600 + 1)
            #expect(try await SweeperTests.sweeper(h).sweep().bansLifted == 0)
            #expect(try await signIn() == "user_banned")

            // The admin API's ban changes neither lift it nor turn it into a ban that ends.
            let lifted = try await admin.send(.put, path, ["ban_duration": "none"])
            #expect(lifted.status == 200 && lifted.json["banned_until"] is String)
            #expect(try await signIn() == "user_banned")
            #expect(try await admin.send(.put, path, ["ban_duration": "1m"]).status == 200)
            h.clock.advance(by: 120)
            #expect(try await SweeperTests.sweeper(h).sweep().bansLifted == 0)
            #expect(try await signIn() == "user_banned")

            // An operator's enable does.
            #expect(try await op.enableUser(email))
            #expect(try await signIn() == "signed_in")
            let enabled = try await h.server.services.store.database.select().column("id").from("audit_events")
                .where("action", .equal, "account_enabled").where("account_id", .equal, id).all()
            #expect(enabled.count == 1)
            #expect(try await op.enableUser("nobody-\(UUID().uuidString)@example.com") == false)
        }
    }
}
