import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// The sync endpoints, one helper each.
extension AuthClient {
    func push(_ cid: String, client: String, _ mutations: [[String: Any]], bearer: String) async throws -> HTTPReply {
        try await post("/v1/companies/\(cid)/sync/push", ["client_id": client, "mutations": mutations], bearer: bearer)
    }

    func pull(_ cid: String, token: String?, limit: Int? = nil, types: [String]? = nil, bearer: String) async throws
        -> HTTPReply
    {
        var body: [String: Any] = [:]
        if let types { body["types"] = types }
        if let token { body["token"] = token }
        if let limit { body["limit"] = limit }
        return try await post("/v1/companies/\(cid)/sync/pull", body, bearer: bearer)
    }
}

/// A mutation as a device sends it.
func upsert(
    _ id: String, base: Int64, _ fields: [String: Any], type: String = "item", mid: String = UUID().uuidString,
    deptMask: Int64? = nil
) -> [String: Any] {
    var mutation: [String: Any] = ["mid": mid, "id": id, "type": type, "op": "upsert", "base": base, "fields": fields]
    if let deptMask { mutation["dept_mask"] = deptMask }
    return mutation
}

func delete(_ id: String, base: Int64, type: String = "item", mid: String = UUID().uuidString) -> [String: Any] {
    ["mid": mid, "id": id, "type": type, "op": "delete", "base": base]
}

func newRecordID() -> String { UUID().uuidString.lowercased() }

/// A device's local copy of a company: records by id (with the seq it last saw), and its change token. It applies
/// pulls the way the SDK does.
struct Device {
    let client: AuthClient
    let cid: String
    var bearer: String
    let clientID = UUID().uuidString
    var token: String?
    var records: [String: (seq: Int64, type: String, fields: [String: Any], deptMask: Int64)] = [:]
    /// Every (id, seq) received, and the seqs of each page, to check nothing comes twice and pages end on
    /// transaction boundaries.
    var received: [(id: String, seq: Int64)] = []
    var pageSeqs: [Set<Int64>] = []
    var revoked: [String] = []

    init(_ client: AuthClient, cid: String, bearer: String) {
        self.client = client
        self.cid = cid
        self.bearer = bearer
    }

    /// Pulls until the server has nothing more; returns the last answer (or a failed one).
    @discardableResult
    mutating func sync(limit: Int? = nil) async throws -> HTTPReply {
        while true {
            let reply = try await client.pull(cid, token: token, limit: limit, bearer: bearer)
            guard reply.status == 200 else { return reply }
            let json = reply.json
            for id in json["revoked"] as? [String] ?? [] {
                records[id] = nil
                revoked.append(id)
            }
            var seqs: Set<Int64> = []
            for change in json["changes"] as? [[String: Any]] ?? [] {
                let id = try #require(change["id"] as? String)
                let seq = try #require((change["seq"] as? NSNumber)?.int64Value)
                seqs.insert(seq)
                received.append((id, seq))
                if change["deleted"] as? Bool == true {
                    records[id] = nil
                    continue
                }
                var fields = records[id]?.fields ?? [:]
                for (name, value) in change["fields"] as? [String: Any] ?? [:] { fields[name] = value }
                records[id] = (
                    seq, change["type"] as? String ?? "", fields, (change["dept_mask"] as? NSNumber)?.int64Value ?? 0
                )
            }
            pageSeqs.append(seqs)
            token = try #require(json["token"] as? String)
            if json["has_more"] as? Bool != true { return reply }
        }
    }

    /// Pushes mutations as this device.
    func push(_ mutations: [[String: Any]]) async throws -> HTTPReply {
        try await client.push(cid, client: clientID, mutations, bearer: bearer)
    }

    func seq(_ id: String) -> Int64 { records[id]?.seq ?? 0 }
    func field(_ id: String, _ name: String) -> Any? { records[id]?.fields[name] }
}

/// A live stream as a device holds it: its events are read in the background until `close()`.
final class LiveStream: Sendable {
    struct Event: Sendable, Equatable {
        let name: String
        let data: String
    }

    let status: Int
    private let events = NIOLockedValueBox<[Event]>([])
    private let ended = NIOLockedValueBox(false)
    private let reader = NIOLockedValueBox<Task<Void, Never>?>(nil)

    private init(status: Int) { self.status = status }

    static func open(_ http: HTTPClient, base: String, cid: String, bearer: String) async throws -> LiveStream {
        var request = HTTPClientRequest(url: base + "/v1/companies/\(cid)/sync/live")
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await http.execute(request, timeout: .seconds(600))
        let stream = LiveStream(status: Int(response.status.code))
        let task = Task {
            var pending = ""
            do {
                for try await buffer in response.body {
                    pending += String(buffer: buffer)
                    while let end = pending.range(of: "\n\n") {
                        let block = String(pending[..<end.lowerBound])
                        pending = String(pending[end.upperBound...])
                        var name = "message"
                        var data = ""
                        for line in block.split(separator: "\n") {
                            if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                            if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
                            if line.hasPrefix(":") { name = "comment" }
                        }
                        stream.events.withLockedValue { $0.append(Event(name: name, data: data)) }
                    }
                }
            } catch {}
            stream.ended.withLockedValue { $0 = true }
        }
        stream.reader.withLockedValue { $0 = task }
        return stream
    }

    var received: [Event] { events.withLockedValue { $0 } }
    var hasEnded: Bool { ended.withLockedValue { $0 } }

    /// The seqs of the `seq` events so far.
    var seqs: [Int64] {
        received.filter { $0.name == "seq" }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.data.utf8)) as? [String: Any])?["seq"] as? NSNumber
        }.map(\.int64Value)
    }

    /// Waits until an event matches, or the deadline passes.
    func waitFor(timeout: Duration = .seconds(30), _ matches: @escaping (Event) -> Bool) async throws -> Bool {
        try await LiveServer.eventually(timeout: timeout) { self.received.contains(where: matches) }
    }

    func close() { reader.withLockedValue { $0?.cancel() } }
}
