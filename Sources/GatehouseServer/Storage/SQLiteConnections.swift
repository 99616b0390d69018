import Logging
import NIOConcurrencyHelpers
import NIOCore
import SQLKit
import SQLiteKit

/// SQLite connections set up for a server: in WAL mode, `synchronous=NORMAL` syncs at checkpoints rather than on
/// every commit. The database cannot be corrupted by a crash; a power cut may lose the last commits.
/// A lock held by another process (a backup, an operator's `sqlite3`) is waited for a few seconds, then the request
/// fails with `store_unavailable`: SQLiteNIO's own busy handler would retry forever, on one of the store's threads.
///
/// The file is read through a memory map (`mmap_size`): in WAL mode a connection drops its page cache whenever another
/// wrote, so under a write load every query read its pages again, each a `pread` call (4% of a refresh's time).
/// No connection checkpoints the WAL by itself (`wal_autocheckpoint = 0`): a checkpoint ran inside the commit that
/// crossed 1,000 pages, with its fsyncs, about every 70 ms under a refresh load, and made the tail of every write's
/// latency (p99 5.4 ms at 500 refreshes a second, 1.4 ms without). `Store.run` checkpoints instead, off the write
/// path, every 100 ms in which something was written.
struct TunedSQLiteSource: Sendable {
    let base: SQLiteConnectionSource
    /// How much of the file is mapped: more than a large deployment's store, far less than the address space.
    static let mappedBytes = 1 << 30

    func makeConnection(logger: Logger, on eventLoop: any EventLoop) -> EventLoopFuture<SQLiteConnection> {
        base.makeConnection(logger: logger, on: eventLoop).flatMap { connection in
            connection.query("PRAGMA synchronous = NORMAL").flatMap { _ in
                connection.query("PRAGMA busy_timeout = \(StoreOutage.sqliteBusyTimeoutMilliseconds)")
            }.flatMap { _ in
                connection.query("PRAGMA mmap_size = \(Self.mappedBytes)")
            }.flatMap { _ in
                connection.query("PRAGMA wal_autocheckpoint = 0")
            }.map { _ in connection }
        }
    }
}

/// The store's SQLite connections, lent to one query or one session at a time.
///
/// A connection is taken and given back under a lock, on the caller's thread, where AsyncKit's event-loop pool sent
/// every query to an event loop first, to take a connection, and waited for it there; under a refresh load those
/// switches took more time in the kernel than SQLite took running the statements.
final class SQLiteConnections: Sendable {
    private typealias Waiter = CheckedContinuation<SQLiteConnection, any Error>

    private struct State {
        var idle: [SQLiteConnection] = []
        var opened = 0
        var waiters: [Waiter] = []
        var closed = false
    }

    let source: TunedSQLiteSource
    let eventLoopGroup: any EventLoopGroup
    let limit: Int
    let logger: Logger
    private let state = NIOLockedValueBox(State())

    init(source: TunedSQLiteSource, limit: Int, eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.source = source
        self.limit = limit
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    /// Runs `body` with a connection of its own, given back when it returns or throws.
    func withConnection<T>(_ body: (SQLiteConnection) async throws -> T) async throws -> T {
        let connection = try await take()
        do {
            let result = try await body(connection)
            give(back: connection)
            return result
        } catch {
            give(back: connection)
            throw error
        }
    }

    private enum Taken {
        case idle(SQLiteConnection)
        case open
        case wait
        case closed
    }

    private func take() async throws -> SQLiteConnection {
        let taken: Taken = state.withLockedValue { state in
            if state.closed { return .closed }
            if let connection = state.idle.popLast() { return .idle(connection) }
            guard state.opened < limit else { return .wait }
            state.opened += 1
            return .open
        }
        switch taken {
        case .idle(let connection): return connection
        case .closed: throw ConnectionPoolError.shutdown
        case .open:
            do {
                return try await source.makeConnection(logger: logger, on: eventLoopGroup.any()).get()
            } catch {
                // The place is free again; whoever waits for it is told why it is not coming.
                let waiter = state.withLockedValue { state in
                    state.opened -= 1
                    return state.waiters.isEmpty ? nil : state.waiters.removeFirst()
                }
                waiter?.resume(throwing: error)
                throw error
            }
        case .wait:
            return try await withCheckedThrowingContinuation { (waiter: Waiter) in
                let now: Result<SQLiteConnection, any Error>? = state.withLockedValue { state in
                    // Given back between the two locks: taken at once.
                    if !state.closed, let connection = state.idle.popLast() { return .success(connection) }
                    if state.closed { return .failure(ConnectionPoolError.shutdown) }
                    state.waiters.append(waiter)
                    return nil
                }
                if let now { waiter.resume(with: now) }
            }
        }
    }

    private func give(back connection: SQLiteConnection) {
        enum Next {
            case hand(Waiter)
            case kept
            case close
        }
        let next: Next = state.withLockedValue { state in
            if state.closed || connection.isClosed {
                state.opened -= 1
                return .close
            }
            if !state.waiters.isEmpty { return .hand(state.waiters.removeFirst()) }
            state.idle.append(connection)
            return .kept
        }
        switch next {
        case .hand(let waiter): waiter.resume(returning: connection)
        case .kept: break
        case .close: if !connection.isClosed { _ = connection.close() }
        }
    }

    /// Closes the idle connections and those in use as they come back; later requests fail.
    func close() async {
        let (idle, waiters) = state.withLockedValue { state in
            state.closed = true
            state.opened -= state.idle.count
            defer {
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        for waiter in waiters { waiter.resume(throwing: ConnectionPoolError.shutdown) }
        // Through the future path: SQLiteNIO's async close is skipped in a cancelled task (a service group's at
        // shutdown), and a connection dropped unclosed leaks its handle.
        for connection in idle {
            let closing: EventLoopFuture<Void> = connection.close()
            try? await closing.get()
        }
    }
}

/// An SQLKit database over the store's SQLite connections: each query borrows a connection, a session keeps one.
struct SQLitePoolDatabase: SQLDatabase {
    let connections: SQLiteConnections

    var logger: Logger { connections.logger }
    var eventLoop: any EventLoop { connections.eventLoopGroup.any() }
    var dialect: any SQLDialect { SQLiteDialect() }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<
        Void
    > {
        let promise = eventLoop.makePromise(of: Void.self)
        promise.completeWithTask { try await execute(sql: query, onRow) }
        return promise.futureResult
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        try await connections.withConnection {
            try await SQLiteSessionDatabase(base: $0.sql()).execute(sql: query, onRow)
        }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await connections.withConnection { try await closure(SQLiteSessionDatabase(base: $0.sql())) }
    }
}

/// One connection's SQLKit database whose statements run whether or not the calling task was cancelled.
/// SQLiteNIO's async path skips the work of a cancelled task: a transaction's ROLLBACK after a cancelled statement
/// would not run, and the connection would go back to the pool inside the transaction. Its future path, which this
/// takes, runs what was asked.
struct SQLiteSessionDatabase: SQLDatabase {
    let base: any SQLDatabase

    var logger: Logger { base.logger }
    var eventLoop: any EventLoop { base.eventLoop }
    var dialect: any SQLDialect { base.dialect }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<
        Void
    > {
        base.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let done: EventLoopFuture<Void> = base.execute(sql: query, onRow)
        try await done.get()
    }
}
