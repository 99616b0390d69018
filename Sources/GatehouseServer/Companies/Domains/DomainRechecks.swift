import Foundation
import Logging
import SQLKit
import ServiceLifecycle

/// Looks at verified domains again when they fall due (daily; an hour after a failure), a service on every instance.
/// Each re-check leases its row first, so two instances never both look; `DomainRules.recheck` judges the answer.
/// The last failure allowed unverifies the domain, audits `domain_verification_lost` and mails the owner, in one
/// transaction.
final class DomainRechecks: Service, Sendable {
    let store: Store
    let lookup: any TXTLookup
    let clock: any GatehouseClock
    let trail: AuditTrail
    let mailer: Mailer
    let logger: Logger
    private let wakeUps = QueueWakeUps(interval: DomainRechecks.pollInterval)

    /// How long one instance holds a re-check: longer than a lookup can take.
    static let lease: TimeInterval = 120
    /// Re-checks fall due a day apart: a look every few minutes is soon enough.
    static let pollInterval: Duration = .seconds(300)

    init(
        store: Store, lookup: any TXTLookup, clock: any GatehouseClock, trail: AuditTrail, mailer: Mailer,
        logger: Logger
    ) {
        self.store = store
        self.lookup = lookup
        self.clock = clock
        self.trail = trail
        self.mailer = mailer
        self.logger = logger
    }

    func run() async throws {
        await wakeUps.run(store: store, logger: logger, unavailable: "domain re-checks unavailable") {
            try await checkNext()
        }
    }

    /// Re-checks every domain due now; answers how many were looked at.
    @discardableResult
    func checkDue() async throws -> Int {
        var checked = 0
        while try await checkNext() { checked += 1 }
        return checked
    }

    /// Re-checks the most overdue verified domain; false when none is due.
    func checkNext() async throws -> Bool {
        let now = clock.now
        let repository = DomainRepository(db: store.database)
        guard var due = try await repository.nextDue(now: now) else { return false }
        guard try await repository.lease(due, until: now.addingTimeInterval(Self.lease)) else { return true }
        let answer: DNSMessage.Answer?
        do {
            answer = try await lookup.txt(DomainRules.recordName(due.domain))
        } catch {
            logger.warning(
                "a domain's re-check got no answer from the resolver",
                metadata: ["domain": "\(due.domain)", "error": "\(error)"])
            answer = nil
        }
        let outcome = DomainRules.recheck(
            answer, expected: DomainRules.recordValue(due.token), failures: due.failures, now: now)
        switch outcome {
        case .confirmed(let next):
            due.failures = 0
            due.lastCheckedAt = now
            due.nextCheckAt = next
        case .failed(let failures, let next):
            due.failures = failures
            due.lastCheckedAt = now
            due.nextCheckAt = next
        case .unanswered(let next):
            due.nextCheckAt = next
        case .lost(let failures):
            due.verifiedAt = nil
            due.failures = 0
            due.lastCheckedAt = now
            due.nextCheckAt = nil
            try await lose(due, failures: failures)
            return true
        }
        try await DomainRepository(db: store.database).update(due)
        return true
    }

    /// Unverifies `record`, audits it and mails the company's owner.
    private func lose(_ record: DomainRecord, failures: Int) async throws {
        try await store.transaction { [trail, mailer] db in
            try await DomainRepository(db: db).update(record)
            try await trail.within(db).record(
                AuditEvent(
                    .domainVerificationLost, companyID: record.companyID,
                    detail: ["domain": record.domain, "domain_id": record.id, "failures": String(failures)]))
            guard let company = try await CompanyDirectory(db: db).company(record.companyID),
                let owner = try await AccountDirectory(db: db).find(id: company.ownerID)
            else { return }
            try await mailer.enqueue(
                .domainVerificationLost(company: company.name, domain: record.domain), to: owner.email, db: db)
        }
        mailer.queue.wake()
        logger.notice(
            "a domain is no longer verified after failed re-checks",
            metadata: ["domain": "\(record.domain)", "company.id": "\(record.companyID)"])
    }
}
