import Foundation
import GatehouseAPI
import SQLKit

/// A company's domains: the owner adds one, publishes its TXT record and asks for it to be verified through the
/// server's resolver (`DomainRules` says what counts); `DomainRechecks` looks at verified ones again.
struct DomainService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let lookup: any TXTLookup

    static let domainNotFound = APIError.notFound("No such domain")

    /// The company's domains; the owner only.
    func list(_ caller: CompanyCaller) async throws -> Schemas.CompanyDomainList {
        try Self.ownerOnly(caller)
        return .init(domains: try await DomainRepository(db: store.database).domains(caller.companyID).map(Self.wire))
    }

    /// Adds a pending domain with a fresh challenge; the owner only.
    func add(_ body: Schemas.AddDomainRequest, by caller: CompanyCaller) async throws -> Schemas.CompanyDomain {
        try Self.ownerOnly(caller)
        guard let domain = DomainRules.normalized(body.domain) else {
            throw APIError.validation(
                "domain must be a registrable domain name such as acme.com: letters, digits and hyphens, two labels "
                    + "or more, not an IP address or a local name")
        }
        let record = DomainRecord(
            id: Secrets.identifier(), companyID: caller.companyID, domain: domain, token: Secrets.token(),
            verifiedAt: nil, failures: 0, nextCheckAt: nil, lastCheckedAt: nil, createdAt: Self.stored(clock.now))
        try await store.transaction { [trail] db in
            let domains = DomainRepository(db: db)
            let held = try await domains.domains(caller.companyID)
            guard !held.contains(where: { $0.domain == domain }) else {
                throw APIError(.conflict, code: .domainExists, message: "The company has added \(domain) already")
            }
            guard held.count < DomainRules.perCompany else {
                throw APIError.validation("A company may hold at most \(DomainRules.perCompany) domains")
            }
            try await domains.insert(record)
            try await trail.within(db).record(
                caller.event(.domainAdded, detail: ["domain": domain, "domain_id": record.id]))
        }
        return Self.wire(record)
    }

    /// Looks up the domain's record now: verified when it holds the challenge and no other company holds the domain
    /// verified. A failed lookup changes nothing.
    func verify(_ id: String, by caller: CompanyCaller) async throws -> Schemas.CompanyDomain {
        try Self.ownerOnly(caller)
        guard var record = try await DomainRepository(db: store.database).domain(caller.companyID, id: id) else {
            throw Self.domainNotFound
        }
        let expected = DomainRules.recordValue(record.token)
        let answer: DNSMessage.Answer
        do {
            answer = try await lookup.txt(DomainRules.recordName(record.domain))
        } catch {
            throw APIError(
                .serviceUnavailable, code: .dnsLookupFailed,
                message: "The DNS lookup of \(DomainRules.recordName(record.domain)) failed: \(error). Try again later")
        }
        guard DomainRules.proves(answer, expected: expected) else {
            throw APIError(
                .unprocessableContent, code: .domainRecordNotFound,
                message: "No TXT record \(expected) at \(DomainRules.recordName(record.domain)) yet")
        }
        let now = Self.stored(clock.now)
        let wasVerified = record.verifiedAt != nil
        record.verifiedAt = record.verifiedAt ?? now
        record.failures = 0
        record.lastCheckedAt = now
        record.nextCheckAt = now.addingTimeInterval(DomainRules.recheckInterval)
        let verified = record
        let held = APIError(
            .conflict, code: .domainAlreadyVerified,
            message: "Another company holds \(verified.domain) verified: one company per domain")
        do {
            try await store.transaction { [trail] db in
                let domains = DomainRepository(db: db)
                guard try await domains.domain(caller.companyID, id: id) != nil else { throw Self.domainNotFound }
                if let holder = try await domains.verifiedHolder(of: verified.domain), holder != caller.companyID {
                    throw held
                }
                try await domains.update(verified)
                if !wasVerified {
                    try await trail.within(db).record(
                        caller.event(.domainVerified, detail: ["domain": verified.domain, "domain_id": verified.id]))
                }
            }
        } catch let error as APIError {
            throw error
        } catch {
            // Two companies verifying at once: the store's unique index refused the second.
            if let holder = try? await DomainRepository(db: store.database).verifiedHolder(of: verified.domain),
                holder != caller.companyID
            {
                throw held
            }
            throw error
        }
        return Self.wire(verified)
    }

    /// Removes the domain; the owner only.
    func remove(_ id: String, by caller: CompanyCaller) async throws {
        try Self.ownerOnly(caller)
        try await store.transaction { [trail] db in
            let domains = DomainRepository(db: db)
            guard let record = try await domains.domain(caller.companyID, id: id),
                try await domains.delete(caller.companyID, id: id)
            else { throw Self.domainNotFound }
            try await trail.within(db).record(
                caller.event(.domainRemoved, detail: ["domain": record.domain, "domain_id": record.id]))
        }
    }

    /// `date` as the store keeps it (whole milliseconds), so an answer and a later list agree.
    private static func stored(_ date: Date) -> Date { Date(epochMilliseconds: date.epochMilliseconds) }

    private static func ownerOnly(_ caller: CompanyCaller) throws {
        guard caller.membership.isOwner else { throw CompanyService.forbidden("Only the owner manages domains") }
    }

    static func wire(_ record: DomainRecord) -> Schemas.CompanyDomain {
        Schemas.CompanyDomain(
            id: record.id, domain: record.domain, status: record.verifiedAt == nil ? .pending : .verified,
            recordName: DomainRules.recordName(record.domain), recordValue: DomainRules.recordValue(record.token),
            verifiedAt: record.verifiedAt, lastCheckedAt: record.lastCheckedAt, createdAt: record.createdAt)
    }
}
