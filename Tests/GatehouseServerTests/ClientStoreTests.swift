import Foundation
import GatehouseServer
import HTTPTypes
import NIOConcurrencyHelpers
import OpenAPIRuntime
import Testing

@testable import GatehouseClient

/// The company store as an app's first hour meets it, against the server's router in process: opening without syncing, the awaited
/// first sync with its progress, one `synced` per sync, counting, and typed records observed for SwiftUI.
@Suite("GatehouseClient company store: opening, the first sync, counts and typed records")
struct ClientStoreTests {
    @Test("Opening makes no request; the first sync, awaited, reports its pages up to the total and one synced")
    func openThenFirstSync() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            // 25 customers in five pushes: five transactions, so pages of 10 hold two each.
            let ownerStore = try await owner.client.openCompanyStore(companyID: cid, directory: owner.folder)
            for batch in 0..<5 {
                for index in 0..<5 {
                    try await ownerStore.save(Customer(id: Customer.newID(), name: "Customer \(batch * 5 + index)"))
                }
                #expect(try await ownerStore.sync().pushed == 5)
            }
            await ownerStore.close()

            let (client, log) = try await Self.relaunched(guest, h)
            let store = try await client.openCompanyStore(companyID: cid, directory: guest.folder, pageSize: 10)
            let events = Recorder(store.events)
            #expect(await !store.isSyncing)
            #expect(try await store.count() == 0)
            let local = try await store.save(Customer(id: Customer.newID(), name: "Made offline"))
            #expect(try await store.pendingCount() == 1)
            #expect(log.operations.isEmpty)
            #expect(await store.announced == nil)  // no live stream either

            let reports = NIOLockedValueBox<[SyncProgress]>([])
            let summary = try await store.sync { progress in reports.withLockedValue { $0.append(progress) } }
            #expect(summary == SyncSummary(pushed: 1, records: 26, pages: 3))
            let progress = reports.withLockedValue { $0 }
            #expect(progress.map(\.pushed) == [1, 1, 1, 1])
            #expect(progress.map(\.pages) == [0, 1, 2, 3])
            #expect(progress.dropFirst().map(\.records) == [10, 20, 26])
            #expect(progress.dropLast().allSatisfy { $0.total == nil && !$0.isComplete })
            #expect(progress.last?.total == 26)
            #expect(log.operations == ["syncPush", "syncPull", "syncPull", "syncPull"])
            #expect(try await store.pendingCount() == 0)
            #expect(try await store.record(Customer.self, id: local)?.name == "Made offline")

