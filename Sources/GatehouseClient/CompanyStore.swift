import Foundation
import GRDB
import GatehouseAPI

/// One company's records on this device, offline first: its own GRDB database holds the server's copy of each record,
/// the changes saved here and not yet confirmed, and the change token. A save returns at once; pushing, pulling and
/// the live stream run in the background while the client is logged in to the company.
///
/// Reads show the server's copy with the unsent changes on top. `events` tells the UI which records changed, each
/// field that lost a conflict, refusals, and the wipe that follows a removal from the company.
public actor CompanyStore {
    /// The company.
    public nonisolated let companyID: String
    /// The database file.
    public nonisolated let file: URL
    private var database: DatabaseQueue?
    private let clientID: String
    private let gatehouse: GatehouseClient
    private let broadcast = Broadcast<StoreEvent>()
    private let wakes: AsyncStream<Void>.Continuation
    private let liveWakes: AsyncStream<Void>.Continuation
    private var tasks: [Task<Void, Never>] = []
    /// The last sync started; the next one waits for it.
    private var running: Task<Void, any Error>?
    /// The last seq the live stream announced, so the periodic repeat of the same seq pulls nothing.
    private var announced: Int64?

    /// What happens to the store. Each call makes a new stream.
    public nonisolated var events: AsyncStream<StoreEvent> { broadcast.stream() }

    init(companyID: String, directory: URL, client: GatehouseClient) async throws(GatehouseError) {
        self.companyID = companyID
        self.gatehouse = client
        file = directory.appendingPathComponent(
            "company-\(companyID.filter { $0.isLetter || $0.isNumber || $0 == "-" }).sqlite")
        do {
            (database, clientID) = try Self.open(file, in: directory)
        } catch {
            throw .localStore(String(describing: error))
        }
        let (wakeStream, wakes) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (liveStream, liveWakes) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.wakes = wakes
        self.liveWakes = liveWakes
        let authEvents = client.auth.events
        tasks = [
            Task { [weak self] in await self?.runEngine(wakeStream) },
            Task { [weak self] in await self?.runLive(liveStream) },
            Task { [weak self] in await self?.watch(authEvents) },
        ]
        wakes.yield()
        liveWakes.yield()
    }

    /// Opens (or makes) the database and reads this device's client id, made on first use.
    private static func open(_ file: URL, in directory: URL) throws -> (DatabaseQueue, String) {
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let database = try DatabaseQueue(path: file.path)
        try migrator.migrate(database)
        let clientID = try database.write { db in
            if let known = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'client_id'") {
                return known
            }
            let made = UUID().uuidString.lowercased()
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('client_id', ?)", arguments: [made])
            return made
        }
        return (database, clientID)
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

    // MARK: Reading and saving

    /// Saves fields of a record (a new one when `id` is nil) and returns its id at once; the change is kept until
    /// the server confirms it, through crashes and relaunches. Only the given fields change.
    @discardableResult
    public func save(
        type: String, id: String? = nil, fields: [String: FieldValue], deptMask: Int64? = nil
    ) throws(GatehouseError) -> String {
        let id = id?.lowercased() ?? UUID().uuidString.lowercased()
        let encoded = try Self.encode(fields)
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending (mid, id, type, op, base, fields, dept_mask)
                    VALUES (?, ?, ?, 'upsert', \(Self.base), ?, ?)
                    """,
                arguments: [Self.newMID(), id, type, id, id, encoded, deptMask])
        }
        broadcast.send(.changed([id]))
        wakes.yield()
        return id
    }

    /// Deletes a record; like a save, it returns at once and reaches the server in the background.
    public func delete(id: String) throws(GatehouseError) {
        let id = id.lowercased()
        try write { db in
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
        broadcast.send(.changed([id]))
        wakes.yield()
    }

    /// The base of a new change to the record `?` (bound twice): the seq of the server's copy this device holds, or
    /// of this device's own last change the server confirmed when that is newer (its pull may not have run yet).
    private static let base = """
        MAX(COALESCE((SELECT seq FROM record WHERE id = ?), 0), COALESCE((SELECT seq FROM acked WHERE id = ?), 0))
        """

    /// The record with `id`, nil when there is none (or it is deleted).
    public func record(_ id: String) throws(GatehouseError) -> Record? {
        try read { db in try Self.overlay(db, where: "id = ?", [id.lowercased()]).first }
    }

    /// The records of `type`, by id.
    public func records(ofType type: String) throws(GatehouseError) -> [Record] {
        try read { db in try Self.overlay(db, where: "type = ?", [type]) }
    }

    /// How many saved changes have not reached the server yet.
    public func pendingCount() throws(GatehouseError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending") ?? 0 }
    }

    /// The server's copy with the unsent changes on top, for the records matching `condition`.
    private static func overlay(_ db: Database, where condition: String, _ arguments: StatementArguments) throws
        -> [Record]
    {
        var records: [String: (type: String, fields: [String: FieldValue], mask: Int64?, pending: Bool)] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM record WHERE \(condition)", arguments: arguments) {
            records[row["id"]] = (row["type"], try decode(row["fields"]), row["dept_mask"], false)
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
            record.fields.merge(try decode(row["fields"])) { $1 }
            if let mask: Int64 = row["dept_mask"] { record.mask = mask }
            record.pending = true
            records[id] = record
        }
        return records.sorted { $0.key < $1.key }.map {
            Record(
                id: $0.key, type: $0.value.type, fields: $0.value.fields, deptMask: $0.value.mask,
                hasPendingChanges: $0.value.pending)
        }
    }

    // MARK: Syncing

    /// Pushes every saved change and pulls the server's, now; answers when both are done. The background sync does
    /// the same on its own after saves, live pokes and reconnects.
    /// A session that ended or an access change is checked against the account's company list: out of the company,
    /// the store is wiped (and `companyAccessRevoked` thrown).
    public func sync() async throws(GatehouseError) {
        // Runs after the sync before it, so two never interleave their pushes.
        let task = Task { [previous = running] in
            _ = try? await previous?.value
            try await self.pushAndPull()
        }
        running = task
        do {
            try await task.value
        } catch let error as GatehouseError {
            switch error {
            case .sessionExpired, .companyAccessRevoked:
                guard try await gatehouse.companies.confirmMembership(companyID) else { throw .companyAccessRevoked }
                throw .notSignedIn
            default: throw error
            }
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    /// Stops syncing and closes the database; the unsent changes stay for the next launch.
    public func close() {
        stop()
        broadcast.finish()
    }

    /// Ends the background tasks and closes the database.
    private func stop() {
        for task in tasks { task.cancel() }
        tasks = []
        wakes.finish()
        liveWakes.finish()
        try? database?.close()
        database = nil
    }

    private func pushAndPull() async throws {
        try await push()
        try await pull()
        broadcast.send(.synced)
    }

    /// Sends the pending changes in order, in batches of up to 500. A batch over the server's body limit is halved
    /// until it fits; a single change too large for any batch is dropped with `refused(payload_too_large)`, so it
    /// never blocks the ones after it.
    private func push() async throws {
        var limit = 500
        while true {
            let size = limit
            let batch = try read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM pending ORDER BY ord LIMIT ?", arguments: [size])
            }
            guard !batch.isEmpty else { return }
            var sent: [String: [String: FieldValue]] = [:]
            var mutations: [Components.Schemas.Mutation] = []
            for row in batch {
                let fields = try Self.decode(row["fields"])
                sent[row["mid"]] = fields
                let op: String = row["op"]
                mutations.append(
                    .init(
                        mid: row["mid"], id: row["id"], _type: row["type"], op: op == "delete" ? .delete : .upsert,
                        base: row["base"], fields: op == "delete" ? nil : fields.mapValues(\.json),
                        deptMask: row["dept_mask"]))
            }
            let body = Components.Schemas.SyncPushRequest(clientId: clientID, mutations: mutations)
            guard let answer = try await send(body) else {
                if batch.count > 1 {
                    limit = batch.count / 2
                } else if let mid: String = batch.first?["mid"], let id: String = batch.first?["id"] {
                    try write { db in try db.execute(sql: "DELETE FROM pending WHERE mid = ?", arguments: [mid]) }
                    broadcast.send(.refused(recordID: id, code: "payload_too_large"))
                }
                continue
            }
            let events = try write { db in
                var events: [StoreEvent] = []
                for result in answer.results {
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
                    }
                    switch result.status {
                    case .applied: break
                    case .merged:
                        for (field, kept) in result.rejectedFields ?? [:] {
                            events.append(
                                .conflict(
                                    FieldConflict(
                                        recordID: result.id, field: field, yours: sent[result.mid]?[field],
                                        kept: FieldValue(kept))))
                        }
                    case .refused: events.append(.refused(recordID: result.id, code: result.code ?? "refused"))
                    }
                }
                return events
            }
            for event in events { broadcast.send(event) }
        }
    }

    /// One push; nil when the batch is larger than the server's body limit.
    private func send(_ body: Components.Schemas.SyncPushRequest) async throws -> Components.Schemas.SyncPushResponse? {
        do {
            return try await inCompany { client, cid in
                try await client.syncPush(path: .init(cid: cid), body: .json(body)).ok.body.json
            }
        } catch let error {
            if error.code == "payload_too_large" { return nil }
            throw error
        }
    }

    private func pull() async throws {
        var token = try read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'token'") }
        while true {
            let request = Components.Schemas.SyncPullRequest(token: token, limit: 1000)
            let page: Components.Schemas.SyncPullResponse
            do {
                page = try await inCompany { client, cid in
                    try await client.syncPull(path: .init(cid: cid), body: .json(request)).ok.body.json
                }
            } catch let error {
                switch error.code {
                case "resync_required":
                    try await resync()
                    return
                case "invalid_sync_token":
                    // A token this member cannot use (another account's copy): start over.
                    try write { db in try db.execute(sql: "DELETE FROM record; DELETE FROM meta WHERE key = 'token'") }
                    token = nil
                    continue
                default: throw error
                }
            }
            try apply(page.changes, revoked: page.revoked, token: page.token)
            token = page.token
            guard page.hasMore else { return }
        }
    }

    /// The digest exchange, for a token older than the server's log: the device's ids and seqs go up in chunks, and
    /// what differs comes back.
    private func resync() async throws {
        var token: String?
        var after: String?
        while true {
            let from = after ?? ""
            let known = try read { db in
                try Row.fetchAll(
                    db, sql: "SELECT id, seq FROM record WHERE id > ? ORDER BY id LIMIT 5000", arguments: [from]
                ).map { Components.Schemas.DigestEntry(id: $0["id"], seq: $0["seq"]) }
            }
            let body = Components.Schemas.SyncDigestRequest(
                token: token, after: after, known: known, complete: known.count < 5000)
            let answer = try await inCompany { client, cid in
                try await client.syncDigest(path: .init(cid: cid), body: .json(body)).ok.body.json
            }
            try apply(answer.changes, revoked: answer.revoked, token: answer.through == nil ? answer.token : nil)
            guard let through = answer.through else { return }
            token = answer.token
            after = through
        }
    }

    /// Applies a page of the server's changes in one transaction, with its token when given.
    private func apply(_ changes: [Components.Schemas.RecordChange], revoked: [String], token: String?) throws {
        let changed = try write { db in
            var changed = Set<String>()
            for change in changes {
                changed.insert(change.id)
                if change.deleted {
                    try db.execute(sql: "DELETE FROM record WHERE id = ?", arguments: [change.id])
                    continue
                }
                var fields =
                    try String.fetchOne(db, sql: "SELECT fields FROM record WHERE id = ?", arguments: [change.id])
                    .map(Self.decode) ?? [:]
                fields.merge(change.fields.mapValues(FieldValue.init)) { $1 }
                try db.execute(
                    sql: """
                        INSERT INTO record (id, type, fields, dept_mask, seq) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET type = excluded.type, fields = excluded.fields,
                            dept_mask = excluded.dept_mask, seq = excluded.seq
                        """,
                    arguments: [change.id, change._type, try Self.encode(fields), change.deptMask, change.seq])
            }
            for id in revoked {
                changed.insert(id)
                try db.execute(sql: "DELETE FROM record WHERE id = ?", arguments: [id])
            }
            if let token {
                try db.execute(
                    sql:
                        "INSERT INTO meta (key, value) VALUES ('token', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    arguments: [token])
            }
            return changed
        }
        if !changed.isEmpty { broadcast.send(.changed(changed)) }
    }

    /// Runs a call in this company's session; an answer that the account is out of the company wipes the store.
    private func inCompany<T: Sendable>(
        _ body: @escaping @Sendable (Client, String) async throws -> T
    ) async throws(GatehouseError) -> T {
        let sessions = gatehouse.auth.companySessions
        guard await sessions.current?.companyID == companyID else { throw .notSignedIn }
        let cid = companyID
        return try await sessions.authorized { try await body($0, cid) }
    }

    // MARK: The background

    /// Syncs after each wake (saves, pokes, logins), retrying with backoff while the network fails. A session that
    /// ended or an access change is checked against the account's company list: out of the company, the store is
    /// wiped.
    private func runEngine(_ wakeStream: AsyncStream<Void>) async {
        var delay = gatehouse.retryBase
        for await _ in wakeStream {
            do throws(GatehouseError) {
                try await sync()
                delay = gatehouse.retryBase
            } catch .companyAccessRevoked {
                return  // wiped
            } catch {
                broadcast.send(.syncFailed(error))
                // Unreachable: try again with backoff. Otherwise a company login (or switch back) wakes this again.
                guard case .network = error else { continue }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, gatehouse.retryMax)
                wakes.yield()
            }
        }
    }

    /// Keeps the live stream open while the client is logged in to this company; each new seq wakes the sync.
    private func runLive(_ liveStream: AsyncStream<Void>) async {
        var delay = gatehouse.retryBase
        for await _ in liveStream {
            while !Task.isCancelled {
                let sessions = gatehouse.auth.companySessions
                guard await sessions.current?.companyID == companyID,
                    let token = try? await sessions.valid().accessToken
                else { break }
                do {
                    for try await poke in gatehouse.live.pokes(companyID: companyID, token: token) {
                        delay = gatehouse.retryBase
                        switch poke {
                        case .seq(let seq):
                            if seq != announced {
                                announced = seq
                                wakes.yield()
                            }
                        case .closed:
                            wakes.yield()
                        }
                    }
                } catch {
                    wakes.yield()
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, gatehouse.retryMax)
            }
        }
    }

    /// Follows the client's sessions: a login to this company starts syncing, a removal from it wipes the store.
    private func watch(_ events: AsyncStream<AuthEvent>) async {
        for await event in events {
            switch event {
            case .companyChanged(companyID: companyID):
                wakes.yield()
                liveWakes.yield()
            case .companyAccessRevoked(companyID: companyID):
                wipe()
            default: break
            }
        }
    }

    /// Deletes every local record and unsent change of the company, and the database file.
    private func wipe() {
        stop()
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: file.path + suffix)
        }
        broadcast.send(.wiped)
    }

    // MARK: The database

    private func read<T>(_ body: (Database) throws -> T) throws(GatehouseError) -> T {
        guard let database else { throw .companyAccessRevoked }
        do {
            return try database.read(body)
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(GatehouseError) -> T {
        guard let database else { throw .companyAccessRevoked }
        do {
            return try database.write(body)
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    private static func newMID() -> String { "m-" + UUID().uuidString.lowercased() }

    private static func encode(_ fields: [String: FieldValue]) throws(GatehouseError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(fields.mapValues(\.json)), as: UTF8.self)
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    private static func decode(_ text: String) throws -> [String: FieldValue] {
        try JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8)).mapValues(FieldValue.init)
    }
}
