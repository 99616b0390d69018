import Foundation
import GatehouseClientAPI

extension Companies {
    // MARK: Domains of the company signed in to (owner)

    /// The company's domains, pending and verified, each with the DNS record that proves it (owner).
    public func domains() async throws(GatehouseError) -> [CompanyDomain] {
        try await inCompany { try await $0.listDomains(path: .init(cid: $1)).ok.body.json }.domains
            .map(CompanyDomain.init)
    }

    /// Adds a domain the company owns, such as `acme.com` (owner). It stays pending until its TXT record, named in
    /// the answer, is published and ``verifyDomain(id:)`` finds it. Adding one twice is `domain_exists`.
    public func addDomain(_ domain: String) async throws(GatehouseError) -> CompanyDomain {
        let body = Components.Schemas.AddDomainRequest(domain: domain)
        return CompanyDomain(
            try await inCompany { try await $0.addDomain(path: .init(cid: $1), body: .json(body)).created.body.json })
    }

    /// Asks the server to look up the domain's TXT record now (owner). A missing record is
    /// ``GatehouseError/Code/domainRecordNotFound``, a domain another company holds verified
    /// ``GatehouseError/Code/domainAlreadyVerified``, a resolver that did not answer
    /// ``GatehouseError/Code/dnsLookupFailed``; none of them changes the domain.
    public func verifyDomain(id: String) async throws(GatehouseError) -> CompanyDomain {
        CompanyDomain(
            try await inCompany { try await $0.verifyDomain(path: .init(cid: $1, id: id)).ok.body.json })
    }

    /// Removes a domain (owner); a verified one stops counting at once.
    public func removeDomain(id: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.removeDomain(path: .init(cid: $1, id: id)).noContent }
    }
}

extension Companies {
    // MARK: Joining by domain

    /// The companies the account may join by the domain of its confirmed address: each holds that domain verified and
    /// lets its addresses join, at once or once its owner approves.
    public func domainCompanies() async throws(GatehouseError) -> [DomainCompany] {
        try await sessions.authorized { try await $0.listDomainCompanies().ok.body.json }.companies
            .map(DomainCompany.init)
    }

    /// Joins a company of ``domainCompanies()`` (`true`), or asks its owner to admit the account (`false`: the
    /// request waits). Joining again as a member changes nothing.
    public func joinByDomain(_ companyID: String) async throws(GatehouseError) -> Bool {
        try await sessions.authorized { try await $0.joinByDomain(path: .init(cid: companyID)).ok.body.json }
            .status == .joined
    }

    /// Whether and how accounts of the company's verified domains may join (owner).
    public func domainJoin() async throws(GatehouseError) -> DomainJoin {
        DomainJoin(try await inCompany { try await $0.getDomainJoin(path: .init(cid: $1)).ok.body.json })
    }

    /// Sets joining by domain (owner): off, automatic or with approval, and the role and department mask a member
    /// joining this way gets.
    public func setDomainJoin(_ setting: DomainJoin) async throws(GatehouseError) -> DomainJoin {
        let body = Components.Schemas.DomainJoinSetting(
            mode: .init(rawValue: setting.mode.rawValue) ?? .off, role: setting.role == .readOnly ? .readOnly : .member,
            deptMask: setting.deptMask)
        return DomainJoin(
            try await inCompany { try await $0.setDomainJoin(path: .init(cid: $1), body: .json(body)).ok.body.json })
    }

    /// The accounts waiting for the owner's approval (owner).
    public func joinRequests() async throws(GatehouseError) -> [JoinRequest] {
        try await inCompany { try await $0.listJoinRequests(path: .init(cid: $1)).ok.body.json }.requests
            .map(JoinRequest.init)
    }

    /// Admits a waiting account with the setting's role and mask (owner).
    public func approveJoinRequest(id: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.approveJoinRequest(path: .init(cid: $1, id: id)).noContent }
    }

    /// Declines a request (owner); the account may ask again.
    public func declineJoinRequest(id: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.declineJoinRequest(path: .init(cid: $1, id: id)).noContent }
    }
}

/// How accounts with a confirmed address at one of a company's verified domains may join it.
public struct DomainJoin: Sendable, Equatable {
    /// Whether they may join, and how.
    public enum Mode: String, Sendable, Equatable {
        /// They may not (the default).
        case off
        /// They join at once.
        case automatic
        /// They ask, and the owner approves or declines.
        case approval
    }

