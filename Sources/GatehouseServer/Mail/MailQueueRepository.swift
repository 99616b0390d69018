import Foundation
import SQLKit

/// A queued mail as stored: its message sealed (`SecretBox`), bound to its id.
struct QueuedMailRecord: Decodable, Sendable {
    let id: String
    let message: String
    let attempts: Int64
    let createdAt: Int64

    enum CodingKeys: String, CodingKey {
        case id, message, attempts
        case createdAt = "created_at"
    }
}

/// The SQL of the mail queue (`MailQueue`): rows are leased before they are sent, so two instances never send the
/// same mail.
struct MailQueueRepository {
    let db: any SQLDatabase

    /// Queues a sealed message for `recipientDigest`, due at once.
    func insert(id: String, recipientDigest: String, sealed: String, now: Int64) async throws {
        try await db.insert(into: "mail_queue")
            .columns("id", "recipient_digest", "message", "created_at", "attempts", "next_attempt_at")
            .values(
                SQLBind(id), SQLBind(recipientDigest), SQLBind(sealed), SQLBind(now), SQLBind(Int64(0)), SQLBind(now)
            )
            .run()
    }

    /// The oldest mail due at `now` that no worker holds a lease on.
    func nextDue(now: Int64) async throws -> QueuedMailRecord? {
        try await db.select().columns("id", "message", "attempts", "created_at")
            .from("mail_queue").where("next_attempt_at", .lessThanOrEqual, now)
            .where { $0.where("claimed_until", .is, SQLLiteral.null).orWhere("claimed_until", .lessThan, now) }
            .orderBy("next_attempt_at").limit(1).first(decoding: QueuedMailRecord.self)
    }

    /// Leases mail `id` until `until`; false when another worker leased it first.
    func lease(_ id: String, now: Int64, until: Int64) async throws -> Bool {
        let leased = try await db.update("mail_queue")
            .set("claimed_until", to: until)
            .where("id", .equal, id)
            .where { $0.where("claimed_until", .is, SQLLiteral.null).orWhere("claimed_until", .lessThan, now) }
            .returning("id").all()
        return !leased.isEmpty
    }

    /// Puts mail `id` back for another try at `next`, its lease given up.
    func reschedule(_ id: String, attempts: Int64, next: Int64) async throws {
        try await db.update("mail_queue").set("attempts", to: attempts)
            .set("next_attempt_at", to: next)
            .set("claimed_until", to: SQLLiteral.null)
            .where("id", .equal, id).run()
    }

    /// Removes mail `id`: sent, unreadable or refused for good.
    func delete(_ id: String) async throws {
        try await db.delete(from: "mail_queue").where("id", .equal, id).run()
    }

    /// Removes every mail still waiting for the address behind `recipientDigest` (its account is being deleted).
    func deleteAll(recipientDigest: String) async throws {
        try await db.delete(from: "mail_queue").where("recipient_digest", .equal, recipientDigest).run()
    }
}
