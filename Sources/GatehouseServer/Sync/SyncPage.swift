import Foundation
import GatehouseAPI

/// A pull's page before it is written: the records it sends (those sent whole still hold their fields as the store
/// keeps them, `StoredRecord.storedFields`), the ids revoked, the next token.
///
/// `json()` writes the answer with each stored fields text spliced in as it is, where going through the generated
/// serializer would parse every record's JSON into `JSONValue`s and encode them again: for a first sync, that parse and
/// encode was more than half of the server's time (perf, 50,000 records of 1 KB). `wire()` is the same page as the
/// generated type, for the generated handler and the tests that compare the two.
struct SyncPage: Sendable {
    var changes: [StoredRecord]
    var revoked: [String]
    var token: String
    var hasMore: Bool

    /// The page as the generated type.
    func wire() throws -> Schemas.SyncPullResponse {
        .init(
            changes: try changes.map { Self.change(try $0.withFieldsRead()) }, revoked: revoked, token: token,
            hasMore: hasMore)
    }

    static func change(_ record: StoredRecord) -> Schemas.RecordChange {
        .init(
            id: record.id, _type: record.type, fields: record.fields, deleted: record.deleted,
            deptMask: record.deptMask, seq: record.seq, createdBy: record.createdBy, createdAt: record.createdAt,
            updatedAt: record.updatedAt)
    }

    /// The answer's JSON as the generated serializer writes it (keys sorted, dates to the millisecond, a missing
    /// `created_by` left out), but for the fields of a record sent whole, which are the stored text itself.
    func json() throws -> [UInt8] {
        var out = JSONWriter(capacity: changes.reduce(256) { $0 + $1.storedSize + 320 })
        out.raw("{\"changes\":[")
        for (index, record) in changes.enumerated() {
            if index > 0 { out.raw(",") }
            try out.record(record, deleted: true)
        }
        out.raw("],\"has_more\":")
        out.raw(hasMore ? "true" : "false")
        out.raw(",\"revoked\":[")
        for (index, id) in revoked.enumerated() {
            if index > 0 { out.raw(",") }
            out.string(id)
        }
        out.raw("],\"token\":")
        out.string(token)
        out.raw("}")
        return out.bytes
    }
}

/// A record list's page (`GET …/records`) before it is written: the records with their fields as stored.
struct RecordListPage: Sendable {
    var records: [StoredRecord]
    var nextAfter: String?

    /// The page as the generated type.
    func wire() throws -> Schemas.RecordPage {
        .init(
            records: try records.map { SyncService.info(try $0.withFieldsRead()) }, nextAfter: nextAfter)
    }

    /// The answer's JSON as the generated serializer writes it, the stored fields spliced in.
    func json() throws -> [UInt8] {
        var out = JSONWriter(capacity: records.reduce(64) { $0 + $1.storedSize + 320 })
        out.raw("{")
        if let nextAfter {
            out.raw("\"next_after\":")
            out.string(nextAfter)
            out.raw(",")
        }
        out.raw("\"records\":[")
        for (index, record) in records.enumerated() {
            if index > 0 { out.raw(",") }
            try out.record(record, deleted: false)
        }
        out.raw("]}")
        return out.bytes
    }
}
