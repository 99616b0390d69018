import Foundation
import SQLKit

/// A registered webhook endpoint as the admin API and the console show it (never its secret).
struct WebhookEndpoint: Sendable, Equatable {
    let id: String
    let url: String
    /// Event types (`WebhookEventType` raw values), or `*`.
    let events: [String]
    let includeRecordFields: Bool
    let description: String?
    let enabled: Bool
    /// Why it stopped: `gone` (the receiver answered 410), `failing` (a delivery failed through the whole retry
    /// schedule), `operator`.
    let disabledReason: String?
    let createdAt: Date

    /// Whether it takes events of `type`.
    func wants(_ type: WebhookEventType) -> Bool {
        events.contains(WebhookEventType.everything) || events.contains(type.rawValue)
    }
}

/// An endpoint's sealed signing secrets: the current one, and the one it replaced until `previousUntil`.
struct WebhookEndpointSecrets: Sendable {
    let secret: String
    let previous: String?
    let previousUntil: Int64?
}

/// One delivery of one event to one endpoint, as its log shows it.
struct WebhookDelivery: Sendable, Equatable {
    enum Status: String, Sendable { case pending, delivered, failed }
    let id: String
    let eventID: String
    let eventType: String
    let endpointID: String
    let status: Status
    let attempts: Int
    let nextAttemptAt: Date?
    let lastStatusCode: Int?
    let lastLatencyMS: Int?
    let lastError: String?
    let createdAt: Date
    let finishedAt: Date?
}

/// A delivery the worker may send now, with what it sends.
struct DueWebhookDelivery: Sendable {
    let id: String
    let endpointID: String
    let eventID: String
    let attempts: Int
    let payload: String
    let fieldsPayload: String?
}

/// The SQL of webhooks: endpoints, the events written in their change's transaction, and their deliveries, which are
/// leased before they are sent so that two instances never send one at once.
struct WebhookRepository {
    let db: any SQLDatabase

    func insert(
        _ endpoint: WebhookEndpoint, sealedSecret: String
    ) async throws {
        try await db.insert(into: "webhook_endpoints")
            .columns(
                "id", "url", "events", "include_record_fields", "description", "secret", "enabled", "created_at"
            )
            .values(
                SQLBind(endpoint.id), SQLBind(endpoint.url), SQLBind(endpoint.events.joined(separator: ",")),
                SQLBind(Int64(endpoint.includeRecordFields ? 1 : 0)), SQLBind(endpoint.description),
                SQLBind(sealedSecret), SQLBind(Int64(1)), SQLBind(endpoint.createdAt.epochMilliseconds)
            )
            .run()
    }

    /// Every endpoint, oldest first.
    func endpoints() async throws -> [WebhookEndpoint] {
        try await db.select().columns(Self.endpointColumns).from("webhook_endpoints").orderBy("created_at")
            .orderBy("id").all(decoding: EndpointRow.self).map(\.endpoint)
    }

    func endpoint(_ id: String) async throws -> WebhookEndpoint? {
        try await db.select().columns(Self.endpointColumns).from("webhook_endpoints").where("id", .equal, id)
            .first(decoding: EndpointRow.self)?.endpoint
    }

    func secrets(_ id: String) async throws -> WebhookEndpointSecrets? {
        guard
            let row = try await db.select().columns("secret", "previous_secret", "previous_until")
                .from("webhook_endpoints").where("id", .equal, id).first()
        else { return nil }
        return WebhookEndpointSecrets(
            secret: try row.decode(column: "secret", as: String.self),
            previous: try row.decode(column: "previous_secret", as: String?.self),
            previousUntil: try row.decode(column: "previous_until", as: Int64?.self))
    }

    /// Removes the endpoint and its deliveries; false when there was none.
    func delete(_ id: String) async throws -> Bool {
        let gone = try await db.delete(from: "webhook_endpoints").where("id", .equal, id).returning("id").all()
        return !gone.isEmpty
    }

    /// Turns the endpoint on (`reason` nil) or off with its reason; false when there is none.
    func setEnabled(_ id: String, _ enabled: Bool, reason: String?) async throws -> Bool {
        let changed = try await db.update("webhook_endpoints").set("enabled", to: Int64(enabled ? 1 : 0))
            .set("disabled_reason", to: SQLBind(reason)).where("id", .equal, id).returning("id").all()
        return !changed.isEmpty
    }

    /// A new secret; the one it replaces keeps signing until `previousUntil`.
    func rotate(_ id: String, sealed: String, previous: String, previousUntil: Int64) async throws -> Bool {
        let changed = try await db.update("webhook_endpoints").set("secret", to: sealed)
            .set("previous_secret", to: previous).set("previous_until", to: previousUntil)
            .where("id", .equal, id).returning("id").all()
        return !changed.isEmpty
    }

