import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

/// The SDK's page reader over a page the server's own writer made (the reader alone: `PageReaderTests`).
@Suite("The SDK's page reader and the server's pages")
struct ClientPageTests {
    @Test("A page the server spliced reads back as the records it sent")
    func splicedByTheServer() throws {
        let fields: JSONFields = ["name": .string("Ada \"Byron\" \\ {x}"), "n": .int(3)]
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let stored = String(decoding: try encoder.encode(fields), as: UTF8.self)
        let record = StoredRecord(
            id: "a", type: "Client", fields: [:], fieldSeqs: [:], deptMask: 0, maskSeq: 1, createdBy: nil,
            createdAt: Date(), updatedAt: Date(), createdSeq: 1, seq: 9, deleted: false,
            storedSize: stored.utf8.count, storedFields: stored)
        let page = try PulledPage(
            json: try SyncPage(changes: [record, record], revoked: [], token: "t", hasMore: false).json())
        #expect(page.changes.count == 2)
        #expect(page.changes.allSatisfy { $0.fields == stored && $0.seq == 9 && $0.type == "Client" })
        #expect(try CompanyDatabase.decode(page.changes[0].fields) == fields.mapValues(FieldValue.init))
    }
}
