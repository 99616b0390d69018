import Foundation
import GatehouseServer
import NIOConcurrencyHelpers
import Testing

/// `gatehouse backup`: a copy of the SQLite store taken while a server writes, and the documented restore.
@Suite("gatehouse backup")
struct BackupTests {
    /// A mutation the server acknowledged (`applied`), when the pushing client sent it, and when it heard so. The
    /// commit falls between the two: a push sent before a copy ended may be in it even when its answer came after.
    struct Acknowledged: Sendable {
        let id: String
        let n: Int
        let sent: ContinuousClock.Instant
        let at: ContinuousClock.Instant
    }

    /// Devices pushing new records as fast as the server takes them, each recording what was acknowledged and when.
    final class PushLoad: Sendable {
        /// Records per push, each with a 1 KiB field, so the store grows while the load runs.
        static let batch = 5
        static let padding = String(repeating: "p", count: 1024)

        private let acknowledged = NIOLockedValueBox<[Acknowledged]>([])
        private let stopping = NIOLockedValueBox(false)
        private let failures = NIOLockedValueBox<[String]>([])
        private let run = NIOLockedValueBox<Task<Void, Never>?>(nil)

        /// Starts one pushing device per bearer.
        static func start(_ client: AuthClient, cid: String, bearers: [String]) -> PushLoad {
            let load = PushLoad()
            let task = Task {
                await withTaskGroup(of: Void.self) { group in
                    for (device, bearer) in bearers.enumerated() {
                        group.addTask { await load.push(client, cid: cid, bearer: bearer, device: device) }
                    }
                }
            }
            load.run.withLockedValue { $0 = task }
            return load
        }

        /// Pushes batches of new records as one device until asked to stop, or until a push is not applied whole.
        private func push(_ client: AuthClient, cid: String, bearer: String, device: Int) async {
            let clientID = UUID().uuidString
            var n = 0
            while !stopping.withLockedValue({ $0 }) {
                let records = (n..<n + Self.batch).map { (id: newRecordID(), n: $0) }
                n += Self.batch
                let mutations = records.map {
                    upsert($0.id, base: 0, ["n": $0.n, "device": device, "pad": Self.padding])
                }
                do {
                    let sent = ContinuousClock.now
                    let reply = try await client.push(cid, client: clientID, mutations, bearer: bearer)
                    let at = ContinuousClock.now
                    let results = reply.json["results"] as? [[String: Any]] ?? []
                    guard reply.status == 200, results.count == records.count,
                        results.allSatisfy({ $0["status"] as? String == "applied" })
                    else {
                        failures.withLockedValue {
                            $0.append("push answered \(reply.status): \(reply.body.prefix(200))")
                        }
                        return
                    }
                    acknowledged.withLockedValue {
                        $0 += records.map { Acknowledged(id: $0.id, n: $0.n, sent: sent, at: at) }
                    }
                } catch {
                    failures.withLockedValue { $0.append("\(error)") }
                    return
                }
            }
        }

        var acknowledgements: [Acknowledged] { acknowledged.withLockedValue { $0 } }
        var errors: [String] { failures.withLockedValue { $0 } }

        /// Asks every device to stop after its push in flight, and waits until they have.
        func finish() async {
            stopping.withLockedValue { $0 = true }
            await run.withLockedValue { $0 }?.value
        }
    }

    /// Runs the binary to its end off Swift's cooperative threads, which the server and the load need meanwhile.
    static func runBinary(_ arguments: [String]) async throws -> ProcessOutcome {
        try await CommandLineTests.process(arguments, environment: [:], in: nil).runToEnd()
    }

