import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// The pull's page written with the stored fields spliced in says exactly what the generated serializer says.
@Suite("A pull's page, spliced")
struct SyncPageTests {
    /// Fields as the repository stores them.
    static func storedText(_ fields: JSONFields) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(fields), as: UTF8.self)
    }

    static func record(
        _ id: String, type: String, fields: JSONFields, stored: Bool, createdBy: String?, deleted: Bool = false
    ) throws -> StoredRecord {
        let text = try storedText(fields)
        return StoredRecord(
            id: id, type: type, fields: stored ? [:] : fields, fieldSeqs: [:], deptMask: 6, maskSeq: 2,
            createdBy: createdBy, createdAt: Date(epochMilliseconds: 1_764_000_000_123),
            updatedAt: Date(epochMilliseconds: 1_764_000_100_987), createdSeq: 1, seq: 41, deleted: deleted,
            storedSize: text.utf8.count, storedFields: stored ? text : nil)
    }

    static let awkward: JSONFields = [
        "name": .string("Grace \"Amazing\" Hopper\\n\n\t\r\u{8}\u{c}\u{1}\u{1f} / é 🚀"),
        "qty": .int(-42), "price": .double(9.5), "in_stock": .bool(true), "gone": .null,
        "since": .object(["$ts": .string("2026-11-27T01:02:03.456Z")]),
        "client": .object(["$ref": .string("0f8fad5b-d9cb-469f-a165-70867728950e")]),
    ]

    @Test("Whole and partial records, a missing creator, a tombstone, revocations: the same page as the generated one")
    func sameAsGenerated() throws {
        let page = SyncPage(
            changes: [
                try Self.record("a", type: "Client", fields: Self.awkward, stored: true, createdBy: "u-1"),
                try Self.record(
                    "b", type: "Odd \"type\" \\ \n", fields: ["qty": .int(7)], stored: false, createdBy: nil),
                try Self.record("c", type: "Client", fields: [:], stored: true, createdBy: "u-2", deleted: true),
            ],
            revoked: ["d", "e\"f"], token: "tok.en/+=", hasMore: true)
        let spliced = try page.json()
        #expect(try JSONSerialization.jsonObject(with: Data(spliced)) is [String: Any])
        let read = try JSONDecoder.withMilliseconds.decode(Schemas.SyncPullResponse.self, from: Data(spliced))
        #expect(read == (try page.wire()))
        #expect(read.changes[0].fields == Self.awkward)
        #expect(read.changes[1].createdBy == nil)
        // Byte for byte as the generated serializer writes it, but for the stored text spliced in.
        var unspliced = page
        unspliced.changes = try page.changes.map { try $0.withFieldsRead() }
        #expect(
            String(decoding: try unspliced.json(), as: UTF8.self)
                == String(decoding: try WireJSON.encode(try page.wire()), as: UTF8.self))
    }

    @Test("A record list's page: stored and read fields, a missing creator, with and without a next page")
    func recordList() throws {
        let records = [
            try Self.record("a", type: "Client", fields: Self.awkward, stored: true, createdBy: "u-1"),
            try Self.record("b", type: "Odd \"type\"", fields: ["qty": .int(7)], stored: false, createdBy: nil),
        ]
        for nextAfter in ["b", nil] {
            let page = RecordListPage(records: records, nextAfter: nextAfter)
            let read = try JSONDecoder.withMilliseconds.decode(Schemas.RecordPage.self, from: Data(try page.json()))
            #expect(read == (try page.wire()))
            var unspliced = page
            unspliced.records = try records.map { try $0.withFieldsRead() }
            #expect(
                String(decoding: try unspliced.json(), as: UTF8.self)
                    == String(decoding: try WireJSON.encode(try page.wire()), as: UTF8.self))
        }
        #expect(
            String(decoding: try RecordListPage(records: [], nextAfter: nil).json(), as: UTF8.self)
                == #"{"records":[]}"#)
    }

    @Test("A record list's query is taken only when plain")
    func listQuery() {
        #expect(FastPath.companyID("/v1/companies/c-1/records", ["records"]) == "c-1")
        #expect(FastPath.companyID("/v1/companies/c-1/records/r-1", ["records"]) == nil)
        #expect(FastPath.listQuery(nil)! == (nil, nil, nil))
        #expect(FastPath.listQuery("type=Client&after=x-1&limit=50")! == ("Client", "x-1", 50))
        #expect(FastPath.listQuery("limit=0")! == (nil, nil, 0))  // refused by the service, as generated
        #expect(FastPath.listQuery("limit=ten") == nil)
        #expect(FastPath.listQuery("limit=1&limit=2") == nil)
        #expect(FastPath.listQuery("type=A%20B") == nil)
        #expect(FastPath.listQuery("type=A+B") == nil)
        #expect(FastPath.listQuery("other=1") == nil)
        #expect(FastPath.listQuery("type") == nil)
    }

    @Test("An empty page")
    func empty() throws {
        let page = SyncPage(changes: [], revoked: [], token: "t", hasMore: false)
        #expect(
            String(decoding: try page.json(), as: UTF8.self)
                == #"{"changes":[],"has_more":false,"revoked":[],"token":"t"}"#)
    }

    @Test("Only a pull's own path and JSON are taken; anything else goes to the generated handler")
    func routing() {
        #expect(FastPath.companyID(pulling: "/v1/companies/c-1/sync/pull") == "c-1")
        #expect(FastPath.companyID(pulling: "/v1/companies/c-1/sync/push") == nil)
        #expect(FastPath.companyID(pulling: "/v1/companies//sync/pull") == nil)
        #expect(FastPath.companyID(pulling: "/v1/companies/c%2F1/sync/pull") == nil)
        #expect(FastPath.companyID(pulling: "/v1/companies/c-1/sync/pull/x") == nil)
        #expect(FastPath.isJSON("application/json"))
        #expect(FastPath.isJSON("Application/JSON; charset=utf-8"))
        #expect(!FastPath.isJSON("text/plain"))
        #expect(!FastPath.isJSON(nil))
        #expect(FastPath.acceptsJSON(nil))
        #expect(FastPath.acceptsJSON("text/html, application/json;q=0.9"))
        #expect(FastPath.acceptsJSON("*/*"))
        #expect(!FastPath.acceptsJSON("text/html"))
    }
}

extension JSONDecoder {
    /// Reads the API's dates as the generated client does.
    static var withMilliseconds: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            try MillisecondDateTranscoder().decode(try decoder.singleValueContainer().decode(String.self))
        }
        return decoder
    }
}
