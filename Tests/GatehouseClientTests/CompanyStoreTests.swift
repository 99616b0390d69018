import Foundation
import GatehouseClientTesting
import HTTPTypes
import OpenAPIRuntime
import Testing

@testable import GatehouseClient

/// The company store without a server: what it refuses before saving, and its live stream through the transport the
/// app handed the client. (`ClientStoreTests` and `ClientCompanyTests` run it against the server's router.)
@Suite("GatehouseClient company store, no server", .timeLimit(.minutes(1)))
struct CompanyStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("A typed record that cannot be kept as fields is refused before it is saved")
    func nestedFieldsRefused() async throws {
        let client = GatehouseClient(
            url: try #require(URL(string: "http://127.0.0.1:9")), sessionStore: MemorySessionStore())
        let store = try await client.openCompanyStore(companyID: "c-1", directory: Self.folder())
        await #expect(throws: GatehouseError.self) { try await store.save(Basket(id: Basket.newID(), items: [1])) }
        #expect(try await store.count() == 0)
        #expect(try await store.pendingCount() == 0)
        await store.close()
    }

    @Test("The live stream goes through the app's transport: a poke there brings another device's record")
    func liveThroughTheTransport() async throws {
        let sessions = MemorySessionStore(
            AuthSession(
                accessToken: "account-access", refreshToken: "account-refresh", expiresAt: Self.t0 + 3600,
                userID: "user-1", email: "ada@example.com"))
        try sessions.companion(named: "company").save(
            AuthSession(
                accessToken: "company-access", refreshToken: "company-refresh", expiresAt: Self.t0 + 3600,
                userID: "user-1", email: "ada@example.com", companyID: "acme"))
        let server = CompanyServer()
        let client = GatehouseClient(
            url: try #require(URL(string: "https://auth.example.com")), sessionStore: sessions, transport: server,
            clock: ManualSessionClock(Self.t0))
        try await client.auth.restoreSession()
        let store = try await client.openCompanyStore(companyID: "acme", directory: Self.folder())
        let events = store.events
        await store.startSyncing()

        // The stream opened with the company session's bearer, through the client's middlewares.
        var opened = server.liveOpened.makeAsyncIterator()
        let request = try #require(await opened.next())
        #expect(request.headerFields[.authorization] == "Bearer company-access")
        #expect(request.headerFields[.accept] == "text/event-stream")

        // Another device saved a record: the server pokes, and the store pulls it.
        server.commit(#"{"id":"r1","type":"Client","fields":{"name":"Ada"},"deleted":false,"dept_mask":0,"seq":1}"#)
        for await event in events {
            if case .changed(let ids) = event, ids.contains("r1") { break }
        }
        #expect(try await store.record("r1")?.fields["name"] == .string("Ada"))
        await store.close()
    }

    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
    }
}

/// A type whose field would be nested.
private struct Basket: CompanyRecord {
    static let recordType = "Basket"
    let id: String
    var items: [Int]
}

/// A company's sync endpoints as a transport: pulls answer the records committed since the token, and the live stream
/// announces each commit's seq as the server's does (the current seq first).
private final class CompanyServer: ClientTransport, Sendable {
    private struct State {
        var records: [String] = []
        var streams: [AsyncStream<ArraySlice<UInt8>>.Continuation] = []
    }

    private let state = Locked(State())
    /// Each live stream's request, as it opens.
    let liveOpened: AsyncStream<HTTPRequest>
    private let opening: AsyncStream<HTTPRequest>.Continuation

    init() { (liveOpened, opening) = AsyncStream.makeStream(of: HTTPRequest.self) }

    /// Another device's commit of `record` (its JSON, with the next seq): every open stream hears the seq.
    func commit(_ record: String) {
        let (seq, streams) = state.withLock { state in
            state.records.append(record)
            return (state.records.count, state.streams)
        }
        for stream in streams { stream.yield(Self.poke(seq)) }
    }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws
        -> (HTTPResponse, HTTPBody?)
    {
        switch operationID {
        case "syncLive":
            let (bytes, feed) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self)
            let seq = state.withLock { state in
                state.streams.append(feed)
                return state.records.count
            }
            feed.yield(Self.poke(seq))
            opening.yield(request)
            return (
                HTTPResponse(status: .ok, headerFields: [.contentType: "text/event-stream"]),
                HTTPBody(bytes, length: .unknown, iterationBehavior: .single)
            )
        case "syncPull":
            let sent = try await Data(collecting: body ?? HTTPBody(), upTo: 1 << 20)
            let token = (try? JSONDecoder().decode(PullRequest.self, from: sent))?.token.flatMap { Int($0) } ?? 0
            let records = state.withLock { $0.records }
            let page = """
                {"changes":[\(records.dropFirst(token).joined(separator: ","))],"revoked":[],\
                "token":"\(records.count)","has_more":false}
                """
            return (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), HTTPBody(page))
        default:
            Issue.record("no answer for \(operationID)")
            return (HTTPResponse(status: .internalServerError), nil)
        }
    }

    private struct PullRequest: Decodable { let token: String? }

    private static func poke(_ seq: Int) -> ArraySlice<UInt8> {
        ArraySlice("event: seq\ndata: {\"seq\":\(seq)}\n\n".utf8)
    }
}
