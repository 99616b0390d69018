import Foundation

/// The audit trail every feature writes through: events in batches (`AuditQueue`), and refusals capped per client
/// address. Built once in `GatehouseServices` and handed to each service that records, so none holds the session
/// service only to audit.
final class AuditTrail: Sendable {
    private let queue: AuditQueue
    /// How many refusals each client address may add (`recordRefusal`).
    private let refusals: RateLimiter

    init(store: Store, clock: any GatehouseClock) {
        queue = AuditQueue(store: store, clock: clock)
        refusals = RateLimiter(clock: clock)
    }

    /// Records an event, in one transaction with whatever other events wait (`AuditQueue`); a failure to record is
    /// logged, never the request's failure.
    func record(_ event: AuditEvent) async { await queue.record(event) }

    /// Records a refusal (a rejected token, a refused authorization, a rate limit, a cross-site post) unless its
    /// client address (its /64 for IPv6, `ClientAddress.limitKey`) has already had `refusalsPerAddress` of this kind
    /// recorded recently: whoever sends garbage cannot grow the trail a row per request. The first refusal held back
    /// in a window is recorded as `audit_suppressed`, so the trail says it stopped counting.
    func recordRefusal(_ event: AuditEvent) async {
        let address = ClientAddress.limitKey(event.ip)
        guard refusals.check("\(event.action):\(address)", Self.refusalsPerAddress) != nil else {
            await record(event)
            return
        }
        guard refusals.check("suppressed:\(address)", Self.suppressionNotices) == nil else { return }
        await record(
            AuditEvent(
                .auditSuppressed, accountID: nil, ip: event.ip, userAgent: event.userAgent,
                detail: ["action": event.action, "for_seconds": "\(Int(Self.refusalsPerAddress.window))"]))
    }

    /// Refusals of one kind recorded per client address: 20 at once, then one every 3 seconds.
    static let refusalsPerAddress = RateLimit(limit: 20, per: 60)
    /// `audit_suppressed` notices per client address: one a minute.
    static let suppressionNotices = RateLimit(limit: 1, per: 60)
}
