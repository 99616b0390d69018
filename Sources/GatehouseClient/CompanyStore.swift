import Foundation
import GRDB
import GatehouseClientAPI

/// One company's records on this device, offline first: its own GRDB database holds the server's copy of each record,
/// the changes saved here and not yet confirmed, and the change token. A save returns at once.
///
/// Opening a store (`GatehouseClient.openCompanyStore(companyID:directory:)`) reads the database and nothing else, so
/// the app can subscribe to `events` and observe records first; then `sync(progress:)` brings it up to date and
/// answers when it is, and `startSyncing()` keeps it so in the background (pushing after saves, pulling on the live
/// stream's pokes) while the client is logged in to the company.
///
/// Reads show the server's copy with the unsent changes on top. `events` tells the UI which records changed, each
/// field that lost a conflict, refusals, each completed sync, and the wipe that follows a removal from the company.
///
/// The database and its statements are `CompanyDatabase`; the push and pull are in `CompanyStore+Sync.swift`, the
/// background tasks that run them in `CompanyStore+Background.swift`, typed records in `Store/`.
public actor CompanyStore {
    /// The company.
    public nonisolated let companyID: String
    /// The database file.
    public nonisolated let file: URL
    private var database: CompanyDatabase?
    /// Whether the store is neither closed nor wiped.
    var isOpen: Bool { database != nil }
    /// The database as opened, for observations, which end when it closes.
    nonisolated let opened: CompanyDatabase
    let clientID: String
    let gatehouse: GatehouseClient
    /// Records per pulled page.
    let pageSize: Int
    let broadcast = Broadcast<StoreEvent>()
    let wakes: AsyncStream<Void>.Continuation
    let liveWakes: AsyncStream<Void>.Continuation
    /// The streams the background tasks read, until `startSyncing()` starts them.
    private var idle: (wakes: AsyncStream<Void>, live: AsyncStream<Void>)?
    private var tasks: [Task<Void, Never>] = []
    /// The syncs: the last one made (the next waits for it), the one not started yet that new callers join, how many
    /// were made, and what each caller waiting on one wants to hear of its progress.
    var tail: Task<SyncSummary, any Error>?
    var queued: (number: Int, task: Task<SyncSummary, any Error>)?
    var runs = 0
    var listeners: [Int: [@Sendable (SyncProgress) -> Void]] = [:]
    /// The last seq the live stream announced, so the periodic repeat of the same seq pulls nothing.
    var announced: Int64?
    /// A seq this device holds every change up to, after a completed sync (nil before one): a poke at or below it has
    /// nothing new.
    var syncedThrough: Int64?
    /// Whether the next wake must sync even with nothing announced or saved (a start, a login, a retry).
    var mustSync = false

    /// What happens to the store. Each call makes a new stream.
    public nonisolated var events: AsyncStream<StoreEvent> { broadcast.stream() }

    /// Whether `startSyncing()` was called.
    public var isSyncing: Bool { idle == nil && database != nil }

    /// Opens (or makes) the database of `companyID` in `directory`; it syncs from `startSyncing()` on.
    init(companyID: String, directory: URL, client: GatehouseClient, pageSize: Int) async throws(GatehouseError) {
        self.companyID = companyID
        self.gatehouse = client
        self.pageSize = min(max(pageSize, 1), 5000)
        file = directory.appendingPathComponent(
            "company-\(companyID.filter { $0.isLetter || $0.isNumber || $0 == "-" }).sqlite")
        let database: CompanyDatabase
        do {
            database = try CompanyDatabase(file: file, in: directory)
        } catch {
            throw .localStore(String(describing: error))
        }
        self.database = database
        opened = database
        clientID = database.clientID
        let (wakeStream, wakes) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (liveStream, liveWakes) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.wakes = wakes
        self.liveWakes = liveWakes
        idle = (wakeStream, liveStream)
        // The watch runs even before syncing: a removal from the company wipes the store whatever the app does.
        let authEvents = client.auth.events
        tasks = [Task { [weak self] in await self?.watch(authEvents) }]
    }

    /// Starts syncing in the background: at once unless a sync already completed, after each save, on each change
    /// the live stream announces, and again after each login to the company, retrying with backoff while the network
    /// fails. Failures arrive as `syncFailed` events. Calling it again changes nothing.
    public func startSyncing() {
        guard let idle, database != nil else { return }
        self.idle = nil
        if syncedThrough == nil { mustSync = true }
        tasks += [
            Task { [weak self] in await self?.runEngine(idle.wakes) },
            Task { [weak self] in await self?.runLive(idle.live) },
        ]
        wakes.yield()
        liveWakes.yield()
    }

    // MARK: Reading and saving

    /// Saves fields of a record (a new one when `id` is nil) and returns its id at once; the change is kept until
    /// the server confirms it, through crashes and relaunches. Only the given fields change.
    @discardableResult
    public func save(
        type: String, id: String? = nil, fields: [String: FieldValue], deptMask: Int64? = nil
    ) throws(GatehouseError) -> String {
        let id = id?.lowercased() ?? UUID().uuidString.lowercased()
        let encoded = try CompanyDatabase.encode(fields)
        try local { try $0.saveChange(id: id, type: type, fields: encoded, deptMask: deptMask) }
        broadcast.send(.changed([id]))
        wakes.yield()
        return id
    }

    /// Deletes a record; like a save, it returns at once and reaches the server in the background.
    public func delete(id: String) throws(GatehouseError) {
        let id = id.lowercased()
        try local { try $0.deleteChange(id: id) }
        broadcast.send(.changed([id]))
        wakes.yield()
    }

    /// The record with `id`, nil when there is none (or it is deleted).
    public func record(_ id: String) throws(GatehouseError) -> StoreRecord? {
        try local { try $0.overlay(where: "id = ?", [id.lowercased()]).first }
    }

    /// The records of `type`, by id.
    public func records(ofType type: String) throws(GatehouseError) -> [StoreRecord] {
        try local { try $0.overlay(where: "type = ?", [type]) }
    }

    /// How many records of `type` there are, as `records(ofType:)` would return them, counted in the database
    /// without reading them.
    public func count(ofType type: String) throws(GatehouseError) -> Int {
        try local { try $0.count(type: type) }
    }

    /// How many records of every type there are, counted in the database without reading them.
    public func count() throws(GatehouseError) -> Int {
        try local { try $0.count(type: nil) }
    }

    /// How many saved changes have not reached the server yet.
    public func pendingCount() throws(GatehouseError) -> Int {
        try local { try $0.pendingCount() }
    }

    // MARK: Closing

    /// Stops syncing and closes the database; the unsent changes stay for the next launch.
    public func close() {
        stop()
        broadcast.finish()
    }

    /// Ends the background tasks and closes the database, ending its observations (with `companyAccessRevoked`
    /// when `wiped`).
    private func stop(_ availability: CompanyDatabase.Availability = .closed) {
        for task in tasks { task.cancel() }
        tasks = []
        idle = nil
        wakes.finish()
        liveWakes.finish()
        try? database?.close(availability)
        database = nil
    }

    /// Deletes every local record and unsent change of the company, and the database file.
    func wipe() {
        stop(.wiped)
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: file.path + suffix)
        }
        broadcast.send(.wiped)
    }

    /// Runs `body` on the open database; once the store is wiped or closed, `companyAccessRevoked`.
    func local<T>(_ body: (CompanyDatabase) throws -> T) throws(GatehouseError) -> T {
        guard let database else { throw .companyAccessRevoked }
        do {
            return try body(database)
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .localStore(String(describing: error))
        }
    }
}
