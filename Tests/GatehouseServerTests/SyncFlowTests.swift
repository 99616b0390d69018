import Foundation
import Testing

@testable import GatehouseServer

/// Company records synced between devices and people, against a live server on this run's store.
@Suite("Sync flows")
struct SyncFlowTests {
    /// The owner's company with two devices (two company logins).
    private func ownerWithTwoDevices(_ h: AccountHarness) async throws -> (cid: String, a: Device, b: Device) {
        var owner = try await h.person("owner")
        let cid = try await h.company("Depot", owner: &owner)
        let second = try SignedIn(
            try await h.client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: owner.account.access))
        let a = Device(h.client, cid: cid, bearer: try #require(owner.company?.access))
        let b = Device(h.client, cid: cid, bearer: second.access)
        return (cid, a, b)
    }

    private static func result(_ reply: HTTPReply, _ index: Int = 0) -> [String: Any] {
        (reply.json["results"] as? [[String: Any]])?[index] ?? [:]
    }

    @Test("Merge matrix: different fields, same field, delete against update, two creates of one id, stale base")
    func mergeMatrix() async throws {
        try await AccountHarness.with { h in
            var (_, a, b) = try await ownerWithTwoDevices(h)
            let id = newRecordID()
            let created = try await a.push([upsert(id, base: 0, ["name": "Crate", "qty": 1])])
            #expect(created.status == 200)
            #expect(Self.result(created)["status"] as? String == "applied")
            try await a.sync()
            try await b.sync()
            #expect(b.field(id, "name") as? String == "Crate")
            let base = b.seq(id)

            // Different fields, both offline from the same base: both edits survive.
            #expect(
                Self.result(try await a.push([upsert(id, base: base, ["name": "Big crate"])]))["status"] as? String
                    == "applied")
            #expect(
                Self.result(try await b.push([upsert(id, base: base, ["qty": 5])]))["status"] as? String == "applied")
            try await a.sync()
            try await b.sync()
            for device in [a, b] {
                #expect(device.field(id, "name") as? String == "Big crate")
                #expect(device.field(id, "qty") as? Int == 5)
            }