            // The count is the server's, without reading a record.
            let listed = try await h.client.get(
                "/v1/companies/\(cid)/records?limit=1000", bearer: try await guest.companyBearer)
            let onServer = (listed.json["records"] as? [[String: Any]])?.count
            #expect(onServer == 26)
            #expect(try await store.count() == onServer)
            #expect(try await store.count(of: Customer.self) == 26)
            #expect(try await store.count(ofType: "Invoice") == 0)
            #expect(try await LiveServer.eventually { events.events.contains(.synced) })
            #expect(events.events.filter { $0 == .synced }.count == 1)
            // Nothing runs in the background until asked.
            #expect(await !store.isSyncing)
            #expect(log.operations.count == 4)
            await store.close()
        }
    }

    @Test("One synced per sync: the live stream's first seq and this device's own pushes start no sync of their own")
    func oneSyncedPerSync() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let ownerStore = try await owner.client.openCompanyStore(companyID: cid, directory: owner.folder)
            let store = try await guest.client.openCompanyStore(companyID: cid, directory: guest.folder)
            let events = Recorder(store.events)
            var syncs = 0
            func syncedCount() -> Int { events.events.filter { $0 == .synced }.count }

            try await store.sync()
            syncs += 1
            #expect(try await LiveServer.eventually { syncedCount() >= syncs })
            #expect(syncedCount() == syncs)
            // The live stream opens and announces the current seq, which the store already holds.
            await store.startSyncing()
            #expect(await store.isSyncing)
            #expect(try await LiveServer.eventually { await store.announced != nil })

            // Another device's change: one sync brings it.
            let first = try await ownerStore.save(Customer(id: Customer.newID(), name: "From the owner"))
            try await ownerStore.sync()
            #expect(try await events.waitFor { if case .changed(let ids) = $0 { ids.contains(first) } else { false } })
            syncs += 1
            #expect(try await LiveServer.eventually { syncedCount() >= syncs })
            #expect(syncedCount() == syncs)

            // A save here: one sync pushes it; the poke of its own commit, once announced, pulls nothing.
            let mine = try await store.save(Customer(id: Customer.newID(), name: "From the guest"))
            syncs += 1
            #expect(try await LiveServer.eventually { syncedCount() >= syncs })
            #expect(syncedCount() == syncs)
            let seq = try #require(try await firstValue { try await Self.serverSeq(h, cid, mine, guest) })
            #expect(try await LiveServer.eventually { await store.announced ?? 0 >= seq })

            // Another change from the owner: had the poke above synced, its synced would come before this one's.
            let second = try await ownerStore.save(Customer(id: Customer.newID(), name: "Again from the owner"))
            try await ownerStore.sync()
            #expect(try await events.waitFor { if case .changed(let ids) = $0 { ids.contains(second) } else { false } })
            syncs += 1
            #expect(try await LiveServer.eventually { syncedCount() >= syncs })
            #expect(syncedCount() == syncs)

            // Callers arriving while a sync runs share the next one: three calls, at most two syncs, one synced each.
            let (runs, synced) = (await store.runs, syncedCount())
            async let one = store.sync()
            async let two = store.sync()
            async let three = store.sync()
            _ = try await (one, two, three)
            let made = await store.runs - runs
            #expect(made <= 2)
            #expect(try await LiveServer.eventually { syncedCount() - synced == made })
            await ownerStore.close()
            await store.close()
        }
    }

    @Test("Counts follow saves and deletions made here before the server has them, and match it after")
    func counts() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let store = try await owner.client.openCompanyStore(companyID: cid, directory: owner.folder)
            let ids = try await (0..<3).asyncMap { _ in
                try await store.save(type: "Note", fields: ["text": .string("note")])
            }
            try await store.save(Customer(id: Customer.newID(), name: "Ada"))
            #expect(try await store.count() == 4)
            #expect(try await store.count(ofType: "Note") == 3)
            try await store.sync()
            try await store.delete(id: ids[0])
            try await store.save(type: "Note", id: ids[1], fields: ["text": .string("edited")])
            #expect(try await store.count(ofType: "Note") == 2)
            #expect(try await store.count(of: Customer.self) == 1)
            #expect(try await store.count() == 3)
            try await store.sync()
            let other = try await guest.client.openCompanyStore(companyID: cid, directory: guest.folder)
            try await other.sync()
            #expect(try await other.count(ofType: "Note") == 2)
            #expect(try await other.count() == (try await store.count()))
            await store.close()
            await other.close()
        }
    }

    @Test("Typed records: an observation yields the new array after a save here and after another device's, live")
    func typedObservation() async throws {
        try await AccountHarness.with { h in
            let (owner, guest, cid) = try await sharedCompany(h)
            let ownerStore = try await owner.client.openCompanyStore(companyID: cid, directory: owner.folder)
            let store = try await guest.client.openCompanyStore(companyID: cid, directory: guest.folder)
            let customers = Observed(store.observe(Customer.self))
            #expect(try await LiveServer.eventually { customers.arrays.first == [] })
            try await store.sync()
            await store.startSyncing()
            await ownerStore.startSyncing()

            // A save here: the array holds it at once, typed, with its date and its reference.
            let since = Date(timeIntervalSince1970: 1_780_000_000.25)
            let ada = Customer(id: Customer.newID(), name: "Ada", since: since)
            try await store.save(ada)
            #expect(try await LiveServer.eventually { customers.latest == [ada] })
            var grace = Customer(id: Customer.newID(), name: "Grace", referredBy: RecordReference(ada.id))
            try await store.save(grace)
            #expect(try await LiveServer.eventually { customers.latest == [ada, grace].sorted { $0.id < $1.id } })
            #expect(try await store.record(grace.id)?.fields["referredBy"] == .reference(ada.id))
            #expect(try await store.record(ada.id)?.fields["since"] == .date(since))
            // Other types are not in it.
            try await store.save(type: "Note", fields: ["text": .string("not a customer")])

            // Another device changes one field: the save sends that field only, and the array follows, live.
            let copy = try #require(
                try await firstValue { try await ownerStore.record(Customer.self, id: grace.id) })
            #expect(copy == grace)
            var edited = copy
            edited.phone = "555-0199"
            try await ownerStore.save(edited)
            grace.phone = "555-0199"
            #expect(try await LiveServer.eventually { customers.latest?.contains(grace) == true })
            #expect(try await store.records(Customer.self) == [ada, grace].sorted { $0.id < $1.id })
            #expect(customers.failure == nil)

            // From the save on, through its push and the pull that brought it back, Ada never left the array.
            let seen = customers.arrays.drop { !$0.contains(ada) }
            #expect(!seen.isEmpty && seen.allSatisfy { $0.contains { $0.id == ada.id } })

            // A deletion here.
            try await store.delete(ada)
            #expect(try await LiveServer.eventually { customers.latest == [grace] })

            // Records.
            let raw = Observed(ownerStore.observeRecords(ofType: "Note"))
            #expect(try await LiveServer.eventually { raw.latest?.count == 1 })
            #expect(raw.latest?.first?.fields["text"] == .string("not a customer"))

            // A record that does not decode as its type ends that type's observations with the reason.
            let tags = Observed(ownerStore.observe(Tag.self))
            try await ownerStore.save(type: Tag.recordType, fields: ["label": .int(7)])
            #expect(try await LiveServer.eventually { tags.finished })
            if case .localStore = tags.failure {} else { Issue.record("\(String(describing: tags.failure))") }

            // Closing the store ends its observations; a removal from the company ends them with the reason.
            await ownerStore.close()
            #expect(try await LiveServer.eventually { raw.finished })
            #expect(raw.failure == nil)
            let late = Observed(ownerStore.observe(Customer.self))
            #expect(try await LiveServer.eventually { late.finished })
            #expect(late.failure == nil && late.arrays.isEmpty)
            try await owner.client.companies.removeMember(try await guest.userID)
            #expect(try await LiveServer.eventually { customers.finished })
            #expect(customers.failure == .companyAccessRevoked)
        }
    }

    /// The same device launched again with a log of the requests it makes.
    private static func relaunched(_ device: AppDevice, _ h: AccountHarness) async throws
        -> (client: GatehouseClient, log: OperationLog)
    {
        let log = OperationLog()
        let client = GatehouseClient(
            url: try #require(URL(string: h.server.baseURL)), sessionStore: device.sessions, refreshMargin: 60,
            middlewares: [log], retryBase: .milliseconds(50), retryMax: .milliseconds(400), transport: h.sdkTransport)
        try await client.auth.restoreSession()
        log.clear()
        return (client, log)
    }

    /// A record's seq on the server.
    private static func serverSeq(_ h: AccountHarness, _ cid: String, _ id: String, _ device: AppDevice)
        async throws -> Int64?
    {
        let record = try await h.client.get(
            "/v1/companies/\(cid)/records/\(id)", bearer: try await device.companyBearer)
        return (record.json["seq"] as? NSNumber)?.int64Value
    }
}

