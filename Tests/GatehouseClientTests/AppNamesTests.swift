import Foundation
import GRDB
import GatehouseClient
import GatehouseClientTesting
import Testing

// An app that imports the SDK beside GRDB, as this file does (without `@testable`): GRDB's `Record` and the app's own
// `User`, `Session` and `Role` are named unqualified next to the SDK's types. Were the SDK to export a type of one of
// these names, this file would not compile: the module is named `GatehouseClient` like the client class, so
// `GatehouseClient.Record` cannot say which one is meant.

/// The app's own cache of invoices: a GRDB `Record` subclass.
private final class Invoice: Record {
    var id: String
    var customer: String

    init(id: String, customer: String) {
        self.id = id
        self.customer = customer
        super.init()
    }

    required init(row: Row) throws {
        id = row["id"]
        customer = row["customer"]
        try super.init(row: row)
    }

    override class var databaseTableName: String { "invoice" }

    override func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id
        container["customer"] = customer
    }
}

/// The app's own signed-in user, session and role: the names an app reaches for first.
private struct User: Equatable {
    let id: String
    let role: Role
}

private struct Session {
    let user: User
    let startedAt: Date
}

private enum Role: Equatable {
    case manager, clerk

    init(_ role: CompanyRole) { self = role == .owner ? .manager : .clerk }
}

@Suite("An app's names beside the SDK's")
struct AppNamesTests {
    @Test("GRDB's Record and the app's User, Session and Role, unqualified, beside the SDK's own types")
    func unqualified() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-names-\(UUID())")
        let signedIn = AuthSession(
            accessToken: "access-1", refreshToken: "refresh-1", expiresAt: Date() + 3600, userID: "user-1",
            email: "ada@example.com", companyID: "acme")
        let client = GatehouseClient(
            url: try #require(URL(string: "https://auth.example.com")), sessionStore: MemorySessionStore(signedIn),
            transport: ScriptedTransport { Issue.record("no reply scripted for \($0)") })
        #expect(try await client.auth.restoreSession() == signedIn)

        // The SDK's company store, offline: a record saved here is a `StoreRecord` with unsent changes.
        let store = try await client.openCompanyStore(companyID: "acme", directory: folder)
        let id = try await store.save(type: "Invoice", fields: ["customer": .string("Grace")])
        let records: [StoreRecord] = try await store.records(ofType: "Invoice")
        #expect(records.map(\.id) == [id] && records.allSatisfy(\.hasPendingChanges))
        await store.close()

        // The app copies it into its own GRDB database as its own `Record` subclass.
        let database = try DatabaseQueue()
        try await database.write { db in
            try db.create(table: "invoice") { table in
                table.primaryKey("id", .text)
                table.column("customer", .text).notNull()
            }
            for record in records {
                guard case .string(let customer) = record.fields["customer"] else { continue }
                try Invoice(id: record.id, customer: customer).insert(db)
            }
        }
        let cached = try database.read { db in try Invoice.fetchAll(db) }
        #expect(cached.map(\.id) == [id] && cached.map(\.customer) == ["Grace"])
        let record: Record = try #require(cached.first)
        #expect(type(of: record).databaseTableName == "invoice")

        // The app's own user, session and role, made from the SDK's.
        let summary = CompanySummary(id: "acme", name: "Acme", role: .owner, hasCredential: true)
        let user = User(id: signedIn.userID, role: Role(summary.role))
        let session = Session(user: user, startedAt: Date())
        #expect(session.user == User(id: "user-1", role: .manager))
    }
}
