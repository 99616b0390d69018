import Foundation
import SQLKit

/// The SQL of the console's own tables: `operators` (who may open it) and `console_sessions` (each account session
/// that opened it, for the idle and age limits).
struct ConsoleRepository {
    let db: any SQLDatabase

    // MARK: Operators

    /// Grants the role; false when the account already held it.
    func grant(_ accountID: String, at time: Date) async throws -> Bool {
        guard try await !isOperator(accountID) else { return false }
        try await db.insert(into: "operators").columns("account_id", "granted_at")
            .values(SQLBind(accountID), SQLBind(time.epochMilliseconds)).run()
        return true
    }

    /// Takes the role away; false when the account did not hold it.
    func revoke(_ accountID: String) async throws -> Bool {
        try await !db.delete(from: "operators").where("account_id", .equal, accountID).returning("account_id").all()
            .isEmpty
    }

    func isOperator(_ accountID: String) async throws -> Bool {
        try await db.select().column("account_id").from("operators").where("account_id", .equal, accountID).first()
            != nil
    }

    /// Which of `accountIDs` are operators.
    func operators(among accountIDs: [String]) async throws -> Set<String> {
        guard !accountIDs.isEmpty else { return [] }
        return Set(
            try await db.select().column("account_id").from("operators").where("account_id", .in, accountIDs).all()
                .map { try $0.decode(column: "account_id", as: String.self) })
    }

    /// Every operator: account id, email and when the role was granted, oldest first.
    func operators() async throws -> [(accountID: String, email: String, grantedAt: Date)] {
        try await db.select().column(SQLColumn("account_id", table: "operators")).column("email")
            .column("granted_at").from("operators")
            .join(
                "accounts", on: SQLColumn("account_id", table: "operators"), .equal, SQLColumn("id", table: "accounts")
            )
            .orderBy("granted_at").all()
            .map {
                (
                    try $0.decode(column: "account_id", as: String.self),
                    try $0.decode(column: "email", as: String.self),
                    Date(epochMilliseconds: try $0.decode(column: "granted_at", as: Int64.self))
                )
            }
    }

    // MARK: Console sessions

    /// When session `id` opened the console and was last seen there; nil when it has not.
    func consoleSession(_ id: String) async throws -> (startedAt: Date, lastSeenAt: Date)? {
        guard
            let row = try await db.select().columns("started_at", "last_seen_at").from("console_sessions")
                .where("session_id", .equal, id).first()
        else { return nil }
        return (
            Date(epochMilliseconds: try row.decode(column: "started_at", as: Int64.self)),
            Date(epochMilliseconds: try row.decode(column: "last_seen_at", as: Int64.self))
        )
    }

    func startConsoleSession(_ id: String, accountID: String, at time: Date) async throws {
        try await db.delete(from: "console_sessions").where("session_id", .equal, id).run()
        try await db.insert(into: "console_sessions").columns("session_id", "account_id", "started_at", "last_seen_at")
            .values(SQLBind(id), SQLBind(accountID), SQLBind(time.epochMilliseconds), SQLBind(time.epochMilliseconds))
            .run()
    }

    func touchConsoleSession(_ id: String, at time: Date) async throws {
        try await db.update("console_sessions").set("last_seen_at", to: time.epochMilliseconds)
            .where("session_id", .equal, id).run()
    }

    func endConsoleSession(_ id: String) async throws {
        try await db.delete(from: "console_sessions").where("session_id", .equal, id).run()
    }
}
