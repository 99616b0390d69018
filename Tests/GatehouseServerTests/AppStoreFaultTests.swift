import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import Testing

@testable import GatehouseServer

/// The `gatehouse` binary killed with SIGKILL while App Store notifications arrive, on this run's store: every
/// notification answered 200 was committed, and sending them all again applies none twice.
@Suite("App Store notifications under kill -9")
struct AppStoreFaultTests {
    @Test("kill -9 while notifications arrive, 5 times: each answered 200 is applied after the restart, once")
    func killNine() async throws {
        let fixtures = AppStoreFixtures.shared
        let sink = try await SMTPSink.shared()
        let folder = try CommandLineTests.scratchFolder()
        let data = folder.appendingPathComponent("data")
        let databaseURL = try await SyncFaultTests.databaseURL()
        let port = try freeLoopbackPort()
        let base = "http://127.0.0.1:\(port)"
        let client = AuthClient(http: AccountHarness.http, base: base)
        let settings = [
            "--app-store-bundle-ids", AppStoreFixtures.bundleID, "--app-store-app-id",
            String(AppStoreFixtures.appAppleID), "--app-store-products", "\(AppStoreFixtures.business)=business",
            "--app-store-root-certificates", fixtures.rootFile,
        ]
        func start() async throws -> Process {
            try await SyncFaultTests.start(
                port: port, data: data, databaseURL: databaseURL, sinkPort: sink.port, extra: settings)
        }
        var process = try await start()
        let email = AccountHarness.newEmail("appstore-fault")
        #expect(try await client.signUp(email, password: "correct horse battery").status == 200)
        let code = try #require(try await sink.waitForMail(to: email, subject: "Confirm your email").code)
        let account = try SignedIn(try await client.verify(email, code: code, type: "signup"))
        let cid = try #require(try await client.createCompany("Faults", bearer: account.access).json["id"] as? String)
        #expect(
            try await client.createCredential(
                cid, username: "boss", password: "company secret 1", bearer: account.access
            ).status == 201)
        let session = try SignedIn(
            try await client.companyLogin(cid, username: "boss", password: "company secret 1", bearer: account.access))
        let token = try #require(
            try await client.get("/v1/companies/\(cid)", bearer: session.access).json["app_account_token"] as? String)

        // Each notification its own subscription (its original transaction), so each one's effect can be seen.
        var sent: [(uuid: String, jws: String)] = []
        var answered: Set<String> = []
        func notification() throws -> (uuid: String, jws: String) {
            let uuid = UUID().uuidString
            let transaction = AppStoreFixtures.transaction(
                token: token, original: "9\(sent.count)\(Int.random(in: 0...999_999))")
            let jws = try fixtures.notification(
                "SUBSCRIBED", subtype: "INITIAL_BUY", uuid: uuid, transaction: transaction)
            sent.append((uuid, jws))
            return (uuid, jws)
        }
        func post(_ jws: String) throws -> HTTPClient.Request {
            try HTTPClient.Request(
                url: base + "/v1/app-store/notifications", method: .POST,
                headers: ["Content-Type": "application/json"],
                body: .data(try JSONSerialization.data(withJSONObject: ["signedPayload": jws])))
        }
        do {
            for round in 0..<5 {
                for _ in 0..<(1 + round % 3) {
                    let (uuid, jws) = try notification()
                    let reply = try await client.post("/v1/app-store/notifications", ["signedPayload": jws])
                    #expect(reply.status == 200, "\(reply.body)")
                    answered.insert(uuid)
                }
                // Four in flight at once; the kill lands as the first answer's status line arrives.
                let inFlight = try (0..<4).map { _ in try notification() }
                let killSwitch = KillSwitch(pid: process.processIdentifier)
                let replies = try inFlight.map {
                    let request = try post($0.jws)
                    return AccountHarness.http.execute(
                        request: request, delegate: KillOnFirstAnswer(request: request, killSwitch: killSwitch)
                    ).futureResult
                }
                for (notification, reply) in zip(inFlight, replies) {
                    if let reply = try? await reply.get(), reply.status == .ok { answered.insert(notification.uuid) }
                }
                killSwitch.fire()
                process.waitUntilExit()
                #expect(process.terminationReason == .uncaughtSignal)
                process = try await start()
            }
            // Every notification answered 200 is in the trail, applied once.
            func applied() async throws -> [String: Int] {
                var counts: [String: Int] = [:]
                var before: Int64?
                repeat {
                    let page = try await client.get(
                        "/v1/companies/\(cid)/audit?limit=100" + (before.map { "&before=\($0)" } ?? ""),
                        bearer: session.access)
                    #expect(page.status == 200)
                    for event in page.json["events"] as? [[String: Any]] ?? []
                    where event["action"] as? String == "subscription_notified" {
                        if let uuid = (event["detail"] as? [String: Any])?["notification_uuid"] as? String {
                            counts[uuid, default: 0] += 1
                        }
                    }
                    before = (page.json["next_before"] as? NSNumber)?.int64Value
                } while before != nil
                return counts
            }
            // The kills did land mid-stream: some answers never came.
            #expect(answered.count < sent.count)
            let afterKills = try await applied()
            for uuid in answered { #expect(afterKills[uuid] == 1, "notification \(uuid) was answered 200") }
            // Apple sends again whatever it got no 200 for, and may repeat the rest: each applies once.
            for (_, jws) in sent {
                #expect(try await client.post("/v1/app-store/notifications", ["signedPayload": jws]).status == 200)
            }
            let final = try await applied()
            #expect(final.count == sent.count && final.values.allSatisfy { $0 == 1 })
            let detail = try await client.get("/v1/companies/\(cid)", bearer: session.access)
            #expect(detail.json["tier"] as? String == "business")
        } catch {
            process.terminate()
            process.waitUntilExit()
            throw error
        }
        process.terminate()
        process.waitUntilExit()
    }
}
