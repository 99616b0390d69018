import SQLKit

/// The SQL of announcements to the other instances: PostgreSQL's `NOTIFY` on `Store.notifyChannel`.
struct NotificationRepository {
    let db: any SQLDatabase

    /// Announces `payload`; inside a transaction the other instances hear it when, and only if, it commits.
    func notify(_ payload: String) async throws {
        try await db.raw("SELECT pg_notify(\(bind: Store.notifyChannel), \(bind: payload))").run()
    }
}

extension Store {
    /// Announces `payload` to the other instances from inside the transaction `db`: they hear it when, and only if,
    /// it commits. Nothing to do on SQLite, where there is one instance.
    func announce(_ payload: String, db: any SQLDatabase) async throws {
        guard case .postgres = location else { return }
        try await NotificationRepository(db: db).notify(payload)
    }
}
