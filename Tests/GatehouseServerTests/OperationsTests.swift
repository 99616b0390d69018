import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import GatehouseServer

@Suite("Operations endpoints and error shapes")
struct OperationsTests {
    static let metricsToken = "scraper-token-0123456789"
    static let json: HTTPFields = [.contentType: "application/json"]

    /// The router on a fresh store, migrated, with a metrics token.
    func withApp(_ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try await withRouterApp({ $0.metricsToken = Self.metricsToken }, test)
    }

    @Test("liveness and readiness answer 200 once migrated")
    func health() async throws {
        try await withApp { client in
            try await client.execute(uri: "/health/live", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ok"}"#)
            }
            try await client.execute(uri: "/health/ready", method: .get) { response in
                #expect(response.status == .ok)
                let body = String(buffer: response.body)
                #expect(body.contains(#""store":"\#(TestStore.kind)""#))
                #expect(body.contains(#""schema_version":\#(Migrations.all.count)"#))
            }
        }
    }

    @Test("metrics count requests by route and status, with latency histograms and pool gauges")
    func metrics() async throws {
        try await withApp { client in
            _ = try await client.execute(uri: "/health/live", method: .get)
            _ = try await client.execute(uri: "/no/such/route", method: .get)
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .unauthorized)
            }
            try await client.execute(
                uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(Self.metricsToken)"]
            ) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                let text = String(buffer: response.body)
                #expect(text.contains(#"http_route="/health/live""#))
                #expect(text.contains(#"http_response_status_code="404""#))
                #expect(text.contains("http_server_request_duration_bucket"))
                #expect(text.contains("gatehouse_store_connections_max"))
                #expect(text.contains("gatehouse_store_connections_in_use"))
            }
        }
    }

    @Test("the OpenAPI document is served")
    func openAPI() async throws {
        try await withApp { client in
            try await client.execute(uri: "/openapi.yaml", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/yaml")
                let text = String(buffer: response.body)
                #expect(text.hasPrefix("openapi: 3.1.0"))
                #expect(text.contains("/health/ready:"))
            }
        }
    }

    @Test("a method a known path does not serve is 405 with Allow; an unknown path stays 404")
    func methodNotAllowed() async throws {
        try await withApp { client in
            try await client.execute(uri: "/health/live", method: .put) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "GET")
                #expect(String(buffer: response.body).contains(#""code":"method_not_allowed""#))
            }
            try await client.execute(uri: "/v1/companies/some-id/members/someone", method: .post) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "DELETE, PATCH")
            }
            try await client.execute(uri: "/v1/no-such-thing", method: .put) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test("an unknown route is 404 not_found in {code, message}")
    func unknownRoute() async throws {
        try await withApp { client in
            try await client.execute(uri: "/v1/nothing-here", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                #expect(
                    String(buffer: response.body)
                        == #"{"code":"not_found","message":"No route matches this method and path"}"#)
            }
        }
    }

    @Test(
        "malformed JSON is 400 bad_json, naming the field but never echoing the value",
        arguments: [
            (#"{"name": "#, "The request body is not valid JSON"),
            (#"{"name": 12345}"#, "'name' must be a string"),
            (#"["secret-value"]"#, "the body must be an object"),
        ])
    func malformedJSON(body: String, message: String) async throws {
        try await withApp { client in
            try await client.execute(
                uri: "/v1/companies", method: .post, headers: Self.json, body: ByteBuffer(string: body)
            ) { response in
                #expect(response.status == .badRequest)
                let text = String(buffer: response.body)
                #expect(text == #"{"code":"bad_json","message":"\#(message)"}"#)
                #expect(!text.contains("12345") && !text.contains("secret-value"))
            }
            // A well-formed body is read, and only then is the missing token refused.
            try await client.execute(
                uri: "/v1/companies", method: .post, headers: Self.json, body: ByteBuffer(string: #"{"name":"b"}"#)
            ) {
                #expect($0.status == .unauthorized)
            }
        }
    }

    @Test("a body over the limit is 413 payload_too_large, declared or streamed")
    func oversizedBody() async throws {
        try await withApp { client in
            let big = ByteBuffer(repeating: UInt8(ascii: "a"), count: (1 << 20) + 1)
            try await client.execute(uri: "/v1/companies", method: .post, headers: Self.json, body: big) { response in
                #expect(response.status == .contentTooLarge)
                #expect(String(buffer: response.body).contains(#""code":"payload_too_large""#))
            }
            // The limit holds on routes that never read the body, too.
            try await client.execute(uri: "/health/live", method: .post, body: big) { response in
                #expect(response.status == .contentTooLarge)
            }
        }
    }
}

@Suite("Readiness and shutdown on a live server")
struct LifecycleTests {
    @Test("with PostgreSQL unreachable the server still answers: live 200, ready 503 not_ready")
    func storeUnavailable() async throws {
        var configuration = try await TestStore.configuration()
        // Nothing listens on port 1 of loopback: connections are refused at once.
        configuration.databaseURL = "postgres://gatehouse@127.0.0.1:1/gatehouse"
        configuration.databaseSearchPath = nil
        let server = try await LiveServer.start(configuration)
        let client = HTTPClient()
        #expect(try await client.send(.GET, server.baseURL + "/health/live").status == 200)
        for _ in 0..<3 {
            let ready = try await client.send(.GET, server.baseURL + "/health/ready")
            #expect(ready.status == 503)
            #expect(ready.json["code"] as? String == "not_ready")
        }
        try await client.shutdown()
        try await server.stop()
        #expect(server.services.store.isClosed)
    }

    @Test(
        "a PostgreSQL database that appears after start is retried until ready",
        .enabled(if: TestStore.postgresURL != nil))
    func storeRecovers() async throws {
        let base = try #require(TestStore.postgresURL)
        let name = "late_" + UUID().uuidString.prefix(8).lowercased()
        var configuration = try await TestStore.configuration()
        let url = try #require(URL(string: base)).deletingLastPathComponent().appendingPathComponent(name)
        configuration.databaseURL = url.absoluteString
        configuration.databaseSearchPath = nil
        let server = try await LiveServer.start(configuration)
        let client = HTTPClient()
        #expect(try await client.send(.GET, server.baseURL + "/health/ready").status == 503)
        try await TestStore.asAdmin("CREATE DATABASE \(ident: name)")
        let ready = try await LiveServer.eventually {
            try await client.send(.GET, server.baseURL + "/health/ready").status == 200
        }
        #expect(ready)
        try await client.shutdown()
        try await server.stop()
        try await TestStore.asAdmin("DROP DATABASE \(ident: name)")
    }

    @Test(
        "a running server folds the SQLite WAL into the file by itself, its connections never do",
        .enabled(if: TestStore.postgresURL == nil))
    func checkpoints() async throws {
        let configuration = try await TestStore.configuration()
        guard case .sqlite(let path) = configuration.storeLocation else { return }
        let server = try await LiveServer.start(configuration)
        do {
            let store = server.services.store
            func fileSize() throws -> Int {
                (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            }
            // Writes enough pages that a checkpoint must grow the file: its connections leave them in the WAL.
            try await store.transaction { db in
                try await db.raw("CREATE TABLE checkpoint_probe (id INTEGER PRIMARY KEY, filler TEXT)").run()
                for _ in 0..<200 {
                    try await db.raw(
                        "INSERT INTO checkpoint_probe (filler) VALUES (\(bind: String(repeating: "x", count: 4000)))"
                    ).run()
                }
            }
            let written = try fileSize()
            let folded = try await LiveServer.eventually(timeout: .seconds(30)) { try fileSize() > written + 400_000 }
            #expect(folded)
        } catch {
            try await server.stop()
            throw error
        }
        try await server.stop()
    }

    @Test("graceful shutdown lets an in-flight request finish, then closes the store")
    func gracefulShutdown() async throws {
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let server = try await LiveServer.start(try await TestStore.configuration()) { router in
            router.get("/test/slow") { _, _ -> String in
                enteredContinuation.yield()
                for await _ in release { break }
                return "finished"
            }
        }
        let client = HTTPClient()
        let ready = try await LiveServer.eventually {
            try await client.send(.GET, server.baseURL + "/health/ready").status == 200
        }
        #expect(ready)
        let inFlight = Task { try await client.send(.GET, server.baseURL + "/test/slow") }
        for await _ in entered { break }
        let stopping = Task { try await server.stop() }
        // The server stops accepting new connections while the slow request is still running.
        let refusing = try await LiveServer.eventually {
            let fresh = HTTPClient()
            let refused: Bool
            do {
                _ = try await fresh.send(.GET, server.baseURL + "/health/live")
                refused = false
            } catch {
                refused = true
            }
            try await fresh.shutdown()
            return refused
        }
        #expect(refusing)
        #expect(!server.services.store.isClosed)
        releaseContinuation.yield()
        let reply = try await inFlight.value
        #expect(reply.status == 200)
        #expect(reply.body == "finished")
        try await stopping.value
        #expect(server.services.store.isClosed)
        try await client.shutdown()
    }

    @Test("once migrated, the start-up code pages are advised out, and the app answers as before")
    func startupPages() async throws {
        let services = try GatehouseServices(
            try await TestStore.configuration(), logger: TestStore.quietLogger, clock: SystemClock())
        let release = Task { await services.releaseStartupCodePages() }
        try await services.store.migrate()
        let advised = await release.value
        #if os(Linux)
            #expect(advised > 0)
        #endif
        do {
            try await buildApplication(services, router: try buildRouter(services)).test(.router) { client in
                try await client.execute(uri: "/health/ready", method: .get) { response in
                    #expect(response.status == .ok)
                }
            }
        } catch {
            await services.store.close()
            throw error
        }
        await services.store.close()
        // A store closed before it was migrated releases nothing, and does not keep its caller waiting.
        let unmigrated = try GatehouseServices(
            try await TestStore.configuration(), logger: TestStore.quietLogger, clock: SystemClock())
        let waiting = Task { await unmigrated.releaseStartupCodePages() }
        await unmigrated.store.close()
        #expect(await waiting.value == 0)
    }

    @Test("start-up pages: only executable mappings of a file are advised")
    func startupPageRanges() {
        let maps = """
            55d0c0000000-55d0c2000000 r-xp 00000000 fe:00 123   /usr/bin/gatehouse
            55d0c2000000-55d0c2100000 r--p 02000000 fe:00 123   /usr/bin/gatehouse
            7f0000000000-7f0000001000 r-xp 00000000 00:00 0
            7f0000010000-7f0000020000 rw-p 00000000 00:00 0     [heap]
            7fff00000000-7fff00001000 r-xp 00000000 00:00 0     [vdso]
            7f1000000000-7f1000800000 r-xp 00000000 fe:00 456   /opt/swift/usr/lib/swift/linux/libswiftCore.so
            """
        let ranges = StartupCodePages.executableFileRanges(maps)
        #expect(ranges.map(\.start) == [0x55d0_c000_0000, 0x7f10_0000_0000])
        #expect(ranges.map(\.end) == [0x55d0_c200_0000, 0x7f10_0080_0000])
    }
}
