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

/// Which database holds Gatehouse's data.
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    /// `searchPath` puts every table in one schema; tests use it to keep databases apart.
    case postgres(url: String, searchPath: String? = nil)

    /// Short store name for logs and readiness: `sqlite` or `postgres`.
    public var kind: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres: "postgres"
        }
    }

    /// A description safe for logs: the file path, or host, port and database without credentials.
    public var description: String {
        switch self {
        case .sqlite(let path):
            return "sqlite at \(path)"
        case .postgres(let url, _):
            guard let parsed = URL(string: url) else { return "postgres" }
            let database = parsed.path.isEmpty ? "" : parsed.path
            return "postgres at \(parsed.host ?? "localhost"):\(parsed.port ?? 5432)\(database)"
        }
    }
}

/// Validation of PostgreSQL URLs, kept next to the store that uses them.
enum SQLPostgresURL {
    static func validate(_ url: String) throws -> SQLPostgresConfiguration {
        try SQLPostgresConfiguration(url: url)
    }
}

/// The connection pool to one store, and its lifecycle: it migrates at start (retrying while the
/// database is down), reports readiness, and closes when the service group shuts down.
public final class Store: Service, Sendable {
    /// Where the data lives.
    public let location: StoreLocation
    let logger: Logger
    private let backend: Backend
    /// SQLite's own threads: more than its connections, so the connection holding the write lock always has a
    /// thread to finish on while others wait in SQLite's busy handler (which retries without yielding).
    private let threadPool: NIOThreadPool?
    private let state = NIOLockedValueBox(State())
    private let writeLock = AsyncLock()
    private let inUse = NIOLockedValueBox(0)
    private let inUseGauge: Gauge
    private let maxGauge: Gauge
    private let readyGauge: Gauge
    /// Who hears of what committed transactions changed (the session and user cache).
    private let observers = NIOLockedValueBox<[@Sendable (CacheInvalidation) -> Void]>([])

    /// The channel instances hear each other on (PostgreSQL `LISTEN`/`NOTIFY`): sync pokes and cache invalidations.
    static let notifyChannel = "gatehouse_sync"

    // The AsyncKit pool predates Sendable checking; it guards its own state with locks.
    private enum Backend: @unchecked Sendable {
        case sqlite(EventLoopGroupConnectionPool<TunedSQLiteSource>)
        case postgres(EventLoopGroupConnectionPool<PostgresConnectionSource>)
    }

