import Foundation
import GatehouseServer
import Testing

/// The SDK's example app (Examples/GatehouseExample), run as the SDK's guide runs it, against a live server with
/// passkeys on: the codes come from the mail the server sent, the authenticator app's from the factor's secret at the
/// server's clock, and the tier from the operator.
@Suite("The SDK's example app")
struct ExampleAppTests {
    static let executable: URL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("gatehouse-example")

    @Test(
        "gatehouse-example walks the seeds' path: two accounts, one company, live edits both ways; then the app lock, a company passkey and the second factor"
    )
    func walksTheSeedsPath() async throws {
        let passkeys: (inout GatehouseConfiguration) -> Void = { configuration in
            configuration.passkeys.enabled = true
            configuration.passkeys.relyingPartyID = "localhost"
            configuration.passkeys.origins = [ClientPasskeyTests.origin]
        }
        try await AccountHarness.with(live: true, passkeys) { h in
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
            var secret: String?
            for await line in lines {
                transcript.append(line)
                if line.hasPrefix("Type the code mailed to ") {
                    let email = ada.contains(line.dropFirst(24).prefix { $0 != "," }) ? ada : bob
                    let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
                    input.fileHandleForWriting.write(Data("\(code)\n".utf8))
                } else if line.hasPrefix("Type the code your authenticator app shows ") {
                    // A new time step for each code: each is accepted once.
                    if let range = line.range(of: "shows for ") {
                        secret = String(line[range.upperBound...].prefix { $0 != "," })
                    }
                    h.clock.advance(by: 30)
                    let code = try ClientMFATests.totp(try #require(secret), h)
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
            for step in [
                "Ada registered a passkey for Acme Ltd on her phone.",
                "Ada opens the app: it is locked, and she cancels Face ID.",
                "She logs in to Acme Ltd with her passkey.",
                "The notification centre and twenty seconds away leave it unlocked.",
                "Password, authenticator code, company login: Ada is back in Acme Ltd.",
            ] {
                #expect(transcript.contains(step), "\(step)")
            }
            #expect(transcript.contains { $0.hasPrefix("Back after ten minutes: locked, Face ID") })
            #expect(transcript.contains { $0.hasPrefix("Face ID was turned off:") })
            #expect(transcript.last == "Both signed out. Done.")
        }
    }
}
