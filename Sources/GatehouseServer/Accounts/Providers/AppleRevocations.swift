import Foundation
import Logging
import SQLKit
import ServiceLifecycle

/// Apple refresh tokens to revoke, kept in the store until Apple takes them. A deletion or an unlink queues the
/// identity's token in its own transaction and never waits for Apple: a worker on every instance revokes what is
/// due, leasing a row first so two instances never both call, and retries a failure with backoff (30 s doubling to
/// six hours) for 30 days. Apple refusing a token for good (it was revoked already, or expired) ends its row.
final class AppleRevocations: Service, Sendable {
    let store: Store
    let api: AppleSignInAPI
    let box: SecretBox
    let clock: any GatehouseClock
    let trail: AuditTrail
    let logger: Logger
    private let wakeUps = QueueWakeUps(interval: AppleRevocations.pollInterval)

    static let lease: TimeInterval = 120
    static let giveUpAfter: TimeInterval = 30 * 24 * 3600
    static let pollInterval: Duration = .seconds(1)

    init(
        store: Store, api: AppleSignInAPI, box: SecretBox, clock: any GatehouseClock, trail: AuditTrail, logger: Logger
    ) {
        self.store = store
        self.api = api
        self.box = box
        self.clock = clock
        self.trail = trail
        self.logger = logger
    }

    /// The SecretBox context an identity's provider token is sealed under: the token cannot be moved to another row.
    static func context(identityID: String) -> String { "identity-token:\(identityID)" }

    /// Queues the provider tokens of `accountID` (all its identities, or just `identityID`) for revocation, in the
    /// caller's transaction. The sealed token moves as it is: its row is keyed by the identity's id.
    static func enqueue(accountID: String, identityID: String? = nil, clientID: String, now: Date, db: any SQLDatabase)
        async throws -> Int
    {
        let repository = ProviderRepository(db: db)
        var queued = 0
        for token in try await repository.providerTokens(accountID: accountID)
        where identityID == nil || token.identityID == identityID {
            try await repository.enqueueRevocation(
                id: token.identityID, sealedToken: token.sealed, clientID: clientID, now: now)
            queued += 1
        }
        return queued
    }

    /// Tells the worker that a revocation was committed.
    func wake() { wakeUps.wake() }

    func run() async throws {
        await wakeUps.run(store: store, logger: logger, unavailable: "apple revocations unavailable") {
            try await revokeNext()
        }
    }

    /// Revokes the oldest due token; false when none is due or Apple is not answering.
    func revokeNext() async throws -> Bool {
        let now = clock.now
        let repository = ProviderRepository(db: store.database)
        guard let due = try await repository.nextDueRevocation(now: now.epochMilliseconds) else { return false }
        guard
            try await repository.lease(
                due, until: now.addingTimeInterval(Self.lease).epochMilliseconds)
        else { return true }
        let token: String
        do {
            token = try box.open(due.sealedToken, context: Self.context(identityID: due.id))
        } catch {
            logger.error(
                "an Apple token to revoke cannot be read and is dropped", metadata: ["identity.id": "\(due.id)"])
            try await repository.deleteRevocation(id: due.id)
            return true
        }
        do {
            try await api.revoke(refreshToken: token, now: now)
            try await repository.deleteRevocation(id: due.id)
            await trail.record(
                AuditEvent(.appleTokenRevoked, accountID: nil, detail: ["identity": due.id, "outcome": "revoked"]))
            return true
        } catch let failure as AppleSignInAPI.Failure where !failure.refused {
            let age = now.timeIntervalSince(Date(epochMilliseconds: due.createdAt))
            if age > Self.giveUpAfter {
                try await repository.deleteRevocation(id: due.id)
                await trail.record(
                    AuditEvent(
                        .appleTokenRevoked, accountID: nil,
                        detail: ["identity": due.id, "outcome": "given_up", "error": failure.description]))
                return true
            }
            let delay = Self.retryDelay(attempt: Int(due.attempts + 1))
            logger.warning(
                "apple token not revoked, will retry",
                metadata: ["identity.id": "\(due.id)", "retry_in": "\(Int(delay))s", "error": "\(failure)"])
            try await repository.reschedule(id: due.id, next: now.addingTimeInterval(delay).epochMilliseconds)
            return false
        } catch {
            try await repository.deleteRevocation(id: due.id)
            await trail.record(
                AuditEvent(
                    .appleTokenRevoked, accountID: nil,
                    detail: ["identity": due.id, "outcome": "refused", "error": "\(error)"]))
            return true
        }
    }

    /// 30 s, 1 min, 2 min … up to six hours between tries of one token.
    static func retryDelay(attempt: Int) -> TimeInterval {
        min(6 * 3600, 30 * pow(2, Double(max(0, attempt - 1))))
    }
}
