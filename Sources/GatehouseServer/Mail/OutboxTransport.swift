import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The development transport used when no SMTP server is configured: each message becomes an `.eml` file that a
/// developer can open, readable only by the server's user because messages carry one-time codes.
public struct OutboxTransport: MailTransport {
    public let directory: String
    private let logger: Logger

    /// Makes an outbox writing into `directory`, which is created (mode 0700) on first use.
    public init(directory: String, logger: Logger) {
        self.directory = directory
        self.logger = logger
    }

    /// Writes the complete message to a new 0600 file and logs its path and the recipient's domain, nothing more.
    public func send(_ message: MailMessage) async throws {
        let date = Date()
        let content = try message.rfc5322(messageID: message.makeMessageID(), date: date)
        let path = try store(Array(content.utf8), date: date)
        // The subject and body can carry one-time codes and the local part names a person: log neither.
        logger.info(
            "wrote outgoing mail to the outbox",
            metadata: ["mail.file": "\(path)", "mail.recipient_domain": "\(message.recipientDomain)"])
    }

    private func store(_ bytes: [UInt8], date: Date) throws -> String {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw MailError(.unavailable, stage: "outbox", detail: "cannot create \(directory): \(error)")
        }
        let stamp = Self.timestamp(date)
        // The file is written under a hidden temporary name and renamed, so a reader polling the outbox never sees
        // half a message; O_EXCL keeps a concurrent writer's file from being reused.
        for _ in 0..<8 {
            let random = String(UInt32.random(in: 0..<0x100_0000), radix: 16)
            let suffix = String(repeating: "0", count: 6 - random.count) + random
            let path = (directory as NSString).appendingPathComponent("\(stamp)-\(suffix).eml")
            let temporary = (directory as NSString).appendingPathComponent(".\(stamp)-\(suffix).eml.tmp")
            guard !FileManager.default.fileExists(atPath: path) else { continue }
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if descriptor < 0 && errno == EEXIST { continue }
            guard descriptor >= 0 else { throw failure("cannot create a file in \(directory)", errno) }
            // The umask can only narrow the mode, but fchmod makes 0600 certain whatever created the descriptor.
            var ok = fchmod(descriptor, 0o600) == 0
            var offset = 0
            while ok && offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                ok = written > 0
                offset += max(written, 0)
            }
            ok = fsync(descriptor) == 0 && ok
            ok = close(descriptor) == 0 && ok
            ok = ok && rename(temporary, path) == 0
            guard ok else {
                let code = errno
                unlink(temporary)
                throw failure("cannot write \(path)", code)
            }
            return path
        }
        throw failure("no free file name in \(directory)", EEXIST)
    }

    private func failure(_ detail: String, _ code: Int32) -> MailError {
        MailError(.unavailable, stage: "outbox", detail: "\(detail): \(String(cString: strerror(code)))")
    }

    /// `20261122T001500Z`: UTC, and sorts in time order.
    static func timestamp(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let values = [
            parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0,
        ]
        let digits = zip(values, [4, 2, 2, 2, 2, 2]).map { value, width in
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return digits[0...2].joined() + "T" + digits[3...5].joined() + "Z"
    }
}
