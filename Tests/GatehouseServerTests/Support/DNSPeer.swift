import Foundation

/// A DNS server for the domain tests: `Tests/dns/server.py` (dnslib) on a loopback UDP port, answering from a zone
/// the test rewrites at any time. A name not in the zone is NXDOMAIN; a silent name gets no answer (a timeout).
final class DNSPeer {
    let port: Int
    private let process: Process
    private let input: Pipe
    private let folder: TemporaryFolder
    private var zonePath: String { folder.path + "/zone.json" }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("dns/server.py").path

    /// `--dns-resolver`'s value for this server.
    var resolver: String { "127.0.0.1:\(port)" }

    private init(port: Int, process: Process, input: Pipe, folder: TemporaryFolder) {
        self.port = port
        self.process = process
        self.input = input
        self.folder = folder
    }

    /// Starts the server with an empty zone and waits (with a deadline) until it says which port it bound.
    static func start() async throws -> DNSPeer {
        let folder = try TemporaryFolder()
        try Data(#"{"records": {}}"#.utf8).write(to: URL(fileURLWithPath: folder.path + "/zone.json"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, folder.path + "/zone.json"]
        // The server exits when its standard input closes: with the test, however it ends.
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.start()
        let lines = output.lines()
        let port = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                for await line in lines where line.hasPrefix("READY ") { return Int(line.dropFirst(6)) }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(30))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let port else {
            process.terminate()
            throw PeerError("the DNS server did not start (is dnslib installed? scripts/requirements-test.txt)")
        }
        return DNSPeer(port: port, process: process, input: input, folder: folder)
    }

    /// Replaces the zone: TXT values by name, and the names that get no answer.
    func serve(_ records: [String: [String]], silent: [String] = []) throws {
        let data = try JSONSerialization.data(withJSONObject: ["records": records, "silent": silent])
        try data.write(to: URL(fileURLWithPath: zonePath), options: .atomic)
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
        folder.remove()
    }

    struct PeerError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
