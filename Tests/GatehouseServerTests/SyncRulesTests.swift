import Crypto
import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// The pure rules of sync, without a store or a server.
@Suite("Sync rules")
struct SyncRulesTests {
    private let now = Date(timeIntervalSince1970: 1_800_000_000)
    private let owner = SyncActor(
        membership: Membership(companyID: "c", accountID: "o", role: .owner, deptMask: 0, managerMask: 0),
        superUser: true)

    private func member(dept: Int64, manager: Int64 = 0, role: MemberRole = .member) -> SyncActor {
        SyncActor(
            membership: Membership(companyID: "c", accountID: "m", role: role, deptMask: dept, managerMask: manager),
            superUser: false)
    }

    private func mutation(
        _ fields: JSONFields, base: Int64 = 0, op: RecordMutation.Operation = .upsert, deptMask: Int64? = nil,
        type: String = "item", id: String = "0f5b3c1e-4a59-4f4e-9c39-0a1b2c3d4e5f"
    ) -> RecordMutation {
        RecordMutation(mid: "m", id: id, type: type, op: op, base: base, fields: fields, deptMask: deptMask)
    }

    private func stored(_ fields: [String: (JSONValue, Int64)], deptMask: Int64 = 0, maskSeq: Int64 = 1)
        -> StoredRecord
    {
        StoredRecord(
            id: "0f5b3c1e-4a59-4f4e-9c39-0a1b2c3d4e5f", type: "item", fields: fields.mapValues(\.0),
            fieldSeqs: fields.mapValues(\.1), deptMask: deptMask, maskSeq: maskSeq, createdBy: "o", createdAt: now,
            updatedAt: now, createdSeq: 1, seq: fields.values.map(\.1).max() ?? maskSeq, deleted: false)
    }

    @Test("Names: 1 to 64 of [A-Za-z0-9_], starting with a letter")
    func names() {
        for good in ["a", "Name", "qty_2", String(repeating: "x", count: 64)] { #expect(SyncRules.isValidName(good)) }
        for bad in ["", "2a", "_a", "a-b", "a b", "é", String(repeating: "x", count: 65)] {
            #expect(!SyncRules.isValidName(bad))
        }
    }

    @Test("Values: scalars, timestamps and references; nothing nested")
    func values() {
        let id = "0F5B3C1E-4A59-4F4E-9C39-0A1B2C3D4E5F"
        for good: JSONValue in [
            .null, .bool(true), .int(3), .double(2.5), .string("x"), .object(["$ts": .string("2026-11-22T10:00:00Z")]),
            .object(["$ts": .string("2026-11-22T10:00:00.123Z")]), .object(["$ref": .string(id)]),
        ] {
            #expect(SyncRules.isValidValue(good))
        }
        for bad: JSONValue in [
            .array([.int(1)]), .object(["a": .int(1)]), .object(["$ts": .string("noon")]),
            .object(["$ref": .string("x")]), .object(["$ts": .int(1)]),
            .object(["$ts": .string("2026-11-22T10:00:00Z"), "$ref": .string(id)]),
        ] {
            #expect(!SyncRules.isValidValue(bad))
        }
        #expect(SyncRules.recordID(id) == id.lowercased())
        #expect(SyncRules.recordID("{\(id)}") == nil)
    }

    @Test("Per-field merge: the server wins only on fields it changed after the base")
    func merge() {
        let current = stored(["name": (.string("A"), 5), "qty": (.int(1), 2)])
        let (record, outcome) = SyncRules.apply(
            mutation(["name": .string("B"), "qty": .int(9), "bin": .string("B4")], base: 3), to: current, by: owner,
            seq: 7, now: now)
        #expect(outcome == .merged(rejected: ["name": .string("A")], keptDeptMask: nil))
        #expect(record?.fields == ["name": .string("A"), "qty": .int(9), "bin": .string("B4")])
        #expect(record?.fieldSeqs == ["name": 5, "qty": 7, "bin": 7])
        #expect(record?.seq == 7)
        // The same value is no conflict, and writes nothing.
        let same = SyncRules.apply(mutation(["name": .string("A")], base: 0), to: current, by: owner, seq: 8, now: now)
        #expect(same.outcome == .applied)
        #expect(same.record == nil)
        // A field this batch wrote itself is the device's to change again.
        let again = SyncRules.apply(
            mutation(["name": .string("C")], base: 0), to: current, by: owner, seq: 5, now: now,
            batchWritten: ["name"])
        #expect(again.outcome == .applied)
        #expect(again.record?.fields["name"] == .string("C"))
    }

    @Test("Deletes win: a stale update of a deleted record is refused; a delete of a changed record applies")
    func deletes() throws {
        let current = stored(["name": (.string("A"), 5)])
        let deleted = try #require(
            SyncRules.apply(mutation([:], base: 1, op: .delete), to: current, by: owner, seq: 6, now: now).record)
        #expect(deleted.deleted && deleted.fields.isEmpty && deleted.seq == 6)
        let late = SyncRules.apply(mutation(["name": .string("B")], base: 5), to: deleted, by: owner, seq: 7, now: now)
        #expect(late.outcome == .refused(.recordDeleted))
        // Seen the delete, created again.
        let recreated = SyncRules.apply(
            mutation(["name": .string("B")], base: 6), to: deleted, by: owner, seq: 8, now: now)
        #expect(recreated.outcome == .applied)
        #expect(recreated.record?.deleted == false)
        // Deleting what is not there is done already.
        let nothing = SyncRules.apply(mutation([:], op: .delete), to: nil, by: owner, seq: 9, now: now)
        #expect(nothing.record == nil && nothing.outcome == .applied)
    }

