import Foundation
import Testing

@testable import GatehouseClient

/// The SDK reads a pull's page without the generated decoding, keeping each record's fields as the server wrote
/// them: what it keeps must be exactly those fields. (`ClientPageTests` reads a page the server's own writer made.)
@Suite("The SDK's page reader")
struct PageReaderTests {
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
        // Each kept text reads as the fields the generated decoding would have given, as the store reads it.
        #expect(try page.changes.map { try CompanyDatabase.decode($0.fields).count } == [4, 0, 1])
        #expect(try CompanyDatabase.decode(page.changes[0].fields)["e"] == .string("é🚀"))
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
