import Foundation
import Logging
import SQLKit
import ServiceLifecycle

/// Mail waits in the store, encrypted, and a worker sends it off the request path (docs/security.md): an answer takes the
/// same time whether or not a mail was due, and a mail server outage delays mail without losing any. Every instance
/// runs a worker; a row is leased before it is sent, so two instances never send the same mail.
final class MailQueue: Service, Sendable {
    let store: Store
    let transport: any MailTransport
    let box: SecretBox
    let clock: any GatehouseClock
    let logger: Logger
    private let wakeUps = QueueWakeUps(interval: MailQueue.pollInterval)

    /// How long a sent-but-unacknowledged lease keeps other workers away, and how long mail is retried at most.
    static let lease: TimeInterval = 120
    static let giveUpAfter: TimeInterval = 3 * 24 * 3600
    /// How often a worker looks for due mail when nothing woke it (mail queued elsewhere, retries falling due).
    static let pollInterval: Duration = .milliseconds(500)

    init(store: Store, transport: any MailTransport, box: SecretBox, clock: any GatehouseClock, logger: Logger) {
        self.store = store
        self.transport = transport
        self.box = box
        self.clock = clock
        self.logger = logger
    }

    /// Queues `message` in the caller's transaction, so it is sent exactly when what it announces is committed.
    func enqueue(_ message: MailMessage, db: any SQLDatabase) async throws {
        let id = Secrets.identifier()
        let now = clock.now.epochMilliseconds
        let sealed = try box.seal(
            String(decoding: try JSONEncoder().encode(message), as: UTF8.self), context: "mail:\(id)")
        try await MailQueueRepository(db: db).insert(
            id: id, recipientDigest: Secrets.emailDigest(message.to), sealed: sealed, now: now)
    }

    /// Tells the worker that mail was committed; call after the transaction that queued it.
    func wake() {
        wakeUps.wake()
    }

    /// Sends due mail until the service group shuts down.
    func run() async throws {
        await wakeUps.run(store: store, logger: logger, unavailable: "mail queue unavailable") { try await sendNext() }
    }

    /// Leases and sends the oldest due mail; false when none is due.
    func sendNext() async throws -> Bool {
        let now = clock.now.epochMilliseconds
        let queue = MailQueueRepository(db: store.database)
        guard let due = try await queue.nextDue(now: now) else { return false }
        let id = due.id
        guard try await queue.lease(id, now: now, until: now + Int64(Self.lease * 1000)) else { return true }
        let attempts = due.attempts + 1
        let message: MailMessage
        do {
            let clear = try box.open(due.message, context: "mail:\(id)")
            message = try JSONDecoder().decode(MailMessage.self, from: Data(clear.utf8))
        } catch {
            logger.error(
                "queued mail cannot be read and is dropped", metadata: ["mail.id": "\(id)", "error": "\(error)"])
            try await queue.delete(id)
            return true
        }
        let recipient = Secrets.emailDigest(message.to)
        do {
            try await transport.send(message)
            try await queue.delete(id)
            logger.debug("mail sent", metadata: ["mail.id": "\(id)", "mail.to": "\(recipient)"])
        } catch let error as MailError where error.kind == .unavailable {
            let created = Date(epochMilliseconds: due.createdAt)
            if clock.now.timeIntervalSince(created) > Self.giveUpAfter {
                logger.error(
                    "mail given up after retrying",
                    metadata: ["mail.id": "\(id)", "mail.to": "\(recipient)", "error": "\(error)"])
                try await queue.delete(id)
                return true
            }
            let delay = Self.retryDelay(attempt: Int(attempts))
            logger.warning(
                "mail not sent, will retry",
                metadata: [
                    "mail.id": "\(id)", "mail.to": "\(recipient)", "retry_in": "\(Int(delay))s", "error": "\(error)",
                ])
            try await queue.reschedule(
                id, attempts: attempts, next: clock.now.addingTimeInterval(delay).epochMilliseconds)
            // Nothing else is likely to get through right now either.
            return false
        } catch {
            logger.error(
                "mail refused for good and dropped",
                metadata: ["mail.id": "\(id)", "mail.to": "\(recipient)", "error": "\(error)"])
            try await queue.delete(id)
        }
        return true
    }

    /// 1 s, 2 s, 4 s … up to 5 minutes between tries of one mail.
    static func retryDelay(attempt: Int) -> TimeInterval {
        min(300, pow(2, Double(max(0, attempt - 1))))
    }
}

extension MailQueue {
    /// Drops every mail still waiting for `email`, inside the caller's transaction (its account is being deleted).
    static func dropWaiting(for email: String, db: any SQLDatabase) async throws {
        try await MailQueueRepository(db: db).deleteAll(recipientDigest: Secrets.emailDigest(email))
    }
}
