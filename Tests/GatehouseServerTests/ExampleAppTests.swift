import Foundation
import GatehouseServer
import Testing

/// The SDK's example app (Examples/GatehouseExample), run as the README runs it, against a live server: the codes
/// come from the mail the server sent, and the tier from the operator.
@Suite("The SDK's example app")
struct ExampleAppTests {
    static let executable: URL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("gatehouse-example")

    @Test("gatehouse-example walks the seeds' path: two accounts, one company, live edits both ways")
    func walksTheSeedsPath() async throws {
        try await AccountHarness.with(live: true) { h in
            let ada = AccountHarness.newEmail("ada")
            let bob = AccountHarness.newEmail("bob")
            let process = Process()
            process.executableURL = Self.executable
            process.arguments = [
                "--server", h.server.baseURL, "--data",
                FileManager.default.temporaryDirectory.appendingPathComponent("example-\(UUID().uuidString)").path,
                ada, bob,
            ]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            let lines = output.lines()
            try process.start()
            defer { if process.isRunning { process.terminate() } }
            var transcript: [String] = []
            for await line in lines {
                transcript.append(line)
                if line.hasPrefix("Type the code mailed to ") {
                    let email = ada.contains(line.dropFirst(24).prefix { $0 != "," }) ? ada : bob
                    let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
                    input.fileHandleForWriting.write(Data("\(code)\n".utf8))
                } else if line.contains("set-tier"), let range = line.range(of: "set-tier ") {
                    let cid = String(line[range.upperBound...].prefix { $0 != " " })
                    #expect(try await Operator(store: h.server.services.store).setTier(cid, .business))
                    input.fileHandleForWriting.write(Data("\n".utf8))
                }
            }
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(transcript.contains("Bob sees it live."))
            #expect(transcript.contains { $0.hasPrefix("Ada sees it live:") && $0.contains("555-0199") })
            #expect(transcript.last == "Both signed out. Done.")
        }
    }
}
