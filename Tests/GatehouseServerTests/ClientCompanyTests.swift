import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's companies and company store against the server's router in process (the live stream included): the
/// seeds' path, and the sync failure modes.
@Suite("GatehouseClient companies and the company store")
struct ClientCompanyTests {
    @Test("A purchase made for the company: its token, the report, the tier and its source on the company model")
    func purchase() async throws {
        try await AccountHarness.with({ AppStoreFixtures.shared.configure(&$0) }) { h in
            let owner = try AppDevice(h)
            try await owner.signUp(h, "buyer")
            let company = try await owner.client.companies.create(name: "Bought Ltd")
            _ = try await owner.client.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
            let before = try await owner.client.companies.details()
            #expect(before.subscription.tier == .free && before.subscription.source == nil)
            let token = try #require(before.appAccountToken)
            let jws = try AppStoreFixtures.shared.sign(AppStoreFixtures.transaction(token: token.uuidString))
            let subscription = try await owner.client.companies.reportPurchase(signedTransaction: jws)
            #expect(subscription.tier == .business && subscription.source == .appStore)
            #expect(subscription.state == .active && subscription.productID == AppStoreFixtures.business)
            let after = try await owner.client.companies.details()
            #expect(after.tier == .business && after.subscription == subscription)
            // A purchase made for another company is refused, with the server's code.
            let other = try AppStoreFixtures.shared.sign(AppStoreFixtures.transaction(token: UUID().uuidString))
            await #expect(throws: GatehouseError.self) {
                try await owner.client.companies.reportPurchase(signedTransaction: other)
            }
        }
    }

    @Test("The seeds' path: create, credential, login, share, preview, accept, members, switching, lockout")
    func companiesPath() async throws {
        try await AccountHarness.with { h in
            let owner = try AppDevice(h)
            try await owner.signUp(h, "owner")
            let events = Recorder(owner.client.auth.events)
            let company = try await owner.client.companies.create(name: "Acme Ltd")
            #expect(company.tier == .free)
            #expect(try await Operator(store: h.server.services.store).setTier(company.id, .business))
            let listed = try #require(try await owner.client.companies.list().first)
            #expect(listed.name == "Acme Ltd" && listed.role == .owner && !listed.hasCredential)
            // Company calls need the company session.
            await #expect(throws: GatehouseError.notSignedIn) { try await owner.client.companies.members() }
            let credential = try await owner.client.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            #expect(credential.username == "olive" && credential.isSuperUser)
            try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
            #expect(try await events.waitFor { $0 == .companyChanged(companyID: company.id) })
            #expect(try await owner.client.companies.details().name == "Acme Ltd")
            #expect(try await owner.client.companies.credential().username == "olive")
            let share = try await owner.client.companies.createShare(permission: .readWrite, maxUses: 3)
            let link = try #require(share.url)

            let guest = try AppDevice(h)
            try await guest.signUp(h, "guest")
            let preview = try await guest.client.companies.previewShare(link)
            #expect(preview.companyName == "Acme Ltd" && preview.permission == .readWrite)
            #expect(preview.inviterName == "owner")
            let joined = try await guest.client.companies.acceptShare(link)
            #expect(joined.id == company.id && joined.role == .member && !joined.hasCredential)
            _ = try await guest.client.companies.createCredential(
                in: company.id, username: "gus", password: "green tractor 17")

            // Wrong passwords: the server backs off, and the SDK says until when.
            var lockedUntil: Date?
            var lockedAt = Date()
            for _ in 0..<12 where lockedUntil == nil {
                do throws(GatehouseError) {
                    try await guest.client.companies.signIn(to: company.id, username: "gus", password: "wrong one 1")
                    Issue.record("a wrong password logged in")
                } catch .lockedOut(let until) {
                    lockedUntil = until
                    lockedAt = Date()
                } catch {
                    #expect(error == .invalidCredentials)
                }
            }
            let until = try #require(lockedUntil)
            #expect(until > Date())
            await #expect(throws: GatehouseError.self) {
                try await guest.client.companies.signIn(to: company.id, username: "gus", password: "green tractor 17")
            }
            // The server's clock stands still: move it past the lock's length (not past `until` in real time, which
            // the attempt above may have spent on a loaded machine).
            h.clock.advance(by: until.timeIntervalSince(lockedAt) + 1)
            try await guest.client.companies.signIn(to: company.id, username: "gus", password: "green tractor 17")

            let members = try await owner.client.companies.members()
            #expect(members.count == 2)
            let guestID = try await guest.userID
            let changed = try await owner.client.companies.updateMember(guestID, role: .readOnly, deptMask: 3)
            #expect(changed.role == .readOnly && changed.deptMask == 3)
            #expect(try await owner.client.companies.shares().first?.uses == 1)

            // Switching: a second company, logged in to in its turn.
            let second = try await owner.client.companies.create(name: "Beta Co")
            _ = try await owner.client.companies.createCredential(
                in: second.id, username: "olive", password: "blue tractor 42")
            try await owner.client.companies.signIn(to: second.id, username: "olive", password: "blue tractor 42")
            #expect(await owner.client.companies.currentCompanyID == second.id)
            #expect(try await owner.client.companies.details().name == "Beta Co")
            #expect(try await events.waitFor { $0 == .companyChanged(companyID: second.id) })

            // The guest leaves: its company session ends and the app is told.
            let guestEvents = Recorder(guest.client.auth.events)
            try await guest.client.companies.leave()
            #expect(try await guestEvents.waitFor { $0 == .companyAccessRevoked(companyID: company.id) })
            #expect(await guest.client.companies.currentCompanyID == nil)
            #expect(try await guest.client.companies.list().isEmpty)
        }
    }

    @Test("Saves return at once, reach the other device live, and different fields edited offline both survive")
    func liveAndDifferentFields() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let ownerStore = try await owner.store(cid)
            let guestStore = try await guest.store(cid)
            let guestEvents = Recorder(guestStore.events)
            let id = try await ownerStore.save(type: "Client", fields: ["name": .string("Ada"), "phone": .string("1")])
            #expect(try await ownerStore.record(id)?.hasPendingChanges == true)
            // No explicit sync on either side: the background push and the live poke carry it.
            #expect(
                try await LiveServer.eventually { try await guestStore.record(id)?.fields["name"] == .string("Ada") })
            #expect(
                try await guestEvents.waitFor { if case .changed(let ids) = $0 { ids.contains(id) } else { false } })

            owner.network.offline = true
            guest.network.offline = true
            try await ownerStore.save(type: "Client", id: id, fields: ["phone": .string("2")])
            try await guestStore.save(type: "Client", id: id, fields: ["name": .string("Ada Lovelace")])
            #expect(try await guestStore.record(id)?.fields["name"] == .string("Ada Lovelace"))
            owner.network.offline = false
            guest.network.offline = false
            // Each store's background push may still be on its way when another store syncs: wait for both to settle.
            for store in [ownerStore, guestStore, ownerStore] {
                let settled = try await LiveServer.eventually {
                    try await store.sync()
                    guard let record = try await store.record(id) else { return false }
                    return record.fields["name"] == .string("Ada Lovelace") && record.fields["phone"] == .string("2")
                        && !record.hasPendingChanges
                }
                #expect(settled)
            }
            #expect(!guestEvents.events.contains { if case .conflict = $0 { true } else { false } })
            await ownerStore.close()
            await guestStore.close()
        }
    }

    @Test("The same field edited offline on two devices: the server's value stays on both; the loser hears of it")
    func sameFieldConflict() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let ownerStore = try await owner.store(cid)
            let guestStore = try await guest.store(cid)
            let id = try await ownerStore.save(type: "Client", fields: ["name": .string("Ada")])
            try await ownerStore.sync()
            try await guestStore.sync()
            #expect(try await guestStore.record(id)?.fields["name"] == .string("Ada"))

            owner.network.offline = true
            guest.network.offline = true
            try await ownerStore.save(type: "Client", id: id, fields: ["name": .string("Ada (owner)")])
            try await guestStore.save(type: "Client", id: id, fields: ["name": .string("Ada (guest)")])
            let guestEvents = Recorder(guestStore.events)
            let ownerEvents = Recorder(ownerStore.events)
            owner.network.offline = false
            try await ownerStore.sync()
            guest.network.offline = false
            try await guestStore.sync()
            try await ownerStore.sync()
            let conflict = FieldConflict(
                recordID: id, field: "name", yours: .string("Ada (guest)"), kept: .string("Ada (owner)"))
            #expect(try await guestEvents.waitFor { $0 == .conflict(conflict) })
            #expect(try await guestStore.record(id)?.fields["name"] == .string("Ada (owner)"))
            #expect(try await ownerStore.record(id)?.fields["name"] == .string("Ada (owner)"))
            #expect(!ownerEvents.events.contains { if case .conflict = $0 { true } else { false } })
            await ownerStore.close()
            await guestStore.close()
        }
    }

    @Test("Changes larger together than the server's body limit go up in smaller batches; none is lost")
    func batchesOverTheBodyLimit() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let ownerStore = try await owner.store(cid)
            let guestStore = try await guest.store(cid)
            owner.network.offline = true
            let note = String(repeating: "x", count: 60_000)
            for index in 0..<40 {
                try await ownerStore.save(type: "Note", fields: ["n": .int(Int64(index)), "text": .string(note)])
            }
            owner.network.offline = false
            try await ownerStore.sync()  // 40 × 60 KB: over the 1 MiB limit until halved
            #expect(try await ownerStore.pendingCount() == 0)
            try await guestStore.sync()
            #expect(try await guestStore.records(ofType: "Note").count == 40)
            await ownerStore.close()
            await guestStore.close()
        }
    }

    @Test("The app is killed mid-push and relaunched: the retried push loses nothing and applies nothing twice")
    func killedMidPush() async throws {
        try await AccountHarness.with { h in
            let (owner, _, cid) = try await sharedCompany(h)
            var store = try await owner.store(cid)
            owner.network.dropPushAnswers(1)
            var ids: [String] = []
            for name in ["Ada", "Grace", "Edsger"] {
                ids.append(try await store.save(type: "Client", fields: ["name": .string(name)]))
            }
            // The server applied the push, but the answer never arrived: the changes are still pending.
            #expect(try await LiveServer.eventually { try await Self.serverSeqs(h, cid, owner).count == 3 })
            let applied = try await Self.serverSeqs(h, cid, owner)
            await store.close()

            let relaunched = try owner.relaunched()
            try await relaunched.client.auth.restoreSession()
            store = try await relaunched.store(cid)
            try await store.sync()
            #expect(try await store.pendingCount() == 0)
            #expect(try await store.records(ofType: "Client").map(\.id) == ids.sorted())
            #expect(try await Self.serverSeqs(h, cid, owner) == applied)
            await store.close()
        }
    }

    @Test("A member removed while offline: the device wipes the company's local data when it reconnects")
    func removedWhileOffline() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let guestStore = try await guest.store(cid)
            let id = try await guestStore.save(type: "Client", fields: ["name": .string("Ada")])
            try await guestStore.sync()
            let storeEvents = Recorder(guestStore.events)
            let authEvents = Recorder(guest.client.auth.events)
            guest.network.offline = true
            try await guestStore.save(type: "Client", id: id, fields: ["name": .string("Ada (offline)")])
            try await owner.client.companies.removeMember(try await guest.userID)
            #expect(try await guestStore.record(id)?.fields["name"] == .string("Ada (offline)"))
            guest.network.offline = false
            #expect(try await storeEvents.waitFor { $0 == .wiped })
            #expect(try await authEvents.waitFor { $0 == .companyAccessRevoked(companyID: cid) })
            #expect(!FileManager.default.fileExists(atPath: guestStore.file.path))
            await #expect(throws: GatehouseError.companyAccessRevoked) { try await guestStore.record(id) }
            #expect(await guest.client.companies.currentCompanyID == nil)
            #expect(await guest.client.auth.currentSession != nil)
        }
    }

    /// Each record's seq on the server, by id, read with the owner's company session.
    private static func serverSeqs(_ h: AccountHarness, _ cid: String, _ owner: AppDevice) async throws -> [String: Int]
    {
        let page = try await h.client.get("/v1/companies/\(cid)/records", bearer: try await owner.companyBearer)
        let records = page.json["records"] as? [[String: Any]] ?? []
        return Dictionary(
            uniqueKeysWithValues: records.compactMap { record in
                (record["id"] as? String).map { ($0, record["seq"] as? Int ?? 0) }
            })
    }
}
