import Foundation
import GatehouseClientAPI
import HTTPTypes
import OpenAPIRuntime

/// A change as the store applies it: each record's fields kept as the JSON text the server sent, so that a record
/// this device does not hold yet (every record of a first sync) is stored without being decoded into `JSONValue`s
/// and encoded again: that round trip was 40% of a first sync's CPU here.
struct PulledChange: Sendable {
    let id: String
    let type: String
    let deleted: Bool
    let deptMask: Int64
    let seq: Int64
    /// The fields object as JSON text.
    let fields: String

    /// A change the generated client decoded (the digest exchange's), with its fields written out again.
    init(_ change: Components.Schemas.RecordChange) throws(GatehouseError) {
        id = change.id
        type = change._type
        deleted = change.deleted
        deptMask = change.deptMask
        seq = change.seq
        fields = try CompanyDatabase.encode(json: change.fields)
    }

    init(id: String, type: String, deleted: Bool, deptMask: Int64, seq: Int64, fields: String) {
        self.id = id
        self.type = type
        self.deleted = deleted
        self.deptMask = deptMask
        self.seq = seq
        self.fields = fields
    }
}

/// A pull's page (`SyncPullResponse`), read without the generated client's decoding: `JSONDecoder` reads everything
/// but the fields (and the dates, which the store does not keep), and `JSONSlices` finds the text of each change's
/// `fields` in the same bytes.
struct PulledPage: Sendable {
    var changes: [PulledChange]
    var revoked: [String]
    var token: String
    var hasMore: Bool

    private struct Wire: Decodable {
        struct Change: Decodable {
            let id: String
            let type: String
            let deleted: Bool
            let dept_mask: Int64
            let seq: Int64
        }
        let changes: [Change]
        let revoked: [String]
        let token: String
        let has_more: Bool
    }

    /// The next page's token and whether there is one, read from a page's bytes before the page itself (a scan that
    /// builds nothing): the store asks for the next page with it, then reads and stores this one meanwhile.
    static func next(in bytes: [UInt8]) throws(GatehouseError) -> String? {
        do {
            let members = try JSONSlices.members(["token", "has_more"], in: bytes)
            guard let more = members["has_more"], bytes[more].elementsEqual("true".utf8) else { return nil }
            guard let token = members["token"] else { throw JSONSlices.Unexpected(offset: 0) }
            return try JSONDecoder().decode(String.self, from: Data(bytes[token]))
        } catch {
            throw .localStore("The server's page could not be read: \(error)")
        }
    }

    init(json bytes: [UInt8]) throws(GatehouseError) {
        let wire: Wire
        let fields: [Range<Int>]
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
            fields = try JSONSlices.values(of: "fields", inElementsOf: "changes", in: bytes)
        } catch {
            throw .localStore("The server's page could not be read: \(error)")
        }
        guard fields.count == wire.changes.count else {
            throw .localStore("The server's page holds \(wire.changes.count) changes but \(fields.count) fields")
        }
        changes = zip(wire.changes, fields).map { change, range in
            PulledChange(
                id: change.id, type: change.type, deleted: change.deleted, deptMask: change.dept_mask,
                seq: change.seq, fields: String(decoding: bytes[range], as: UTF8.self))
        }
        revoked = wire.revoked
        token = wire.token
        hasMore = wire.has_more
    }
}

/// Where values sit in JSON text that is known to be valid (a `JSONDecoder` read it first): a scan that skips
/// strings, numbers, literals and nested containers without building any of them.
enum JSONSlices {
    struct Unexpected: Error, CustomStringConvertible {
        let offset: Int
        var description: String { "unexpected JSON at byte \(offset)" }
    }

    /// The byte ranges of the values of `keys` in the top-level object.
    static func members(_ keys: Set<String>, in bytes: [UInt8]) throws -> [String: Range<Int>] {
        var scanner = Scanner(bytes: bytes)
        var found: [String: Range<Int>] = [:]
        try scanner.object { name, scanner in
            let start = scanner.offset
            try scanner.skipValue()
            if keys.contains(name) { found[name] = start..<scanner.offset }
        }
        return found
    }

    /// The byte range of the value of `key` in each object of the top-level object's array `array`, in order; an
    /// object without `key` has none.
    static func values(of key: String, inElementsOf array: String, in bytes: [UInt8]) throws -> [Range<Int>] {
        var scanner = Scanner(bytes: bytes)
        var found: [Range<Int>] = []
        try scanner.object { name, scanner in
            guard name == array else { return try scanner.skipValue() }
            try scanner.array { scanner in
                try scanner.object { name, scanner in
                    guard name == key else { return try scanner.skipValue() }
                    let start = scanner.offset
                    try scanner.skipValue()
                    found.append(start..<scanner.offset)
                }
            }
        }
        return found
    }

    private struct Scanner {
        let bytes: [UInt8]
        var offset = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        private mutating func skipSpace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
        }

