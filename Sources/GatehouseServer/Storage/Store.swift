import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresKit
import SQLKit
import SQLiteKit
import ServiceLifecycle

/// The connection pool to one store, and its lifecycle: it migrates at start (retrying while the
/// database is down), reports readiness, and closes when the service group shuts down.
public final class Store: Service, Sendable {
    /// Where the data lives.
    public let location: StoreLocation
    let logger: Logger
    /// The database drivers' logger: never below `info`, whatever `--log-level` says. At `debug` the drivers log
    /// every statement with its bound values (addresses, password and code digests), and no log may carry those.
    let driverLogger: Logger
    private let backend: Backend
    /// SQLite's own threads: more than its connections, so the connection holding the write lock always has a
    /// thread to finish on while others wait in SQLite's busy handler (which retries without yielding).
    private let threadPool: NIOThreadPool?
    private let state = NIOLockedValueBox(State())
    private let writeLock = AsyncLock()
    /// Whether anything was written since the last WAL checkpoint (SQLite).
    private let written = NIOLockedValueBox(false)
    private let inUse = NIOLockedValueBox(0)
    private let inUseGauge: Gauge
    private let maxGauge: Gauge
    private let readyGauge: Gauge
    /// Who hears of what committed transactions changed (the session and user cache).
    private let observers = NIOLockedValueBox<[@Sendable (CacheInvalidation) -> Void]>([])

    /// The channel instances hear each other on (PostgreSQL `LISTEN`/`NOTIFY`): sync pokes and cache invalidations.
    static let notifyChannel = "gatehouse_sync"

    // The AsyncKit pool (PostgreSQL) predates Sendable checking; it guards its own state with locks.
    private enum Backend: @unchecked Sendable {
        case sqlite(SQLiteConnections)
        case postgres(EventLoopGroupConnectionPool<PostgresConnectionSource>)
    }

    private struct State {
        var schemaVersion: Int?
        var closed = false
        /// Who waits for the first migration (`migrated()`).
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Opens a pool to `location`. Nothing connects until the first query; an SQLite file's folder is created.
    public init(
        location: StoreLocation,
        connectionsPerLoop: Int = 4,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws {
        self.location = location
        self.logger = logger
        var driverLogger = logger
        driverLogger.logLevel = max(logger.logLevel, .info)
        self.driverLogger = driverLogger
        let labels = [("store", location.kind)]
        inUseGauge = Gauge(label: "gatehouse_store_connections_in_use", dimensions: labels)
        maxGauge = Gauge(label: "gatehouse_store_connections_max", dimensions: labels)
        readyGauge = Gauge(label: "gatehouse_store_ready", dimensions: labels)
        switch location {
        case .sqlite(let path):
            // The file holds password digests and sealed keys: 0600 from its first byte, in a 0700 folder when new.
            try DataFolder.protectDatabase(path)
            let loops = eventLoopGroup.makeIterator().reduce(0) { count, _ in count + 1 }
            let pool = NIOThreadPool(numberOfThreads: connectionsPerLoop * loops + 1)
            pool.start()
            threadPool = pool
            let source = TunedSQLiteSource(
                base: SQLiteConnectionSource(
                    configuration: .init(storage: .file(path: path), enableForeignKeys: true), threadPool: pool))
            backend = .sqlite(
                SQLiteConnections(
                    source: source, limit: connectionsPerLoop * loops, eventLoopGroup: eventLoopGroup,
                    logger: driverLogger))
        case .postgres(let url, let searchPath):
            threadPool = nil
            var configuration = try SQLPostgresConfiguration(url: url)
            if let searchPath { configuration.searchPath = [searchPath] }
            configuration.coreConfiguration.options.connectTimeout = StoreOutage.connectTimeout
            backend = .postgres(
                EventLoopGroupConnectionPool(
                    source: PostgresConnectionSource(sqlConfiguration: configuration),
                    maxConnectionsPerEventLoop: connectionsPerLoop,
                    requestTimeout: StoreOutage.connectionWaitTimeout, logger: driverLogger, on: eventLoopGroup))
        }
        maxGauge.record(connectionsPerLoop * eventLoopGroup.makeIterator().reduce(0) { count, _ in count + 1 })
        readyGauge.record(0)
    }

    /// A database handle for queries; each query takes a pooled connection. A query that finds the store unreachable
    /// tells the request's `StoreOutage.RequestReport`, if any.
    public var database: any SQLDatabase {
        switch backend {
        case .sqlite(let connections): OutageReportingDatabase(base: SQLitePoolDatabase(connections: connections))
        case .postgres(let pool): OutageReportingDatabase(base: pool.database(logger: driverLogger).sql())
        }
    }

    /// Runs `body` on one connection inside a transaction, committing when it returns and rolling back when it throws.
    /// Every write goes through here. On SQLite, writers take turns in this process: SQLite allows one writer at a
    /// time and its busy handler would otherwise spin on the few threads that run queries.
    /// Also collects what the body changed for the caches (`TransactionChanges`): on PostgreSQL it is announced to
    /// the other instances inside the transaction, so they hear of it when, and only if, it commits; this instance's
    /// observers hear of it after the commit.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws
        -> T
    {
        guard case .sqlite = location else { return try await transaction(begin: "BEGIN", body) }
        return try await takingTurns { try await transaction(begin: "BEGIN IMMEDIATE", body) }
    }

    /// Runs `body`, a single statement that is atomic on its own (its triggers included), with no transaction around
    /// it: one trip to the store where `transaction` takes three (BEGIN and COMMIT around it). Writers take turns on
    /// SQLite as in `transaction`. What it changes is not announced to the caches: only for statements that change
    /// nothing they hold.
    func autocommit<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        guard case .sqlite = location else { return try await withConnection(body) }
        return try await takingTurns { try await withConnection(body) }
    }

