import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

/// The SDK reads a pull's page without the generated decoding, keeping each record's fields as the server wrote
/// them: what it keeps must be exactly those fields.
@Suite("The SDK's page reader")
struct ClientPageTests {
    @Test("Fields kept as sent: strings holding braces, quotes, escapes and unicode; nesting; spaces; an escaped key")
    func awkwardPage() throws {
        let text = """
             { "token" : "t\\"1", "changes" : [
              {"id":"a","type":"Client","fields": {"n":"}{][,\\"\\\\","m":{"$ts":"2026-11-27T01:02:03.456Z"},"e":"é🚀","z":[1,{"x":null}]},
               "deleted":false,"dept_mask":0,"seq":3,"created_at":"2026-11-27T01:02:03.456Z"},
              {"fields":{},"id":"b","type":"T","deleted":true,"dept_mask":-1,"seq":4,"extra":{"fields":"no"}},
              {"id":"c","type":"T","deleted":false,"dept_mask":2,"seq":5,"fi\\u0065ld":"escaped key","fields" : { "q" : 1.5e3 } }
            ], "revoked": ["r"], "has_more": true }
            """
        let page = try PulledPage(json: Array(text.utf8))
        #expect(page.changes.map(\.id) == ["a", "b", "c"])
        #expect(page.token == "t\"1" && page.hasMore && page.revoked == ["r"])
        #expect(page.changes.map(\.deptMask) == [0, -1, 2])
        #expect(
            page.changes[0].fields
                == #"{"n":"}{][,\"\\","m":{"$ts":"2026-11-27T01:02:03.456Z"},"e":"é🚀","z":[1,{"x":null}]}"#)
        #expect(page.changes[1].fields == "{}")
        #expect(page.changes[2].fields == #"{ "q" : 1.5e3 }"#)
        // Each kept text reads as the fields the generated decoding would have given.
        let generated = try JSONDecoder().decode(
            [String: [JSONValue]].self,
            from: Data(#"{"x":[\#(page.changes.map(\.fields).joined(separator: ","))]}"#.utf8))
        #expect(generated["x"]?.count == 3)
    }

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

    @Test("A page that is not one is a local store error, never a crash")
    func notAPage() {
        for text in [
            "", "[]", #"{"changes":[{"id":1}]}"#, #"{"changes":[],"revoked":[],"token":"t"}"#, "{\"changes\":",
        ] {
            #expect(throws: GatehouseError.self) { try PulledPage(json: Array(text.utf8)) }
        }
    }
}
