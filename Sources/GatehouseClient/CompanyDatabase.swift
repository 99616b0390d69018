import Foundation
import GRDB
import GatehouseClientAPI

/// One company's database on this device and every statement on it, as GRDB's demo app keeps its `AppDatabase`:
/// `record` holds the server's copy of each record, `pending` the changes saved here and not yet confirmed, `acked`
/// the seq of this device's last confirmed change to each record, and `meta` the client id and the change token.
struct CompanyDatabase: Sendable {
    private let queue: DatabaseQueue
    /// This device's id in the company's sync, made on first use.
    let clientID: String
    /// Open until the store closes or wipes it; observations read it to end.
    private let state = Locked(Availability.open)

    /// Whether the database can still be read, and if not, why.
    enum Availability: Sendable {
        case open
        /// The app closed the store: observations end.
        case closed
        /// The account lost the company and its data is gone: observations end with `companyAccessRevoked`.
        case wiped
    }

    /// Thrown inside an observation once the database closed, so that it ends.
    struct Unavailable: Error {}

    /// Opens (or makes) the database and reads this device's client id.
    init(file: URL, in directory: URL) throws {
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let queue = try DatabaseQueue(path: file.path)
        try Self.migrator.migrate(queue)
        clientID = try queue.write { db in
            if let known = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'client_id'") {
                return known
            }
            let made = UUID().uuidString.lowercased()
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('client_id', ?)", arguments: [made])
            return made
        }
        self.queue = queue
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE record (
                        id TEXT PRIMARY KEY, type TEXT NOT NULL, fields TEXT NOT NULL, dept_mask INTEGER NOT NULL,
                        seq INTEGER NOT NULL);
                    CREATE INDEX record_type ON record (type);
                    CREATE TABLE pending (
                        ord INTEGER PRIMARY KEY AUTOINCREMENT, mid TEXT NOT NULL UNIQUE, id TEXT NOT NULL,
                        type TEXT NOT NULL, op TEXT NOT NULL, base INTEGER NOT NULL, fields TEXT NOT NULL,
                        dept_mask INTEGER);
                    CREATE INDEX pending_id ON pending (id);
                    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    CREATE TABLE acked (id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
                    """)
        }
        return migrator
    }

    /// Closes the file (the unsent changes stay in it, unless `availability` is `.wiped`); every observation of it
    /// ends.
    func close(_ availability: Availability = .closed) throws {
        state.withLock { $0 = availability }
        // A change notice makes each observation fetch again, find the database closed, and end.
        try? queue.write { try $0.notifyChanges(in: .fullDatabase) }
        try queue.close()
    }

    /// Whether the database is still open, and if not, why.
    var availability: Availability { state.withLock { $0 } }

    // MARK: Changes saved here

    /// Keeps a save of `fields` (already encoded) until the server confirms it.
    func saveChange(id: String, type: String, fields: String, deptMask: Int64?) throws {
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending (mid, id, type, op, base, fields, dept_mask)
                    VALUES (?, ?, ?, 'upsert', \(Self.base), ?, ?)
                    """,
                arguments: [Self.newMID(), id, type, id, id, fields, deptMask])
        }
    }

    /// Keeps a deletion until the server confirms it; nothing when no record or change has that id.
    func deleteChange(id: String) throws {
        try queue.write { db in
            let type =
                try String.fetchOne(db, sql: "SELECT type FROM record WHERE id = ?", arguments: [id])
                ?? String.fetchOne(db, sql: "SELECT type FROM pending WHERE id = ? ORDER BY ord DESC", arguments: [id])
            guard let type else { return }
            try db.execute(
                sql: """
                    INSERT INTO pending (mid, id, type, op, base, fields)
                    VALUES (?, ?, ?, 'delete', \(Self.base), '{}')
                    """,
                arguments: [Self.newMID(), id, type, id, id])
        }
    }

    /// The base of a new change to the record `?` (bound twice): the seq of the server's copy this device holds, or
    /// of this device's own last change the server confirmed when that is newer (its pull may not have run yet).
    private static let base = """
        MAX(COALESCE((SELECT seq FROM record WHERE id = ?), 0), COALESCE((SELECT seq FROM acked WHERE id = ?), 0))
        """

    private static func newMID() -> String { "m-" + UUID().uuidString.lowercased() }

    /// How many saved changes have not reached the server yet.
    func pendingCount() throws -> Int {
        try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending") ?? 0 }
    }

    /// The oldest `limit` changes not yet confirmed, in the order they were saved.
    func pendingChanges(limit: Int) throws -> [PendingChange] {
        try queue.read { db in
            try PendingChange.fetchAll(db, sql: "SELECT * FROM pending ORDER BY ord LIMIT ?", arguments: [limit])
        }
    }

    /// Forgets a change the server will never take.
    func dropChange(mid: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM pending WHERE mid = ?", arguments: [mid]) }
    }

    /// Records the server's answer to a push, and returns the events it means for the UI: each field that lost a
    /// conflict (`sent` holds the changes sent, by mid) and each refusal.
    func confirm(_ results: [Components.Schemas.MutationResult], sent: [String: PendingChange]) throws
        -> [StoreEvent]
    {
        try queue.write { db in
            var events: [StoreEvent] = []
            for result in results {
                try db.execute(sql: "DELETE FROM pending WHERE mid = ?", arguments: [result.mid])
                // Changes saved after this one build on it, not on what the device saw before: its own write
                // is no conflict. (Another device's write to other fields between the two stays unseen until
                // the pull; a later change here to those fields would win over it.)
                if result.status != .refused {
                    try db.execute(
                        sql: "UPDATE pending SET base = ? WHERE id = ? AND base < ?",
                        arguments: [result.seq, result.id, result.seq])
                    try db.execute(
                        sql: """
                            INSERT INTO acked (id, seq) VALUES (?, ?)
                            ON CONFLICT (id) DO UPDATE SET seq = MAX(acked.seq, excluded.seq)
                            """,
                        arguments: [result.id, result.seq])
                    if let change = sent[result.mid] { try Self.keep(change, as: result, db) }
                }
                switch result.status {
                case .applied: break
                case .merged:
                    for (field, kept) in result.rejectedFields ?? [:] {
                        events.append(
                            .conflict(
                                FieldConflict(
                                    recordID: result.id, field: field, yours: sent[result.mid]?.fields[field],
                                    kept: FieldValue(kept))))
                    }
                case .refused: events.append(.refused(recordID: result.id, code: result.code ?? "refused"))
                }
            }
            return events
        }
    }

    /// Puts a change the server took into the server's copy at once (with the values it kept instead of the ones
    /// that lost), so that between the push and the pull that brings it back the record neither vanishes nor shows
    /// its old fields to a reader or an observation. Its seq stays as it was: the copy may lack other devices'
    /// writes to other fields until the pull, and the digest exchange must still see it as older than the server's.
    private static func keep(_ change: PendingChange, as result: Components.Schemas.MutationResult, _ db: Database)
        throws
    {
        guard !change.isDeletion else {
            try db.execute(sql: "DELETE FROM record WHERE id = ?", arguments: [change.id])
            return
        }
        let held = try Row.fetchOne(
            db, sql: "SELECT fields, dept_mask FROM record WHERE id = ?", arguments: [change.id])
        var fields = try held.map { try decode($0["fields"]) } ?? [:]
        fields.merge(change.fields) { $1 }
        fields.merge((result.rejectedFields ?? [:]).mapValues(FieldValue.init)) { $1 }
        // The server's own mask when it kept it, else the one sent, else the one held; a new record's is 0.
        let mask: Int64 = result.deptMask ?? change.deptMask ?? held?["dept_mask"] ?? 0
        try db.execute(
            sql: """
                INSERT INTO record (id, type, fields, dept_mask, seq) VALUES (?, ?, ?, ?, 0)
                ON CONFLICT (id) DO UPDATE SET fields = excluded.fields, dept_mask = excluded.dept_mask
                """,
            arguments: [change.id, change.type, try encode(fields), mask])
    }

    // MARK: The server's copy

    /// The server's copy with the unsent changes on top, for the records matching `condition`.
    func overlay(where condition: String, _ arguments: StatementArguments) throws -> [StoreRecord] {
        try queue.read { db in try Self.overlay(db, where: condition, arguments) }
    }

    /// The records of `type` as `overlay` reads them, every time a save, a confirmation or a pulled page changes
    /// them (GRDB's `ValueObservation` over `record` and `pending`), each array once; nil once the database closed.
    func observe<Item: Sendable>(
        type: String, as decode: @escaping @Sendable (StoreRecord) throws -> Item
    ) -> AsyncValueObservation<[Item]>.Iterator? {
        let values = ValueObservation.tracking(regions: [Table("record"), Table("pending")]) { [state] db in
            guard case .open = state.withLock({ $0 }) else { throw Unavailable() }
            return try Self.overlay(db, where: "type = ?", [type])
        }
        .removeDuplicates()
        .map { try $0.map(decode) }
        .values(in: queue, bufferingPolicy: .bufferingNewest(1))
        // Started under the lock `close` takes, so that its first fetch is queued before the file closes or not at
        // all: GRDB would read a closed connection.
        return state.withLock { availability in
            guard case .open = availability else { return nil }
            return values.makeAsyncIterator()
        }
    }

    /// How many records `overlay` would return for `type` (all types when nil), counted by SQLite: the server's copy
    /// and the records made here, less those whose last unsent change deletes them.
    func count(type: String?) throws -> Int {
        let filter = type == nil ? "1" : "type = :type"
        return try queue.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT COUNT(*) FROM (
                        SELECT id FROM record WHERE \(filter) UNION SELECT id FROM pending WHERE \(filter)) AS ids
                    WHERE (SELECT op FROM pending
                           WHERE pending.id = ids.id AND \(filter) ORDER BY ord DESC LIMIT 1) IS NOT 'delete'
                    """,
                arguments: type.map { ["type": $0] } ?? [:]) ?? 0
        }
    }

    private static func overlay(_ db: Database, where condition: String, _ arguments: StatementArguments) throws
        -> [StoreRecord]
    {
        var records: [String: (type: String, fields: [String: FieldValue], mask: Int64?, pending: Bool)] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM record WHERE \(condition)", arguments: arguments) {
            records[row["id"]] = (row["type"], try Self.decode(row["fields"]), row["dept_mask"], false)
        }
        let pending = try Row.fetchAll(
            db, sql: "SELECT * FROM pending WHERE \(condition) ORDER BY ord", arguments: arguments)
        for row in pending {
            let id: String = row["id"]
            if row["op"] as String == "delete" {
                records[id] = nil
                continue
            }
            var record = records[id] ?? (row["type"], [:], nil, true)
            record.fields.merge(try Self.decode(row["fields"])) { $1 }
            if let mask: Int64 = row["dept_mask"] { record.mask = mask }
            record.pending = true
            records[id] = record
        }
        return records.sorted { $0.key < $1.key }.map {
            StoreRecord(
                id: $0.key, type: $0.value.type, fields: $0.value.fields, deptMask: $0.value.mask,
                hasPendingChanges: $0.value.pending)
        }
    }

    /// The change token of the last page applied; nil before the first pull.
    func token() throws -> String? {
        try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'token'") }
    }

    /// Drops the server's copy and the token, so the next pull starts over.
    func forgetServerCopy() throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM record; DELETE FROM meta WHERE key = 'token'") }
    }

    /// Up to `limit` ids and seqs of the server's copy after `after`, by id, for the digest exchange.
    func known(after: String, limit: Int) throws -> [Components.Schemas.DigestEntry] {
        try queue.read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, seq FROM record WHERE id > ? ORDER BY id LIMIT ?", arguments: [after, limit]
            ).map { Components.Schemas.DigestEntry(id: $0["id"], seq: $0["seq"]) }
        }
    }

    /// Applies a page of the server's changes in one transaction, with its token when given; returns the ids changed.
    func apply(_ changes: [PulledChange], revoked: [String], token: String?) throws -> Set<String> {
        try queue.write { db in
            var changed = Set<String>()
            // Prepared once per page (a page holds up to 5,000 changes), not once per change.
            let held = try db.cachedStatement(sql: "SELECT fields FROM record WHERE id = ?")
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO record (id, type, fields, dept_mask, seq) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET type = excluded.type, fields = excluded.fields,
                        dept_mask = excluded.dept_mask, seq = excluded.seq
                    """)
            let delete = try db.cachedStatement(sql: "DELETE FROM record WHERE id = ?")
            for change in changes {
                changed.insert(change.id)
                if change.deleted {
                    try delete.execute(arguments: [change.id])
                    continue
                }
                // A pull sends a record this device holds with the fields written since its token: merge them. One it
                // does not hold (every record of a first sync) comes whole.
                var stored = change.fields
                if let text = try String.fetchOne(held, arguments: [change.id]) {
                    var fields = try Self.decode(text)
                    fields.merge(try Self.decode(change.fields)) { $1 }
                    stored = try Self.encode(fields)
                }
                try upsert.execute(arguments: [change.id, change.type, stored, change.deptMask, change.seq])
            }
            for id in revoked {
                changed.insert(id)
                try delete.execute(arguments: [id])
            }
            if let token {
                try db.execute(
                    sql:
                        "INSERT INTO meta (key, value) VALUES ('token', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    arguments: [token])
            }
            return changed
        }
    }

    // MARK: Fields as stored

    static func encode(_ fields: [String: FieldValue]) throws(GatehouseError) -> String {
        try encode(json: fields.mapValues(\.json))
    }

    /// Fields as the server sends them (timestamps and references as their `$ts` and `$ref` objects), as stored.
    static func encode(json fields: [String: JSONValue]) throws(GatehouseError) -> String {
        do {
            return String(decoding: try encoder.encode(fields), as: UTF8.self)
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    static func decode(_ text: String) throws -> [String: FieldValue] {
        try decoder.decode([String: JSONValue].self, from: Data(text.utf8)).mapValues(FieldValue.init)
    }

    private static let encoder = JSONEncoder()
    private static let decoder = JSONDecoder()
}

/// A change saved on this device and not yet confirmed by the server: a row of `pending`.
struct PendingChange: FetchableRecord {
    let mid: String
    let id: String
    let type: String
    let isDeletion: Bool
    let base: Int64
    let fields: [String: FieldValue]
    let deptMask: Int64?

    init(row: Row) throws {
        mid = row["mid"]
        id = row["id"]
        type = row["type"]
        isDeletion = row["op"] as String == "delete"
        base = row["base"]
        fields = try CompanyDatabase.decode(row["fields"])
        deptMask = row["dept_mask"]
    }

    /// The change as the push sends it.
    var mutation: Components.Schemas.Mutation {
        .init(
            mid: mid, id: id, _type: type, op: isDeletion ? .delete : .upsert, base: base,
            fields: isDeletion ? nil : fields.mapValues(\.json), deptMask: deptMask)
    }
}
