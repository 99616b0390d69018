import Foundation
import NIOConcurrencyHelpers
import Testing

/// A real SMTP server (Python's aiosmtpd, run from Support/smtp_sink.py) that keeps every message it accepts
/// as a file; tests read the mail a person would get.
final class SMTPSink: Mailbox, @unchecked Sendable {
    let port: Int
    let folder: URL
    private let process: Process
    private let stdin: Pipe

    private init(port: Int, folder: URL, process: Process, stdin: Pipe) {
        self.port = port
        self.folder = folder
        self.process = process
        self.stdin = stdin
    }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "smtp_sink.py")

    private static let sharedSink = Task { try await SMTPSink.start() }

    /// One sink for the whole test process; tests tell their mail apart by recipient.
    static func shared() async throws -> SMTPSink { try await sharedSink.value }

    /// Starts a sink on a free port and returns once it accepts connections. A `closed` sink returns once it holds its
    /// port, and refuses connections (a mail server that is down) until `open()`.
    static func start(closed: Bool = false) async throws -> SMTPSink {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-mail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", script.path, folder.path, "--max-lifetime", "7200"]
            + (closed ? ["--closed"] : [])
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        let lines = stdout.lines()
        try process.run()
        for await line in lines where line.hasPrefix("READY ") {
            guard let bound = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) else { break }
            return SMTPSink(port: bound, folder: folder, process: process, stdin: stdin)
        }
        throw SinkError.didNotStart
    }

    enum SinkError: Error { case didNotStart }

    func waitForMail(to recipient: String, subject: String) async throws -> ReceivedMail {
        try await poll(to: recipient, subject: subject) { claim(to: recipient, subject: subject, take: true) }
    }

    func hasMail(to recipient: String, subject: String) async throws -> Bool {
        claim(to: recipient, subject: subject, take: false) != nil
    }

    /// One message as the sink wrote it, read once: its To line and its decoded subject.
    private struct Entry {
        let to: String
        let subject: String
        let mail: ReceivedMail
        var claimed = false
    }

    /// Every message read so far, by file name. Each file is read once (the sink writes them whole, by rename), so
    /// many tests polling at once do not read the whole folder again and again.
    private let messages = NIOLockedValueBox<[String: Entry]>([:])

    /// The oldest unread message to `recipient` whose subject contains `subject`, marked read when `take` is set.
    private func claim(to recipient: String, subject: String, take: Bool) -> ReceivedMail? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        let known = messages.withLockedValue { Set($0.keys) }
        var fresh: [String: Entry] = [:]
        for name in names where name.hasSuffix(".eml") && !known.contains(name) {
            guard let raw = try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8) else {
                continue
            }
            let mail = ReceivedMail(raw: raw)
            let to = raw.split(separator: "\r\n").first { $0.hasPrefix("To: ") }.map(String.init) ?? ""
            fresh[name] = Entry(to: to, subject: mail.subject, mail: mail)
        }
        return messages.withLockedValue { messages in
            messages.merge(fresh) { old, _ in old }
            for name in messages.keys.sorted() {
                guard let entry = messages[name], !entry.claimed, entry.to.contains(recipient),
                    entry.subject.contains(subject)
                else { continue }
                if take { messages[name]?.claimed = true }
                return entry.mail
            }
            return nil
        }
    }

    /// Starts listening on a `closed` sink's port: the mail server is back.
    func open() throws {
        try stdin.fileHandleForWriting.write(contentsOf: Data("OPEN\n".utf8))
    }

    func stop() {
        process.terminate()
    }

    /// A loopback port nothing listens on right now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