    @Test("Access: read-only, hidden records, type mismatch, and the bits a member may grant")
    func access() {
        let hidden = stored(["name": (.string("A"), 1)], deptMask: 2)
        let sales = member(dept: 1)
        #expect(
            SyncRules.apply(mutation([:]), to: hidden, by: sales, seq: 2, now: now).outcome
                == .refused(.recordForbidden))
        // Hidden, whatever its state: deleted, its id is not for another department to take; a delete answers as
        // for an id that does not exist, and changes nothing.
        var tombstone = hidden
        tombstone.deleted = true
        for current in [hidden, tombstone] {
            #expect(
                SyncRules.apply(mutation([:], base: 9, deptMask: 1), to: current, by: sales, seq: 9, now: now)
                    .outcome == .refused(.recordForbidden))
            let delete = SyncRules.apply(mutation([:], op: .delete), to: current, by: sales, seq: 9, now: now)
            #expect(delete.record == nil && delete.outcome == .applied)
        }
        #expect(
            SyncRules.apply(mutation([:]), to: nil, by: member(dept: 1, role: .readOnly), seq: 2, now: now).outcome
                == .refused(.readOnly))
        #expect(
            SyncRules.apply(mutation([:], type: "order"), to: stored(["a": (.int(1), 1)]), by: owner, seq: 2, now: now)
                .outcome == .refused(.typeMismatch))
        // A member grants only their own departments; a manager only their manager mask; the owner anything.
        #expect(SyncRules.apply(mutation([:], deptMask: 1), to: nil, by: sales, seq: 2, now: now).outcome == .applied)
        #expect(
            SyncRules.apply(mutation([:], deptMask: 2), to: nil, by: sales, seq: 2, now: now).outcome
                == .refused(.deptMaskForbidden))
        let manager = member(dept: 1, manager: 6)
        #expect(SyncRules.apply(mutation([:], deptMask: 4), to: nil, by: manager, seq: 2, now: now).outcome == .applied)
        #expect(
            SyncRules.apply(mutation([:], deptMask: 1), to: nil, by: manager, seq: 2, now: now).outcome
                == .refused(.deptMaskForbidden))
        #expect(
            SyncRules.apply(mutation([:], deptMask: 1 << 40), to: nil, by: owner, seq: 2, now: now).outcome == .applied)
        #expect(
            SyncRules.apply(mutation([:], deptMask: -1), to: nil, by: owner, seq: 2, now: now).outcome
                == .refused(.deptMaskForbidden))
        // On an existing record only the changing bits count, and opening to everyone or closing takes a full grant.
        #expect(SyncRules.mayGrant(1, replacing: 1, actor: sales))
        #expect(!SyncRules.mayGrant(0, replacing: 1, actor: sales))
        #expect(!SyncRules.mayGrant(1, replacing: 0, actor: sales))
        #expect(!SyncRules.mayGrant(1, replacing: 3, actor: sales))
        #expect(SyncRules.mayGrant(4, replacing: 2, actor: manager))
        #expect(SyncRules.mayGrant(3, replacing: 5, actor: manager))
        #expect(!SyncRules.mayGrant(1, replacing: 4, actor: manager))
        #expect(SyncRules.mayGrant(0, replacing: 4, actor: owner))
        // Every mask a record has had is kept, 0 (everyone) as the sign bit.
        let created = SyncRules.apply(mutation([:], deptMask: 1), to: nil, by: sales, seq: 2, now: now).record
        #expect(created?.pastMasks == 1)
        let moved = SyncRules.apply(
            mutation([:], base: 2, deptMask: 4), to: created, by: owner, seq: 3, now: now
        ).record
        #expect(moved?.pastMasks == 5)
        let opened = SyncRules.apply(mutation([:], base: 3, deptMask: 0), to: moved, by: owner, seq: 4, now: now).record
        #expect(opened?.pastMasks == Int64.min | 5)
    }

    @Test("Limits: 200 fields and 256 KiB per record")
    func limits() {
        var many: JSONFields = [:]
        for index in 0..<201 { many["f\(index)"] = .int(Int64(index)) }
        #expect(
            SyncRules.apply(mutation(many), to: nil, by: owner, seq: 1, now: now).outcome == .refused(.tooManyFields))
        many["f200"] = nil
        #expect(SyncRules.apply(mutation(many), to: nil, by: owner, seq: 1, now: now).outcome == .applied)
        let big: JSONFields = ["blob": .string(String(repeating: "x", count: SyncRules.maxRecordBytes))]
        #expect(
            SyncRules.apply(mutation(big), to: nil, by: owner, seq: 1, now: now).outcome == .refused(.recordTooLarge))
        // A merge that would grow a record past the limit is refused too.
        let half = String(repeating: "y", count: SyncRules.maxRecordBytes / 2)
        let current = stored(["a": (.string(half), 1)])
        #expect(
            SyncRules.apply(mutation(["b": .string(half)], base: 1), to: current, by: owner, seq: 2, now: now).outcome
                == .refused(.recordTooLarge))
    }

    @Test("Pages end on transaction boundaries")
    func pageEnds() {
        #expect(SyncRules.pageEnd([1, 2, 3], limit: 3) == .all)
        #expect(SyncRules.pageEnd([1, 2, 2, 3], limit: 3) == .prefix(3))
        #expect(SyncRules.pageEnd([1, 2, 2, 2], limit: 3) == .prefix(1))
        #expect(SyncRules.pageEnd([4, 4, 4, 4], limit: 3) == .wholeTransaction(4))
        // A byte budget shortens the page, never below one row.
        #expect(SyncRules.rowsWithin(100, sizes: [40, 40, 40, 40], limit: 4) == 2)
        #expect(SyncRules.rowsWithin(100, sizes: [400, 40], limit: 4) == 1)
        #expect(SyncRules.rowsWithin(100, sizes: [10, 10], limit: 4) == 4)
    }

    @Test("What a pull sends of a changed row: changed fields, the whole record once visible, revocations")
    func pullItems() {
        let record = stored(["a": (.int(1), 3), "b": (.int(2), 8)], deptMask: 1, maskSeq: 2)
        #expect(
            SyncRules.pullItem(record, since: 5, visibility: Visibility(mask: 1)) == .change(partial(record, ["b"])))
        #expect(SyncRules.pullItem(record, since: 0, visibility: Visibility(mask: 1)) == .change(record))
        // Invisible: nothing, unless its mask changed since the token (the device may hold it).
        #expect(SyncRules.pullItem(record, since: 5, visibility: Visibility(mask: 2)) == .skip)
        var moved = record
        moved.maskSeq = 8
        moved.pastMasks = 2 | 1
        #expect(SyncRules.pullItem(moved, since: 5, visibility: Visibility(mask: 2)) == .revoked(record.id))
        // Only to members who may have seen it: one moved between departments they are not in is no news to them.
        #expect(SyncRules.pullItem(moved, since: 5, visibility: Visibility(mask: 4)) == .skip)
        var wasPublic = moved
        wasPublic.pastMasks = Int64.min | 1
        #expect(SyncRules.pullItem(wasPublic, since: 5, visibility: Visibility(mask: 4)) == .revoked(record.id))
        #expect(SyncRules.pullItem(wasPublic, since: 5, visibility: Visibility(mask: 0)) == .revoked(record.id))
        // Not to a first sync, nor for a record made after the token: the device never had it.
        #expect(SyncRules.pullItem(moved, since: 0, visibility: Visibility(mask: 2)) == .skip)
        // Moved out of sight and then deleted: a device that may hold it is told to drop it, and learns nothing more.
        var gone = moved
        gone.deleted = true
        gone.fields = [:]
        #expect(SyncRules.pullItem(gone, since: 5, visibility: Visibility(mask: 2)) == .revoked(gone.id))
        #expect(SyncRules.pullItem(gone, since: 5, visibility: Visibility(mask: 4)) == .skip)
        #expect(SyncRules.pullItem(gone, since: 5, visibility: Visibility(mask: 1)) == .change(gone))
        #expect(SyncRules.pullItem(gone, since: 0, visibility: Visibility(mask: 2)) == .skip)
        var young = moved
        young.createdSeq = 6
        #expect(SyncRules.pullItem(young, since: 5, visibility: Visibility(mask: 2)) == .skip)
        // Just became visible: sent whole.
        #expect(SyncRules.pullItem(moved, since: 5, visibility: Visibility(mask: 1)) == .change(moved))
        #expect(Visibility.everything.sees(1 << 62) && Visibility(mask: 4).sees(0))
    }

    private func partial(_ record: StoredRecord, _ names: Set<String>) -> StoredRecord {
        var partial = record
        partial.fields = record.fields.filter { names.contains($0.key) }
        return partial
    }

    @Test("Tokens are signed: altered or foreign ones do not decode")
    func tokens() throws {
        let key = SymmetricKey(size: .bits256)
        let token = SyncToken(company: "c", account: "a", seq: 42, epoch: 1, mask: 3)
        let text = token.encoded(key: key)
        #expect(SyncToken.decode(text, key: key) == token)
        #expect(SyncToken.decode(text, key: SymmetricKey(size: .bits256)) == nil)
        let parts = text.split(separator: ".")
        let forged = SyncToken(company: "c", account: "a", seq: 42, epoch: 1, mask: -1)
        let payload = Secrets.base64URL(try JSONEncoder().encode(forged))
        #expect(SyncToken.decode(payload + "." + parts[1], key: key) == nil)
        #expect(SyncToken.decode("nonsense", key: key) == nil)
    }

    @Test("Stored fields read back as written: every value type, through JSONSerialization")
    func storedJSON() throws {
        let fields: JSONFields = [
            "yes": .bool(true), "no": .bool(false), "zero": .int(0), "one": .int(1), "big": .int(Int64.max),
            "negative": .int(-7), "half": .double(0.5), "price": .double(9.99), "name": .string("Crate \u{1F4E6}"),
            "empty": .string(""), "nothing": .null, "when": .object(["$ts": .string("2026-11-22T10:00:00Z")]),
            "of": .object(["$ref": .string("0f5b3c1e-4a59-4f4e-9c39-0a1b2c3d4e5f")]),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(fields), as: UTF8.self)
        #expect(try StoredJSON.fields(text) == fields)
        #expect(try StoredJSON.fields(text) == JSONDecoder().decode(JSONFields.self, from: Data(text.utf8)))
        #expect(throws: (any Error).self) { try StoredJSON.fields("[1]") }
    }

    @Test("Bus messages round-trip through their NOTIFY payload")
    func busPayloads() {
        for message: InstanceBus.Message in [
            .committed(companyID: "c1", seq: 9), .accessChanged(companyID: "c1", accountID: "a1"),
            .companyEnded(companyID: "c1"),
        ] {
            #expect(InstanceBus.Message(payload: message.payload) == message)
        }
        #expect(InstanceBus.Message(payload: "c x notanumber") == nil)
        #expect(InstanceBus.Message(payload: "") == nil)
    }
}
