import Foundation
import GatehouseAPI

/// A record as the store keeps it: its fields and, per field, the seq of the transaction that last wrote it.
struct StoredRecord: Sendable, Equatable {
    let id: String
    var type: String
    var fields: JSONFields
    var fieldSeqs: [String: Int64]
    var deptMask: Int64
    /// The seq that last changed `deptMask`.
    var maskSeq: Int64
    var createdBy: String?
    var createdAt: Date
    var updatedAt: Date
    /// The seq of the transaction that created the record (a device whose token is older never had it).
    var createdSeq: Int64
    /// The seq of the last write: a pull after this seq does not show the record again.
    var seq: Int64
    var deleted: Bool
    /// Every department mask the record has had, OR-ed, with the sign bit once it was 0 (everyone): who may ever have
    /// seen it, so a pull tells only them when it goes out of sight (`Visibility.mayHaveSeen`).
    var pastMasks: Int64 = 0
    /// The size of the stored fields, in bytes (0 for a record not read from the store).
    var storedSize = 0
    /// The stored text of the fields while `fields` is left unread (empty): a pull that sends the record whole writes
    /// it into its answer as it is (`SyncPage.json()`). Nil once `fields` holds them.
    var storedFields: String? = nil

    /// `pastMasks` with `mask` added.
    static func pastMasks(_ past: Int64, adding mask: Int64) -> Int64 { past | (mask == 0 ? Int64.min : mask) }
}

/// Which records a member sees: those whose department mask is 0 or shares a bit with theirs. The owner and super
/// users see everything (every bit set).
struct Visibility: Sendable, Equatable {
    let mask: Int64

    static let everything = Visibility(mask: -1)

    func sees(_ deptMask: Int64) -> Bool { deptMask == 0 || deptMask & mask != 0 }

    /// Whether a record with these `StoredRecord.pastMasks` was ever visible under this mask.
    func mayHaveSeen(_ pastMasks: Int64) -> Bool { pastMasks < 0 || pastMasks & mask != 0 }
}

/// The member pushing: what they may write and which department bits they may give a record.
struct SyncActor: Sendable, Equatable {
    let accountID: String
    let canWrite: Bool
    let visibility: Visibility
    /// Department bits this member may set on a record: all for the owner and super users, the manager mask for a
    /// manager, their own departments for anyone else.
    let grantable: Int64

    init(membership: Membership, superUser: Bool) {
        accountID = membership.accountID
        canWrite = membership.canWrite
        let seesAll = membership.isOwner || superUser
        visibility = seesAll ? .everything : Visibility(mask: membership.deptMask)
        grantable = seesAll ? -1 : membership.isManager ? membership.managerMask : membership.deptMask
    }
}

/// One mutation of a push, as the service reads it from the wire.
struct RecordMutation: Sendable, Equatable {
    enum Operation: Sendable { case upsert, delete }
    let mid: String
    let id: String
    let type: String
    let op: Operation
    let base: Int64
    let fields: JSONFields
    let deptMask: Int64?
}

/// What became of one mutation.
enum MutationOutcome: Sendable, Equatable {
    case applied
    /// Applied but for the fields (and maybe the department mask) the server changed since the base: their values stay.
    case merged(rejected: JSONFields, keptDeptMask: Int64?)
    case refused(ErrorCode)
}

/// The pure rules of sync (docs/api.md, "Company records that sync"): limits, access and the per-field merge. No I/O, so each is tested alone.
enum SyncRules {
    static let maxFields = 200
    static let maxRecordBytes = 256 * 1024
    static let maxMutations = 1000
    static let maxDigestEntries = 10_000
    /// The key under which a batch notes that it changed a record's department mask itself.
    static let maskKey = "$dept_mask"