    /// Writes an event and a pending delivery of it to each endpoint, due at once.
    func insert(
        eventID: String, type: String, payload: String, fieldsPayload: String?, endpoints: [String], now: Int64
    ) async throws {
        try await db.insert(into: "webhook_events").columns("id", "type", "payload", "fields_payload", "created_at")
            .values(SQLBind(eventID), SQLBind(type), SQLBind(payload), SQLBind(fieldsPayload), SQLBind(now)).run()
        guard !endpoints.isEmpty else { return }
        var insert = db.insert(into: "webhook_deliveries")
            .columns("id", "event_id", "endpoint_id", "status", "attempts", "next_attempt_at", "created_at")
        for endpoint in endpoints {
            insert = insert.values(
                SQLBind(Secrets.identifier()), SQLBind(eventID), SQLBind(endpoint),
                SQLBind(WebhookDelivery.Status.pending.rawValue), SQLBind(Int64(0)), SQLBind(now), SQLBind(now))
        }
        try await insert.run()
    }

    /// The enabled endpoints with a delivery due at `now` that no worker holds.
    func endpointsDue(now: Int64) async throws -> [String] {
        try await Self.due(db.select().distinct().column(SQLColumn("endpoint_id", table: "d")), now: now)
            .all(decodingColumn: "endpoint_id", as: String.self)
    }

    /// Up to `limit` deliveries to `endpointID` due at `now` that no worker holds, oldest due first.
    func due(now: Int64, endpointID: String, limit: Int) async throws -> [DueWebhookDelivery] {
        let query = db.select()
            .column(SQLColumn("id", table: "d")).column(SQLColumn("endpoint_id", table: "d"))
            .column(SQLColumn("event_id", table: "d")).column(SQLColumn("attempts", table: "d"))
            .column(SQLColumn("payload", table: "e")).column(SQLColumn("fields_payload", table: "e"))
        return try await Self.withEvents(Self.due(query, now: now))
            .where(SQLColumn("endpoint_id", table: "d"), .equal, SQLBind(endpointID))
            .orderBy(SQLColumn("next_attempt_at", table: "d")).limit(limit)
            .all().map { row in
                DueWebhookDelivery(
                    id: try row.decode(column: "id", as: String.self),
                    endpointID: try row.decode(column: "endpoint_id", as: String.self),
                    eventID: try row.decode(column: "event_id", as: String.self),
                    attempts: Int(try row.decode(column: "attempts", as: Int64.self)),
                    payload: try row.decode(column: "payload", as: String.self),
                    fieldsPayload: try row.decode(column: "fields_payload", as: String?.self))
            }
    }

    /// Deliveries (`d`) pending and due at `now`, to enabled endpoints (`p`), that no worker holds.
    private static func due(_ query: SQLSelectBuilder, now: Int64) -> SQLSelectBuilder {
        query.from(SQLAlias(SQLIdentifier("webhook_deliveries"), as: SQLIdentifier("d")))
            .join(
                SQLAlias(SQLIdentifier("webhook_endpoints"), as: SQLIdentifier("p")), method: SQLJoinMethod.inner,
                on: SQLColumn("id", table: "p"), .equal, SQLColumn("endpoint_id", table: "d")
            )
            .where(SQLColumn("status", table: "d"), .equal, SQLBind(WebhookDelivery.Status.pending.rawValue))
            .where(SQLColumn("next_attempt_at", table: "d"), .lessThanOrEqual, SQLBind(now))
            .where(SQLColumn("enabled", table: "p"), .equal, SQLBind(Int64(1)))
            .where {
                $0.where(SQLColumn("leased_until", table: "d"), .is, SQLLiteral.null)
                    .orWhere(SQLColumn("leased_until", table: "d"), .lessThan, SQLBind(now))
            }
    }

    /// `query` over deliveries (`d`) joined to their events (`e`).
    private static func withEvents(_ query: SQLSelectBuilder) -> SQLSelectBuilder {
        query.join(
            SQLAlias(SQLIdentifier("webhook_events"), as: SQLIdentifier("e")), method: SQLJoinMethod.inner,
            on: SQLColumn("id", table: "e"), .equal, SQLColumn("event_id", table: "d"))
    }

