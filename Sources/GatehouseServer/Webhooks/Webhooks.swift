import Foundation

/// The operator's webhook endpoints: registered with the events they take (the admin API, the command line and the
/// console share these rules), listed, removed, turned on again, their secret rotated, and their delivery log read
/// and replayed. Every change is audited and refreshes this instance's outbox at once.
struct Webhooks: Sendable {
    let store: Store
    let box: SecretBox
    let clock: any GatehouseClock
    let trail: AuditTrail
    let outbox: WebhookOutbox
    let targets: WebhookTargets
    /// Wakes the dispatcher after a replay; nil where none runs (the command line).
    var wake: @Sendable () -> Void = {}

    /// How long a rotated-out secret keeps signing beside the new one.
    static let rotationOverlap: TimeInterval = 24 * 3600
    /// The most endpoints one server keeps.
    static let endpointLimit = 100

    static func secretContext(_ id: String) -> String { "webhook:\(id)" }
    static func previousSecretContext(_ id: String) -> String { "webhook-previous:\(id)" }

    static let notFound = APIError(.notFound, code: .webhookNotFound, message: "No webhook endpoint with this id")

    /// Registers an endpoint; answers it and its `whsec_` secret, shown only here.
    func register(
        url: String, events: [String], includeRecordFields: Bool, description: String?, by caller: AdminCaller
    ) async throws -> (WebhookEndpoint, secret: String) {
        let checked: URL
        do {
            checked = try targets.check(url: url)
        } catch {
            throw APIError(.badRequest, code: .webhookTargetRefused, message: error.description)
        }
        let events = try Self.validEvents(events)
        if let description, description.count > 200 {
            throw APIError.validation("description must be at most 200 characters")
        }
        let endpoint = WebhookEndpoint(
            id: Secrets.identifier(), url: checked.absoluteString, events: events,
            includeRecordFields: includeRecordFields, description: description, enabled: true, disabledReason: nil,
            createdAt: clock.now)
        let secret = WebhookSecret.generate()
        let sealed = try box.seal(secret, context: Self.secretContext(endpoint.id))
        try await store.transaction { [trail] db in
            let repository = WebhookRepository(db: db)
            guard try await repository.endpoints().count < Self.endpointLimit else {
                throw APIError.validation("At most \(Self.endpointLimit) webhook endpoints")
            }
            try await repository.insert(endpoint, sealedSecret: sealed)
            try await trail.within(db).record(
                caller.event(
                    .webhookCreated, accountID: nil,
                    detail: ["webhook": endpoint.id, "events": events.joined(separator: ",")]))
        }
        outbox.invalidate()
        return (endpoint, secret)
    }

    /// The events as asked: known types or `*`, each once, at least one.
    static func validEvents(_ events: [String]) throws -> [String] {
        guard !events.isEmpty else { throw APIError.validation("events must name at least one event type, or *") }
        var seen: [String] = []
        for event in events where !seen.contains(event) {
            guard event == WebhookEventType.everything || WebhookEventType(rawValue: event) != nil else {
                throw APIError(
                    .badRequest, code: .webhookEventUnknown,
                    message: "Unknown event type '\(event.prefix(64))': one of "
                        + WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ") + ", or *")
            }
            seen.append(event)
        }
        return seen
    }

    func list() async throws -> [WebhookEndpoint] {
        try await WebhookRepository(db: store.database).endpoints()
    }

    func endpoint(_ id: String) async throws -> WebhookEndpoint {
        guard let endpoint = try await WebhookRepository(db: store.database).endpoint(id) else { throw Self.notFound }
        return endpoint
    }

    /// Removes the endpoint and its log; what waited for it is not sent.
    func remove(_ id: String, by caller: AdminCaller) async throws {
        try await store.transaction { [trail] db in
            guard try await WebhookRepository(db: db).delete(id) else { throw Self.notFound }
            try await trail.within(db).record(caller.event(.webhookDeleted, accountID: nil, detail: ["webhook": id]))
        }
        outbox.invalidate()
    }

    /// Turns a disabled endpoint on again: what waited for it is sent, and new events reach it.
    func enable(_ id: String, by caller: AdminCaller) async throws -> WebhookEndpoint {
        try await store.transaction { [trail] db in
            guard try await WebhookRepository(db: db).setEnabled(id, true, reason: nil) else { throw Self.notFound }
            try await trail.within(db).record(caller.event(.webhookEnabled, accountID: nil, detail: ["webhook": id]))
        }
        outbox.invalidate()
        wake()
        return try await endpoint(id)
    }

    /// A new secret, shown once; the old one signs beside it for `rotationOverlap`.
    func rotateSecret(_ id: String, by caller: AdminCaller) async throws -> String {
        let secret = WebhookSecret.generate()
        let until = clock.now.addingTimeInterval(Self.rotationOverlap).epochMilliseconds
        try await store.transaction { [box, trail] db in
            let repository = WebhookRepository(db: db)
            guard let sealed = try await repository.secrets(id) else { throw Self.notFound }
            let current = try box.open(sealed.secret, context: Self.secretContext(id))
            _ = try await repository.rotate(
                id, sealed: try box.seal(secret, context: Self.secretContext(id)),
                previous: try box.seal(current, context: Self.previousSecretContext(id)), previousUntil: until)
            try await trail.within(db).record(
                caller.event(.webhookSecretRotated, accountID: nil, detail: ["webhook": id]))
        }
        return secret
    }

    /// The endpoint's deliveries, newest first: `limit` (1…100) after the delivery `before`.
    func deliveries(_ id: String, before: String?, limit: Int) async throws -> [WebhookDelivery] {
        let repository = WebhookRepository(db: store.database)
        guard try await repository.endpoint(id) != nil else { throw Self.notFound }
        var cursor: (createdAt: Int64, id: String)?
        if let before {
            guard let anchor = try await repository.delivery(before, endpointID: id) else {
                throw APIError(.notFound, code: .webhookNotFound, message: "No delivery with this id")
            }
            cursor = (anchor.createdAt.epochMilliseconds, anchor.id)
        }
        return try await repository.deliveries(endpointID: id, before: cursor, limit: limit)
    }

    /// Sends a delivery again, now, with a fresh schedule (it keeps its `webhook-id`, so a receiver that already
    /// has it can tell).
    func replay(_ id: String, delivery: String, by caller: AdminCaller) async throws -> WebhookDelivery {
        try await store.transaction { [clock, trail] db in
            guard try await WebhookRepository(db: db).replay(delivery, endpointID: id, now: clock.now.epochMilliseconds)
            else { throw APIError(.notFound, code: .webhookNotFound, message: "No delivery with this id") }
            try await trail.within(db).record(
                caller.event(.webhookReplayed, accountID: nil, detail: ["webhook": id, "delivery": delivery]))
        }
        wake()
        guard let replayed = try await WebhookRepository(db: store.database).delivery(delivery, endpointID: id) else {
            throw Self.notFound
        }
        return replayed
    }
}
