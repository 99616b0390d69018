import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// `sync`: the sync figures of docs/benchmarks.md, against a company session (`--bearer` or GATEHOUSE_BENCH_BEARER).
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure first sync, push throughput, change-to-device latency and idle live connections.",
        discussion: """
            first-sync: pushes --records records of about --record-bytes each (batches of 500, within the 1 MiB body limit), then times a first \
            sync pulled to completion with every page's JSON decoded. push: --batches pushes of 100 new records, \
            one at a time and --concurrency at once. latency: a live stream on --other-url (or --url), and \
            --changes pushes on --url one after the other, each timed from the push until its seq arrives as a poke. \
            idle: opens --connections live streams and holds them for --hold seconds; the caller reads the server's \
            memory meanwhile.
            """
    )

    enum Mode: String, ExpressibleByArgument { case firstSync = "first-sync", push, latency, idle }

    @Argument(help: "first-sync, push, latency or idle.")
    var mode: Mode

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The company id.")
    var company: String

    @Option(help: "A company session's access token; GATEHOUSE_BENCH_BEARER is read when it is not given.")
    var bearer: String?

    @Option(help: "first-sync: records in the company.") var records: Int = 10_000
    @Option(help: "first-sync: bytes of text per record.") var recordBytes: Int = 1000
    @Option(help: "first-sync: records per pull page.") var pageSize: Int = 5000
    @Option(help: "push: batches of 100 records.") var batches: Int = 200
    @Option(help: "push: concurrent pushers in the second pass; idle: streams opened at once.") var concurrency: Int = 4
    @Option(help: "latency: changes timed.") var changes: Int = 1000
    @Option(help: "latency: the instance the live stream is opened on.") var otherURL: String?
    @Option(help: "idle: live streams held.") var connections: Int = 1000
    @Option(help: "idle: seconds to hold them once all are open.") var hold: Double = 10

    func run() async throws {
        let token =
            try bearer ?? ProcessInfo.processInfo.environment["GATEHOUSE_BENCH_BEARER"]
            ?? { throw ValidationError("give --bearer or set GATEHOUSE_BENCH_BEARER") }()
        let base = try connection.baseURL()
        var configuration = HTTPClient.Configuration(
            timeout: .init(connect: .seconds(30), read: .seconds(600)),
            connectionPool: .init(idleTimeout: .seconds(600), concurrentHTTP1ConnectionsPerHostSoftLimit: 20_000))
        configuration.decompression = .disabled
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let api = SyncAPI(http: http, base: base, company: company, bearer: token)
        let line: String
        do {
            switch mode {
            case .firstSync: line = try await firstSync(api)
            case .push: line = try await push(api)
            case .latency: line = try await latency(api, http: http)
            case .idle: line = try await idle(http: http, base: try otherURL.map(Self.loopback) ?? base, bearer: token)
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        print(line)
    }

    private static func loopback(_ url: String) throws -> String {
        try ConnectionOptions.parse(["--url", url]).baseURL()
    }

    // MARK: First sync

    private func firstSync(_ api: SyncAPI) async throws -> String {
        let filler = String(repeating: "x", count: max(0, recordBytes - 120))
        var seeded = 0
        while seeded < records {
            let count = min(500, records - seeded)
            let mutations: [[String: Any]] = (0..<count).map { index in
                SyncAPI.upsert(
                    [
                        "name": "Item \(seeded + index)", "qty": seeded + index, "price": 9.5, "in_stock": true,
                        "note": filler,
                    ])
            }
            try await api.push(mutations)
            seeded += count
        }
        let started = ContinuousClock.now
        var token: String?
        var pages = 0
        var received = 0
        var bytes = 0
        while true {
            var body: [String: Any] = ["limit": pageSize]
            if let token { body["token"] = token }
            let (json, size) = try await api.post("/sync/pull", body)
            pages += 1
            bytes += size
            received += (json["changes"] as? [[String: Any]])?.count ?? 0
            token = json["token"] as? String
            if json["has_more"] as? Bool != true { break }
        }
        let seconds = (ContinuousClock.now - started).inSeconds
        return
            "first-sync records=\(received) pages=\(pages) mib=\(String(format: "%.1f", Double(bytes) / 1_048_576)) seconds=\(String(format: "%.3f", seconds)) records_per_s=\(Int(Double(received) / seconds))"
    }

    // MARK: Push

    private func push(_ api: SyncAPI) async throws -> String {
        func batch() -> [[String: Any]] { (0..<100).map { SyncAPI.upsert(["name": "Item \($0)", "qty": $0]) } }
        for _ in 0..<10 { try await api.push(batch()) }
        let sequential = ContinuousClock.now
        for _ in 0..<batches { try await api.push(batch()) }
        let one = (ContinuousClock.now - sequential).inSeconds
        let parallel = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    for index in stride(from: worker, to: batches, by: concurrency) {
                        _ = index
                        try await api.push((0..<100).map { SyncAPI.upsert(["name": "Item \($0)", "qty": $0]) })
                    }
                }
            }
            try await group.waitForAll()
        }
        let many = (ContinuousClock.now - parallel).inSeconds
        return
            "push batches=\(batches)x100 sequential_records_per_s=\(Int(Double(batches * 100) / one)) sequential_batch_ms=\(String(format: "%.2f", one * 1000 / Double(batches))) concurrency=\(concurrency) records_per_s=\(Int(Double(batches * 100) / many))"
    }

    // MARK: Change → other device

    private func latency(_ api: SyncAPI, http: HTTPClient) async throws -> String {
        let streamBase = try otherURL.map(Self.loopback) ?? api.base
        let stream = try await LiveStream.open(http: http, base: streamBase, company: company, bearer: api.bearer)
        defer { stream.close() }
        _ = try await stream.next()
        var samples: [Int64] = []
        let id = UUID().uuidString.lowercased()
        for index in 0..<changes {
            let started = ContinuousClock.now
            let (json, _) = try await api.post(
                "/sync/push",
                ["client_id": "bench", "mutations": [SyncAPI.upsert(["n": index], id: id, base: 1 << 40)]])
            guard let visible = (json["visible_at"] as? NSNumber)?.int64Value else {
                throw BenchError("push answered without visible_at")
            }
            while try await stream.next() < visible {}
            samples.append((ContinuousClock.now - started).inNanoseconds)
        }
        let summary = LatencySummary(sorted: samples.sorted())
        return
            "latency changes=\(changes) across=\(streamBase == api.base ? "one instance" : "two instances") p50_ms=\(summary.p50) p99_ms=\(summary.p99) max_ms=\(summary.max)"
    }

    // MARK: Idle live connections

    private func idle(http: HTTPClient, base: String, bearer: String) async throws -> String {
        var streams: [LiveStream] = []
        var opened = 0
        while opened < connections {
            let count = min(concurrency * 50, connections - opened)
            let batch = try await withThrowingTaskGroup(of: LiveStream.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        let stream = try await LiveStream.open(http: http, base: base, company: company, bearer: bearer)
                        _ = try await stream.next()
                        return stream
                    }
                }
                return try await group.reduce(into: [LiveStream]()) { $0.append($1) }
            }
            streams += batch
            opened += count
        }
        // Unbuffered, so the caller reads the server's memory while every stream is open.
        FileHandle.standardOutput.write(Data("open \(streams.count)\n".utf8))
        try await Task.sleep(for: .seconds(hold))
        for stream in streams { stream.close() }
        return "idle connections=\(streams.count) held_s=\(hold)"
    }
}

