import Foundation
import SQLKit

/// The SQL of `service_keys`: one row per minted key, by id; the token itself is never stored.
struct ServiceKeyRepository {
    let db: any SQLDatabase

    func insert(id: String, at time: Date) async throws {
        try await db.insert(into: "service_keys").columns("id", "created_at")
            .values(SQLBind(id), SQLBind(time.epochMilliseconds)).run()
    }

    func isLive(_ id: String) async throws -> Bool {
        try await db.select().column("id").from("service_keys").where("id", .equal, id)
            .where("revoked_at", .is, SQLLiteral.null).first() != nil
    }

    /// Revokes the key `id`; false when there is no live key of that id.
    func revoke(_ id: String, at time: Date) async throws -> Bool {
        try await !db.update("service_keys").set("revoked_at", to: time.epochMilliseconds)
            .where("id", .equal, id).where("revoked_at", .is, SQLLiteral.null).returning("id").all().isEmpty
    }

    /// Revokes every live key; returns how many there were.
    func revokeAll(at time: Date) async throws -> Int {
        try await db.update("service_keys").set("revoked_at", to: time.epochMilliseconds)
            .where("revoked_at", .is, SQLLiteral.null).returning("id").all().count
    }

    /// Every key, live or revoked, newest first (a handful: one per backend and rotation).
    func all(limit: Int) async throws -> [ServiceKey] {
        try await db.select().columns("id", "created_at", "revoked_at").from("service_keys")
            .orderBy("created_at", .descending).orderBy("id", .descending).limit(limit).all()
            .map { row in
                ServiceKey(
                    id: try row.decode(column: "id", as: String.self),
                    createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
                    revokedAt: try row.decode(column: "revoked_at", as: Int64?.self).map(Date.init(epochMilliseconds:)))
            }
    }
}
