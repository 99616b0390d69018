import Foundation

/// A DNS server for the domain tests: `Tests/dns/server.py` (dnslib) on a loopback port over UDP and TCP, answering
/// from a zone the test rewrites at any time. A name not in the zone is NXDOMAIN; a silent name gets no answer (a
/// timeout); a truncated name is answered over UDP with TC set and no records, and in full over TCP, unless it is
/// also silent over TCP.
final class DNSPeer {
    private let peer: PythonPeer
    private let folder: TemporaryFolder
    private var zonePath: String { folder.path + "/zone.json" }

    var port: Int { peer.port }

    /// `--dns-resolver`'s value for this server.
    var resolver: String { "127.0.0.1:\(port)" }

    private init(peer: PythonPeer, folder: TemporaryFolder) {
        self.peer = peer
        self.folder = folder
    }

    /// Starts the server with an empty zone and waits (with a deadline) until it says which port it bound.
    static func start() async throws -> DNSPeer {
        let folder = try TemporaryFolder()
        try Data(#"{"records": {}}"#.utf8).write(to: URL(fileURLWithPath: folder.path + "/zone.json"))
        let peer = try await PythonPeer.start(
            PythonPeer.script("dns/server.py"), arguments: [folder.path + "/zone.json"],
            failure: "the DNS server did not start (is dnslib installed? scripts/requirements-test.txt)")
        return DNSPeer(peer: peer, folder: folder)
    }

    /// Replaces the zone: TXT values by name, the names that get no answer, those truncated over UDP, and those that
    /// get no answer over TCP.
    func serve(
        _ records: [String: [String]], silent: [String] = [], truncated: [String] = [], silentOverTCP: [String] = []
    ) throws {
        let zone: [String: Any] = [
            "records": records, "silent": silent, "truncate": truncated, "silent_tcp": silentOverTCP,
        ]
        let data = try JSONSerialization.data(withJSONObject: zone)
        try data.write(to: URL(fileURLWithPath: zonePath), options: .atomic)
    }

    func stop() {
        peer.stop()
        folder.remove()
    }
}