    static func mode(_ path: String) throws -> Int {
        ((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? 0)
            & 0o777
    }

    /// One `gatehouse backup` run during the load: where it wrote, what it printed, and when it began and ended.
    struct TakenBackup {
        let path: String
        let outcome: ProcessOutcome
        let began: ContinuousClock.Instant
        let ended: ContinuousClock.Instant
    }

    /// The documented restore, with the server stopped: put `backup` in place of the store in `dataDir` (its -wal and
    /// -shm go), keep the key file, check the copy's integrity, start `gatehouse serve` on it and pull every record
    /// the session `bearer` can see. The server is stopped before this returns.
    static func restoreAndPull(
        _ backup: String, dataDir: String, publicURL: String, cid: String, bearer: String
    ) async throws -> Device {
        let store = dataDir + "/gatehouse.sqlite"
        for file in [store, store + "-wal", store + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        try FileManager.default.copyItem(atPath: backup, toPath: store)
        let check = try Store(location: .sqlite(path: store), logger: TestStore.quietLogger)
        let integrity = try await check.database.raw("PRAGMA integrity_check").first(
            decodingColumn: "integrity_check", as: String.self)
        await check.close()
        #expect(integrity == "ok")

        // The same public URL, so the tokens the first server issued are for this one too.
        let (server, lines) = try CommandLineTests.serve([
            "serve", "--data-dir", dataDir, "--port", "0", "--public-url", publicURL,
        ])
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        var iterator = lines.makeAsyncIterator()
        let startLine = await iterator.next() ?? ""
        let port = try #require(startLine.firstMatch(of: /port=(\d+)/).map { String($0.1) }, "\(startLine)")
        let client = AuthClient(http: AccountHarness.http, base: "http://127.0.0.1:\(port)")
        let ready = try await LiveServer.eventually { (try? await client.get("/health/ready").status) == 200 }
        #expect(ready)
        var device = Device(client, cid: cid, bearer: bearer)
        let pulled = try await device.sync(limit: 1000)
        #expect(pulled.status == 200, "\(pulled.body)")
        return device
    }

    @Test(
        "backups taken during a push load restore with every mutation acknowledged before they began",
        .enabled(if: TestStore.postgresURL == nil, "the command copies SQLite stores; PostgreSQL uses pg_dump"))
    func backupDuringPushLoadRestores() async throws {
        let folder = try CommandLineTests.scratchFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let dataDir = folder.appendingPathComponent("data").path
        let backups = folder.appendingPathComponent("backups").path
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)

        var owner: Person?
        var cid = ""
        var publicURL = ""
        var acknowledgements: [Acknowledged] = []
        var taken: [TakenBackup] = []
        // The server runs on the SQLite file in its data directory, as a default install does.
        try await AccountHarness.with(
            live: true,
            {
                $0.databaseURL = nil
                $0.databaseSearchPath = nil
                $0.dataDirectory = dataDir
            }
        ) { h in
            var boss = try await h.person("backup")
            cid = try await h.company("Backup Co", owner: &boss)
            publicURL = h.server.baseURL
            owner = boss
            var bearers = [try #require(boss.company?.access)]
            for _ in 1..<4 {
                bearers.append(
                    try SignedIn(
                        try await h.client.companyLogin(
                            cid, username: "boss", password: "company secret 1", bearer: boss.account.access)
                    ).access)
            }
            let load = PushLoad.start(h.client, cid: cid, bearers: bearers)
            do {
                // Three copies, each once the load has written 300 more records: whichever of them lands just after
                // one of SQLite's checkpoints, the others find acknowledged writes still in the -wal file only.
                for round in 1...3 {
                    let warm = try await firstValue {
                        load.acknowledgements.count >= 300 * round
                            ? true
                            : load.errors.count == bearers.count ? false : nil
                    }
                    try #require(warm == true, "\(load.errors)")
                    let path = backups + "/backup-\(round).sqlite"
                    let began = ContinuousClock.now
                    let outcome = try await Self.runBinary(["backup", "--to", path, "--data-dir", dataDir])
                    taken.append(TakenBackup(path: path, outcome: outcome, began: began, ended: .now))
                }
                // The load goes on after the last copy is done, so it was writing the whole time the copies were taken.
                let after = try await firstValue {
                    load.acknowledgements.contains { $0.sent > taken[2].ended } ? true : nil
                }
                #expect(after == true)
            } catch {
                await load.finish()
                throw error
            }
            await load.finish()
            acknowledgements = load.acknowledgements
            #expect(load.errors.isEmpty, "\(load.errors.prefix(3))")
        }

        // Nothing half-written is left beside the copies.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: backups).sorted() == [
                "backup-1.sqlite", "backup-2.sqlite", "backup-3.sqlite",
            ])
        let bearer = try #require(owner?.company?.access)
        let pushed = Set(acknowledgements.map(\.id))
        for backup in taken {
            #expect(backup.outcome.status == 0, "\(backup.outcome.stderr)")
            #expect(
                backup.outcome.stdout.hasPrefix("backed up sqlite at \(dataDir)/gatehouse.sqlite to \(backup.path) ("))
            #expect(backup.outcome.stdout.contains(" bytes)"))
            #expect(try Self.mode(backup.path) == 0o600)
            let before = acknowledgements.filter { $0.at < backup.began }
            // The load was writing while the copy ran: some push was in flight (sent before the copy ended, answered
            // after it began). Whether one is also answered inside the copy's span is up to the scheduler: a copy of
            // a few hundred milliseconds on a loaded machine may see none (a fresh-clone run did).
            let overlapping = acknowledgements.filter { $0.sent < backup.ended && $0.at > backup.began }
            let later = acknowledgements.filter { $0.sent > backup.ended }
            #expect(!overlapping.isEmpty, "no push was in flight while the backup ran")

            let device = try await Self.restoreAndPull(
                backup.path, dataDir: dataDir, publicURL: publicURL, cid: cid, bearer: bearer)
            let missing = before.filter { device.field($0.id, "n") as? Int != $0.n }
            #expect(missing.isEmpty, "\(missing.count) of \(before.count) acknowledged mutations are not in the copy")
            // It serves the copy, not what was written after it, and nothing nobody pushed.
            #expect(!later.isEmpty && later.allSatisfy { device.records[$0.id] == nil })
            #expect(device.records.keys.allSatisfy { pushed.contains($0) })
        }
    }

    @Test("gatehouse backup never replaces a file unasked, never creates a store, and sends PostgreSQL to pg_dump")
    func backupRefusals() async throws {
        let folder = try CommandLineTests.scratchFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let dataDir = folder.appendingPathComponent("data").path
        let store = dataDir + "/gatehouse.sqlite"
        let backup = folder.appendingPathComponent("copy.sqlite").path
        #expect(try await Self.runBinary(["migrate", "--data-dir", dataDir]).status == 0)

        let first = try await Self.runBinary(["backup", "--to", backup, "--data-dir", dataDir])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try Self.mode(backup) == 0o600)

        // An existing file stays as it was without --force, and is replaced with it.
        try Data("an older backup".utf8).write(to: URL(fileURLWithPath: backup))
        let again = try await Self.runBinary(["backup", "--to", backup, "--data-dir", dataDir])
        #expect(again.status == 1)
        #expect(again.stderr == "gatehouse: \(backup) exists; pass --force to replace it\n")
        #expect(try String(contentsOfFile: backup, encoding: .utf8) == "an older backup")
        let forced = try await Self.runBinary(["backup", "--to", backup, "--force", "--data-dir", dataDir])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: backup)).prefix(15) == Data("SQLite format 3".utf8))
        #expect(try Self.mode(backup) == 0o600)

        // Not over the store itself, even with --force.
        let onItself = try await Self.runBinary(["backup", "--to", store, "--force", "--data-dir", dataDir])
        #expect(onItself.status == 1)
        #expect(onItself.stderr.contains("is the store itself"))
        // Nor over its write-ahead log, which holds what is not yet in the file.
        let onLog = try await Self.runBinary(["backup", "--to", store + "-wal", "--force", "--data-dir", dataDir])
        #expect(onLog.status == 1)
        #expect(onLog.stderr.contains("is the store itself"))

        // A data directory without a store: an error, and no empty store made.
        let empty = folder.appendingPathComponent("empty").path
        let none = try await Self.runBinary(["backup", "--to", folder.path + "/none.sqlite", "--data-dir", empty])
        #expect(none.status == 1)
        #expect(none.stderr.contains("no SQLite store at \(empty)/gatehouse.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: empty + "/gatehouse.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/none.sqlite"))

        // PostgreSQL: pointed to pg_dump, without connecting (nothing listens on port 1) and without writing.
        let postgres = try await Self.runBinary([
            "backup", "--to", folder.path + "/pg.dump", "--database-url", "postgres://gatehouse@127.0.0.1:1/gatehouse",
        ])
        #expect(postgres.status == 1)
        #expect(postgres.stderr.split(separator: "\n").count == 1)
        #expect(postgres.stderr.contains("back it up with pg_dump"))
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/pg.dump"))
    }
}
