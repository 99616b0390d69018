import GatehouseServer
import SQLKit
import Testing

@Suite("Migrations")
struct MigrationTests {
    @Test("a fresh store gets every migration, in order, recorded in gatehouse_migrations")
    func fresh() async throws {
        let store = try Store(location: try await TestStore.freshLocation(), logger: TestStore.quietLogger)
        let report = try await store.migrate()
        #expect(report.applied == Migrations.all.map(\.version))
        #expect(report.version == Migrations.all.count)
        let recorded = try await store.database.select().column("version").from("gatehouse_migrations")
            .orderBy("version").all(decodingColumn: "version", as: Int.self)
        #expect(recorded == Migrations.all.map(\.version))
        await store.close()
    }

    @Test("a second run is a no-op")
    func rerun() async throws {
        let location = try await TestStore.freshLocation()
        let first = try Store(location: location, logger: TestStore.quietLogger)
        try await first.migrate()
        await first.close()
        let second = try Store(location: location, logger: TestStore.quietLogger)
        let report = try await second.migrate()
        #expect(report.applied.isEmpty)
        #expect(report.version == Migrations.all.count)
        let count = try await second.database.raw("SELECT COUNT(*) AS n FROM gatehouse_migrations")
            .first(decodingColumn: "n", as: Int.self)
        #expect(count == Migrations.all.count)
        await second.close()
    }

    @Test("only the migrations a store lacks are applied")
    func partial() async throws {
        let store = try Store(location: try await TestStore.freshLocation(), logger: TestStore.quietLogger)
        let extra = Migration(version: Migrations.all.count + 1, name: "test table") { db in
            try await db.create(table: "migration_probe").column("id", type: .bigint).run()
        }
        try await store.migrate()
        let report = try await store.migrate(Migrations.all + [extra])
        #expect(report.applied == [extra.version])
        try await store.database.insert(into: "migration_probe").columns("id").values(SQLBind(1)).run()
        await store.close()
    }

    @Test("a database with a newer schema than this binary is refused, untouched")
    func newerSchema() async throws {
        let store = try Store(location: try await TestStore.freshLocation(), logger: TestStore.quietLogger)
        try await store.migrate()
        let future = Migrations.all.count + 5
        try await store.database.insert(into: "gatehouse_migrations").columns("version", "name", "applied_at")
            .values(SQLBind(future), SQLBind("from the future"), SQLBind(0)).run()
        await #expect(throws: MigrationError.schemaNewerThanBinary(database: future, binary: Migrations.all.count)) {
            try await store.migrate()
        }
        #expect(store.schemaVersion == Migrations.all.count)
        let message = "\(MigrationError.schemaNewerThanBinary(database: future, binary: Migrations.all.count))"
        #expect(message.contains("schema is version \(future)"))
        await store.close()
    }

    @Test("a failing migration leaves nothing half-applied")
    func failedMigrationRollsBack() async throws {
        let store = try Store(location: try await TestStore.freshLocation(), logger: TestStore.quietLogger)
        try await store.migrate()
        let broken = Migration(version: Migrations.all.count + 1, name: "broken") { db in
            try await db.create(table: "half_made").column("id", type: .bigint).run()
            try await db.raw("SELECT * FROM no_such_table").run()
        }
        await #expect(throws: (any Error).self) { try await store.migrate(Migrations.all + [broken]) }
        let report = try await store.migrate()
        #expect(report.applied.isEmpty)
        await #expect(throws: (any Error).self) { try await store.database.raw("SELECT * FROM half_made").run() }
        await store.close()
    }
}