    /// Runs `write` holding this process's SQLite write lock, and marks the WAL as having something to checkpoint.
    private func takingTurns<T: Sendable>(_ write: () async throws -> T) async throws -> T {
        await writeLock.lock()
        written.withLockedValue { $0 = true }
        do {
            let result = try await write()
            await writeLock.unlock()
            return result
        } catch {
            await writeLock.unlock()
            throw error
        }
    }

    private func transaction<T: Sendable>(
        begin: String, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let changes = TransactionChanges()
        let result = try await withConnection { [location] db in
            try await db.raw(SQLQueryString(begin)).run()
            do {
                let result = try await TransactionChanges.$current.withValue(changes) { try await body(db) }
                if case .postgres = location {
                    let notifications = NotificationRepository(db: db)
                    for payload in changes.collected.payloads { try await notifications.notify(payload) }
                }
                try await db.raw("COMMIT").run()
                return result
            } catch {
                try? await db.raw("ROLLBACK").run()
                throw error
            }
        }
        let collected = changes.collected
        if !collected.isEmpty { invalidate(collected) }
        return result
    }

    /// Calls `observer` with what each committed transaction changed (and what other instances announce).
    func onCommit(_ observer: @escaping @Sendable (CacheInvalidation) -> Void) {
        observers.withLockedValue { $0.append(observer) }
    }

    /// Tells the observers that `changes` happened: after a commit here, or when another instance announces one.
    func invalidate(_ changes: CacheInvalidation) {
        for observer in observers.withLockedValue({ $0 }) { observer(changes) }
    }

    /// Runs `body` on one pooled connection, counted in the pool gauges.
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    {
        inUseGauge.record(
            inUse.withLockedValue {
                $0 += 1; return $0
            })
        defer {
            inUseGauge.record(
                inUse.withLockedValue {
                    $0 -= 1; return $0
                })
        }
        // PostgreSQL's pool runs `body` in a task of its own, which has none of the request's task locals: the
        // request id goes along by hand, so the audit events made inside carry it (`AuditEvent.requestID`).
        let requestID = RequestScope.requestID
        return try await database.withSession { db in
            try await RequestScope.$requestID.withValue(requestID) { try await body(db) }
        }
    }

