import Foundation
import GatehouseServer
import NIOConcurrencyHelpers

/// Where a test reads the mail a person would get: the real SMTP server (`SMTPSink`) or the in-memory transport
/// (`MemoryMailbox`). A message is read once: waiting again for the same recipient and subject finds the next one.
protocol Mailbox: Sendable {
    /// Waits (up to 60 s, for a loaded machine) for an unread message to `recipient` whose subject contains `subject`.
    func waitForMail(to recipient: String, subject: String) async throws -> ReceivedMail
    /// Whether an unread message to `recipient` whose subject contains `subject` has arrived (it stays unread).
    func hasMail(to recipient: String, subject: String) async throws -> Bool
}

enum MailboxError: Error { case noMail(String) }

extension Mailbox {
    /// Polls `claim` until it finds a message or the deadline passes: a deadline for a loaded machine, never a measure.
    func poll(to recipient: String, subject: String, _ claim: () -> ReceivedMail?) async throws -> ReceivedMail {
        guard let mail = try await firstValue(every: .milliseconds(10), claim) else {
            throw MailboxError.noMail("no mail to \(recipient) with subject containing '\(subject)'")
        }
        return mail
    }
}

/// A mail transport that keeps every message it is given, as the SMTP server would have received it (RFC 5322 text,
/// written by the same code), for tests that check what was mailed rather than how it was delivered.
final class MemoryMailbox: MailTransport, Mailbox {
    private struct Entry {
        let to: String
        let mail: ReceivedMail
        var read = false
    }
    private let entries = NIOLockedValueBox<[Entry]>([])

    func send(_ message: MailMessage) async throws {
        let raw = try message.rfc5322(messageID: "<\(UUID().uuidString)@gatehouse.test>", date: Date())
        entries.withLockedValue { $0.append(Entry(to: message.to, mail: ReceivedMail(raw: raw))) }
    }

    /// Every message sent so far, oldest first.
    var all: [ReceivedMail] { entries.withLockedValue { $0.map(\.mail) } }

    func waitForMail(to recipient: String, subject: String) async throws -> ReceivedMail {
        try await poll(to: recipient, subject: subject) { claim(to: recipient, subject: subject, take: true) }
    }

    func hasMail(to recipient: String, subject: String) async throws -> Bool {
        claim(to: recipient, subject: subject, take: false) != nil
    }

    private func claim(to recipient: String, subject: String, take: Bool) -> ReceivedMail? {
        entries.withLockedValue { entries in
            guard
                let index = entries.firstIndex(where: {
                    !$0.read && $0.to.contains(recipient) && $0.mail.subject.contains(subject)
                })
            else { return nil }
            if take { entries[index].read = true }
            return entries[index].mail
        }
    }
}
