import Foundation
import GatehouseJSON
import NIOConcurrencyHelpers
import SQLKit

/// Where webhook events are written: in the transaction of the change they tell of (as an `AuditFollower` of the
/// trail, or called by a feature for what it does not audit, such as record changes), one row per event and a
/// pending delivery per endpoint that takes it. With no endpoint, nothing is written at all.
///
/// Which endpoints take what is cached and read again at most `refreshInterval` after it was loaded, or at once when
/// this instance changed an endpoint (`invalidate`); another instance's new endpoint starts receiving within that
/// interval.
final class WebhookOutbox: AuditFollower {
    private let store: Store
    private let clock: any GatehouseClock
    private let cache = NIOLockedValueBox<Subscriptions?>(nil)
    /// Called after a transaction that wrote deliveries commits (the dispatcher's wake-up).
    private let committed = NIOLockedValueBox<@Sendable () -> Void>({})

    static let refreshInterval: TimeInterval = 2

    /// The enabled endpoints and what they take, as last read.
    struct Subscriptions: Sendable {
        let endpoints: [WebhookEndpoint]
        let loadedAt: Date
    }

    init(store: Store, clock: any GatehouseClock) {
        self.store = store
        self.clock = clock
    }

    /// Forgets the cached endpoints: this instance just changed one.
    func invalidate() { cache.withLockedValue { $0 = nil } }

    /// What to call once deliveries are committed (the dispatcher's wake-up).
    func onCommitted(_ wake: @escaping @Sendable () -> Void) { committed.withLockedValue { $0 = wake } }

    func follows(_ events: [AuditEvent]) -> Bool {
        let cached = cache.withLockedValue { $0 }
        if let cached, clock.now.timeIntervalSince(cached.loadedAt) < Self.refreshInterval,
            cached.endpoints.isEmpty
        {
            return false
        }
        return events.contains { !WebhookEvent.from($0).isEmpty }
    }

    func record(_ events: [AuditEvent], in db: any SQLDatabase) async throws {
        try await write(events.flatMap(WebhookEvent.from), in: db)
    }

    /// Writes `events` and their deliveries in the transaction of `db`.
    func write(_ events: [WebhookEvent], in db: any SQLDatabase) async throws {
        guard !events.isEmpty else { return }
        let endpoints = try await subscriptions(db).endpoints
        guard !endpoints.isEmpty else { return }
        let repository = WebhookRepository(db: db)
        let now = clock.now
        var wrote = false
        for event in events {
            let takers = endpoints.filter { $0.wants(event.type) }
            guard !takers.isEmpty else { continue }
            let id = "msg_" + Secrets.identifier()
            let fieldsPayload =
                event.fields != nil && takers.contains(where: \.includeRecordFields)
                ? try Self.payload(event, at: now, withFields: true) : nil
            try await repository.insert(
                eventID: id, type: event.type.rawValue, payload: try Self.payload(event, at: now, withFields: false),
                fieldsPayload: fieldsPayload, endpoints: takers.map(\.id), now: now.epochMilliseconds)
            wrote = true
        }
        if wrote {
            let wake = committed.withLockedValue { $0 }
            // The dispatcher looks once this transaction has had time to commit; its tick catches a later commit.
            Task { wake() }
        }
    }

    /// The endpoints that take events now: cached, or read again in the transaction at hand.
    private func subscriptions(_ db: any SQLDatabase) async throws -> Subscriptions {
        let now = clock.now
        if let cached = cache.withLockedValue({ $0 }), now.timeIntervalSince(cached.loadedAt) < Self.refreshInterval {
            return cached
        }
        let loaded = Subscriptions(
            endpoints: try await WebhookRepository(db: db).endpoints().filter(\.enabled), loadedAt: now)
        cache.withLockedValue { $0 = loaded }
        return loaded
    }

    /// The body a delivery sends: `{"type", "timestamp", "data"}`, keys sorted.
    static func payload(_ event: WebhookEvent, at time: Date, withFields: Bool) throws -> String {
        var data = event.data.mapValues(JSONValue.string)
        for (key, value) in event.counts { data[key] = .int(value) }
        if withFields, let fields = event.fields,
            let records = try? JSONDecoder().decode(JSONValue.self, from: Data(fields.utf8))
        {
            data["records"] = records
        }
        let body: [String: JSONValue] = [
            "type": .string(event.type.rawValue), "timestamp": .string(MillisecondDateTranscoder.format(time)),
            "data": .object(data),
        ]
        return String(decoding: try JSONEncoder.sortedKeys.encode(body), as: UTF8.self)
    }
}