    /// Runs `body` on a PostgreSQL connection of its own, outside the pool (for LISTEN), and closes it afterwards.
    /// Nil on SQLite.
    func withDedicatedPostgresConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws
        -> T?
    {
        guard case .postgres(let pool) = backend else { return nil }
        let connection = try await pool.source.makeConnection(logger: driverLogger, on: pool.eventLoopGroup.any()).get()
        do {
            let result = try await body(connection)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// The schema version applied by this process, or nil before migrations have run.
    public var schemaVersion: Int? { state.withLockedValue { $0.schemaVersion } }

    /// Applies pending migrations; a no-op when the schema is current.
    @discardableResult
    public func migrate(_ migrations: [Migration] = Migrations.all) async throws -> MigrationReport {
        let report = try await Migrator(store: self, migrations: migrations).run()
        let waiters = state.withLockedValue { state in
            state.schemaVersion = report.version
            defer { state.waiters = [] }
            return state.waiters
        }
        readyGauge.record(1)
        for waiter in waiters { waiter.resume() }
        return report
    }

    /// Returns once the schema is migrated, or the store closed.
    func migrated() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = state.withLockedValue { state in
                guard state.schemaVersion == nil, !state.closed else { return true }
                state.waiters.append(waiter)
                return false
            }
            if done { waiter.resume() }
        }
    }

    /// True when the store answers a trivial query and migrations have been applied.
    public func isReady() async -> Bool {
        guard schemaVersion != nil else { return false }
        do {
            _ = try await database.raw("SELECT 1 AS one").first()
            return true
        } catch {
            return false
        }
    }

    /// Migrates, retrying with backoff while the database cannot be reached, then waits for shutdown and closes.
    public func run() async throws {
        var nextDelay = Duration.milliseconds(250)
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let delay = nextDelay
            do {
                let report = try await migrate()
                logger.debug(
                    "store ready",
                    metadata: [
                        "store": "\(location)", "schema": "\(report.version)", "applied": "\(report.applied.count)",
                    ])
                break
            } catch let error as MigrationError {
                await close()
                throw error
            } catch {
                logger.warning(
                    "store unavailable, retrying",
                    metadata: ["store": "\(location)", "retry_in": "\(delay)", "error": "\(String(reflecting: error))"])
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
                nextDelay = min(delay * 2, .seconds(10))
            }
        }
        if case .sqlite = location {
            await checkpointUntilShutdown()
        } else {
            try? await gracefulShutdown()
        }
        await close()
    }

    /// How often the SQLite WAL is folded into the file while the server runs and writes. Often, so each checkpoint
    /// is small: at 500 ms, or 5 s, a refresh load's p99 rose with the pages each checkpoint wrote and synced.
    static let checkpointInterval = Duration.milliseconds(100)

    /// Folds the SQLite WAL into the file every `checkpointInterval` in which something was written (through
    /// `transaction` or `autocommit`; writes of other processes wait for the next), until shutdown, on a connection of
    /// the pool and outside the write lock: a passive checkpoint copies what no reader still needs and lets writers go
    /// on meanwhile. The last connection to close checkpoints what is left.
    private func checkpointUntilShutdown() async {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.checkpointInterval) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            guard
                written.withLockedValue({ written in
                    defer { written = false }; return written
                })
            else { continue }
            do {
                _ = try await database.raw("PRAGMA wal_checkpoint(PASSIVE)").all()
            } catch {
                logger.warning("WAL checkpoint failed", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }

    /// Closes every connection; later queries fail.
    public func close() async {
        let (alreadyClosed, waiters) = state.withLockedValue { state in
            defer {
                state.closed = true
                state.waiters = []
            }
            return (state.closed, state.waiters)
        }
        for waiter in waiters { waiter.resume() }
        guard !alreadyClosed else { return }
        readyGauge.record(0)
        switch backend {
        case .sqlite(let connections): await connections.close()
        case .postgres(let pool): try? await pool.shutdownAsync()
        }
        try? await threadPool?.shutdownGracefully()
    }

    /// Whether `close()` has run.
    public var isClosed: Bool { state.withLockedValue { $0.closed } }
}
