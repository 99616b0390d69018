import Foundation
import GatehouseAPI
import SQLKit

/// Companies, their members and their audit trail: the rules (who may do what) and the transaction of each change.
struct CompanyService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let publicURL: String
    /// Tells live streams, on every instance, of members whose access changed.
    let bus: InstanceBus

    static func forbidden(_ message: String) -> APIError { APIError(.forbidden, code: .forbidden, message: message) }
    static let companyNotFound = APIError.notFound("No such company")
    static let ownerCannotLeave = APIError(
        .conflict, code: .ownerCannotLeave, message: "Transfer ownership before leaving")

    /// Runs `body` in one transaction that also records `event` and announces `messages` to live streams (on every
    /// instance once it commits).
    private func change<T: Sendable>(
        _ event: AuditEvent?, announcing messages: [InstanceBus.Message] = [],
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let result = try await store.transaction { [trail, bus] db in
            let result = try await body(db)
            if let event { try await trail.within(db).record(event) }
            for message in messages { try await bus.announce(message, db: db) }
            return result
        }
        for message in messages { bus.deliver(message) }
        return result
    }

    // MARK: The caller's companies

    /// Every company the caller owns or participates in.
    func list(_ caller: Caller) async throws -> Schemas.CompanyList {
        .init(
            companies: try await CompanyRepository(db: store.database).summaries(accountID: caller.accountID)
                .map(Schemas.CompanySummary.init))
    }

    /// Creates a company owned by the caller, on the Free tier.
    func create(_ body: Schemas.CreateCompanyRequest, by caller: Caller) async throws -> Schemas.CompanyDetail {
        let now = clock.now
        let company = CompanyRecord(
            id: Secrets.identifier(), name: try Self.validName(body.name),
            logoURL: try body.logoUrl.map(Self.validLogo),
            ownerID: caller.accountID, tier: .free, policy: CompanyPolicy(), createdAt: now, updatedAt: now)
        let event = AuditEvent(
            .companyCreated, accountID: caller.accountID, companyID: company.id, ip: caller.client.ip,
            userAgent: caller.client.userAgent)
        try await change(event) { db in
            let companies = CompanyRepository(db: db)
            try await companies.insert(company)
            try await companies.addMember(company.id, accountID: caller.accountID, role: .owner, now: now)
        }
        return try await detail(company.id)
    }

    /// 1 to 100 code points as given (the contract's measure), something besides spaces, on one line.
    static func validName(_ raw: String) throws -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard raw.unicodeScalars.count <= 100, !name.isEmpty, !raw.contains(where: { $0.isNewline }) else {
            throw APIError.validation("name must be 1 to 100 characters")
        }
        return name
    }

    /// A logo's URL as the contract documents it (openapi.yaml's pattern): http(s), a plain host, an optional port,
    /// and a path of unreserved characters; anything a page would have to escape is refused.
    static func validLogo(_ raw: String) throws -> String {
        guard raw.count <= 2048, raw.wholeMatch(of: logoPattern) != nil, let url = URL(string: raw), url.host != nil
        else {
            throw APIError.validation("logo_url must be an http(s) URL")
        }
        return raw
    }

    nonisolated(unsafe) static let logoPattern = #/https?://[A-Za-z0-9.-]+(:[0-9]{1,4})?(/[A-Za-z0-9._~/?=&+-]*)?/#

    // MARK: One company

    /// The company and its policy.
    func detail(_ companyID: String) async throws -> Schemas.CompanyDetail {
        let companies = CompanyRepository(db: store.database)
        guard let company = try await companies.company(companyID) else { throw Self.companyNotFound }
        return Schemas.CompanyDetail(
            id: company.id, name: company.name, tier: Schemas.Tier(company.tier), logoUrl: company.logoURL,
            ownerId: company.ownerID, requiresCredential: company.policy.requiresCredential,
            requiresMfa: company.policy.requiresMFA, passwordMinLength: company.policy.passwordMinLength,
            sessionIdleTimeout: Int(company.policy.sessionIdleTimeout),
            sessionLifetime: Int(company.policy.sessionLifetime), managersCanShare: company.policy.managersCanShare,
            memberCount: try await companies.memberCount(companyID), createdAt: company.createdAt,
            appAccountToken: company.appAccountToken,
            subscription: try await SubscriptionDirectory(db: store.database).view(of: company))
    }

    /// Renames or changes policy; the owner only.
    func update(_ body: Schemas.UpdateCompanyRequest, by caller: CompanyCaller) async throws -> Schemas.CompanyDetail {
        guard caller.membership.isOwner else { throw Self.forbidden("Only the owner may change the company") }
        guard var company = try await CompanyRepository(db: store.database).company(caller.companyID) else {
            throw Self.companyNotFound
        }
        let before = company.policy
        try Self.apply(body, to: &company)
        company.updatedAt = clock.now
        let updated = company
        var detail: [String: String] = [:]
        let requiringMFA = company.policy.requiresMFA && !before.requiresMFA
        if company.policy.requiresMFA != before.requiresMFA {
            // The owner must meet the policy they set, or they would lock themselves out of their own company.
            if requiringMFA && caller.identity.aal != .aal2 {
                throw APIError(
                    .forbidden, code: .insufficientAal,
                    message: "Verify a second factor and log in to the company again before requiring one")
            }
            detail["requires_mfa"] = String(company.policy.requiresMFA)
        }
        let now = clock.now
        try await change(caller.event(.companyUpdated, detail: detail)) { db in
            try await CompanyRepository(db: db).update(updated)
            // Sessions opened below aal2 end at once: a policy that let them stay would not be one.
            if requiringMFA {
                try await SessionChanges(db: db).end(.companyBelowAAL2(updated.id), now: now)
            }
        }
        return try await self.detail(company.id)
    }

    /// The change a policy update asks for, each value within its bounds.
    static func apply(_ body: Schemas.UpdateCompanyRequest, to company: inout CompanyRecord) throws {
        if let name = body.name { company.name = try validName(name) }
        if let logo = body.logoUrl { company.logoURL = logo.isEmpty ? nil : try validLogo(logo) }
        if let requires = body.requiresCredential { company.policy.requiresCredential = requires }
        if let minimum = body.passwordMinLength {
            guard (8...64).contains(minimum) else { throw APIError.validation("password_min_length must be 8 to 64") }
            company.policy.passwordMinLength = minimum
        }
        if let idle = body.sessionIdleTimeout {
            guard (300...31_536_000).contains(idle) else {
                throw APIError.validation("session_idle_timeout must be 300 to 31536000 seconds")
            }
            company.policy.sessionIdleTimeout = TimeInterval(idle)
        }
        if let lifetime = body.sessionLifetime {
            guard (300...31_536_000).contains(lifetime) else {
                throw APIError.validation("session_lifetime must be 300 to 31536000 seconds")
            }
            company.policy.sessionLifetime = TimeInterval(lifetime)
        }
        if let managers = body.managersCanShare { company.policy.managersCanShare = managers }
        if let requiresMFA = body.requiresMfa { company.policy.requiresMFA = requiresMFA }
    }

    /// Deletes the company, all its rows, and ends its sessions; the owner only.
    func delete(by caller: CompanyCaller) async throws {
        guard caller.membership.isOwner else { throw Self.forbidden("Only the owner may delete the company") }
        try await change(caller.event(.companyDeleted), announcing: [.companyEnded(companyID: caller.companyID)]) {
            [clock] db in
            try await CompanyRepository(db: db).delete(caller.companyID, now: clock.now)
        }
    }

    // MARK: Members

    func members(_ caller: CompanyCaller) async throws -> Schemas.MemberList {
        .init(
            members: try await CompanyRepository(db: store.database).members(caller.companyID)
                .map { Schemas.MemberInfo($0, companyID: caller.companyID, publicURL: publicURL) })
    }

    /// Changes a member's role or masks, as `CompanyRules.judge` allows the caller.
    func updateMember(_ targetID: String, _ body: Schemas.UpdateMemberRequest, by caller: CompanyCaller) async throws
        -> Schemas.MemberInfo
    {
        let role = body.role.flatMap { MemberRole(rawValue: $0.rawValue) }
        guard (body.deptMask ?? 0) >= 0, (body.managerMask ?? 0) >= 0 else {
            throw APIError.validation("dept_mask and manager_mask are non-negative bitmasks")
        }
        let change = CompanyRules.MemberChange(role: role, deptMask: body.deptMask, managerMask: body.managerMask)
        var detail = ["member": targetID]
        if let role { detail["role"] = role.rawValue }
        if let mask = body.deptMask { detail["dept_mask"] = String(mask) }
        if let mask = body.managerMask { detail["manager_mask"] = String(mask) }
        let revoked = InstanceBus.Message.accessChanged(companyID: caller.companyID, accountID: targetID)
        try await self.change(caller.event(.memberChanged, detail: detail), announcing: [revoked]) { db in
            let companies = CompanyRepository(db: db)
            guard let target = try await companies.membership(caller.companyID, accountID: targetID) else {
                throw APIError.notFound("No such member")
            }
            if case .forbidden(let reason) = CompanyRules.judge(change, by: caller.membership, on: target) {
                throw Self.forbidden(reason)
            }
            try await companies.updateMember(
                caller.companyID, accountID: targetID, role: role ?? target.role,
                deptMask: body.deptMask ?? target.deptMask, managerMask: body.managerMask ?? target.managerMask)
            // What they may see changed: their change tokens re-filter and their live streams close.
            try await SyncAccess(db: db).accessChanged(caller.companyID, accountID: targetID)
        }
        let members = try await CompanyRepository(db: store.database).members(caller.companyID)
        guard let member = members.first(where: { $0.accountID == targetID }) else {
            throw APIError.notFound("No such member")
        }
        return Schemas.MemberInfo(member, companyID: caller.companyID, publicURL: publicURL)
    }

    /// The owner removes a participant; their company sessions end at once.
    func removeMember(_ targetID: String, by caller: CompanyCaller) async throws {
        guard caller.membership.isOwner else { throw Self.forbidden("Only the owner may remove members") }
        guard targetID != caller.accountID else { throw Self.ownerCannotLeave }
        try await remove(targetID, caller: caller, action: .memberRemoved, ending: .removed)
    }

    /// A participant leaves; the owner must transfer ownership first.
    func leave(_ caller: CompanyCaller) async throws {
        guard !caller.membership.isOwner else { throw Self.ownerCannotLeave }
        try await remove(caller.accountID, caller: caller, action: .memberLeft, ending: .left)
    }

    /// Ends a membership. How it ended is kept: links made before a removal never re-admit the account, links made
    /// before a departure re-admit it with at most the role it left with, and its old change tokens stay refused.
    private func remove(
        _ targetID: String, caller: CompanyCaller, action: AuditAction, ending: CompanyRepository.MembershipEnd
    ) async throws {
        let revoked = InstanceBus.Message.accessChanged(companyID: caller.companyID, accountID: targetID)
        try await change(caller.event(action, detail: ["member": targetID]), announcing: [revoked]) { [clock] db in
            let companies = CompanyRepository(db: db)
            guard try await companies.membership(caller.companyID, accountID: targetID) != nil else {
                throw APIError.notFound("No such member")
            }
            try await companies.removeMember(caller.companyID, accountID: targetID, ending: ending, now: clock.now)
        }
    }

    /// Hands ownership to another member; the old owner stays as a member.
    func transfer(to targetID: String, by caller: CompanyCaller) async throws -> Schemas.CompanyDetail {
        guard caller.membership.isOwner else { throw Self.forbidden("Only the owner may transfer ownership") }
        guard targetID != caller.accountID else { throw APIError.validation("You already own this company") }
        let cid = caller.companyID
        let owner = caller.membership
        let revoked = [owner.accountID, targetID].map {
            InstanceBus.Message.accessChanged(companyID: cid, accountID: $0)
        }
        try await change(caller.event(.ownershipTransferred, detail: ["to": targetID]), announcing: revoked) {
            [clock] db in
            let companies = CompanyRepository(db: db)
            guard let target = try await companies.membership(cid, accountID: targetID),
                var company = try await companies.company(cid)
            else { throw APIError.notFound("No such member") }
            try await companies.updateMember(
                cid, accountID: owner.accountID, role: .member, deptMask: owner.deptMask,
                managerMask: owner.managerMask)
            try await companies.updateMember(
                cid, accountID: target.accountID, role: .owner, deptMask: target.deptMask,
                managerMask: target.managerMask)
            company.ownerID = target.accountID
            company.updatedAt = clock.now
            try await companies.update(company)
            try await CompanyCredentials(db: db).setSuperUser(cid, accountID: owner.accountID, false)
            try await CompanyCredentials(db: db).setSuperUser(cid, accountID: target.accountID, true)
            try await SyncAccess(db: db).accessChanged(cid, accountID: owner.accountID)
            try await SyncAccess(db: db).accessChanged(cid, accountID: target.accountID)
        }
        return try await detail(cid)
    }

    // MARK: Audit

    /// The company's audit trail: everything for the owner, one's own events for participants.
    func audit(_ caller: CompanyCaller, before: Int64?, limit: Int?) async throws -> Schemas.AuditPage {
        let limit = try Schemas.AuditPage.size(limit)
        let events = try await trail.page(
            companyID: caller.companyID, accountID: caller.membership.isOwner ? nil : caller.accountID,
            before: before, limit: limit)
        return Schemas.AuditPage(events, limit: limit)
    }
}

extension Schemas.CompanySummary {
    init(_ record: CompanySummaryRecord) {
        self.init(
            id: record.id, name: record.name, tier: Schemas.Tier(record.tier), logoUrl: record.logoURL,
            role: Schemas.Role(record.role), memberCount: record.memberCount, hasCredential: record.hasCredential,
            requiresCredential: record.requiresCredential, requiresMfa: record.requiresMFA)
    }
}

extension Schemas.MemberInfo {
    /// The member as the API shows them; their picture is served under `publicURL`.
    init(_ record: MemberRecord, companyID: String, publicURL: String) {
        self.init(
            accountId: record.accountID, displayName: record.displayName,
            imageUrl: record.hasImage
                ? "\(publicURL)/v1/companies/\(companyID)/members/\(record.accountID)/image" : nil,
            role: Schemas.Role(record.role), deptMask: record.deptMask, managerMask: record.managerMask,
            joinedAt: record.joinedAt)
    }
}