        private mutating func expect(_ byte: UInt8) throws {
            skipSpace()
            guard current == byte else { throw Unexpected(offset: offset) }
            offset += 1
        }

        /// An object: `member` is called with each key's name, positioned at its value, and must consume it.
        mutating func object(_ member: (String, inout Scanner) throws -> Void) throws {
            try expect(UInt8(ascii: "{"))
            skipSpace()
            if current == UInt8(ascii: "}") {
                offset += 1
                return
            }
            while true {
                skipSpace()
                let name = try string()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                try member(name, &self)
                skipSpace()
                guard let byte = current else { throw Unexpected(offset: offset) }
                offset += 1
                if byte == UInt8(ascii: "}") { return }
                guard byte == UInt8(ascii: ",") else { throw Unexpected(offset: offset - 1) }
            }
        }

        /// An array: `element` is called positioned at each element, and must consume it.
        mutating func array(_ element: (inout Scanner) throws -> Void) throws {
            try expect(UInt8(ascii: "["))
            skipSpace()
            if current == UInt8(ascii: "]") {
                offset += 1
                return
            }
            while true {
                skipSpace()
                try element(&self)
                skipSpace()
                guard let byte = current else { throw Unexpected(offset: offset) }
                offset += 1
                if byte == UInt8(ascii: "]") { return }
                guard byte == UInt8(ascii: ",") else { throw Unexpected(offset: offset - 1) }
            }
        }

        /// A string's text (keys here are plain; an escaped one is read through `JSONDecoder`).
        private mutating func string() throws -> String {
            let start = offset
            try skipString()
            let inner = bytes[(start + 1)..<(offset - 1)]
            guard inner.contains(UInt8(ascii: "\\")) else { return String(decoding: inner, as: UTF8.self) }
            return try JSONDecoder().decode(String.self, from: Data(bytes[start..<offset]))
        }

        private mutating func skipString() throws {
            guard current == UInt8(ascii: "\"") else { throw Unexpected(offset: offset) }
            offset += 1
            while let byte = current {
                offset += 1
                if byte == UInt8(ascii: "\\") {
                    offset += 1
                } else if byte == UInt8(ascii: "\"") {
                    return
                }
            }
            throw Unexpected(offset: offset)
        }

        mutating func skipValue() throws {
            skipSpace()
            switch current {
            case UInt8(ascii: "\""): try skipString()
            case UInt8(ascii: "{"): try object { _, scanner in try scanner.skipValue() }
            case UInt8(ascii: "["): try array { scanner in try scanner.skipValue() }
            case .some:
                // A number or a literal: up to the next delimiter.
                let start = offset
                while let byte = current, byte != UInt8(ascii: ","), byte != UInt8(ascii: "}"),
                    byte != UInt8(ascii: "]"), byte != 0x20, byte != 0x0A, byte != 0x0D, byte != 0x09
                {
                    offset += 1
                }
                guard offset > start else { throw Unexpected(offset: offset) }
            case nil: throw Unexpected(offset: offset)
            }
        }
    }
}

/// Runs a request through the client's middlewares (the bearer, the API version, refusals typed as
/// `GatehouseError`) and transport, as the generated client does, and answers the body's bytes: for the answers the
/// SDK reads without the generated decoding.
struct RawCaller: Sendable {
    let serverURL: URL
    let transport: any ClientTransport
    let middlewares: [any ClientMiddleware]

    func post(_ path: String, json body: Data, operationID: String) async throws -> [UInt8] {
        var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: path)
        request.headerFields[.contentType] = "application/json; charset=utf-8"
        request.headerFields[.accept] = "application/json"
        let (response, answer) = try await send(request, body: HTTPBody(body), operationID: operationID)
        guard response.status.code == 200, let answer else {
            throw GatehouseError.server(
                status: response.status.code, code: "unexpected_answer", message: "The server answered no page")
        }
        return Array(try await Data(collecting: answer, upTo: 64 << 20))
    }

    /// GETs `path` (with its query) and answers the body of its 200.
    func get(_ path: String, operationID: String) async throws -> Data {
        var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: path)
        request.headerFields[.accept] = "application/json"
        let (response, answer) = try await send(request, body: nil, operationID: operationID)
        guard response.status.code == 200, let answer else {
            throw GatehouseError.server(
                status: response.status.code, code: "unexpected_answer", message: "The server answered nothing")
        }
        return try await Data(collecting: answer, upTo: 1 << 20)
    }

    /// Sends `request` through the middlewares and the transport; the answer's body as the transport hands it over,
    /// which may still be arriving.
    func send(_ request: HTTPRequest, body: HTTPBody?, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        var next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?) = {
            [transport] in try await transport.send($0, body: $1, baseURL: $2, operationID: operationID)
        }
        for middleware in middlewares.reversed() {
            let inner = next
            next = { try await middleware.intercept($0, body: $1, baseURL: $2, operationID: operationID, next: inner) }
        }
        return try await next(request, body, serverURL)
    }
}
