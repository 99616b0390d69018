import Foundation
import Testing

@testable import GatehouseServer

@Suite("Development outbox")
struct OutboxTests {
    @Test("writes a 0600 .eml in a new 0700 folder and logs only the path and the recipient's domain")
    func writesMessage() async throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/nested/outbox"
        let log = CapturedLog()
        let outbox = OutboxTransport(directory: folder, logger: log.logger)
        let message = MailMessage(
            from: "noreply@gatehouse.test", to: "ada.lovelace@example.com", subject: "Your sign-in code 482913",
            text: "Enter this code: 482913\n\n— Gatehouse\n", html: "<p>482913</p>")
        try await outbox.send(message)

        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        try #require(files.count == 1, "expected one file, found \(files)")
        let name = files[0]
        #expect(name.wholeMatch(of: /\d{8}T\d{6}Z-[0-9a-f]{6}\.eml/) != nil, "unexpected name \(name)")
        let path = folder + "/" + name
        #expect(try permissions(of: path) == 0o600)
        #expect(try permissions(of: folder) == 0o700)
        let content = try String(contentsOfFile: path, encoding: .utf8)
        #expect(content.contains("Enter this code: 482913\r\n"))
        #expect(content.contains("To: ada.lovelace@example.com\r\n"))

        let lines = log.entries
        try #require(lines.count == 1 && log.all.count == 1)
        #expect(lines[0]["level"] == "info")
        // The message and its metadata, read back from the JSON line.
        let text = lines[0].filter { $0.key != "time" }.sorted { $0.key < $1.key }.map(\.value).joined(separator: " ")
        #expect(text.contains(path))
        #expect(text.contains("example.com"))
        for secret in ["482913", "sign-in", "ada.lovelace", "Enter this code", "Gatehouse\n"] {
            #expect(!text.contains(secret), "the log line shows \(secret)")
        }
    }

    @Test("an invalid address writes nothing")
    func invalidAddress() async throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let log = CapturedLog()
        let outbox = OutboxTransport(directory: base.path + "/outbox", logger: log.logger)
        let message = MailMessage(from: "a@b.test", to: "x@y.test\r\nBcc: e@f.test", subject: "s", text: "t", html: "h")
        let error = await #expect(throws: MailError.self) { try await outbox.send(message) }
        #expect(error?.kind == .invalidAddress)
        #expect(!FileManager.default.fileExists(atPath: base.path + "/outbox"))
        #expect(log.all.isEmpty)
    }
}

private func permissions(of path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}
