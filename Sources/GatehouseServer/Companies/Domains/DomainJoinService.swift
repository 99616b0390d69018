import Foundation
import GatehouseAPI
import SQLKit

/// Joining by domain, opt-in per company: an account whose confirmed address is at a domain the company holds verified
/// sees the company and joins with the setting's role and department mask (`automatic`), or asks and waits for the
/// owner (`approval`). Within the tier's participant limit; an account the owner removed does not come back this way.
struct DomainJoinService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail

    static let noCompany = APIError.notFound("No company of your confirmed address's domain lets you join")
    static let requestNotFound = APIError.notFound("No such join request")

    // MARK: The owner

    func setting(_ caller: CompanyCaller) async throws -> Schemas.DomainJoinSetting {
        try Self.ownerOnly(caller)
        return Self.wire(try await DomainJoinRepository(db: store.database).setting(caller.companyID))
    }

    func update(_ body: Schemas.DomainJoinSetting, by caller: CompanyCaller) async throws -> Schemas.DomainJoinSetting {
        try Self.ownerOnly(caller)
        guard body.deptMask >= 0 else { throw APIError.validation("dept_mask is a non-negative bitmask") }
        let setting = DomainJoinSetting(
            mode: DomainJoinSetting.Mode(rawValue: body.mode.rawValue) ?? .off,
            role: MemberRole(rawValue: body.role.rawValue) ?? .member, deptMask: body.deptMask)
        try await store.transaction { [trail, clock] db in
            try await DomainJoinRepository(db: db).save(caller.companyID, setting, now: clock.now)
            try await trail.within(db).record(
                caller.event(
                    .domainJoinChanged,
                    detail: [
                        "mode": setting.mode.rawValue, "role": setting.role.rawValue,
                        "dept_mask": String(setting.deptMask),
                    ]))
        }
        return Self.wire(setting)
    }

    func requests(_ caller: CompanyCaller) async throws -> Schemas.JoinRequestList {
        try Self.ownerOnly(caller)
        return .init(
            requests: try await DomainJoinRepository(db: store.database).requests(caller.companyID).map {
                .init(id: $0.id, accountId: $0.accountID, email: $0.email, createdAt: $0.createdAt)
            })
    }

    /// Admits a waiting account, if its address still qualifies.
    func approve(_ id: String, by caller: CompanyCaller) async throws {
        try Self.ownerOnly(caller)
        try await store.transaction { [trail, clock] db in
            let joins = DomainJoinRepository(db: db)
            guard let request = try await joins.request(caller.companyID, id: id) else { throw Self.requestNotFound }
            guard let (company, _) = try await Self.joinable(caller.companyID, accountID: request.accountID, db: db)
            else { throw Self.requestNotFound }
            _ = try await joins.deleteRequest(caller.companyID, id: id)
            try await Self.admit(request.accountID, to: company, db: db, now: clock.now)
            try await trail.within(db).record(
                caller.event(.domainJoinApproved, detail: ["member": request.accountID, "request": id]))
        }
    }

    func decline(_ id: String, by caller: CompanyCaller) async throws {
        try Self.ownerOnly(caller)
        try await store.transaction { [trail] db in
            let joins = DomainJoinRepository(db: db)
            guard let request = try await joins.request(caller.companyID, id: id),
                try await joins.deleteRequest(caller.companyID, id: id)
            else { throw Self.requestNotFound }
            try await trail.within(db).record(
                caller.event(.domainJoinDeclined, detail: ["account": request.accountID, "request": id]))
        }
    }

    // MARK: The account

    /// The companies the caller's confirmed address lets them join.
    func companies(for caller: Caller) async throws -> Schemas.DomainCompanyList {
        let db = store.database
        guard let domain = try await Self.confirmedDomain(caller.accountID, db: db) else { return .init(companies: []) }
        var companies: [Schemas.DomainCompany] = []
        for company in try await DomainJoinRepository(db: db).companies(domain: domain) {
            companies.append(
                .init(
                    id: company.companyID, name: company.name, logoUrl: company.logoURL, domain: company.domain,
                    mode: company.setting.mode == .approval ? .approval : .automatic,
                    member: try await CompanyDirectory(db: db).membership(
                        company.companyID, accountID: caller.accountID)
                        != nil,
                    requested: try await DomainJoinRepository(db: db).pending(
                        company.companyID, accountID: caller.accountID)))
        }
        return .init(companies: companies)
    }

    /// Joins the company, or asks to.
    func join(_ companyID: String, by caller: Caller) async throws -> Schemas.DomainJoinOutcome {
        try await store.transaction { [trail, clock] db in
            guard let (company, setting) = try await Self.joinable(companyID, accountID: caller.accountID, db: db)
            else { throw Self.noCompany }
            let event = { (action: AuditAction) in
                AuditEvent(
                    action, accountID: caller.accountID, companyID: companyID, ip: caller.client.ip,
                    userAgent: caller.client.userAgent, detail: ["domain": company.domain])
            }
            if try await CompanyRepository(db: db).membership(companyID, accountID: caller.accountID) != nil {
                return .init(status: .joined)
            }
            if let former = try await CompanyRepository(db: db).former(companyID, accountID: caller.accountID),
                former.removedAt != nil
            {
                throw APIError(
                    .forbidden, code: .removedFromCompany,
                    message: "You were removed from this company; ask its owner for an invitation")
            }
            switch setting.mode {
            case .off: throw Self.noCompany
            case .approval:
                try await DomainJoinRepository(db: db).request(companyID, accountID: caller.accountID, now: clock.now)
                try await trail.within(db).record(event(.domainJoinRequested))
                return .init(status: .pending)
            case .automatic:
                try await Self.admit(caller.accountID, to: company, db: db, now: clock.now)
                try await trail.within(db).record(event(.domainJoined))
                return .init(status: .joined)
            }
        }
    }

    // MARK: Rules shared by both sides

    /// The domain of the account's address, when the address is confirmed.
    static func confirmedDomain(_ accountID: String, db: any SQLDatabase) async throws -> String? {
        guard let account = try await AccountDirectory(db: db).find(id: accountID), account.emailConfirmedAt != nil,
            let at = account.email.lastIndex(of: "@")
        else { return nil }
        return DomainRules.normalized(String(account.email[account.email.index(after: at)...]))
    }

    /// The company, when the account's confirmed address is at a domain it holds verified and it allows joining.
    static func joinable(_ companyID: String, accountID: String, db: any SQLDatabase) async throws
        -> (DomainCompanyRecord, DomainJoinSetting)?
    {
        guard let domain = try await confirmedDomain(accountID, db: db),
            let company = try await DomainJoinRepository(db: db).companies(domain: domain)
                .first(where: { $0.companyID == companyID })
        else { return nil }
        return (company, company.setting)
    }

    /// Adds the member with the setting's role and mask, within the tier's participant limit; a member already is
    /// left as they are.
    static func admit(_ accountID: String, to company: DomainCompanyRecord, db: any SQLDatabase, now: Date)
        async throws
    {
        try await admit(accountID, to: company.companyID, setting: company.setting, db: db, now: now)
    }

    /// The same, for any way in without an invitation (a company's identity provider too): `setting`'s role and
    /// mask, within the tier's participant limit; a member already is left as they are.
    static func admit(
        _ accountID: String, to companyID: String, setting: DomainJoinSetting, db: any SQLDatabase, now: Date
    ) async throws {
        let companies = CompanyRepository(db: db)
        // Take the company row's lock first, so concurrent joins count participants one at a time.
        try await companies.lock(companyID)
        guard try await companies.membership(companyID, accountID: accountID) == nil else { return }
        guard let record = try await companies.company(companyID),
            CompanyRules.admits(participants: try await companies.participantCount(companyID), tier: record.tier)
        else {
            throw APIError(
                .forbidden, code: .participantLimitReached,
                message: "This company has reached its tier's participant limit")
        }
        try await companies.addMember(companyID, accountID: accountID, role: setting.role, now: now)
        if setting.deptMask != 0 {
            try await companies.updateMember(
                companyID, accountID: accountID, role: setting.role, deptMask: setting.deptMask, managerMask: 0)
        }
    }

    /// The role and department mask the company gives those who join without an invitation (by domain, or by its
    /// identity provider), whether or not joining by domain is on.
    static func defaultSetting(_ companyID: String, db: any SQLDatabase) async throws -> DomainJoinSetting {
        try await DomainJoinRepository(db: db).setting(companyID)
    }

    private static func ownerOnly(_ caller: CompanyCaller) throws {
        guard caller.membership.isOwner else {
            throw CompanyService.forbidden("Only the owner manages joining by domain")
        }
    }

    static func wire(_ setting: DomainJoinSetting) -> Schemas.DomainJoinSetting {
        .init(
            mode: Schemas.DomainJoinSetting.ModePayload(rawValue: setting.mode.rawValue) ?? .off,
            role: setting.role == .readOnly ? .readOnly : .member, deptMask: setting.deptMask)
    }
}