            // The same field from a stale base: the server's value stays and is reported; the other field merges.
            let stale = b.seq(id)
            #expect(
                Self.result(try await a.push([upsert(id, base: a.seq(id), ["qty": 7])]))["status"] as? String
                    == "applied")
            let conflict = try await b.push([upsert(id, base: stale, ["qty": 9, "colour": "red"])])
            let merged = Self.result(conflict)
            #expect(merged["status"] as? String == "merged")
            #expect((merged["rejected_fields"] as? [String: Any])?["qty"] as? Int == 7)
            try await a.sync()
            try await b.sync()
            for device in [a, b] {
                #expect(device.field(id, "qty") as? Int == 7)
                #expect(device.field(id, "colour") as? String == "red")
            }

            // Delete against update: the delete wins, and the late update is refused with a code.
            let beforeDelete = b.seq(id)
            #expect(Self.result(try await a.push([delete(id, base: a.seq(id))]))["status"] as? String == "applied")
            let late = Self.result(try await b.push([upsert(id, base: beforeDelete, ["qty": 1])]))
            #expect(late["status"] as? String == "refused")
            #expect(late["code"] as? String == "record_deleted")
            try await b.sync()
            #expect(b.records[id] == nil)
            #expect(try await h.client.get("/v1/companies/\(a.cid)/records/\(id)", bearer: a.bearer).status == 404)

            // An update, then a delete from before it: the delete still wins.
            let other = newRecordID()
            _ = try await a.push([upsert(other, base: 0, ["name": "Shelf"])])
            try await a.sync()
            try await b.sync()
            let otherBase = a.seq(other)
            _ = try await b.push([upsert(other, base: otherBase, ["name": "Tall shelf"])])
            #expect(Self.result(try await a.push([delete(other, base: otherBase)]))["status"] as? String == "applied")
            try await b.sync()
            #expect(b.records[other] == nil)

            // Two offline creates of one id: the first stands; the second merges the fields nobody else wrote.
            let twin = newRecordID()
            #expect(
                Self.result(try await a.push([upsert(twin, base: 0, ["name": "From A", "qty": 1])]))["status"]
                    as? String == "applied")
            let second = Self.result(try await b.push([upsert(twin, base: 0, ["name": "From B", "bin": "B4"])]))
            #expect(second["status"] as? String == "merged")
            #expect((second["rejected_fields"] as? [String: Any])?["name"] as? String == "From A")
            try await a.sync()
            #expect(a.field(twin, "name") as? String == "From A")
            #expect(a.field(twin, "bin") as? String == "B4")
        }
    }

    @Test("A mutation replayed after a lost acknowledgement returns its first result and applies nothing twice")
    func replay() async throws {
        try await AccountHarness.with { h in
            let (cid, firstA, firstB) = try await ownerWithTwoDevices(h)
            var (a, b) = (firstA, firstB)
            let id = newRecordID()
            let mutation = upsert(id, base: 0, ["count": 1], mid: "m-1")
            let first = try await a.push([mutation])
            #expect(Self.result(first)["status"] as? String == "applied")
            // Someone else changes the record; the replay must not write its stale value back.
            try await b.sync()
            _ = try await b.push([upsert(id, base: b.seq(id), ["count": 2])])
            let again = try await a.push([mutation, upsert(id, base: 0, ["note": "x"], mid: "m-1")])
            #expect(Self.result(again)["seq"] as? Int == Self.result(first)["seq"] as? Int)
            #expect(Self.result(again, 1)["status"] as? String == "applied")
            #expect(Self.result(again, 1)["seq"] as? Int == Self.result(first)["seq"] as? Int)
            let record = try await h.client.get("/v1/companies/\(cid)/records/\(id)", bearer: a.bearer).json
            #expect((record["fields"] as? [String: Any])?["count"] as? Int == 2)
            #expect((record["fields"] as? [String: Any])?["note"] == nil)
            // Another device may reuse the same mutation id: ids are per device.
            let otherDevice = Self.result(try await b.push([upsert(id, base: b.seq(id), ["note": "y"], mid: "m-1")]))
            #expect(otherDevice["status"] as? String == "applied")
            try await a.sync()
            #expect(a.field(id, "note") as? String == "y")
        }
    }

    @Test("Limits and value types are checked per mutation with stable codes")
    func limits() async throws {
        try await AccountHarness.with { h in
            let (cid, a, _) = try await ownerWithTwoDevices(h)
            let target = newRecordID()
            var many: [String: Any] = [:]
            for index in 0..<201 { many["f\(index)"] = index }
            let cases: [([String: Any], String?)] = [
                (upsert("not-a-uuid", base: 0, ["a": 1]), "invalid_record_id"),
                (upsert(newRecordID(), base: 0, ["a": 1], type: "9lives"), "invalid_record_type"),
                (upsert(newRecordID(), base: 0, ["bad-name": 1]), "invalid_field_name"),
                (upsert(newRecordID(), base: 0, ["list": [1, 2]]), "invalid_field_value"),
                (upsert(newRecordID(), base: 0, ["when": ["$ts": "yesterday"]]), "invalid_field_value"),
                (upsert(newRecordID(), base: 0, many), "too_many_fields"),
                (upsert(newRecordID(), base: 0, ["blob": String(repeating: "x", count: 262_145)]), "record_too_large"),
                (
                    upsert(
                        newRecordID(), base: 0,
                        ["when": ["$ts": "2026-11-22T10:00:00Z"], "of": ["$ref": target], "on": true, "n": NSNull()]
                    ), nil
                ),
            ]
            for (mutation, code) in cases {
                let reply = try await a.push([mutation])
                #expect(reply.status == 200, "\(reply.body.prefix(200))")
                let result = Self.result(reply)
                #expect(result["status"] as? String == (code == nil ? "applied" : "refused"))
                #expect(result["code"] as? String == code)
            }
            let tooMany = try await a.push((0...1000).map { _ in upsert(newRecordID(), base: 0, ["a": 1]) })
            #expect(tooMany.status == 400)
            #expect(tooMany.json["code"] as? String == "too_many_mutations")
            let forged = try await h.client.pull(cid, token: "eyJjIjoieCJ9.AAAA", bearer: a.bearer)
            #expect(forged.status == 400)
            #expect(forged.json["code"] as? String == "invalid_sync_token")
        }
    }

    @Test("A device may sync some types only; its token answers that set of types alone")
    func types() async throws {
        try await AccountHarness.with { h in
            let (cid, a, b) = try await ownerWithTwoDevices(h)
            let order = newRecordID()
            let item = newRecordID()
            _ = try await a.push([
                upsert(order, base: 0, ["total": 12], type: "order"), upsert(item, base: 0, ["name": "Crate"]),
            ])
            let first = try await h.client.pull(cid, token: nil, types: ["order"], bearer: b.bearer)
            #expect((first.json["changes"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [order])
            let token = try #require(first.json["token"] as? String)
            _ = try await a.push([
                upsert(item, base: 1 << 40, ["name": "Big crate"]),
                upsert(order, base: 1 << 40, ["total": 13], type: "order"),
            ])
            let next = try await h.client.pull(cid, token: token, types: ["order"], bearer: b.bearer)
            let changes = next.json["changes"] as? [[String: Any]] ?? []
            #expect(changes.compactMap { $0["id"] as? String } == [order])
            #expect((changes.first?["fields"] as? [String: Any])?["total"] as? Int == 13)
            let widened = try await h.client.pull(cid, token: token, bearer: b.bearer)
            #expect(widened.status == 400)
            #expect(widened.json["code"] as? String == "invalid_sync_token")
            let bad = try await h.client.pull(cid, token: nil, types: ["no-dashes"], bearer: b.bearer)
            #expect(bad.json["code"] as? String == "validation_failed")
        }
    }

    @Test("Pages end on transaction boundaries under concurrent writes; nothing is skipped or shown twice")
    func pagingUnderWrites() async throws {
        try await AccountHarness.with { h in
            let (cid, writer, first) = try await ownerWithTwoDevices(h)
            var reader = first
            let ids = (0..<30).map { _ in newRecordID() }
            _ = try await writer.push(ids.map { upsert($0, base: 0, ["round": 0]) })
            let client = h.client
            let writerBearer = writer.bearer
            async let writing: Void = {
                for round in 1...40 {
                    // Each transaction rewrites five records; records move to later seqs while the reader pages.
                    let batch = (0..<5).map { ids[(round * 7 + $0 * 3) % ids.count] }
                    let reply = try await client.push(
                        cid, client: "writer", batch.map { upsert($0, base: 0, ["round": round]) },
                        bearer: writerBearer)
                    #expect(reply.status == 200)
                }
            }()
            for _ in 0..<15 { try await reader.sync(limit: 7) }
            try await writing
            try await reader.sync(limit: 7)
            // No (id, seq) twice, and no transaction split over two pages.
            let pairs = reader.received.map { "\($0.id)@\($0.seq)" }
            #expect(Set(pairs).count == pairs.count)
            var seen: Set<Int64> = []
            for page in reader.pageSeqs {
                #expect(seen.isDisjoint(with: page))
                seen.formUnion(page)
            }
            // The reader ends with exactly the server's state.
            let listed = try await h.client.get("/v1/companies/\(cid)/records?limit=1000", bearer: reader.bearer).json
            let server = listed["records"] as? [[String: Any]] ?? []
            #expect(server.count == ids.count)
            for record in server {
                let id = try #require(record["id"] as? String)
                #expect(reader.seq(id) == (record["seq"] as? NSNumber)?.int64Value)
                #expect(
                    reader.field(id, "round") as? Int == (record["fields"] as? [String: Any])?["round"] as? Int)
            }
        }
    }

    @Test("Live: the current seq on subscribing, a poke for a change committed right after, closed at sign-out")
    func live() async throws {
        try await AccountHarness.with(live: true, { $0.sync.liveCheckInterval = 0.2 }) { h in
            let (cid, a, b) = try await ownerWithTwoDevices(h)
            _ = try await a.push([upsert(newRecordID(), base: 0, ["n": 1])])
            let stream = try await LiveStream.open(
                AccountHarness.http, base: h.server.baseURL, cid: cid, bearer: b.bearer)
            defer { stream.close() }
            #expect(stream.status == 200)
            #expect(try await stream.waitFor { $0.name == "seq" })
            let first = try #require(stream.seqs.first)
            #expect(first >= 1)
            let pushed = try await a.push([upsert(newRecordID(), base: 0, ["n": 2])])
            let visibleAt = try #require((pushed.json["visible_at"] as? NSNumber)?.int64Value)
            #expect(try await stream.waitFor { _ in stream.seqs.contains(visibleAt) })
            #expect(visibleAt > first)
            // While idle, the current seq comes again as a keep-alive.
            #expect(try await stream.waitFor { _ in stream.seqs.filter { $0 == visibleAt }.count >= 2 })
            // Signing the session out ends its stream, with the reason.
            #expect(try await h.client.logout(b.bearer, scope: "local").status == 204)
            #expect(try await stream.waitFor { $0.name == "closed" && $0.data.contains("session_not_found") })
            #expect(try await LiveServer.eventually { stream.hasEnded })
        }
    }

    @Test("Department masks: visibility, the manager's bits, read-only participants, and revocation")
    func access() async throws {
        try await AccountHarness.with(live: true, { $0.sync.liveCheckInterval = 0.2 }) { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Depot", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            var viewer = try await h.person("viewer")
            try await h.join(cid, &viewer, owner: owner, permission: "read_only")
            let ownerBearer = try #require(owner.company?.access)
            let memberBearer = try #require(member.company?.access)
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)/members/\(member.id)", ["dept_mask": 1, "manager_mask": 1],
                    bearer: ownerBearer
                ).status == 200)
            let boss = Device(h.client, cid: cid, bearer: ownerBearer)
            let sales = newRecordID()
            let stores = newRecordID()
            let everyone = newRecordID()
            _ = try await boss.push([
                upsert(sales, base: 0, ["name": "Sales"], deptMask: 1),
                upsert(stores, base: 0, ["name": "Stores"], deptMask: 2),
                upsert(everyone, base: 0, ["name": "All"]),
            ])
            var device = Device(h.client, cid: cid, bearer: memberBearer)
            try await device.sync()
            #expect(Set(device.records.keys) == [sales, everyone])
            #expect(
                try await h.client.get("/v1/companies/\(cid)/records/\(stores)", bearer: memberBearer).status == 404)
            // Writing a record they cannot see, or granting bits beyond their manager mask, is refused.
            let hidden = Self.result(try await device.push([upsert(stores, base: 0, ["name": "Mine"], deptMask: 2)]))
            #expect(hidden["code"] as? String == "record_forbidden")
            let widen = Self.result(
                try await device.push([upsert(sales, base: device.seq(sales), ["x": 1], deptMask: 3)]))
            #expect(widen["code"] as? String == "dept_mask_forbidden")
            // A token is the member's own: the owner's wider one is refused to anyone else.
            var bossCopy = boss
            try await bossCopy.sync()
            let borrowed = try await h.client.pull(cid, token: bossCopy.token, bearer: memberBearer)
            #expect(borrowed.status == 400)
            #expect(borrowed.json["code"] as? String == "invalid_sync_token")
            // A read-only participant sees what others see and cannot write.
            var reader = Device(h.client, cid: cid, bearer: try #require(viewer.company?.access))
            try await reader.sync()
            #expect(Set(reader.records.keys) == [everyone])
            let refused = Self.result(
                try await reader.push([upsert(everyone, base: reader.seq(everyone), ["name": "No"])]))
            #expect(refused["code"] as? String == "read_only")

            // A mask change while connected: the stream closes; the next pull revokes and adds by the new mask.
            let stream = try await LiveStream.open(
                AccountHarness.http, base: h.server.baseURL, cid: cid, bearer: memberBearer)
            defer { stream.close() }
            #expect(try await stream.waitFor { $0.name == "seq" })
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)/members/\(member.id)", ["dept_mask": 2, "manager_mask": 0],
                    bearer: ownerBearer
                ).status == 200)
            #expect(try await stream.waitFor { $0.name == "closed" && $0.data.contains("company_access_revoked") })
            // Deleted before the device came back: it must still drop it.
            #expect(Self.result(try await boss.push([delete(sales, base: 0)]))["status"] as? String == "applied")
            try await device.sync()
            #expect(device.revoked.contains(sales))
            #expect(Set(device.records.keys) == [stores, everyone])
            #expect(device.field(stores, "name") as? String == "Stores")
            // Nothing it may no longer see is sent again.
            let before = device.received.count
            _ = try await boss.push([upsert(sales, base: 0, ["note": "changed"])])
            try await device.sync()
            #expect(device.records[sales] == nil)
            #expect(!device.received.dropFirst(before).contains { $0.id == sales })

            // The viewer, offline, has their mask changed: the next pull re-filters their copy.
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)/members/\(viewer.id)", ["dept_mask": 2], bearer: ownerBearer
                ).status == 200)
            try await reader.sync()
            #expect(Set(reader.records.keys) == [stores, everyone])

            // Removal: a connected device's stream closes, and every sync call answers company_access_revoked.
            let memberStream = try await LiveStream.open(
                AccountHarness.http, base: h.server.baseURL, cid: cid, bearer: memberBearer)
            defer { memberStream.close() }
            #expect(try await memberStream.waitFor { $0.name == "seq" })
            #expect(
                try await h.client.delete("/v1/companies/\(cid)/members/\(member.id)", bearer: ownerBearer).status
                    == 204)
            #expect(
                try await memberStream.waitFor { $0.name == "closed" && $0.data.contains("company_access_revoked") })
            let removed = try await device.sync()
            #expect(removed.status == 403)
            #expect(removed.json["code"] as? String == "company_access_revoked")
            // The offline viewer, removed, learns it on reconnecting.
            #expect(
                try await h.client.delete("/v1/companies/\(cid)/members/\(viewer.id)", bearer: ownerBearer).status
                    == 204)
            let offline = try await reader.sync()
            #expect(offline.json["code"] as? String == "company_access_revoked")
        }
    }

    @Test("Every sync endpoint refuses another company's session, no session, and a forged token")
    func isolation() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Ours", owner: &owner)
            var stranger = try await h.person("stranger")
            let theirs = try await h.company("Theirs", owner: &stranger)
            let foreign = try #require(stranger.company?.access)
            let id = newRecordID()
            _ = try await Device(h.client, cid: cid, bearer: try #require(owner.company?.access)).push([
                upsert(id, base: 0, ["secret": "ours"])
            ])
            let calls: [(String, (String?) async throws -> HTTPReply)] = [
                ("pull", { try await h.client.pull(cid, token: nil, bearer: $0 ?? "") }),
                (
                    "push",
                    {
                        try await h.client.push(
                            cid, client: "x", [upsert(id, base: 0, ["secret": "theirs"])], bearer: $0 ?? "")
                    }
                ),
                (
                    "digest",
                    {
                        try await h.client.post(
                            "/v1/companies/\(cid)/sync/digest", ["known": [], "complete": true], bearer: $0)
                    }
                ),
                ("live", { try await h.client.get("/v1/companies/\(cid)/sync/live", bearer: $0) }),
                ("list", { try await h.client.get("/v1/companies/\(cid)/records", bearer: $0) }),
                ("get", { try await h.client.get("/v1/companies/\(cid)/records/\(id)", bearer: $0) }),
            ]
            for (name, call) in calls {
                let other = try await call(foreign)
                #expect(other.status == 403, "\(name)")
                #expect(other.json["code"] as? String == "company_context_required", "\(name)")
                #expect(!other.body.contains("ours"), "\(name)")
                #expect(try await call(nil).status == 401, "\(name)")
            }
            // Their own company holds none of ours, whatever ids they ask for.
            #expect(try await h.client.get("/v1/companies/\(theirs)/records/\(id)", bearer: foreign).status == 404)
            let pulled = try await h.client.pull(theirs, token: nil, bearer: foreign)
            #expect((pulled.json["changes"] as? [Any])?.isEmpty == true)
            // A token of one company is refused by another.
            let ours = try await h.client.pull(cid, token: nil, bearer: try #require(owner.company?.access))
            let crossed = try await h.client.pull(theirs, token: ours.json["token"] as? String, bearer: foreign)
            #expect(crossed.json["code"] as? String == "invalid_sync_token")
        }
    }

    @Test("Retention: a token older than the compacted log gets the digest exchange, not a full download")
    func retention() async throws {
        try await AccountHarness.with { h in
            var (cid, a, b) = try await ownerWithTwoDevices(h)
            let kept = newRecordID()
            let gone = newRecordID()
            let changed = newRecordID()
            _ = try await a.push([
                upsert(kept, base: 0, ["n": 1]), upsert(gone, base: 0, ["n": 2]), upsert(changed, base: 0, ["n": 3]),
            ])
            try await b.sync()
            let oldToken = b.token
            _ = try await a.push([delete(gone, base: 0)])
            _ = try await a.push([upsert(changed, base: b.seq(changed), ["n": 30])])
            // The tombstone passes the retention (one second here, 30 days by default) and is compacted away.
            h.clock.advance(by: 2)
            #expect(try await h.server.services.sync.compact(retention: 1) == 1)
            let stale = try await h.client.pull(cid, token: oldToken, bearer: b.bearer)
            #expect(stale.status == 410)
            #expect(stale.json["code"] as? String == "resync_required")
            // The digest: the device's ids and seqs in, the difference out.
            let known = b.records.map { ["id": $0.key, "seq": $0.value.seq] as [String: Any] }
                .sorted { ($0["id"] as! String) < ($1["id"] as! String) }
            let digest = try await h.client.post(
                "/v1/companies/\(cid)/sync/digest", ["known": known, "complete": true], bearer: b.bearer)
            #expect(digest.status == 200)
            #expect(digest.json["revoked"] as? [String] == [gone])
            let changes = digest.json["changes"] as? [[String: Any]] ?? []
            #expect(changes.map { $0["id"] as? String } == [changed])
            #expect(digest.json["through"] is NSNull || digest.json["through"] == nil)
            b.token = digest.json["token"] as? String
            let resumed = try await b.sync()
            #expect(resumed.status == 200)
        }
    }

    @Test("A token survives a restart: another server on the same store takes it")
    func restart() async throws {
        try await AccountHarness.with { h in
            var (cid, a, b) = try await ownerWithTwoDevices(h)
            _ = try await a.push([upsert(newRecordID(), base: 0, ["n": 1])])
            try await b.sync()
            _ = try await a.push([upsert(newRecordID(), base: 0, ["n": 2])])
            var configuration = h.server.services.configuration
            configuration.publicURL = configuration.effectivePublicURL
            let again = try await RouterServer.start(configuration, clock: h.clock)
            do {
                var moved = Device(AuthClient(http: again, base: again.baseURL), cid: cid, bearer: b.bearer)
                moved.token = b.token
                moved.records = b.records
                let reply = try await moved.sync()
                #expect(reply.status == 200)
                #expect(moved.records.count == 2)
                #expect(moved.received.count == 1)
            } catch {
                try? await again.stop()
                throw error
            }
            try await again.stop()
        }
    }

    @Test(
        "Two instances on one PostgreSQL: a change on one reaches a subscriber on the other",
        .enabled(if: TestStore.postgresURL != nil))
    func twoInstances() async throws {
        try await AccountHarness.with(live: true, { $0.sync.liveCheckInterval = 0.2 }) { h in
            let (cid, a, b) = try await ownerWithTwoDevices(h)
            let other = try await h.secondInstance()
            do {
                let stream = try await LiveStream.open(
                    AccountHarness.http, base: other.baseURL, cid: cid, bearer: b.bearer)
                defer { stream.close() }
                #expect(try await stream.waitFor { $0.name == "seq" })
                let pushed = try await a.push([upsert(newRecordID(), base: 0, ["n": 1])])
                let visibleAt = try #require((pushed.json["visible_at"] as? NSNumber)?.int64Value)
                #expect(try await stream.waitFor { _ in stream.seqs.contains(visibleAt) })
            } catch {
                try? await other.stop()
                throw error
            }
            try await other.stop()
        }
    }
}
