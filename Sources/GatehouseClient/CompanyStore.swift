import Foundation
import GRDB
import GatehouseAPI

/// One company's records on this device, offline first: its own GRDB database holds the server's copy of each record,
/// the changes saved here and not yet confirmed, and the change token. A save returns at once; pushing, pulling and
/// the live stream run in the background while the client is logged in to the company.
///
/// Reads show the server's copy with the unsent changes on top. `events` tells the UI which records changed, each
/// field that lost a conflict, refusals, and the wipe that follows a removal from the company.
///
/// The database and its statements are `CompanyDatabase`; the push and pull are in `CompanyStore+Sync.swift`, the
/// background tasks that run them in `CompanyStore+Background.swift`.
public actor CompanyStore {
    /// The company.
    public nonisolated let companyID: String
    /// The database file.
    public nonisolated let file: URL
    private var database: CompanyDatabase?
    let clientID: String
    let gatehouse: GatehouseClient
    let broadcast = Broadcast<StoreEvent>()
    let wakes: AsyncStream<Void>.Continuation
    let liveWakes: AsyncStream<Void>.Continuation
    private var tasks: [Task<Void, Never>] = []
    /// The last sync started; the next one waits for it.
    var running: Task<Void, any Error>?
    /// The last seq the live stream announced, so the periodic repeat of the same seq pulls nothing.
    var announced: Int64?

    /// What happens to the store. Each call makes a new stream.
    public nonisolated var events: AsyncStream<StoreEvent> { broadcast.stream() }

    init(companyID: String, directory: URL, client: GatehouseClient) async throws(GatehouseError) {
        self.companyID = companyID
        self.gatehouse = client
        file = directory.appendingPathComponent(
            "company-\(companyID.filter { $0.isLetter || $0.isNumber || $0 == "-" }).sqlite")
        let database: CompanyDatabase
        do {
            database = try CompanyDatabase(file: file, in: directory)
        } catch {
            throw .localStore(String(describing: error))
        }
        self.database = database
        clientID = database.clientID
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
    public func record(_ id: String) throws(GatehouseError) -> Record? {
        try local { try $0.overlay(where: "id = ?", [id.lowercased()]).first }
    }

    /// The records of `type`, by id.
    public func records(ofType type: String) throws(GatehouseError) -> [Record] {
        try local { try $0.overlay(where: "type = ?", [type]) }
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

    /// Ends the background tasks and closes the database.
    private func stop() {
        for task in tasks { task.cancel() }
        tasks = []
        wakes.finish()
        liveWakes.finish()
        try? database?.close()
        database = nil
    }

    /// Deletes every local record and unsent change of the company, and the database file.
    func wipe() {
        stop()
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