    /// A field name or record type: 1–64 characters of [A-Za-z0-9_], starting with a letter.
    static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), let first = bytes.first, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || ($0 >= 48 && $0 <= 57) || $0 == 95 }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) }

    /// A record id in its one stored spelling (a UUID, lowercased), or nil.
    static func recordID(_ raw: String) -> String? { Secrets.identifier(raw) }

    /// Whether a field value is one records hold: a string, number, boolean, null, `{"$ts": "<RFC 3339>"}` or
    /// `{"$ref": "<record id>"}`.
    static func isValidValue(_ value: JSONValue) -> Bool {
        switch value {
        case .null, .bool, .int, .string: return true
        case .double(let number): return number.isFinite
        case .array: return false
        case .object(let object):
            guard object.count == 1, let (key, inner) = object.first, case .string(let text) = inner else {
                return false
            }
            switch key {
            case "$ts": return timestamp(text) != nil
            case "$ref": return recordID(text) != nil
            default: return false
            }
        }
    }

    static func timestamp(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// The first reason a mutation's own content breaks the rules, before it meets the stored record.
    static func check(_ mutation: RecordMutation) -> ErrorCode? {
        guard isValidName(mutation.type) else { return .invalidRecordType }
        for (name, value) in mutation.fields {
            guard isValidName(name) else { return .invalidFieldName }
            guard isValidValue(value) else { return .invalidFieldValue }
        }
        if let mask = mutation.deptMask, mask < 0 { return .deptMaskForbidden }
        return nil
    }

    /// The encoded size of a record's fields, as stored.
    static func encodedSize(_ fields: JSONFields) -> Int {
        (try? JSONEncoder().encode(fields).count) ?? Int.max
    }

    /// Applies `mutation` from `actor` to the stored record (nil when there is none) in the transaction of `seq`.
    /// `batchWritten` names the fields this batch already wrote to the record: a device's later edit of its own
    /// edit is not a conflict. Returns the record to store (nil when nothing changes) and the outcome.
    ///
    /// A record the actor cannot see, live or deleted, answers the same whatever its state, type or seq: a delete as
    /// if the id did not exist (applied, nothing changes), anything else `record_forbidden`. So a push tells nothing
    /// of it, and a department's deleted id cannot be taken over from another.
    static func apply(
        _ mutation: RecordMutation, to current: StoredRecord?, by actor: SyncActor, seq: Int64, now: Date,
        batchWritten: Set<String> = []
    ) -> (record: StoredRecord?, outcome: MutationOutcome) {
        guard actor.canWrite else { return (nil, .refused(.readOnly)) }
        if let code = check(mutation) { return (nil, .refused(code)) }
        if let current, !actor.visibility.sees(current.deptMask) {
            return (nil, mutation.op == .delete ? .applied : .refused(.recordForbidden))
        }
        if let current, !current.deleted, current.type != mutation.type { return (nil, .refused(.typeMismatch)) }
        let existing = current.flatMap { $0.deleted ? nil : $0 }
        if let wanted = mutation.deptMask, !mayGrant(wanted, replacing: existing?.deptMask, actor: actor) {
            return (nil, .refused(.deptMaskForbidden))
        }
        switch mutation.op {
        case .delete:
            guard var record = existing else { return (nil, .applied) }
            record.fields = [:]
            record.fieldSeqs = [:]
            record.deleted = true
            record.seq = seq
            record.updatedAt = now
            return (record, .applied)
        case .upsert:
            guard let existing else {
                // A deleted record stays deleted against edits made before the delete was seen (delete wins).
                if let current, current.deleted, mutation.base < current.seq { return (nil, .refused(.recordDeleted)) }
                return create(mutation, by: actor, seq: seq, now: now, past: current?.pastMasks ?? 0)
            }
            return merge(mutation, into: existing, seq: seq, now: now, batchWritten: batchWritten)
        }
    }

    /// Whether `actor` may give a record the department mask `wanted`, replacing `current` (nil for a new record).
    /// A new record may be for everyone (0) or for departments the actor may grant. On an existing record only the
    /// bits that change count, and they must all be grantable; opening a record to everyone (0) or closing it to
    /// departments takes a full grant, since it changes what every department sees.
    static func mayGrant(_ wanted: Int64, replacing current: Int64?, actor: SyncActor) -> Bool {
        guard let current else { return wanted & ~actor.grantable == 0 }
        guard wanted != current else { return true }
        guard actor.grantable != -1 else { return true }
        guard wanted != 0, current != 0 else { return false }
        return (wanted ^ current) & ~actor.grantable == 0
    }

    /// A new record; `past` carries the past masks of a deleted record of the same id, whose holders may still have it.
    private static func create(
        _ mutation: RecordMutation, by actor: SyncActor, seq: Int64, now: Date, past: Int64
    ) -> (record: StoredRecord?, outcome: MutationOutcome) {
        if let code = limits(mutation.fields) { return (nil, .refused(code)) }
        let mask = mutation.deptMask ?? 0
        let record = StoredRecord(
            id: mutation.id, type: mutation.type, fields: mutation.fields,
            fieldSeqs: mutation.fields.mapValues { _ in seq }, deptMask: mask, maskSeq: seq,
            createdBy: actor.accountID, createdAt: now, updatedAt: now, createdSeq: seq, seq: seq, deleted: false,
            pastMasks: StoredRecord.pastMasks(past, adding: mask))
        return (record, .applied)
    }

    /// Per field: the device's value, unless the server changed the field after the mutation's base; then the
    /// server's value stays and is reported. Fields nobody else touched merge.
    private static func merge(
        _ mutation: RecordMutation, into current: StoredRecord, seq: Int64, now: Date, batchWritten: Set<String>
    ) -> (record: StoredRecord?, outcome: MutationOutcome) {
        var record = current
        var rejected: JSONFields = [:]
        var changed = false
        for (name, value) in mutation.fields where current.fields[name] != value {
            if (current.fieldSeqs[name] ?? 0) > mutation.base, !batchWritten.contains(name) {
                rejected[name] = current.fields[name] ?? .null
            } else {
                record.fields[name] = value
                record.fieldSeqs[name] = seq
                changed = true
            }
        }
        var keptMask: Int64?
        if let wanted = mutation.deptMask, wanted != current.deptMask {
            if current.maskSeq > mutation.base, !batchWritten.contains(maskKey) {
                keptMask = current.deptMask
            } else {
                record.deptMask = wanted
                record.maskSeq = seq
                record.pastMasks = StoredRecord.pastMasks(current.pastMasks, adding: wanted)
                changed = true
            }
        }
        if changed, let code = limits(record.fields) { return (nil, .refused(code)) }
        let outcome: MutationOutcome =
            rejected.isEmpty && keptMask == nil ? .applied : .merged(rejected: rejected, keptDeptMask: keptMask)
        guard changed else { return (nil, outcome) }
        record.seq = seq
        record.updatedAt = now
        return (record, outcome)
    }

    private static func limits(_ fields: JSONFields) -> ErrorCode? {
        guard fields.count <= maxFields else { return .tooManyFields }
        guard encodedSize(fields) <= maxRecordBytes else { return .recordTooLarge }
        return nil
    }

    // MARK: Pull

    /// Where a page of rows ordered by (seq, id) ends so that it holds whole transactions. `seqs` holds up to
    /// `limit + 1` rows' seqs: one more than a page, to see whether the last transaction continues.
    enum PageEnd: Equatable {
        /// Every row: nothing more follows.
        case all
        /// The first `count` rows; more follow.
        case prefix(Int)
        /// One transaction wrote more rows than a page holds: the page is that whole transaction.
        case wholeTransaction(Int64)
    }

    /// How many rows a page takes, at most `limit`, so that their fields stay within `budget` bytes (at least one).
    static func rowsWithin(_ budget: Int, sizes: [Int], limit: Int) -> Int {
        var total = 0
        for (index, size) in sizes.prefix(limit).enumerated() {
            total += size
            if total > budget { return max(1, index) }
        }
        return limit
    }

    static func pageEnd(_ seqs: [Int64], limit: Int) -> PageEnd {
        guard seqs.count > limit else { return .all }
        let next = seqs[limit]
        var end = limit
        while end > 0, seqs[end - 1] == next { end -= 1 }
        return end > 0 ? .prefix(end) : .wholeTransaction(next)
    }

    /// What a pull after `since` sends of one changed row for a member who sees `visibility`: the fields written
    /// after `since` (all of them when the record just became visible), a tombstone, a revoked id, or nothing. An id
    /// is revoked only to a member who may have seen the record: others never hear of it.
    enum PullItem: Equatable {
        case change(StoredRecord)
        case revoked(String)
        case skip
    }

    /// Whether a pull after `since` sends every field of `record` (a first sync, or a record that became visible after
    /// `since`) rather than only those written after it; `pullItem` reads `fields` only when it does not.
    static func sendsWhole(_ record: StoredRecord, since: Int64) -> Bool { since == 0 || record.maskSeq > since }

    static func pullItem(_ record: StoredRecord, since: Int64, visibility: Visibility) -> PullItem {
        let visible = visibility.sees(record.deptMask)
        // The device may hold an invisible record when it existed at the token and its mask changed since.
        let mayHold =
            since > 0 && record.createdSeq <= since && record.maskSeq > since
            && visibility.mayHaveSeen(record.pastMasks)
        if record.deleted { return visible ? .change(record) : mayHold ? .revoked(record.id) : .skip }
        guard visible else { return mayHold ? .revoked(record.id) : .skip }
        if sendsWhole(record, since: since) { return .change(record) }
        var partial = record
        partial.fields = record.fields.filter { (record.fieldSeqs[$0.key] ?? 0) > since }
        return .change(partial)
    }
}
