import Logging
import NIOCore
import SQLKit
import SQLiteKit

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

/// An SQLKit database over the SQLite pool: each query borrows a connection, a session keeps one.
struct SQLitePoolDatabase: SQLDatabase, @unchecked Sendable {
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
