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
        var out = JSONText(capacity: changes.reduce(256) { $0 + $1.storedSize + 320 })
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
        var out = JSONText(capacity: records.reduce(64) { $0 + $1.storedSize + 320 })
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

/// JSON written byte by byte: strings escaped as RFC 8259 requires (a quote, a backslash and the control characters;
/// nothing else, as `JSONEncoder` with `.withoutEscapingSlashes`).
struct JSONText {
    private(set) var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Text that is JSON already (punctuation, a stored object).
    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    mutating func bytes(_ data: [UInt8]) { bytes.append(contentsOf: data) }

    mutating func integer(_ value: Int64) { raw(String(value)) }

    /// A date as the API writes it: RFC 3339 in UTC with milliseconds.
    mutating func date(_ date: Date) {
        bytes.append(UInt8(ascii: "\""))
        raw(MillisecondDateTranscoder.format(date))
        bytes.append(UInt8(ascii: "\""))
    }

    /// A record as a pull's `RecordChange` (with `deleted`) or a list's `RecordInfo` (without) has it, keys sorted;
    /// fields left as stored text are written as they are.
    mutating func record(_ record: StoredRecord, deleted withDeleted: Bool) throws {
        raw("{\"created_at\":")
        date(record.createdAt)
        if let createdBy = record.createdBy {
            raw(",\"created_by\":")
            string(createdBy)
        }
        if withDeleted {
            raw(",\"deleted\":")
            raw(record.deleted ? "true" : "false")
        }
        raw(",\"dept_mask\":")
        integer(record.deptMask)
        raw(",\"fields\":")
        if let stored = record.storedFields {
            raw(stored)
        } else {
            bytes(try WireJSON.encode(record.fields))
        }
        raw(",\"id\":")
        string(record.id)
        raw(",\"seq\":")
        integer(record.seq)
        raw(",\"type\":")
        string(record.type)
        raw(",\"updated_at\":")
        date(record.updatedAt)
        raw("}")
    }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)],
                    hex[Int(byte & 0x0F)],
                ])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
