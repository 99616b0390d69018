import Foundation
import Logging
import PostgresKit
import SQLKit
import ServiceLifecycle

/// Carries commits and access changes to the live subscribers of every instance. In the transaction it announces
/// one small `NOTIFY` on PostgreSQL, delivered only if the transaction commits; after the commit it tells this
/// instance's subscribers at once. Each instance `LISTEN`s once (`InstanceBusListener`) and fans out.
struct InstanceBus: Sendable {
    static let channel = Store.notifyChannel

    let store: Store
    let streams: LiveStreams

    enum Message: Sendable, Equatable {
        case committed(companyID: String, seq: Int64)
        case accessChanged(companyID: String, accountID: String)
        case companyEnded(companyID: String)
        /// Sessions ended or accounts changed: what `Store.transaction` announces for the caches.
        case invalidated(CacheInvalidation)

        var payload: String {
            switch self {
            case .committed(let company, let seq): "c \(company) \(seq)"
            case .accessChanged(let company, let account): "a \(company) \(account)"
            case .companyEnded(let company): "d \(company)"
            case .invalidated(let changes): changes.payloads.first ?? "x"
            }
        }

        init?(payload: String) {
            if let changes = CacheInvalidation(payload: payload) {
                self = .invalidated(changes)
                return
            }
            let parts = payload.split(separator: " ").map(String.init)
            switch (parts.first, parts.count) {
            case ("c", 3):
                guard let seq = Int64(parts[2]) else { return nil }
                self = .committed(companyID: parts[1], seq: seq)
            case ("a", 3): self = .accessChanged(companyID: parts[1], accountID: parts[2])
            case ("d", 2): self = .companyEnded(companyID: parts[1])
            default: return nil
            }
        }
    }

    /// Inside the transaction: other instances hear of it when, and only if, it commits.
    func announce(_ message: Message, db: any SQLDatabase) async throws {
        try await store.announce(message.payload, db: db)
    }

    /// After the commit: this instance's subscribers.
    func deliver(_ message: Message) {
        switch message {
        case .committed(let company, let seq): streams.committed(companyID: company, seq: seq)
        case .accessChanged(let company, let account): streams.accessChanged(companyID: company, accountID: account)
        case .companyEnded(let company): streams.companyEnded(companyID: company)
        case .invalidated(let changes): store.invalidate(changes)
        }
    }
}

/// The one `LISTEN` of this instance on PostgreSQL, on a connection of its own; it reconnects with backoff, and after
/// each (re)connect pokes every local subscriber with its company's current seq, so nothing announced while it was
/// away is missed. On SQLite there is one instance and nothing to listen to.
struct InstanceBusListener: Service {
    let bus: InstanceBus
    let logger: Logger

    func run() async throws {
        guard case .postgres = bus.store.location else {
            try? await gracefulShutdown()
            return
        }
        var delay = Duration.milliseconds(250)
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                _ = try await bus.store.withDedicatedPostgresConnection { connection in
                    let notifications = try await connection.listen(InstanceBus.channel)
                    try await catchUp()
                    for try await notification in notifications.cancelOnGracefulShutdown() {
                        if let message = InstanceBus.Message(payload: notification.payload) { bus.deliver(message) }
                    }
                }
            } catch {
                guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
                // A connection that lived a while starts the backoff afresh.
                if ContinuousClock.now - started > .seconds(30) { delay = .milliseconds(250) }
                let wait = delay
                logger.warning(
                    "sync listener lost its connection, reconnecting",
                    metadata: ["retry_in": "\(wait)", "error": "\(String(reflecting: error))"])
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
                delay = min(wait * 2, .seconds(5))
            }
        }
    }

    /// What may have been missed while away: every cache entry goes, and every subscriber hears its company's seq.
    private func catchUp() async throws {
        bus.store.invalidate(.all)
        let sync = SyncRepository(db: bus.store.database)
        for company in bus.streams.companies {
            guard let counters = try? await sync.counters(company) else { continue }
            bus.streams.committed(companyID: company, seq: counters.seq)
        }
    }
}