/// The sync endpoints of one company.
struct SyncAPI: Sendable {
    let http: HTTPClient
    let base: String
    let company: String
    let bearer: String

    static func upsert(_ fields: [String: Any], id: String = UUID().uuidString.lowercased(), base: Int64 = 0)
        -> [String: Any]
    {
        ["mid": UUID().uuidString, "id": id, "type": "item", "op": "upsert", "base": base, "fields": fields]
    }

    func push(_ mutations: [[String: Any]]) async throws {
        _ = try await post("/sync/push", ["client_id": "bench", "mutations": mutations])
    }

    /// Posts JSON to the company's `path` and decodes the answer; returns it and its size.
    func post(_ path: String, _ body: [String: Any]) async throws -> ([String: Any], Int) {
        var request = HTTPClientRequest(url: base + "/v1/companies/\(company)" + path)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        let response = try await http.execute(request, timeout: .seconds(600))
        let buffer = try await response.body.collect(upTo: 1 << 30)
        guard response.status == .ok else {
            throw BenchError("\(path) answered \(response.status.code): \(String(buffer: buffer).prefix(200))")
        }
        let data = Data(buffer.readableBytesView)
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:], data.count)
    }
}

/// One live stream: its `seq` events, in order, handed to `next()` as they arrive.
final class LiveStream: Sendable {
    private struct State {
        var seqs: [Int64] = []
        var waiter: CheckedContinuation<Int64, any Error>?
        var ended = false
    }

    private let state = Mutex(State())
    private let reader = Mutex<Task<Void, Never>?>(nil)

    static func open(http: HTTPClient, base: String, company: String, bearer: String) async throws -> LiveStream {
        var request = HTTPClientRequest(url: base + "/v1/companies/\(company)/sync/live")
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        let response = try await http.execute(request, timeout: .seconds(3600))
        guard response.status == .ok else { throw BenchError("live answered \(response.status.code)") }
        let stream = LiveStream()
        let prefix = "data: {\"seq\":"
        let task = Task {
            var pending = ""
            do {
                for try await buffer in response.body {
                    pending += String(buffer: buffer)
                    while let end = pending.range(of: "\n\n") {
                        let block = pending[..<end.lowerBound]
                        pending = String(pending[end.upperBound...])
                        if let data = block.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
                            let seq = Int64(data.dropFirst(prefix.count).dropLast())
                        {
                            stream.deliver(seq)
                        }
                    }
                }
            } catch {}
            stream.end()
        }
        stream.reader.withLock { $0 = task }
        return stream
    }

    private func deliver(_ seq: Int64) {
        state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                waiter.resume(returning: seq)
            } else {
                state.seqs.append(seq)
            }
        }
    }

    private func end() {
        state.withLock { state in
            state.ended = true
            state.waiter?.resume(throwing: BenchError("the live stream ended"))
            state.waiter = nil
        }
    }

    /// The next seq poked.
    func next() async throws -> Int64 {
        try await withCheckedThrowingContinuation { continuation in
            state.withLock { state in
                if !state.seqs.isEmpty {
                    continuation.resume(returning: state.seqs.removeFirst())
                } else if state.ended {
                    continuation.resume(throwing: BenchError("the live stream ended"))
                } else {
                    state.waiter = continuation
                }
            }
        }
    }

    func close() { reader.withLock { $0?.cancel() } }
}
