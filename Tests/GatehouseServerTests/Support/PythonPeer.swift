import Foundation

/// A peer the tests start from a Python script in Tests/ (`dns/server.py`, `saml/idp.py`): it binds a loopback port
/// the system picks, prints "READY <port>", and exits when its standard input closes, so it goes with the test
/// however the test ends.
struct PythonPeer {
    let port: Int
    let process: Process
    let input: Pipe

    /// The script's path, from the Tests/ folder.
    static func script(_ relative: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(relative).path
    }

    /// Starts `script` and waits, with a deadline, until it says which port it bound; `failure` says what to
    /// install when it does not.
    static func start(_ script: String, arguments: [String] = [], failure: String) async throws -> PythonPeer {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script] + arguments
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
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let port else {
            process.terminate()
            throw PeerError(failure)
        }
        return PythonPeer(port: port, process: process, input: input)
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    struct PeerError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