    private struct State {
        var schemaVersion: Int?
        var closed = false
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
                EventLoopGroupConnectionPool(
                    source: source, maxConnectionsPerEventLoop: connectionsPerLoop, logger: logger, on: eventLoopGroup))
        case .postgres(let url, let searchPath):
            threadPool = nil
            var configuration = try SQLPostgresConfiguration(url: url)
            if let searchPath { configuration.searchPath = [searchPath] }
            configuration.coreConfiguration.options.connectTimeout = StoreOutage.connectTimeout
            backend = .postgres(
                EventLoopGroupConnectionPool(
                    source: PostgresConnectionSource(sqlConfiguration: configuration),
                    maxConnectionsPerEventLoop: connectionsPerLoop,
                    requestTimeout: StoreOutage.connectionWaitTimeout, logger: logger, on: eventLoopGroup))
        }
        maxGauge.record(connectionsPerLoop * eventLoopGroup.makeIterator().reduce(0) { count, _ in count + 1 })
        readyGauge.record(0)
    }

    /// A database handle for queries; each query takes a pooled connection. A query that finds the store unreachable
    /// tells the request's `StoreOutage.Witness`, if any.
    public var database: any SQLDatabase {
        switch backend {
        case .sqlite(let pool): WitnessedDatabase(base: SQLitePoolDatabase(pool: pool, logger: logger))
        case .postgres(let pool): WitnessedDatabase(base: pool.database(logger: logger).sql())
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
        await writeLock.lock()
        do {
            let result = try await transaction(begin: "BEGIN IMMEDIATE", body)
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
        return try await database.withSession(body)
    }

    /// Runs `body` on a PostgreSQL connection of its own, outside the pool (for LISTEN), and closes it afterwards.
    /// Nil on SQLite.
    func withDedicatedPostgresConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws
        -> T?
    {
        guard case .postgres(let pool) = backend else { return nil }
        let connection = try await pool.source.makeConnection(logger: logger, on: pool.eventLoopGroup.any()).get()
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
        state.withLockedValue { $0.schemaVersion = report.version }
        readyGauge.record(1)
        return report
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
        try? await gracefulShutdown()
        await close()
    }

    /// Closes every connection; later queries fail.
    public func close() async {
        let alreadyClosed = state.withLockedValue { state in
            defer { state.closed = true }
            return state.closed
        }
        guard !alreadyClosed else { return }
        readyGauge.record(0)
        switch backend {
        case .sqlite(let pool): try? await pool.shutdownAsync()
        case .postgres(let pool): try? await pool.shutdownAsync()
        }
        try? await threadPool?.shutdownGracefully()
    }

    /// Whether `close()` has run.
    public var isClosed: Bool { state.withLockedValue { $0.closed } }
}

/// An SQLKit database over the SQLite pool: each query borrows a connection, a session keeps one.
private struct SQLitePoolDatabase: SQLDatabase, @unchecked Sendable {
    let pool: EventLoopGroupConnectionPool<TunedSQLiteSource>
    let logger: Logger

    var eventLoop: any EventLoop { pool.eventLoopGroup.any() }
    var dialect: any SQLDialect { SQLiteDialect() }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<
        Void
    > {
        pool.withConnection(logger: logger) { $0.sql().execute(sql: query, onRow) }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        let connection = try await pool.requestConnection(logger: logger).get()
        defer { pool.releaseConnection(connection, logger: logger) }
        return try await closure(connection.sql())
    }
}

/// A first-come, first-served lock that suspends waiters instead of blocking threads.
actor AsyncLock {
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        guard locked else {
            locked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            locked = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// SQLite connections set up for a server: in WAL mode, `synchronous=NORMAL` syncs at checkpoints rather than on
/// every commit. The database cannot be corrupted by a crash; a power cut may lose the last commits.
/// A lock held by another process (a backup, an operator's `sqlite3`) is waited for a few seconds, then the request
/// fails with `store_unavailable`: SQLiteNIO's own busy handler would retry forever, on one of the store's threads.
struct TunedSQLiteSource: ConnectionPoolSource {
    let base: SQLiteConnectionSource

    func makeConnection(logger: Logger, on eventLoop: any EventLoop) -> EventLoopFuture<SQLiteConnection> {
        base.makeConnection(logger: logger, on: eventLoop).flatMap { connection in
            connection.query("PRAGMA synchronous = NORMAL").flatMap { _ in
                connection.query("PRAGMA busy_timeout = \(StoreOutage.sqliteBusyTimeoutMilliseconds)")
            }.map { _ in connection }
        }
    }
}

/// An unreachable store, told apart from a statement the store refused: requests that meet one answer 503
/// `store_unavailable` with `Retry-After`, and work again by themselves once the store is back (the pools reconnect).
public enum StoreOutage {
    /// What `Retry-After` says.
    public static let retryAfterSeconds = 5
    /// How long opening a PostgreSQL connection may take: an unreachable host fails a request within seconds.
    static let connectTimeout = TimeAmount.seconds(3)
    /// How long a query waits for a pooled connection when every connection is busy (or being opened).
    static let connectionWaitTimeout = TimeAmount.seconds(10)
    /// How long an SQLite statement waits for a lock another process holds.
    static let sqliteBusyTimeoutMilliseconds = 5000

    /// Whether `error` says the store cannot be reached or cannot serve now, rather than that it refused a statement
    /// (a constraint, a syntax error, a trigger's refusal, a corrupt file): connection failures, closed connections
    /// and a full pool; PostgreSQL's connection-exception, shutdown, resource and login errors; SQLite's busy (after
    /// the timeout), cannot-open, I/O, disk-full and read-only (the file moved or was made read-only) results.
    public static func isUnavailable(_ error: any Error) -> Bool {
        switch error {
        case let error as PSQLError: isUnavailable(error)
        case let error as SQLiteError: isUnavailable(error.reason)
        case is ConnectionPoolTimeoutError, is ConnectionPoolError: true
        default: false
        }
    }

    private static func isUnavailable(_ error: PSQLError) -> Bool {
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            return true
        case .server:
            guard let state = error.serverInfo?[.sqlState] else { return false }
            // 08: connection exception; 28: the login is refused; 53: insufficient resources (too many connections,
            // disk full); 57P01–57P03: the server is shutting down, crashed or starting; 3D000: the database is not
            // there (yet).
            return ["08", "28", "53"].contains(String(state.prefix(2)))
                || ["57P01", "57P02", "57P03", "3D000"].contains(state)
        default:
            return false
        }
    }

    private static func isUnavailable(_ reason: SQLiteError.Reason) -> Bool {
        switch reason {
        case .busy, .busyTimeout, .busyInRecovery,
            .cantOpen, .cantOpenDirectory, .cantOpenInvalidPath, .cantOpenUnfollowedSymlink,
            .full,
            .readOnly, .readonlyInRecovery, .readonlyCantLock, .readonlyInRollback, .readonlyBackingMoved,
            .readonlyDirectory,
            .ioError, .ioErrorFailedRead, .ioErrorIncompleteRead, .ioErrorFailedWrite, .ioErrorFailedSync,
            .ioErrorFailedDirSync, .ioErrorFailedTruncate, .ioErrorFailedStat, .ioErrorFailedUnlock,
            .ioErrorFailedReadLock, .ioErrorFailedDelete, .ioErrorNoMemory, .ioErrorFailedAccess,
            .ioErrorFailedLockCheck, .ioErrorFailedAdvisoryLock, .ioErrorFailedClose, .ioErrorFailedSharedMemOpen,
            .ioErrorFailedSharedMemSize, .ioErrorFailedSharedMemMap, .ioErrorFailedDeleteNonexistent,
            .ioErrorFailedMemoryMap, .ioErrorCorruptedFilesystem:
            true
        default:
            false
        }
    }

    /// What one request's queries met: the first failure that said the store was unreachable. A handler may turn such
    /// a failure into an answer of its own (a session it could not read looks ended); the error middleware asks this
    /// instead, so the client hears "try again", never "signed out".
    public final class Witness: Sendable {
        private let seen = NIOLockedValueBox<(any Error)?>(nil)

        public init() {}

        /// The first unavailability failure a query of this request met, if any.
        public var outage: (any Error)? { seen.withLockedValue { $0 } }

        func saw(_ error: any Error) {
            guard StoreOutage.isUnavailable(error) else { return }
            seen.withLockedValue { seen in if seen == nil { seen = error } }
        }
    }

    /// The current request's witness, bound by the error middleware.
    @TaskLocal public static var witness: Witness?
}

/// A database handle that tells the request's `StoreOutage.Witness` when a query finds the store unreachable, also
/// when the caller then swallows the error.
private struct WitnessedDatabase: SQLDatabase {
    let base: any SQLDatabase

    var logger: Logger { base.logger }
    var eventLoop: any EventLoop { base.eventLoop }
    var version: (any SQLDatabaseReportedVersion)? { base.version }
    var dialect: any SQLDialect { base.dialect }
    var queryLogLevel: Logger.Level? { base.queryLogLevel }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<
        Void
    > {
        let future = base.execute(sql: query, onRow)
        if let witness = StoreOutage.witness { future.whenFailure { witness.saw($0) } }
        return future
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        do {
            try await base.execute(sql: query, onRow)
        } catch {
            StoreOutage.witness?.saw(error)
            throw error
        }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        do {
            return try await base.withSession { try await closure(WitnessedDatabase(base: $0)) }
        } catch {
            StoreOutage.witness?.saw(error)
            throw error
        }
    }
}
