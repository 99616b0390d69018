import Foundation
import NIOConcurrencyHelpers
import Testing

/// A real SMTP server (Python's aiosmtpd, run from Support/smtp_sink.py) that keeps every message it accepts
/// as a file; tests read the mail a person would get, or what the server saw of it (`records(count:)`).
final class SMTPSink: Mailbox, @unchecked Sendable {
    let port: Int
    /// Where the sink writes each message it accepts: message-NNNN.eml (the raw bytes) and message-NNNN.json.
    let folder: URL
    /// The folder's parent, which also holds the script's standard error; it goes when the sink stops.
    private let base: URL
    private let process: Process
    private let stdin: Pipe

    private init(port: Int, folder: URL, base: URL, process: Process, stdin: Pipe) {
        self.port = port
        self.folder = folder
        self.base = base
        self.process = process
        self.stdin = stdin
    }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "smtp_sink.py")

    private static let sharedSink = Task { try await SMTPSink.start() }

    /// One sink for the whole test process; tests tell their mail apart by recipient.
    static func shared() async throws -> SMTPSink { try await sharedSink.value }

    /// Starts a sink on a free port with the script's `options` (`--tls starttls`, `--auth user:password`,
    /// `--silent`, …: see smtp_sink.py) and returns once it accepts connections. A `closed` sink returns once it
    /// holds its port, and refuses connections (a mail server that is down) until `open()`.
    static func start(_ options: [String] = [], closed: Bool = false) async throws -> SMTPSink {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-smtp-\(UUID().uuidString)")
        let folder = base.appendingPathComponent("mail")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let errorLog = base.appendingPathComponent("sink.log")
        _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", script.path, folder.path, "--max-lifetime", "7200"] + options + (closed ? ["--closed"] : [])
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = try FileHandle(forWritingTo: errorLog)
        let lines = stdout.lines()
        try process.start()
        // A sink that has not started within 30 seconds never will: ending it ends its output, and the wait below.
        let pid = process.processIdentifier
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            kill(pid, SIGTERM)
        }
        defer { watchdog.cancel() }
        for await line in lines where line.hasPrefix("READY ") {
            guard let bound = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) else { break }
            return SMTPSink(port: bound, folder: folder, base: base, process: process, stdin: stdin)
        }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let log = (try? String(contentsOf: errorLog, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: base)
        throw SinkError(
            description: """
                the SMTP test server \(script.path) did not start; it needs python3 with aiosmtpd \
                (python3 -m pip install -r scripts/requirements-test.txt). Its output: \(log)
                """)
    }

    struct SinkError: Error, CustomStringConvertible {
        var description: String
    }

    /// What the sink read of one message it accepted (smtp_sink.py's message-NNNN.json).
    struct Record: Decodable {
        var mailFrom: String
        var rcptTos: [String]
        var from: String
        var to: String
        var subject: String
        var messageId: String
        var mimeVersion: String
        var contentType: String
        var text: String?
        var html: String?
        var defects: [String]
        var tls: Bool
        var authMechanism: String?
        var authLogin: String?
        var longestLine: Int

        var normalizedText: String? { text?.replacingOccurrences(of: "\r\n", with: "\n") }
        var normalizedHTML: String? { html?.replacingOccurrences(of: "\r\n", with: "\n") }
    }

    /// Waits until the sink holds at least `count` messages (for 60 seconds at most), then returns the records of
    /// them all, oldest first. With `count` 0 it returns at once: the transport returned only after the server
    /// answered, so nothing is pending.
    func records(count: Int) async throws -> [Record] {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        func recorded() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        }
        let names = try await firstValue {
            let names = try recorded()
            return names.count >= count ? names : nil
        }
        guard let names else {
            throw SinkError(description: "the sink got \(try recorded().count) of \(count) messages within 60 seconds")
        }
        return try names.map { name in
            try decoder.decode(Record.self, from: Data(contentsOf: folder.appendingPathComponent(name)))
        }
    }

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

    /// Closing its standard input ends the script; its folder goes with it. It does not wait for the exit, which
    /// would block a thread of the cooperative pool that other tests need.
    func stop() {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        try? FileManager.default.removeItem(at: base)
    }
}
