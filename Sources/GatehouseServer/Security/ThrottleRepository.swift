import Foundation
import SQLKit

/// Failure backoff kept in the store, so every instance behind a load balancer sees the same count.
/// Keys are digests (`password:<sha256 of email>`), never an address in the clear.
struct ThrottleRepository {
    let db: any SQLDatabase

    /// The record behind `key`, locked until the transaction ends; a fresh one (no failures) is made first when
    /// there is none, so parallel requests queue on the same row instead of each seeing nothing.
    func locked(_ key: String, now: Date) async throws -> FailureBackoff {
        try await db.insert(into: "auth_throttle")
            .columns("key", "failures", "window_started_at", "last_failure_at")
            .values(SQLBind(key), SQLBind(Int64(0)), SQLBind(now.epochMilliseconds), SQLBind(Int64(0)))
            .ignoringConflicts(with: "key").run()
        guard
            let row = try await db.select().columns("failures", "window_started_at", "last_failure_at")
                .from("auth_throttle").where("key", .equal, key).for(.update).first()
        else { return FailureBackoff(failures: 0, windowStartedAt: now, lastFailureAt: Date(epochMilliseconds: 0)) }
        return FailureBackoff(
            failures: Int(try row.decode(column: "failures", as: Int64.self)),
            windowStartedAt: Date(epochMilliseconds: try row.decode(column: "window_started_at", as: Int64.self)),
            lastFailureAt: Date(epochMilliseconds: try row.decode(column: "last_failure_at", as: Int64.self)))
    }

    func save(_ key: String, _ state: FailureBackoff) async throws {
        try await db.insert(into: "auth_throttle")
            .columns("key", "failures", "window_started_at", "last_failure_at")
            .values(
                SQLBind(key), SQLBind(Int64(state.failures)), SQLBind(state.windowStartedAt.epochMilliseconds),
                SQLBind(state.lastFailureAt.epochMilliseconds)
            )
            .onConflict(with: ["key"]) { conflict in
                conflict.set(excludedValueOf: "failures").set(excludedValueOf: "window_started_at")
                    .set(excludedValueOf: "last_failure_at")
            }
            .run()
    }

    /// Counts one attempt at the secret behind `key` before it is checked, atomically (run it in a transaction): the
    /// row is locked while it is read and written, so parallel guesses are each counted. Nil when the attempt may go
    /// ahead, else the seconds to wait (and nothing is counted).
    func admit(_ key: String, now: Date, rule: FailureBackoff.Rule) async throws -> Int? {
        let (wait, next) = try await locked(key, now: now).admitting(now: now, rule: rule)
        if wait == nil { try await save(key, next) }
        return wait
    }

    func clear(_ key: String) async throws {
        try await db.delete(from: "auth_throttle").where("key", .equal, key).run()
    }

    /// Clears `key` and every key under it (`key:…`).
    func clear(keyAndBelow key: String) async throws {
        let prefix = key + ":"
        try await db.delete(from: "auth_throttle")
            .where {
                $0.where("key", .equal, key).orWhere(
                    SQLFunction(
                        "substr", args: SQLIdentifier("key"), SQLLiteral.numeric("1"),
                        SQLLiteral.numeric(String(prefix.count))),
                    .equal, SQLBind(prefix))
            }.run()
    }
}

/// A send-or-wait record per address and purpose, used for the resend cooldown whether or not the address
/// has an account, so the answer never tells which.
struct CooldownRepository {
    let db: any SQLDatabase

    /// Seconds left before `key` may be used again, or nil; starts a new period when free. Atomic (run it in a
    /// transaction): the row is locked while it is read and written, so parallel requests cannot all claim it.
    func claim(_ key: String, cooldown: TimeInterval, now: Date) async throws -> Int? {
        let throttle = ThrottleRepository(db: db)
        let readyAt = try await throttle.locked(key, now: now).lastFailureAt.addingTimeInterval(cooldown)
        if readyAt > now { return max(1, Int(readyAt.timeIntervalSince(now).rounded(.up))) }
        try await throttle.save(key, FailureBackoff(failures: 0, windowStartedAt: now, lastFailureAt: now))
        return nil
    }
}