    /// Whether they may join, and how.
    public var mode: Mode
    /// The role they get: ``CompanyRole/member`` or ``CompanyRole/readOnly``.
    public var role: CompanyRole
    /// The departments they get.
    public var deptMask: Int64

    /// A setting to send with ``Companies/setDomainJoin(_:)``.
    public init(mode: Mode, role: CompanyRole = .member, deptMask: Int64 = 0) {
        self.mode = mode
        self.role = role
        self.deptMask = deptMask
    }

    init(_ wire: Components.Schemas.DomainJoinSetting) {
        mode = Mode(rawValue: wire.mode.rawValue) ?? .off
        role = wire.role == .readOnly ? .readOnly : .member
        deptMask = wire.deptMask
    }
}

/// A company the account may join by the domain of its confirmed address.
public struct DomainCompany: Sendable, Equatable, Identifiable {
    /// The company's id.
    public let id: String
    /// Its name.
    public let name: String
    /// Its logo.
    public let logoURL: URL?
    /// The verified domain the account's address is at.
    public let domain: String
    /// Whether joining is at once (``DomainJoin/Mode/automatic``) or needs approval.
    public let mode: DomainJoin.Mode
    /// The account is a member already.
    public let isMember: Bool
    /// The account's request waits for the owner.
    public let isRequested: Bool

    init(_ wire: Components.Schemas.DomainCompany) {
        id = wire.id
        name = wire.name
        logoURL = wire.logoUrl.flatMap(URL.init(string:))
        domain = wire.domain
        mode = DomainJoin.Mode(rawValue: wire.mode.rawValue) ?? .approval
        isMember = wire.member
        isRequested = wire.requested
    }
}

/// An account waiting for the owner's approval to join by domain.
public struct JoinRequest: Sendable, Equatable, Identifiable {
    /// The request's id (to approve or decline it).
    public let id: String
    /// The account asking.
    public let accountID: String
    /// Its confirmed address, at the company's domain.
    public let email: String
    /// When it asked.
    public let createdAt: Date

    init(_ wire: Components.Schemas.JoinRequest) {
        id = wire.id
        accountID = wire.accountId
        email = wire.email
        createdAt = wire.createdAt
    }
}

/// A domain of a company, and the DNS TXT record that proves the company holds it. Only a verified domain counts; one
/// company at a time holds a domain verified, and the server checks it again every day.
public struct CompanyDomain: Sendable, Equatable, Identifiable {
    /// Whether the domain's record was found.
    public enum Status: String, Sendable, Equatable {
        /// Added, its record not found yet (or no longer: three failed daily checks in a row drop a verification).
        case pending
        /// Proven by its record.
        case verified
    }

    /// The domain's id (for verifying or removing it).
    public let id: String
    /// The domain, lowercased.
    public let domain: String
    /// Pending or verified.
    public let status: Status
    /// Where to publish the TXT record: `_gatehouse-challenge.<domain>`.
    public let recordName: String
    /// The TXT record's value: `gatehouse-verification=<token>`.
    public let recordValue: String
    /// When the record was first found, while verified.
    public let verifiedAt: Date?
    /// When the server last looked, if it has.
    public let lastCheckedAt: Date?
    /// When it was added.
    public let createdAt: Date

    init(_ wire: Components.Schemas.CompanyDomain) {
        id = wire.id
        domain = wire.domain
        status = Status(rawValue: wire.status.rawValue) ?? .pending
        recordName = wire.recordName
        recordValue = wire.recordValue
        verifiedAt = wire.verifiedAt
        lastCheckedAt = wire.lastCheckedAt
        createdAt = wire.createdAt
    }
}

extension GatehouseError.Code {
    /// Another company holds that domain verified: one company per domain.
    public static let domainAlreadyVerified = Self(rawValue: "domain_already_verified")
    /// The company has added that domain already.
    public static let domainExists = Self(rawValue: "domain_exists")
    /// The domain's TXT record was not found, or holds another value; the domain stays pending.
    public static let domainRecordNotFound = Self(rawValue: "domain_record_not_found")
    /// The server's DNS resolver did not answer: try again later.
    public static let dnsLookupFailed = Self(rawValue: "dns_lookup_failed")
}
