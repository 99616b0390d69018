import AsyncHTTPClient
import Foundation
import GatehouseServer
import SQLKit
import Testing

/// The store unreachable: requests that need it answer 503 `store_unavailable` with `Retry-After` (never a 500, never
/// an answer that would sign the user out), and work again by themselves once it is back.
@Suite("Store outages")
struct StoreOutageTests {
    static let versionHeader = ("X-Supabase-Api-Version", "2024-01-01")

    /// Checks one outage answer: 503, `Retry-After: 5`, and the body shape of its path (GoTrue's legacy shape under
    /// /auth/v1 without the version header, `{code, message}` otherwise).
    static func expectUnavailable(_ reply: HTTPReply, legacy: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == 503, "\(reply.body)", sourceLocation: sourceLocation)
        #expect(reply.headers["retry-after"] == "5", sourceLocation: sourceLocation)
        let json = reply.json
        if legacy {
            #expect(json["code"] as? Int == 503, sourceLocation: sourceLocation)
            #expect(json["error_code"] as? String == "store_unavailable", sourceLocation: sourceLocation)
            #expect((json["msg"] as? String)?.isEmpty == false, sourceLocation: sourceLocation)
        } else {
            #expect(json["code"] as? String == "store_unavailable", sourceLocation: sourceLocation)
            #expect((json["message"] as? String)?.isEmpty == false, sourceLocation: sourceLocation)
        }
    }

    /// What a client sees while PostgreSQL is away: a password sign-in (both /auth/v1 shapes), a refresh (which must
    /// not spend or end the session), creating a company, and readiness.
    static func expectOutageAnswers(_ h: AccountHarness, email: String, session: SignedIn) async throws {
        let c = h.client
        expectUnavailable(try await c.password(email, "correct horse battery"), legacy: true)
        let versioned = try await c.post(
            "/auth/v1/token?grant_type=password", ["email": email, "password": "correct horse battery"],
            extra: [versionHeader])
        expectUnavailable(versioned, legacy: false)
        #expect(versioned.headers["x-supabase-api-version"] == "2024-01-01")
        expectUnavailable(try await c.refresh(session.refresh), legacy: true)
        expectUnavailable(try await c.createCompany("During the outage", bearer: session.access), legacy: false)
        let ready = try await c.get("/health/ready")
        #expect(ready.status == 503)
        #expect(ready.json["code"] as? String == "not_ready")
        #expect(try await c.get("/health/live").status == 200)
    }

    /// Once the store is back: the same refresh token rotates (the outage spent nothing), sign-in and writes work.
    static func expectRecovered(_ h: AccountHarness, email: String, session: SignedIn) async throws {
        let c = h.client
        let back = try await LiveServer.eventually {
            try await c.createCompany("After the outage", bearer: session.access).status == 201
        }
        #expect(back)
        #expect(try await c.refresh(session.refresh).status == 200)
        #expect(try await c.password(email, "correct horse battery").status == 200)
        #expect(try await c.get("/health/ready").status == 200)
    }

    @Test(
        "PostgreSQL stopped under a running server: 503 store_unavailable with Retry-After, then answers again once it is started",
        .enabled(if: TestStore.postgresURL != nil))
    func postgresStoppedAndStarted() async throws {
        let cluster = try ThrowawayCluster.start()
        defer { cluster.remove() }
        try await AccountHarness.with({ configuration in
            configuration.databaseURL = cluster.url
            configuration.databaseSearchPath = nil
        }) { h in
            let email = AccountHarness.newEmail("outage")
            let session = try await h.confirmedAccount(email)
            #expect(try await h.client.createCompany("Before the outage", bearer: session.access).status == 201)

            try cluster.stop()
            // A read with a bearer token: served from the ≤1 s cache at first, then the store is needed.
            var user = try await h.client.user(session.access)
            let refused = try await LiveServer.eventually {
                user = try await h.client.user(session.access)
                return user.status != 200
            }
            #expect(refused)
            Self.expectUnavailable(user, legacy: true)
            let companies = try await h.client.get("/v1/companies", bearer: session.access)
            Self.expectUnavailable(companies, legacy: false)
            try await Self.expectOutageAnswers(h, email: email, session: session)

            try cluster.start()
            try await Self.expectRecovered(h, email: email, session: session)
            #expect(try await h.client.user(session.access).status == 200)
        }
    }

    @Test(
        "SQLite locked by another process for longer than the busy timeout: writes answer 503 store_unavailable, reads go on, and writes work again once it lets go",
        .enabled(if: TestStore.postgresURL == nil))
    func sqliteLockedByAnotherProcess() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("outage")
            let session = try await h.confirmedAccount(email)
            #expect(try await h.client.createCompany("Before the outage", bearer: session.access).status == 201)

            // A backup or an operator's `sqlite3` holding the write lock: each write waits the busy timeout (5 s),
            // then gives up. Three writes, one after the other, at the store's write turn.
            let path = (h.server.services.configuration.dataDirectory as NSString)
                .appendingPathComponent("gatehouse.sqlite")
            let holder = try LockHolder(path: path)
            do {
                Self.expectUnavailable(try await h.client.password(email, "correct horse battery"), legacy: true)
                Self.expectUnavailable(try await h.client.refresh(session.refresh), legacy: true)
                Self.expectUnavailable(
                    try await h.client.createCompany("During the outage", bearer: session.access), legacy: false)
                // WAL readers do not wait for the writer.
                #expect(try await h.client.get("/v1/companies", bearer: session.access).status == 200)
            } catch {
                holder.release()
                throw error
            }
            holder.release()
            try await Self.expectRecovered(h, email: email, session: session)
        }
    }

    @Test(
        "a PostgreSQL that was never reachable: 503 store_unavailable, and a token that cannot be checked is not called bad"
    )
    func unreachableFromTheStart() async throws {
        var configuration = try await TestStore.configuration()
        // Nothing listens on port 1 of loopback: connections are refused at once.
        configuration.databaseURL = "postgres://gatehouse@127.0.0.1:1/gatehouse"
        configuration.databaseSearchPath = nil
        let server = try await LiveServer.start(configuration)
        let client = AuthClient(http: AccountHarness.http, base: server.baseURL)
        do {
            Self.expectUnavailable(
                try await client.password("nobody@example.com", "correct horse battery"), legacy: true)
            Self.expectUnavailable(try await client.signUp(AccountHarness.newEmail("outage")), legacy: true)
            // A well-formed ES256 token: its keys cannot be read, so it is neither accepted nor called forged.
            let header = Data(#"{"alg":"ES256","kid":"k1","typ":"JWT"}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "")
            let token = "\(header).eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
            Self.expectUnavailable(try await client.get("/v1/companies", bearer: token), legacy: false)
            Self.expectUnavailable(
                try await client.get("/auth/v1/user", bearer: token, extra: [Self.versionHeader]), legacy: false)
            // What needs no store keeps its own answer.
            let anonymous = try await client.get("/v1/companies")
            #expect(anonymous.status == 401)
            #expect(anonymous.json["code"] as? String == "no_authorization")
            #expect(try await client.get("/health/live").status == 200)
            let ready = try await client.get("/health/ready")
            #expect(ready.status == 503)
            #expect(ready.json["code"] as? String == "not_ready")
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    @Test("what counts as unreachable: connection failures do, a statement the store refuses does not")
    func classification() async throws {
        // A refused connection, as postgres-nio reports it.
        let refused = try Store(
            location: .postgres(url: "postgres://gatehouse@127.0.0.1:1/gatehouse"), connectionsPerLoop: 1,
            logger: TestStore.quietLogger)
        do {
            _ = try await refused.database.raw("SELECT 1 AS one").all()
            Issue.record("a query on port 1 succeeded")
        } catch {
            #expect(StoreOutage.isUnavailable(error), "\(String(reflecting: error))")
        }
        await refused.close()
        // A closed pool.
        do {
            _ = try await refused.database.raw("SELECT 1 AS one").all()
            Issue.record("a query on a closed store succeeded")
        } catch {
            #expect(StoreOutage.isUnavailable(error), "\(String(reflecting: error))")
        }

        // This run's store: syntax errors, unknown tables and constraint violations are the caller's fault.
        let store = try Store(location: try await TestStore.freshLocation(), logger: TestStore.quietLogger)
        let report = StoreOutage.RequestReport()
        do {
            try await StoreOutage.$currentRequest.withValue(report) {
                try await store.database.raw(
                    "CREATE TABLE outage_check (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"
                ).run()
                try await store.database.raw("INSERT INTO outage_check (id, name) VALUES (1, 'one')").run()
                for statement: SQLQueryString in [
                    "INSERT INTO outage_check (id, name) VALUES (1, 'again')",
                    "INSERT INTO outage_check (id, name) VALUES (2, NULL)", "SELEC 1", "SELECT * FROM no_such_table",
                ] {
                    do {
                        try await store.database.raw(statement).run()
                        Issue.record("a statement the store should refuse succeeded")
                    } catch {
                        #expect(!StoreOutage.isUnavailable(error), "\(String(reflecting: error))")
                    }
                }
                // In a transaction, too.
                await #expect(throws: (any Error).self) {
                    try await store.transaction { db in
                        try await db.raw("INSERT INTO outage_check (id, name) VALUES (1, 'again')").run()
                    }
                }
            }
            #expect(report.outage == nil)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    @Test("an SQLite file whose folder is gone cannot be opened: unavailable, and the request's report saw it")
    func sqliteFolderGone() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-tests/gone-\(UUID().uuidString.prefix(8))")
        let store = try Store(
            location: .sqlite(path: folder.appendingPathComponent("gatehouse.sqlite").path),
            logger: TestStore.quietLogger)
        try FileManager.default.removeItem(at: folder)
        let report = StoreOutage.RequestReport()
        do {
            // The caller swallows the failure, as a handler may; the report still knows.
            let rows = try? await StoreOutage.$currentRequest.withValue(report) {
                try await store.database.raw("SELECT 1 AS one").all()
            }
            #expect(rows == nil)
            let seen = try #require(report.outage)
            #expect(StoreOutage.isUnavailable(seen), "\(String(reflecting: seen))")
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

/// Another process (Python's sqlite3) holding SQLite's write lock (`BEGIN IMMEDIATE`) until released.
final class LockHolder {
    private let process = Process()
    private let input = Pipe()

    init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
            db.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            sys.stdin.read()
            db.execute("ROLLBACK")
            """,
            path,
        ]
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.start()
        // The first line says the lock is held; nothing is written before it.
        let line = output.fileHandleForReading.readData(ofLength: 7)
        guard String(decoding: line, as: UTF8.self) == "locked\n" else {
            process.terminate()
            throw ThrowawayCluster.ClusterError(output: "the lock holder did not start")
        }
    }

    /// Lets go of the lock and waits for the process to end.
    func release() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// A PostgreSQL cluster of the test's own (scripts/pg-cluster.sh: a free loopback port, run as the `postgres` OS
/// user when root), which the test may stop and start again; removed afterwards.
struct ThrowawayCluster {
    let port: Int
    let folder: String
    let bin: String

    var url: String { "postgres://gatehouse@127.0.0.1:\(port)/postgres" }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/pg-cluster.sh").path

    static func start() throws -> ThrowawayCluster {
        let words = try shell(#". '\#(script)' && pg_start >&2 && echo "$pg_port $pg_work $pg_bin""#)
            .split(separator: " ").map(String.init)
        guard words.count == 3, let port = Int(words[0]) else { throw ClusterError(output: words.joined()) }
        return ThrowawayCluster(port: port, folder: words[1], bin: words[2])
    }

    /// Stops the server at once (its connections are cut); the data stays for `start()`.
    func stop() throws {
        try Self.shell(
            #". '\#(Self.script)' && pg_as_postgres "'\#(bin)/pg_ctl' -D '\#(folder)/data' -m fast -w stop" >&2"#)
    }

    /// Starts the stopped server again on the same port.
    func start() throws {
        let options = "-p \(port) -k '\(folder)' -c listen_addresses=127.0.0.1 -c fsync=off"
        try Self.shell(
            #". '\#(Self.script)' && pg_as_postgres "'\#(bin)/pg_ctl' -D '\#(folder)/data' -l '\#(folder)/postgres.log' -w -t 60 -o \"\#(options)\" start" >&2"#
        )
    }

    /// Stops the server and removes its folder.
    func remove() {
        _ = try? Self.shell(#". '\#(Self.script)' && pg_bin='\#(bin)' && pg_work='\#(folder)' && pg_stop"#)
    }

    struct ClusterError: Error, CustomStringConvertible {
        let output: String
        var description: String { "the throwaway cluster failed: \(output)" }
    }

    /// Runs `command` in bash and returns its standard output; a failure throws with its standard error.
    /// Bash runs under Python's subprocess, which closes every other descriptor: the PostgreSQL server it starts must
    /// not inherit the one Foundation watches to learn that its child exited, or `waitUntilExit` waits for the server.
    @discardableResult
    static func shell(_ command: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", "import subprocess, sys; sys.exit(subprocess.run(['bash', '-c', sys.argv[1]]).returncode)",
            command,
        ]
        let outcome = try process.runToEndBlocking()
        guard outcome.status == 0 else { throw ClusterError(output: outcome.stderr) }
        return outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
