import Foundation
import SQLKit

/// SQL for custom providers.
struct CustomProviderRepository {
    let db: any SQLDatabase

    func all() async throws -> [CustomProviderRecord] {
        try await db.select().columns("settings", "sealed_secret", "created_at", "updated_at").from("custom_providers")
            .orderBy("created_at").all().map(Self.decode)
    }

    func find(_ identifier: String) async throws -> CustomProviderRecord? {
        try await db.select().columns("settings", "sealed_secret", "created_at", "updated_at").from("custom_providers")
            .where("identifier", .equal, identifier).first().map(Self.decode)
    }

    /// Inserts `record`; false when its identifier is taken.
    func insert(_ record: CustomProviderRecord) async throws -> Bool {
        let inserted = try await db.insert(into: "custom_providers")
            .columns("identifier", "id", "provider_type", "settings", "sealed_secret", "created_at", "updated_at")
            .values(
                SQLBind(record.settings.identifier), SQLBind(record.settings.id),
                SQLBind(record.settings.providerType), SQLBind(try Self.encode(record.settings)),
                SQLBind(record.sealedSecret), SQLBind(record.createdAt.epochMilliseconds),
                SQLBind(record.updatedAt.epochMilliseconds)
            )
            .ignoringConflicts(with: "identifier").returning("identifier").all()
        return !inserted.isEmpty
    }

    func update(_ record: CustomProviderRecord) async throws {
        try await db.update("custom_providers").set("settings", to: try Self.encode(record.settings))
            .set("sealed_secret", to: record.sealedSecret).set("updated_at", to: record.updatedAt.epochMilliseconds)
            .where("identifier", .equal, record.settings.identifier).run()
    }

    func delete(_ identifier: String) async throws -> Bool {
        try await !db.delete(from: "custom_providers").where("identifier", .equal, identifier).returning("identifier")
            .all().isEmpty
    }

    private static func encode(_ settings: CustomProviderSettings) throws -> String {
        String(decoding: try JSONEncoder.sortedKeys.encode(settings), as: UTF8.self)
    }

    private static func decode(_ row: any SQLRow) throws -> CustomProviderRecord {
        CustomProviderRecord(
            settings: try JSONDecoder().decode(
                CustomProviderSettings.self, from: Data(try row.decode(column: "settings", as: String.self).utf8)),
            sealedSecret: try row.decode(column: "sealed_secret", as: String.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            updatedAt: Date(epochMilliseconds: try row.decode(column: "updated_at", as: Int64.self)))
    }
}
