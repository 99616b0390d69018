import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// The attack review's sync findings, replayed: reads bounded by bytes (finding 1) and nothing told of records a
/// member cannot see (finding 6).
@Suite("Sync hardening")
struct SyncHardeningTests {
    /// Bytes of one record's fields as the server counts them (JSON, sorted keys).
    private static func bytes(_ change: [String: Any]) throws -> Int {
        try JSONSerialization.data(withJSONObject: change["fields"] ?? [:], options: .sortedKeys).count
    }

    private static func result(_ reply: HTTPReply, _ index: Int = 0) -> [String: Any] {
        (reply.json["results"] as? [[String: Any]])?[index] ?? [:]
    }

    /// 24 records of 250,000 bytes, each pushed in its own transaction: 6 MB, half again the 4 MiB page budget.
    private func bigRecords(_ h: AccountHarness) async throws -> (cid: String, bearer: String, ids: Set<String>) {
        var owner = try await h.person("owner")
        let cid = try await h.company("Archive", owner: &owner)
        let bearer = try #require(owner.company?.access)
        let device = Device(h.client, cid: cid, bearer: bearer)
        let blob = String(repeating: "x", count: 250_000)
        var ids: Set<String> = []
        for _ in 0..<24 {
            let id = newRecordID()
            ids.insert(id)
            #expect(
                Self.result(try await device.push([upsert(id, base: 0, ["blob": blob])]))["status"] as? String
                    == "applied")
        }
        return (cid, bearer, ids)
    }

    @Test("F1: a record list stops at the page's bytes, and next_after brings every record exactly once")
    func listWithinBudget() async throws {
        try await AccountHarness.with { h in
            let (cid, bearer, ids) = try await bigRecords(h)
            var seen: [String] = []
            var after: String?
            var pages = 0
            repeat {
                let path = "/v1/companies/\(cid)/records?limit=1000" + (after.map { "&after=\($0)" } ?? "")
                let reply = try await h.client.get(path, bearer: bearer)
                #expect(reply.status == 200)
                let records = try #require(reply.json["records"] as? [[String: Any]])
                #expect(!records.isEmpty)
                #expect(try records.map(Self.bytes).reduce(0, +) <= SyncService.pageBytes)
                seen += records.compactMap { $0["id"] as? String }
                after = reply.json["next_after"] as? String
                pages += 1
            } while after != nil && pages < 10
            #expect(pages >= 2)
            #expect(seen.count == ids.count)
            #expect(Set(seen) == ids)
        }
    }

    @Test("F1: pulls of large records keep each page within its bytes; every record arrives exactly once")
    func pullWithinBudget() async throws {
        try await AccountHarness.with { h in
            let (cid, bearer, ids) = try await bigRecords(h)
            var seen: [String] = []
            var token: String?
            var pages = 0
            var more = true
            while more && pages < 10 {
                let reply = try await h.client.pull(cid, token: token, limit: 5000, bearer: bearer)
                #expect(reply.status == 200)
                let changes = try #require(reply.json["changes"] as? [[String: Any]])
                #expect(!changes.isEmpty)
                #expect(try changes.map(Self.bytes).reduce(0, +) <= SyncService.pageBytes)
                seen += changes.compactMap { $0["id"] as? String }
                token = try #require(reply.json["token"] as? String)
                more = reply.json["has_more"] as? Bool == true
                pages += 1
            }
            #expect(pages >= 2)
            #expect(seen.count == ids.count)
            #expect(Set(seen) == ids)
        }
    }

    @Test("F1: a digest chunk sends at most a page's bytes; its through goes on, and every record comes once")
    func digestWithinBudget() async throws {
        try await AccountHarness.with { h in
            let (cid, bearer, ids) = try await bigRecords(h)
            var seen: [String] = []
            var after: String?
            var token: String?
            var chunks = 0
            repeat {
                var body: [String: Any] = ["known": [], "complete": true]
                if let after { body["after"] = after }
                if let token { body["token"] = token }
                let reply = try await h.client.post("/v1/companies/\(cid)/sync/digest", body, bearer: bearer)
                #expect(reply.status == 200)
                let changes = try #require(reply.json["changes"] as? [[String: Any]])
                #expect(!changes.isEmpty)
                #expect(try changes.map(Self.bytes).reduce(0, +) <= SyncService.pageBytes)
                seen += changes.compactMap { $0["id"] as? String }
                after = reply.json["through"] as? String
                token = reply.json["token"] as? String
                chunks += 1
            } while after != nil && chunks < 10
            #expect(chunks >= 2)
            #expect(seen.count == ids.count)
            #expect(Set(seen) == ids)
            // Records the device holds at their current seq cost nothing: one chunk covers them all, sending the one
            // it holds older.
            let known = ids.map { id -> [String: Any] in ["id": id, "seq": id == seen[0] ? 0 : Int64.max] }
            let current = try await h.client.post(
                "/v1/companies/\(cid)/sync/digest", ["known": known, "complete": true], bearer: bearer)
            #expect((current.json["changes"] as? [[String: Any]])?.count == 1)
            #expect(current.json["through"] == nil || current.json["through"] is NSNull)
        }
    }

    @Test("F1: the store reads the fields of the rows that fit only; the keys say where the page ends")
    func repositoryReadsWhatFits() async throws {
        try await AccountHarness.with { h in
            let (cid, _, ids) = try await bigRecords(h)
            let sync = SyncRepository(db: h.server.services.store.database)
            let keys = try await sync.changeKeys(cid, since: 0, mask: -1, types: nil, limit: 5001)
            #expect(keys.count == ids.count)
            #expect(keys.allSatisfy { $0.size > 250_000 && $0.size < 250_100 })
            let fitting = SyncRules.rowsWithin(SyncService.pageBytes, sizes: keys.map(\.size), limit: 5000)
            #expect(fitting == 16)
            let rows = try await sync.changes(
                cid, since: 0, seqs: keys[0].seq...keys[fitting - 1].seq, keys: keys.prefix(fitting), mask: -1,
                types: nil)
            #expect(rows.map(\.id) == keys.prefix(fitting).map(\.id))
            #expect(rows.map(\.storedSize).reduce(0, +) <= SyncService.pageBytes)
            let listed = try await sync.existingKeys(cid, mask: -1, after: nil, limit: 1000)
            #expect(listed.map(\.size) == listed.map { key in keys.first { $0.id == key.id }?.size ?? -1 })
        }
    }

    /// The fields a pull after `since` sends of `id` among `rows` (nil when it sends no change of it).
    private static func sent(_ id: String, in rows: [StoredRecord], since: Int64, mask: Int64) throws -> JSONFields? {
        guard var row = rows.first(where: { $0.id == id }) else { return nil }
        try row.readFields()  // as the pull does for a record it may send in part
        guard case .change(let record) = SyncRules.pullItem(row, since: since, visibility: Visibility(mask: mask))
        else { return nil }
        return record.fields
    }

    // The SDK's lost phone number: a device's token passed a field it never received when another device wrote the
    // record between the pull's read of the keys and its read of the fields (the row had moved past the page).
    @Test("F1: a write between a pull's two reads: the page still sends the record, with every field since the token")
    func writeBetweenThePullsReads() async throws {
        try await AccountHarness.with { h in
            let (cid, boss, device) = try await departments(h)
            var member = device
            let id = newRecordID()
            _ = try await boss.push([upsert(id, base: 0, ["name": "Ada", "phone": "1"])])
            try await member.sync()
            let since = member.seq(id)
            _ = try await boss.push([upsert(id, base: since, ["phone": "2"])])
            // The pull reads the keys of what changed after the member's token…
            let sync = SyncRepository(db: h.server.services.store.database)
            let keys = try await sync.changeKeys(cid, since: since, mask: 1, types: nil, limit: 1001)
            let phone = try #require(keys.first { $0.id == id })
            // …another device writes the record before the pull reads the fields…
            _ = try await boss.push([upsert(id, base: phone.seq, ["name": "Ada Lovelace"])])
            // …and the page the keys were cut to still holds it, with the phone the token will claim.
            let rows = try await sync.changes(
                cid, since: since, seqs: phone.seq...phone.seq, keys: keys, mask: 1, types: nil)
            #expect(
                try Self.sent(id, in: rows, since: since, mask: 1) == [
                    "name": .string("Ada Lovelace"), "phone": .string("2"),
                ])
            // The member's device, pulling as usual, ends with both.
            try await member.sync()
            #expect(
                member.field(id, "name") as? String == "Ada Lovelace" && member.field(id, "phone") as? String == "2")
        }
    }

    @Test("F1: a write between a re-filtering pull's two reads: a record now in sight is still sent whole")
    func writeBetweenTheRefilteringReads() async throws {
        try await AccountHarness.with { h in
            let (cid, boss, _) = try await departments(h)
            let id = newRecordID()
            let created = try await boss.push([upsert(id, base: 0, ["name": "Ada"], deptMask: 2)])
            let since = try #require((Self.result(created)["seq"] as? NSNumber)?.int64Value)
            // A device of a member moved from department 1 to 2 re-filters what existed at its token: the record
            // comes into sight, and the keys say so…
            let sync = SyncRepository(db: h.server.services.store.database)
            let keys = try await sync.rescopeKeys(
                cid, createdBy: since, old: 1, new: 2, types: nil, after: (0, ""), limit: 1001)
            #expect(keys.map(\.id) == [id])
            // …another device writes it before the fields are read…
            _ = try await boss.push([upsert(id, base: since, ["phone": "2"])])
            // …and the page still sends it whole: the pull after the re-filtering sends only what came after.
            let rows = try await sync.rescope(
                cid, createdBy: since, old: 1, new: 2, types: nil, after: (0, ""), keys: keys)
            var row = try #require(rows.first { $0.id == id })
            try row.readFields()
            #expect(row.fields == ["name": .string("Ada"), "phone": .string("2")])
        }
    }

    /// A company with an owner and a member of department 1, and a device of each.
    private func departments(_ h: AccountHarness) async throws -> (cid: String, boss: Device, member: Device) {
        var owner = try await h.person("owner")
        let cid = try await h.company("Depot", owner: &owner)
        var member = try await h.person("member")
        try await h.join(cid, &member, owner: owner)
        let ownerBearer = try #require(owner.company?.access)
        #expect(
            try await h.client.patch("/v1/companies/\(cid)/members/\(member.id)", ["dept_mask": 1], bearer: ownerBearer)
                .status == 200)
        return (
            cid, Device(h.client, cid: cid, bearer: ownerBearer),
            Device(h.client, cid: cid, bearer: try #require(member.company?.access))
        )
    }

    @Test("F6: revoked names only records the member may have seen, not hidden ones whose mask changed")
    func revokedOnlyWhatWasSeen() async throws {
        try await AccountHarness.with { h in
            var (_, boss, member) = try await departments(h)
            let ours = newRecordID()
            let theirs = newRecordID()
            let gone = newRecordID()
            _ = try await boss.push([
                upsert(ours, base: 0, ["name": "Ours"], deptMask: 1),
                upsert(theirs, base: 0, ["name": "Theirs"], deptMask: 2),
                upsert(gone, base: 0, ["name": "Gone"], deptMask: 2),
            ])
            try await boss.sync()
            try await member.sync()
            #expect(Set(member.records.keys) == [ours])
            // Each record leaves or moves between departments the member is not in; one hidden one is deleted after.
            _ = try await boss.push([
                upsert(ours, base: boss.seq(ours), [:], deptMask: 2),
                upsert(theirs, base: boss.seq(theirs), [:], deptMask: 4),
                upsert(gone, base: boss.seq(gone), [:], deptMask: 4),
            ])
            _ = try await boss.push([delete(gone, base: 0)])
            try await member.sync()
            #expect(member.revoked == [ours])
            #expect(member.records.isEmpty)
        }
    }

    @Test("F6: a member whose own departments changed still drops what the old ones saw and that moved out of sight")
    func refilteringRevokesWhatTheOldMaskSaw() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Depot", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            let ownerBearer = try #require(owner.company?.access)
            let masks = "/v1/companies/\(cid)/members/\(member.id)"
            #expect(try await h.client.patch(masks, ["dept_mask": 1], bearer: ownerBearer).status == 200)
            var boss = Device(h.client, cid: cid, bearer: ownerBearer)
            var device = Device(h.client, cid: cid, bearer: try #require(member.company?.access))
            let held = newRecordID()
            let never = newRecordID()
            _ = try await boss.push([
                upsert(held, base: 0, ["name": "Held"], deptMask: 1), upsert(never, base: 0, ["n": 1], deptMask: 4),
            ])
            try await boss.sync()
            try await device.sync()
            #expect(Set(device.records.keys) == [held])
            // Offline: the member moves from department 1 to 2, and both records move to department 8.
            #expect(try await h.client.patch(masks, ["dept_mask": 2], bearer: ownerBearer).status == 200)
            _ = try await boss.push([
                upsert(held, base: boss.seq(held), [:], deptMask: 8),
                upsert(never, base: boss.seq(never), [:], deptMask: 8),
            ])
            try await device.sync()
            #expect(device.records.isEmpty)
            #expect(device.revoked.contains(held))
            #expect(!device.revoked.contains(never))
        }
    }

    @Test("F6: a push touching a record the member cannot see answers as an unknown id would, whatever its state")
    func pushTellsNothingOfHiddenRecords() async throws {
        try await AccountHarness.with { h in
            let (cid, boss, member) = try await departments(h)
            let live = newRecordID()
            let deleted = newRecordID()
            _ = try await boss.push([
                upsert(live, base: 0, ["name": "Live"], deptMask: 2),
                upsert(deleted, base: 0, ["name": "Deleted"], deptMask: 2),
            ])
            // Some activity, so the hidden records' seqs are not small numbers anyone could guess.
            for round in 0..<3 { _ = try await boss.push([upsert(live, base: 0, ["round": round])]) }
            let removal = try await boss.push([delete(deleted, base: 0)])
            let deletedAt = try #require(Self.result(removal)["seq"] as? Int)
            let unknown = newRecordID()

            // Deletes: of a hidden live record, a hidden deleted one and an id that never existed, the same answer.
            let deletes = try await member.push([
                delete(live, base: 0), delete(deleted, base: 0), delete(unknown, base: 0),
            ])
            #expect(deletes.status == 200)
            for index in 0..<3 {
                let answer = Self.result(deletes, index)
                #expect(answer["status"] as? String == "applied", "\(index)")
                #expect(answer["seq"] as? Int == 0, "\(index)")
                #expect(answer["code"] == nil, "\(index)")
            }
            #expect(deletes.json["visible_at"] as? Int == 0)

            // Upserts: live or deleted, any base, even the deleted record's own seq: one refusal, without a seq.
            let upserts = try await member.push([
                upsert(live, base: 0, ["name": "Mine"]), upsert(live, base: 1_000, ["name": "Mine"], type: "other"),
                upsert(deleted, base: 0, ["name": "Mine"]), upsert(deleted, base: Int64(deletedAt), ["name": "Mine"]),
                upsert(deleted, base: Int64(deletedAt), ["name": "Mine"], deptMask: 1),
            ])
            for index in 0..<5 {
                let answer = Self.result(upserts, index)
                #expect(answer["status"] as? String == "refused", "\(index)")
                #expect(answer["code"] as? String == "record_forbidden", "\(index)")
                #expect(answer["seq"] as? Int == 0, "\(index)")
            }
            #expect(upserts.json["visible_at"] as? Int == 0)

            // Nothing changed: the live record keeps its fields, the deleted id was not taken over.
            let kept = try await h.client.get("/v1/companies/\(cid)/records/\(live)", bearer: boss.bearer)
            #expect((kept.json["fields"] as? [String: Any])?["name"] as? String == "Live")
            #expect(
                try await h.client.get("/v1/companies/\(cid)/records/\(deleted)", bearer: boss.bearer).status == 404)
            // Its own department may still create it again.
            let again = try await boss.push([upsert(deleted, base: Int64(deletedAt), ["name": "Back"], deptMask: 2)])
            #expect(Self.result(again)["status"] as? String == "applied")
        }
    }
}
