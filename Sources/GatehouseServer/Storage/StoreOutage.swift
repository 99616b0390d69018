import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresKit
import SQLKit
import SQLiteKit

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
    public final class RequestReport: Sendable {
        private let seen = NIOLockedValueBox<(any Error)?>(nil)

        public init() {}

        /// The first unavailability failure a query of this request met, if any.
        public var outage: (any Error)? { seen.withLockedValue { $0 } }

        func record(_ error: any Error) {
            guard StoreOutage.isUnavailable(error) else { return }
            seen.withLockedValue { seen in if seen == nil { seen = error } }
        }
    }

    /// The current request's report, bound by the error middleware.
    @TaskLocal public static var currentRequest: RequestReport?
}

/// A database handle that records in the request's `StoreOutage.RequestReport` when a query finds the store unreachable, also
/// when the caller then swallows the error.
struct OutageReportingDatabase: SQLDatabase {
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
        if let report = StoreOutage.currentRequest { future.whenFailure { report.record($0) } }
        return future
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        do {
            try await base.execute(sql: query, onRow)
        } catch {
            StoreOutage.currentRequest?.record(error)
            throw error
        }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        do {
            return try await base.withSession { try await closure(OutageReportingDatabase(base: $0)) }
        } catch {
            StoreOutage.currentRequest?.record(error)
            throw error
        }
    }
}
