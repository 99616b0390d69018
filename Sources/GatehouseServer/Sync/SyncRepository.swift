import Foundation
import GatehouseAPI
import SQLKit

/// Where a company's change log stands.
struct SyncCounters: Decodable, Sendable {
    /// The last seq given to a transaction.
    let seq: Int64
    /// The newest seq whose tombstones are compacted away.
    let compacted: Int64

    enum CodingKeys: String, CodingKey {
        case seq = "sync_seq"
        case compacted = "sync_compacted_seq"
    }
}

/// Where a record stands in a page's order, and the bytes of its fields: pages are cut by bytes from these before
/// any fields are read.
struct RecordKey: Sendable, Equatable, Decodable {
    let id: String
    let seq: Int64
    let size: Int

    enum CodingKeys: String, CodingKey {
        case id, seq
        case size = "fields_size"
    }
}

/// The SQL of records, the change log and mutation results. Every query names the company.
struct SyncRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "type", "fields", "field_seqs", "dept_mask", "mask_seq", "created_by", "created_at", "updated_at",
        "created_seq", "seq", "deleted", "past_masks", "fields_size",
    ]
    private static let selected: SQLQueryString = "\(unsafeRaw: columns.joined(separator: ", "))"
    private static let keys: SQLQueryString = "id, seq, fields_size"

    /// `(dept_mask = 0 OR dept_mask & mask <> 0)`: the record is visible under `mask`.
    private static func visible(_ mask: Int64) -> SQLQueryString {
        "(dept_mask = 0 OR (dept_mask & \(bind: mask)) <> 0)"
    }

    /// The record was visible under `mask` at some time (`Visibility.mayHaveSeen`).
    private static func mayHaveSeen(_ mask: Int64) -> SQLQueryString {
        "(past_masks < 0 OR (past_masks & \(bind: mask)) <> 0)"
    }

    /// What a pull after `since` under `mask` sends something about: visible rows, and rows that existed at `since`,
    /// whose mask changed after and that the member may have seen (the device may hold them: they are revoked).
    private static func pulled(since: Int64, mask: Int64, types: [String]?) -> SQLQueryString {
        "(\(visible(mask)) OR (mask_seq > \(bind: since) AND created_seq <= \(bind: since) AND \(mayHaveSeen(mask))))"
            + ofTypes(types)
    }

    /// Rows after `cursor` in (seq, id) order.
    private static func after(_ cursor: (seq: Int64, id: String)) -> SQLQueryString {
        "(seq > \(bind: cursor.seq) OR (seq = \(bind: cursor.seq) AND id > \(bind: cursor.id)))"
    }

    /// `AND type IN (…)` when the device syncs some types only.
    private static func ofTypes(_ types: [String]?) -> SQLQueryString {
        guard let types, !types.isEmpty else { return "" }
        return " AND type IN (\(SQLBind.group(types)))"
    }

    // MARK: Counters

    /// Takes the company's next seq; nil when there is no such company. The row stays locked until the transaction
    /// ends, so transactions of one company commit in seq order: a reader that sees seq n sees everything before it.
    func nextSeq(_ companyID: String) async throws -> Int64? {
        try await db.raw(
            "UPDATE companies SET sync_seq = sync_seq + 1 WHERE id = \(bind: companyID) RETURNING sync_seq"
        ).first(decodingColumn: "sync_seq", as: Int64.self)
    }

    /// The company's last committed seq and the newest seq compacted away; nil when there is no such company.
    func counters(_ companyID: String) async throws -> SyncCounters? {
        try await db.select().columns("sync_seq", "sync_compacted_seq").from("companies")
            .where("id", .equal, companyID).first(decoding: SyncCounters.self)
    }

    /// The member's access epoch and whether their company credential makes them a super user; nil for no member.
    func access(_ companyID: String, accountID: String) async throws -> (epoch: Int64, superUser: Bool)? {
        let row = try await db.raw(
            """
            SELECT m.access_epoch, c.super_user FROM memberships m
            LEFT JOIN company_credentials c ON c.company_id = m.company_id AND c.account_id = m.account_id
            WHERE m.company_id = \(bind: companyID) AND m.account_id = \(bind: accountID)
            """
        ).first()
        guard let row else { return nil }
        return (
            try row.decode(column: "access_epoch", as: Int64.self),
            (try row.decodeNil(column: "super_user") ? 0 : try row.decode(column: "super_user", as: Int.self)) != 0
        )
    }

    /// Bumps a member's access epoch: their tokens re-filter on the next pull.
    func bumpEpoch(_ companyID: String, accountID: String) async throws {
        try await db.raw(
            """
            UPDATE memberships SET access_epoch = access_epoch + 1
            WHERE company_id = \(bind: companyID) AND account_id = \(bind: accountID)
            """
        ).run()
    }

    // MARK: Records

    /// The stored records of `ids` (deleted ones included); with `readingFields` false, their fields stay as stored text
    /// (`storedFields`), for an answer that writes them as they are.
    func records(_ companyID: String, ids: [String], readingFields: Bool = true) async throws -> [String: StoredRecord]
    {
        var found: [String: StoredRecord] = [:]
        for chunk in ids.chunks(of: 500) {
            let rows = try await db.select().columns(Self.columns).from("records")
                .where("company_id", .equal, companyID).where("id", .in, Array(chunk)).all()
            for row in rows {
                let record = try readingFields ? Self.decode(row) : Self.unread(row)
                found[record.id] = record
            }
        }
        return found
    }

    /// Writes records as they now stand: one multi-row upsert per 200 records, not a statement each.
    func save(_ companyID: String, _ records: some Sequence<StoredRecord>) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let all = Array(records)
        for chunk in all.chunks(of: 200) {
            var insert = db.insert(into: "records").columns(["company_id"] + Self.columns)
            for record in chunk {
                let fields = String(decoding: try encoder.encode(record.fields), as: UTF8.self)
                let seqs = String(decoding: try encoder.encode(record.fieldSeqs), as: UTF8.self)
                insert = insert.values(
                    SQLBind(companyID), SQLBind(record.id), SQLBind(record.type), SQLBind(fields), SQLBind(seqs),
                    SQLBind(record.deptMask), SQLBind(record.maskSeq), SQLBind(record.createdBy),
                    SQLBind(record.createdAt.epochMilliseconds), SQLBind(record.updatedAt.epochMilliseconds),
                    SQLBind(record.createdSeq), SQLBind(record.seq), SQLBind(record.deleted ? 1 : 0),
                    SQLBind(record.pastMasks), SQLBind(fields.utf8.count))
            }
            try await insert.onConflict(with: ["company_id", "id"]) { update in
                Self.columns.dropFirst().reduce(update) { $0.set(excludedValueOf: $1) }
            }
            .run()
        }
    }

    /// The keys of up to `limit` rows changed after `since`, in (seq, id) order, that a member seeing `mask` is sent
    /// something about (see `pulled`). Fields are not read: the service cuts the page by bytes from these.
    func changeKeys(_ companyID: String, since: Int64, mask: Int64, types: [String]?, limit: Int) async throws
        -> [RecordKey]
    {
        try await db.raw(
            """
            SELECT \(Self.keys) FROM records
            WHERE company_id = \(bind: companyID) AND seq > \(bind: since) AND \(Self.pulled(since: since, mask: mask, types: types))
            ORDER BY seq, id LIMIT \(bind: limit)
            """
        ).all(decoding: RecordKey.self)
    }

    /// The rows a pull after `since` sends something about for a page the keys were cut to: those whose seq is in
    /// `seqs`, in (seq, id) order, then those of the page's `keys` that a write moved past it since they were read
    /// (see `moved`).
    func changes(
        _ companyID: String, since: Int64, seqs: ClosedRange<Int64>, keys: some Collection<RecordKey>, mask: Int64,
        types: [String]?
    ) async throws -> [StoredRecord] {
        let condition = Self.pulled(since: since, mask: mask, types: types)
        let rows = try await db.raw(
            """
            SELECT \(Self.selected) FROM records
            WHERE company_id = \(bind: companyID) AND seq >= \(bind: seqs.lowerBound) AND seq <= \(bind: seqs.upperBound)
            AND \(condition)
            ORDER BY seq, id
            """
        ).all().map(Self.unread)
        return try await rows
            + moved(companyID, keys: keys, besides: rows, past: "seq > \(bind: seqs.upperBound)", condition)
    }

    /// The rows of `keys` missing from `rows` because a write moved them `past` the page between the two reads, as
    /// they stand now and still matching `condition`. A page must send them: the token it ends with claims their
    /// earlier writes, and the next pull sends only the fields written after it. Sent as they are now, their fields
    /// written since the device's token hold those writes too; the next page sends them again, which is harmless.
    private func moved(
        _ companyID: String, keys: some Collection<RecordKey>, besides rows: [StoredRecord], past: SQLQueryString,
        _ condition: SQLQueryString
    ) async throws -> [StoredRecord] {
        let read = Set(rows.map(\.id))
        let missing = keys.map(\.id).filter { !read.contains($0) }
        var found: [StoredRecord] = []
        for chunk in missing.chunks(of: 500) {
            found += try await db.raw(
                """
                SELECT \(Self.selected) FROM records
                WHERE company_id = \(bind: companyID) AND id IN (\(SQLBind.group(Array(chunk)))) AND \(past)
                AND \(condition)
                ORDER BY seq, id
                """
            ).all().map(Self.unread)
        }
        return found
    }

    /// What a device re-filters after the member's masks changed from `old` to `new`: of the records that existed at
    /// its token (`created_seq <= createdBy`), deleted ones included, those whose visibility differs between the two
    /// masks, and those out of sight under both whose mask changed since the token and that `old` may have seen (the
    /// device may hold them). Later changes of those records count too, so one that became visible is sent whole.
    private static func rescoped(createdBy: Int64, old: Int64, new: Int64, types: [String]?) -> SQLQueryString {
        """
        created_seq <= \(bind: createdBy)
        AND (\(visible(old)) <> \(visible(new))
        OR (mask_seq > \(bind: createdBy) AND NOT \(visible(new)) AND \(mayHaveSeen(old))))\(ofTypes(types))
        """
    }

    /// The keys of up to `limit` rows to re-filter (see `rescoped`) after `cursor`, in (seq, id) order.
    func rescopeKeys(
        _ companyID: String, createdBy: Int64, old: Int64, new: Int64, types: [String]?,
        after cursor: (seq: Int64, id: String), limit: Int
    ) async throws -> [RecordKey] {
        try await db.raw(
            """
            SELECT \(Self.keys) FROM records
            WHERE company_id = \(bind: companyID) AND \(Self.after(cursor))
            AND \(Self.rescoped(createdBy: createdBy, old: old, new: new, types: types))
            ORDER BY seq, id LIMIT \(bind: limit)
            """
        ).all(decoding: RecordKey.self)
    }

    /// The rows to re-filter after `cursor` up to the last of `keys` (inclusive), in (seq, id) order: a page the keys
    /// were cut to; then those of `keys` that a write moved past it since they were read (see `moved`).
    func rescope(
        _ companyID: String, createdBy: Int64, old: Int64, new: Int64, types: [String]?,
        after cursor: (seq: Int64, id: String), keys: some BidirectionalCollection<RecordKey>
    ) async throws -> [StoredRecord] {
        guard let last = keys.last else { return [] }
        let condition = Self.rescoped(createdBy: createdBy, old: old, new: new, types: types)
        let rows = try await db.raw(
            """
            SELECT \(Self.selected) FROM records
            WHERE company_id = \(bind: companyID) AND \(Self.after(cursor))
            AND (seq < \(bind: last.seq) OR (seq = \(bind: last.seq) AND id <= \(bind: last.id)))
            AND \(condition)
            ORDER BY seq, id
            """
        ).all().map(Self.unread)
        return try await rows
            + moved(companyID, keys: keys, besides: rows, past: Self.after((last.seq, last.id)), condition)
    }

    /// The keys of up to `limit` records not deleted, visible under `mask`, by id, after `after` and up to `through`
    /// (inclusive), optionally of some types. Fetch the ones a page takes with `records(_:ids:)`.
    func existingKeys(
        _ companyID: String, mask: Int64, types: [String]? = nil, after: String?, through: String? = nil, limit: Int
    ) async throws -> [RecordKey] {
        var query = db.select().columns("id", "seq", "fields_size").from("records")
            .where("company_id", .equal, companyID).where("deleted", .equal, 0).where(Self.visible(mask))
        if let types, !types.isEmpty { query = query.where("type", .in, types) }
        if let after { query = query.where("id", .greaterThan, after) }
        if let through { query = query.where("id", .lessThanOrEqual, through) }
        return try await query.orderBy("id").limit(limit).all(decoding: RecordKey.self)
    }

    // MARK: Mutation results

    /// The stored first results of these mutation ids from one device.
    func results(_ companyID: String, accountID: String, clientID: String, mids: [String]) async throws -> [String:
        String]
    {
        var found: [String: String] = [:]
        for chunk in mids.chunks(of: 500) {
            let rows = try await db.select().columns("mid", "result").from("sync_mutations")
                .where("company_id", .equal, companyID).where("account_id", .equal, accountID)
                .where("client_id", .equal, clientID).where("mid", .in, Array(chunk)).all()
            for row in rows {
                found[try row.decode(column: "mid", as: String.self)] = try row.decode(
                    column: "result", as: String.self)
            }
        }
        return found
    }

    func saveResults(
        _ companyID: String, accountID: String, clientID: String, _ results: [(mid: String, result: String)], now: Date
    ) async throws {
        for chunk in results.chunks(of: 500) {
            var insert = db.insert(into: "sync_mutations").columns(
                "company_id", "account_id", "client_id", "mid", "result", "created_at")
            for item in chunk {
                insert = insert.values(
                    SQLBind(companyID), SQLBind(accountID), SQLBind(clientID), SQLBind(item.mid), SQLBind(item.result),
                    SQLBind(now.epochMilliseconds))
            }
            try await insert.run()
        }
    }

    // MARK: Retention

    /// Drops tombstones and mutation results older than `cutoff`, and raises each company's compacted seq to the
    /// newest tombstone dropped. Returns how many tombstones went.
    func compact(before cutoff: Date) async throws -> Int {
        let millis = cutoff.epochMilliseconds
        let horizons = try await db.raw(
            """
            SELECT company_id, MAX(seq) AS horizon, COUNT(*) AS dropped FROM records
            WHERE deleted = 1 AND updated_at < \(bind: millis) GROUP BY company_id
            """
        ).all()
        var dropped = 0
        for row in horizons {
            let company = try row.decode(column: "company_id", as: String.self)
            let horizon = try row.decode(column: "horizon", as: Int64.self)
            dropped += try row.decode(column: "dropped", as: Int.self)
            try await db.raw(
                """
                UPDATE companies SET sync_compacted_seq = \(bind: horizon)
                WHERE id = \(bind: company) AND sync_compacted_seq < \(bind: horizon)
                """
            ).run()
            try await db.delete(from: "records").where("company_id", .equal, company).where("deleted", .equal, 1)
                .where("seq", .lessThanOrEqual, horizon).run()
        }
        try await db.delete(from: "sync_mutations").where("created_at", .lessThan, millis).run()
        return dropped
    }

    /// Forgets the mutation results of an account that is deleted, in every company.
    func forgetMutations(accountID: String) async throws {
        try await db.delete(from: "sync_mutations").where("account_id", .equal, accountID).run()
    }

    // MARK: Decoding

    private static func decode(_ row: any SQLRow) throws -> StoredRecord {
        var record = try unread(row)
        try record.readFields()
        return record
    }

    /// A row with its fields left as stored text (`storedFields`): a pull reads them only for a record it sends in
    /// part, and writes the others into its answer as they are.
    private static func unread(_ row: any SQLRow) throws -> StoredRecord {
        let fields = try row.decode(column: "fields", as: String.self)
        let seqs = try row.decode(column: "field_seqs", as: String.self)
        return StoredRecord(
            id: try row.decode(column: "id", as: String.self),
            type: try row.decode(column: "type", as: String.self),
            fields: [:],
            fieldSeqs: try StoredJSON.object(seqs).compactMapValues { ($0 as? NSNumber)?.int64Value },
            deptMask: try row.decode(column: "dept_mask", as: Int64.self),
            maskSeq: try row.decode(column: "mask_seq", as: Int64.self),
            createdBy: try row.decode(column: "created_by", as: String?.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            updatedAt: Date(epochMilliseconds: try row.decode(column: "updated_at", as: Int64.self)),
            createdSeq: try row.decode(column: "created_seq", as: Int64.self),
            seq: try row.decode(column: "seq", as: Int64.self),
            deleted: try row.decode(column: "deleted", as: Int.self) != 0,
            pastMasks: try row.decode(column: "past_masks", as: Int64.self), storedSize: fields.utf8.count,
            storedFields: fields)
    }
}