    /// Leases the deliveries `ids` until `until`, in one statement; answers those it leased (not those another worker
    /// holds, or that are no longer pending).
    func lease(_ ids: [String], now: Int64, until: Int64) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let leased = try await db.update("webhook_deliveries").set("leased_until", to: until)
            .where("id", .in, ids).where("status", .equal, WebhookDelivery.Status.pending.rawValue)
            .where { $0.where("leased_until", .is, SQLLiteral.null).orWhere("leased_until", .lessThan, now) }
            .returning("id").all(decodingColumn: "id", as: String.self)
        return Set(leased)
    }

    /// One try's outcome: delivered, pending again at `next`, or failed for good (`status`).
    struct Finish: Sendable {
        let id: String
        let status: WebhookDelivery.Status
        let attempts: Int
        let next: Int64?
        let statusCode: Int?
        let latencyMS: Int
        let error: String?
        let now: Int64
    }

    /// Records tries' outcomes; call inside a transaction to write several at once.
    func finish(_ outcome: Finish) async throws {
        try await db.update("webhook_deliveries").set("status", to: outcome.status.rawValue)
            .set("attempts", to: Int64(outcome.attempts)).set("next_attempt_at", to: SQLBind(outcome.next))
            .set("leased_until", to: SQLLiteral.null)
            .set("last_status_code", to: SQLBind(outcome.statusCode.map(Int64.init)))
            .set("last_latency_ms", to: Int64(outcome.latencyMS)).set("last_error", to: SQLBind(outcome.error))
            .set("finished_at", to: SQLBind(outcome.status == .pending ? nil : outcome.now))
            .where("id", .equal, outcome.id).run()
    }

    /// The endpoint's deliveries, newest first, `limit` at a time, older than the delivery `before` when given.
    func deliveries(endpointID: String, before: (createdAt: Int64, id: String)?, limit: Int) async throws
        -> [WebhookDelivery]
    {
        var query = logOf(endpointID)
        if let before {
            query = query.where {
                $0.where(SQLColumn("created_at", table: "d"), .lessThan, SQLBind(before.createdAt))
                    .orWhere {
                        $0.where(SQLColumn("created_at", table: "d"), .equal, SQLBind(before.createdAt))
                            .where(SQLColumn("id", table: "d"), .lessThan, SQLBind(before.id))
                    }
            }
        }
        return
            try await query
            .orderBy(SQLOrderBy(expression: SQLColumn("created_at", table: "d"), direction: SQLDirection.descending))
            .orderBy(SQLOrderBy(expression: SQLColumn("id", table: "d"), direction: SQLDirection.descending))
            .limit(limit)
            .all(decoding: DeliveryRow.self).map(\.delivery)
    }

    /// Where the delivery `id` of the endpoint sits in its log (for the next page's cursor).
    func delivery(_ id: String, endpointID: String) async throws -> WebhookDelivery? {
        try await logOf(endpointID).where(SQLColumn("id", table: "d"), .equal, SQLBind(id))
            .first(decoding: DeliveryRow.self)?.delivery
    }

    /// The endpoint's deliveries (`d`) with their event's type, as the log shows them.
    private func logOf(_ endpointID: String) -> SQLSelectBuilder {
        Self.withEvents(
            db.select().column(SQLColumn(SQLLiteral.all, table: SQLIdentifier("d")))
                .column(SQLColumn("type", table: "e"))
                .from(SQLAlias(SQLIdentifier("webhook_deliveries"), as: SQLIdentifier("d")))
        )
        .where(SQLColumn("endpoint_id", table: "d"), .equal, SQLBind(endpointID))
    }

    /// Puts a delivery back in the queue, due at `now`, with a fresh retry schedule; false when there is none.
    func replay(_ id: String, endpointID: String, now: Int64) async throws -> Bool {
        let changed = try await db.update("webhook_deliveries")
            .set("status", to: WebhookDelivery.Status.pending.rawValue).set("attempts", to: Int64(0))
            .set("next_attempt_at", to: now).set("leased_until", to: SQLLiteral.null)
            .set("finished_at", to: SQLLiteral.null)
            .where("id", .equal, id).where("endpoint_id", .equal, endpointID).returning("id").all()
        return !changed.isEmpty
    }

    /// How many deliveries of the endpoint wait.
    func pendingCount(endpointID: String) async throws -> Int {
        let row = try await db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n")
            .from("webhook_deliveries").where("endpoint_id", .equal, endpointID)
            .where("status", .equal, WebhookDelivery.Status.pending.rawValue).first()
        return Int(try row?.decode(column: "n", as: Int64.self) ?? 0)
    }

    private static let endpointColumns = [
        "id", "url", "events", "include_record_fields", "description", "enabled", "disabled_reason", "created_at",
    ]

    private struct EndpointRow: Decodable {
        let id: String
        let url: String
        let events: String
        let include_record_fields: Int64
        let description: String?
        let enabled: Int64
        let disabled_reason: String?
        let created_at: Int64

        var endpoint: WebhookEndpoint {
            WebhookEndpoint(
                id: id, url: url, events: events.split(separator: ",").map(String.init),
                includeRecordFields: include_record_fields != 0, description: description, enabled: enabled != 0,
                disabledReason: disabled_reason, createdAt: Date(epochMilliseconds: created_at))
        }
    }

    private struct DeliveryRow: Decodable {
        let id: String
        let event_id: String
        let type: String
        let endpoint_id: String
        let status: String
        let attempts: Int64
        let next_attempt_at: Int64?
        let last_status_code: Int64?
        let last_latency_ms: Int64?
        let last_error: String?
        let created_at: Int64
        let finished_at: Int64?

        var delivery: WebhookDelivery {
            WebhookDelivery(
                id: id, eventID: event_id, eventType: type, endpointID: endpoint_id,
                status: WebhookDelivery.Status(rawValue: status) ?? .pending, attempts: Int(attempts),
                nextAttemptAt: status == WebhookDelivery.Status.pending.rawValue
                    ? next_attempt_at.map(Date.init(epochMilliseconds:)) : nil,
                lastStatusCode: last_status_code.map(Int.init), lastLatencyMS: last_latency_ms.map(Int.init),
                lastError: last_error, createdAt: Date(epochMilliseconds: created_at),
                finishedAt: finished_at.map(Date.init(epochMilliseconds:)))
        }
    }
}
