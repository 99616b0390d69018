import AsyncHTTPClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Sends webhook deliveries off the request path, at least once: each delivery is leased, sent, and recorded as
/// delivered, or as failed with its next try on the Standard Webhooks example schedule. Every instance runs one.
///
/// A slow or failing endpoint delays no other: at most `perEndpoint` deliveries of one endpoint are in flight, and a
/// round never waits for the sends it starts. A 3xx is a failure (redirects are not followed), a 410 turns the
/// endpoint off at once, and a delivery that fails through the whole schedule turns it off and mails the operators.
final class WebhookDispatcher: Service, Sendable {
    private let store: Store
    private let box: SecretBox
    private let clock: any GatehouseClock
    private let logger: Logger
    private let mailer: Mailer
    private let trail: AuditTrail
    let targets: WebhookTargets
    private let inFlight = NIOLockedValueBox<[String: Int]>([:])
    private let signal: AsyncStream<Void>.Continuation
    private let signals: AsyncStream<Void>
    /// Outcomes of tries, written together: one turn at the store's write lock per batch, not one per delivery.
    private let outcomes: GroupCommit<WebhookRepository.Finish, Void>

    /// The waits after each failed try: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h (ten tries in all,
    /// about three days).
    static let schedule: [TimeInterval] = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]
    /// Deliveries of one endpoint in flight at once, and of all endpoints.
    static let perEndpoint = 8
    static let inFlightLimit = 64
    /// How long a leased delivery keeps other workers away: longer than a try can take (15 s). A delivery leased by
    /// an instance that died is tried again once its lease ends.
    static let lease: TimeInterval = 20
    /// The most of an answer read; more is a failure.
    static let answerLimit = 64 << 10
    static let pollInterval: Duration = .milliseconds(250)

    init(
        store: Store, box: SecretBox, clock: any GatehouseClock, logger: Logger, mailer: Mailer, trail: AuditTrail,
        targets: WebhookTargets
    ) {
        self.store = store
        self.box = box
        self.clock = clock
        self.logger = logger
        self.mailer = mailer
        self.trail = trail
        self.targets = targets
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        outcomes = GroupCommit(limit: 256) { [store, logger] batch in
            do {
                try await store.transaction { db in
                    let repository = WebhookRepository(db: db)
                    for outcome in batch { try await repository.finish(outcome) }
                }
            } catch {
                logger.warning(
                    "webhook delivery outcomes not recorded", metadata: ["error": "\(String(reflecting: error))"])
            }
            return batch.map { _ in () }
        }
    }

    /// Tells the worker that deliveries were committed, or a send finished.
    func wake() { signal.yield() }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { [signal] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.pollInterval)
                    signal.yield()
                }
            }
            for await _ in signals.cancelOnGracefulShutdown() {
                guard store.schemaVersion != nil else { continue }
                do {
                    for delivery in try await take() {
                        group.addTask {
                            await self.send(delivery) {
                                self.release(delivery.endpointID)
                                self.wake()
                            }
                        }
                    }
                } catch {
                    logger.warning(
                        "webhook deliveries unavailable", metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            group.cancelAll()
        }
        await targets.shutdown()
    }

    /// Leases what is due, up to what the limits leave room for: endpoint by endpoint, so that one endpoint's backlog
    /// never fills a round.
    private func take() async throws -> [DueWebhookDelivery] {
        let now = clock.now.epochMilliseconds
        let repository = WebhookRepository(db: store.database)
        var taken: [DueWebhookDelivery] = []
        for endpointID in try await repository.endpointsDue(now: now).shuffled() {
            let room = inFlight.withLockedValue { counts in
                min(
                    Self.perEndpoint - counts[endpointID, default: 0],
                    Self.inFlightLimit - counts.values.reduce(0, +))
            }
            guard room > 0 else { continue }
            let due = try await repository.due(now: now, endpointID: endpointID, limit: room)
            let admitted = inFlight.withLockedValue { counts in
                let free = min(
                    Self.perEndpoint - counts[endpointID, default: 0],
                    Self.inFlightLimit - counts.values.reduce(0, +))
                let admitted = Array(due.prefix(max(0, free)))
                counts[endpointID, default: 0] += admitted.count
                return admitted
            }
            guard !admitted.isEmpty else { continue }
            let leased = try await repository.lease(
                admitted.map(\.id), now: now, until: now + Int64(Self.lease * 1000))
            for delivery in admitted {
                if leased.contains(delivery.id) { taken.append(delivery) } else { release(endpointID) }
            }
        }
        return taken
    }

    private func release(_ endpointID: String) {
        inFlight.withLockedValue { counts in
            counts[endpointID, default: 1] -= 1
            if counts[endpointID] == 0 { counts[endpointID] = nil }
        }
    }

    /// What one try came to.
    struct Outcome: Sendable, Equatable {
        var statusCode: Int?
        var error: String?
        var delivered: Bool { error == nil && (statusCode.map { (200..<300).contains($0) } ?? false) }
    }

    /// Sends one delivery and records what came of it. `sent` is called once the exchange is over, before the
    /// outcome is written: the endpoint's slot frees at once, and the delivery stays leased until its outcome is in.
    private func send(_ delivery: DueWebhookDelivery, sent: @Sendable () -> Void) async {
        let started = ContinuousClock.now
        var outcome: Outcome
        let repository = WebhookRepository(db: store.database)
        do {
            guard let endpoint = try await repository.endpoint(delivery.endpointID),
                let keys = try await keys(delivery.endpointID)
            else {
                sent()
                return  // removed while leased: its deliveries went with it
            }
            let body =
                endpoint.includeRecordFields ? (delivery.fieldsPayload ?? delivery.payload) : delivery.payload
            outcome = await post(Array(body.utf8), id: delivery.eventID, to: endpoint.url, keys: keys)
            sent()
        } catch {
            sent()
            logger.warning("webhook delivery not read", metadata: ["error": "\(String(reflecting: error))"])
            return
        }
        let elapsed = ContinuousClock.now - started
        let latency = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        do {
            try await record(outcome, of: delivery, latencyMS: latency)
        } catch {
            logger.warning("webhook delivery outcome not recorded", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// The endpoint's signing keys: its secret, and the one it replaced while the rotation lasts.
    private func keys(_ endpointID: String) async throws -> [[UInt8]]? {
        guard let sealed = try await WebhookRepository(db: store.database).secrets(endpointID) else { return nil }
        var keys: [[UInt8]] = []
        if let key = WebhookSecret.key(try box.open(sealed.secret, context: Webhooks.secretContext(endpointID))) {
            keys.append(key)
        }
        if let previous = sealed.previous, let until = sealed.previousUntil, until > clock.now.epochMilliseconds,
            let key = WebhookSecret.key(
                try box.open(previous, context: Webhooks.previousSecretContext(endpointID)))
        {
            keys.append(key)
        }
        return keys
    }

    /// POSTs the payload, signed; what came back (a status, or why nothing usable did).
    func post(_ body: [UInt8], id: String, to target: String, keys: [[UInt8]]) async -> Outcome {
        let url: URL
        let client: HTTPClient
        do {
            url = try targets.check(url: target)
            client = try await targets.client(for: url)
        } catch {
            return Outcome(statusCode: nil, error: "\(error)")
        }
        var request = HTTPClientRequest(url: target)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "Gatehouse-Webhooks/1")
        let timestamp = Int64(clock.now.timeIntervalSince1970)
        for (name, value) in StandardWebhooks.headers(id: id, timestamp: timestamp, body: body, keys: keys) {
            request.headers.add(name: name, value: value)
        }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: WebhookTargets.requestTimeout)
            let status = Int(response.status.code)
            do {
                _ = try await response.body.collect(upTo: Self.answerLimit)
            } catch {
                return Outcome(statusCode: status, error: "answer larger than \(Self.answerLimit) bytes")
            }
            if (300..<400).contains(status) { return Outcome(statusCode: status, error: "redirect not followed") }
            if !(200..<300).contains(status) { return Outcome(statusCode: status, error: "answered \(status)") }
            return Outcome(statusCode: status, error: nil)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return Outcome(statusCode: nil, error: "timed out")
        } catch let error as HTTPClientError where error == .connectTimeout {
            return Outcome(statusCode: nil, error: "connect timed out")
        } catch {
            return Outcome(statusCode: nil, error: "not reached: \(Self.reason(error))")
        }
    }

    /// A transport error in a few words, without the URL (which may carry a token of the receiver's).
    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return error.description }
        if error is NIOConnectionError { return "connection refused or unreachable" }
        if let error = error as? HTTPClientError { return error.description }
        return String(describing: type(of: error))
    }

    /// Records a try: delivered; failed for good (410, or the schedule is spent), turning the endpoint off; or
    /// pending again after the schedule's next wait.
    private func record(_ outcome: Outcome, of delivery: DueWebhookDelivery, latencyMS: Int) async throws {
        let now = clock.now
        let attempts = delivery.attempts + 1
        if outcome.delivered {
            await outcomes.submit(
                .init(
                    id: delivery.id, status: .delivered, attempts: attempts, next: nil,
                    statusCode: outcome.statusCode, latencyMS: latencyMS, error: nil, now: now.epochMilliseconds))
            return
        }
        let gone = outcome.statusCode == 410
        let spent = attempts > Self.schedule.count
        let next = gone || spent ? nil : now.addingTimeInterval(Self.schedule[attempts - 1]).epochMilliseconds
        await outcomes.submit(
            .init(
                id: delivery.id, status: next == nil ? .failed : .pending, attempts: attempts, next: next,
                statusCode: outcome.statusCode, latencyMS: latencyMS, error: outcome.error,
                now: now.epochMilliseconds))
        guard next == nil else { return }
        try await disable(delivery.endpointID, reason: gone ? "gone" : "failing")
    }

    /// Turns the endpoint off and tells the operators, once.
    private func disable(_ endpointID: String, reason: String) async throws {
        try await store.transaction { [mailer, trail] db in
            let repository = WebhookRepository(db: db)
            guard let endpoint = try await repository.endpoint(endpointID), endpoint.enabled else { return }
            _ = try await repository.setEnabled(endpointID, false, reason: reason)
            try await trail.within(db).record(
                AuditEvent(.webhookDisabled, detail: ["webhook": endpointID, "reason": reason]))
            for email in try await OperatorDirectory(db: db).emails() {
                try await mailer.enqueue(.webhookDisabled(url: endpoint.url, reason: reason), to: email, db: db)
            }
        }
        mailer.queue.wake()
        logger.warning("webhook endpoint turned off", metadata: ["webhook": "\(endpointID)", "reason": "\(reason)"])
    }
}