/// The app's record type in these tests.
private struct Customer: CompanyRecord, Equatable {
    static let recordType = "Customer"
    let id: String
    var name: String
    var phone: String?
    var since: Date?
    var referredBy: RecordReference?
}

/// A type the tests store a wrong field of.
private struct Tag: CompanyRecord {
    static let recordType = "Tag"
    let id: String
    var label: String
}

/// The operations a client called, in order.
final class OperationLog: ClientMiddleware, Sendable {
    private let seen = NIOLockedValueBox<[String]>([])

    var operations: [String] { seen.withLockedValue { $0 } }

    func clear() { seen.withLockedValue { $0 = [] } }

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        seen.withLockedValue { $0.append(operationID) }
        return try await next(request, body, baseURL)
    }
}

/// Every array an observation gave, and how it ended.
private final class Observed<Item: Sendable>: Sendable {
    private let state = NIOLockedValueBox<(arrays: [[Item]], finished: Bool, failure: GatehouseError?)>(
        ([], false, nil))
    private let reader: Task<Void, Never>

    init(_ observation: RecordObservation<Item>) {
        let state = self.state
        reader = Task {
            do {
                for try await array in observation { state.withLockedValue { $0.arrays.append(array) } }
            } catch {
                state.withLockedValue { $0.failure = error as? GatehouseError ?? .localStore("\(error)") }
            }
            state.withLockedValue { $0.finished = true }
        }
    }

    deinit { reader.cancel() }

    var arrays: [[Item]] { state.withLockedValue { $0.arrays } }
    var latest: [Item]? { arrays.last }
    var finished: Bool { state.withLockedValue { $0.finished } }
    var failure: GatehouseError? { state.withLockedValue { $0.failure } }
}

extension Sequence {
    /// `map` with an async transform, in order.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var mapped: [T] = []
        for element in self { mapped.append(try await transform(element)) }
        return mapped
    }
}