extension StoredRecord {
    /// Reads the stored text of the fields into `fields`, when it was left unread.
    mutating func readFields() throws {
        guard let text = storedFields else { return }
        fields = try StoredJSON.fields(text)
        storedFields = nil
    }

    /// A copy with its fields read (`readFields`).
    func withFieldsRead() throws -> StoredRecord {
        var record = self
        try record.readFields()
        return record
    }
}

/// Reads the JSON the store keeps for records with Foundation's JSONSerialization: about three times faster than
/// decoding `JSONValue` through `Decodable`, which must try each type in turn (measured: 9 against 27 µs for a 1 KB
/// record), and a pull reads every record it sends.
enum StoredJSON {
    struct Corrupt: Error {}

    static func object(_ text: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw Corrupt()
        }
        return object
    }

    static func fields(_ text: String) throws -> JSONFields {
        try object(text).mapValues(value)
    }

    static func value(_ any: Any) throws -> JSONValue {
        switch any {
        case is NSNull: return .null
        case let text as String: return .string(text)
        case let number as NSNumber:
            // JSONSerialization makes booleans NSNumbers of type "c", doubles "d", and integers "q".
            switch String(cString: number.objCType) {
            case "c": return .bool(number.boolValue)
            case "d", "f": return .double(number.doubleValue)
            default: return .int(number.int64Value)
            }
        case let object as [String: Any]: return .object(try object.mapValues(value))
        case let array as [Any]: return .array(try array.map(value))
        default: throw Corrupt()
        }
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements (statements stay within the stores' bind limits).
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
