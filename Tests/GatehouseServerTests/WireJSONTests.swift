import Foundation
import OpenAPIRuntime
import Testing

@testable import GatehouseServer

@Suite("Wire text: dates, header whitespace, stored digests")
struct WireJSONTests {
    @Test("dates are written exactly as Foundation's ISO 8601 formatter writes them, and read back to the millisecond")
    func datesMatchFoundation() throws {
        let foundation = ISO8601DateFormatter()
        foundation.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let transcoder = MillisecondDateTranscoder()
        var generator = SystemRandomNumberGenerator()
        let edges: [Int64] = [0, -1, 1, 951_782_400_000, 4_102_444_799_999, -2_208_988_800_000, 1_700_000_000_123]
        let samples =
            edges + (0..<2000).map { _ in Int64.random(in: -2_208_988_800_000...7_258_118_400_000, using: &generator) }
        for milliseconds in samples {
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let text = try transcoder.encode(date)
            #expect(text == foundation.string(from: date), "\(milliseconds)")
            #expect(MillisecondDateTranscoder.parse(text) == milliseconds)
            #expect(try transcoder.decode(text) == date)
        }
    }

    @Test("other RFC 3339 forms still read through Foundation; impossible dates and junk are refused")
    func otherForms() throws {
        let transcoder = MillisecondDateTranscoder()
        #expect(try transcoder.decode("2026-11-24T09:31:23Z").timeIntervalSince1970 == 1_795_512_683)
        #expect(try transcoder.decode("2026-11-24T10:31:23.500+01:00").timeIntervalSince1970 == 1_795_512_683.5)
        #expect(MillisecondDateTranscoder.parse("2026-02-30T00:00:00.000Z") == nil)
        #expect(MillisecondDateTranscoder.parse("2026-13-01T00:00:00.000Z") == nil)
        #expect(throws: (any Error).self) { try transcoder.decode("yesterday") }
    }

    @Test("header values lose surrounding spaces and tabs only")
    func trimming() {
        #expect(" \t abc def\t ".trimmingHTTPWhitespace == "abc def")
        #expect("abc".trimmingHTTPWhitespace == "abc")
        #expect(" \t ".trimmingHTTPWhitespace == "")
        #expect("".trimmingHTTPWhitespace == "")
        #expect(" 10.0.0.1 ".dropFirst().trimmingHTTPWhitespace == "10.0.0.1")
    }

    @Test("stored digests are SHA-256 in lowercase hex, as before")
    func digests() {
        #expect(Secrets.digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Secrets.digest("").hasPrefix("e3b0c44298fc1c149afbf4c8996fb924"))
        #expect(Secrets.hex([0x00, 0x0F, 0xF0, 0xFF]) == "000ff0ff")
    }

    @Test(
        "an audit event's detail is written as the encoder wrote it: keys sorted, escapes as JSON needs, slashes kept")
    func auditDetail() throws {
        let event = AuditEvent(
            .tokenRefreshed, detail: ["session": "a/b", "outcome": "quote \" and\nline", "method": "\u{e9}\u{1}"])
        #expect(event.detailJSON == String(decoding: try JSONEncoder.sortedKeys.encode(event.detail), as: UTF8.self))
        #expect(AuditEvent(.tokenRefreshed).detailJSON == "{}")
    }
}
