import Foundation
import GatehouseAPI
import Hummingbird
import SQLKit

/// Companies, share links, members and the company audit under `/v1`.
struct CompaniesController {
    let env: AccountsEnvironment

    func addRoutes(to router: Router<AppRequestContext>) {
        let account = router.group("/v1").add(middleware: AuthMiddleware(sessions: env.sessions, accountOnly: true))
            .group(context: AuthenticatedContext.self)
        account.get("companies", use: list)
        account.post("companies", use: create)
        account.get("shares/{token}", use: preview)
        account.post("shares/{token}/accept", use: accept)

        let company = router.group("/v1/companies/{cid}")
            .add(middleware: CompanyAccessMiddleware(sessions: env.sessions, store: env.store))
            .group(context: CompanyContext.self)
        company.get("", use: show)
        company.patch("", use: update)
        company.delete("", use: delete)
        company.get("shares", use: shares)
        company.post("shares", use: createShare)
        company.delete("shares/{id}", use: revokeShare)
        company.get("members", use: members)
        company.patch("members/{accountId}", use: updateMember)
        company.delete("members/{accountId}", use: removeMember)
        company.post("leave", use: leave)
        company.post("transfer", use: transfer)
        company.get("audit", use: audit)
    }

    static func forbidden(_ message: String) -> APIError { APIError(.forbidden, code: .forbidden, message: message) }
    static let companyNotFound = APIError.notFound("No such company")

    private func client(_ request: Request, _ peer: String?) -> ClientInfo {
        ClientInfo(request, peerAddress: peer, settings: env.settings)
    }

    private func event(
        _ action: AuditAction, _ client: ClientInfo, accountID: String?, companyID: String,
        detail: [String: String] = [:]
    ) -> AuditEvent {
        AuditEvent(
            action, accountID: accountID, companyID: companyID, ip: client.ip, userAgent: client.userAgent,
            detail: detail)
    }

    // MARK: The caller's companies

    /// Every company the caller owns or participates in.
    @Sendable func list(_ request: Request, context: AuthenticatedContext) async throws -> CompanyList {
        CompanyList(
            companies: try await CompanyRepository(db: env.store.database).summaries(
                accountID: context.identity.accountID))
    }

    /// Creates a company owned by the caller, on the Free tier.
    @Sendable func create(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await request.decodeJSON(as: CreateCompanyRequest.self, context: context)
        let name = try Self.validName(body.name)
        let logo = try body.logoURL.map(Self.validLogo)
        let now = env.clock.now
        let accountID = context.identity.accountID
        let client = client(request, context.peerAddress)
        let env = self.env
        let company = CompanyRecord(
            id: Secrets.identifier(), name: name, logoURL: logo, ownerID: accountID, tier: .free,
            policy: CompanyPolicy(),
            createdAt: now, updatedAt: now)
        try await env.store.transaction { db in
            let companies = CompanyRepository(db: db)
            try await companies.insert(company)
            try await companies.addMember(company.id, accountID: accountID, role: .owner, now: now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.companyCreated, client, accountID: accountID, companyID: company.id))
        }
        return try AuthController.json(try await detail(company.id), status: .created)
    }

    static func validName(_ raw: String) throws -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...100).contains(name.count), !name.contains(where: { $0.isNewline }) else {
            throw APIError.validation("name must be 1 to 100 characters")
        }
        return name
    }

    static func validLogo(_ raw: String) throws -> String {
        guard let url = URL(string: raw), ["https", "http"].contains(url.scheme ?? ""), url.host != nil,
            raw.count <= 2048
        else {
            throw APIError.validation("logo_url must be an http(s) URL")
        }
        return raw
    }

    // MARK: One company

    func detail(_ companyID: String) async throws -> CompanyDetail {
        let companies = CompanyRepository(db: env.store.database)
        guard let company = try await companies.company(companyID) else { throw Self.companyNotFound }
        return CompanyDetail(
            id: company.id, name: company.name, tier: company.tier.rawValue, logoURL: company.logoURL,
            ownerID: company.ownerID, requiresCredential: company.policy.requiresCredential,
            passwordMinLength: company.policy.passwordMinLength,
            sessionIdleTimeout: Int(company.policy.sessionIdleTimeout),
            sessionLifetime: Int(company.policy.sessionLifetime), managersCanShare: company.policy.managersCanShare,
            memberCount: try await companies.memberCount(companyID), createdAt: company.createdAt.iso8601)
    }

    @Sendable func show(_ request: Request, context: CompanyContext) async throws -> CompanyDetail {
        try await detail(context.companyID)
    }

    /// Renames or changes policy; the owner only.
    @Sendable func update(_ request: Request, context: CompanyContext) async throws -> CompanyDetail {
        guard context.membership.isOwner else { throw Self.forbidden("Only the owner may change the company") }
        let body = try await request.decodeJSON(as: UpdateCompanyRequest.self, context: context)
        guard var company = try await CompanyRepository(db: env.store.database).company(context.companyID) else {
            throw Self.companyNotFound
        }
        if let name = body.name { company.name = try Self.validName(name) }
        if let logo = body.logoURL { company.logoURL = logo.isEmpty ? nil : try Self.validLogo(logo) }
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
        company.updatedAt = env.clock.now
        let updated = company
        let client = client(request, context.peerAddress)
        let env = self.env
        let actor = context.identity.accountID
        try await env.store.transaction { db in
            try await CompanyRepository(db: db).update(updated)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.companyUpdated, client, accountID: actor, companyID: updated.id))
        }
        return try await detail(company.id)
    }

    /// Deletes the company, all its rows, and ends its sessions; the owner only.
    @Sendable func delete(_ request: Request, context: CompanyContext) async throws -> Response {
        guard context.membership.isOwner else { throw Self.forbidden("Only the owner may delete the company") }
        let cid = context.companyID
        let actor = context.identity.accountID
        let client = client(request, context.peerAddress)
        let env = self.env
        try await env.store.transaction { db in
            try await CompanyRepository(db: db).delete(cid, now: env.clock.now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.companyDeleted, client, accountID: actor, companyID: cid))
        }
        return Response(status: .noContent)
    }

    // MARK: Share links

    private func shareRights(_ context: CompanyContext) async throws -> CompanyRecord {
        guard let company = try await CompanyRepository(db: env.store.database).company(context.companyID) else {
            throw Self.companyNotFound
        }
        guard CompanyRules.canManageShares(context.membership, policy: company.policy) else {
            throw Self.forbidden("Only the owner (or a manager, if the company allows) may manage share links")
        }
        return company
    }

    @Sendable func shares(_ request: Request, context: CompanyContext) async throws -> ShareLinkList {
        _ = try await shareRights(context)
        return ShareLinkList(
            shares: try await CompanyRepository(db: env.store.database).shares(context.companyID).map { link in
                ShareLinkInfo(
                    id: link.id, permission: link.permission.rawValue, token: nil, url: nil,
                    expiresAt: link.expiresAt?.iso8601,
                    maxUses: link.maxUses, uses: link.uses, revoked: link.revokedAt != nil,
                    createdAt: link.createdAt.iso8601)
            })
    }

    /// Creates a share link; its token appears in this answer only.
    @Sendable func createShare(_ request: Request, context: CompanyContext) async throws -> Response {
        let company = try await shareRights(context)
        guard company.tier.allowsSharing else {
            throw APIError(
                .forbidden, code: .tierForbidsSharing, message: "The Free tier does not allow sharing; upgrade to share"
            )
        }
        let body = try await request.decodeJSON(as: CreateShareRequest.self, context: context)
        guard let permission = SharePermission(rawValue: body.permission) else {
            throw APIError.validation("permission must be read_write or read_only")
        }
        if let expiresIn = body.expiresIn, !(60...(90 * 86400)).contains(expiresIn) {
            throw APIError.validation("expires_in must be 60 seconds to 90 days")
        }
        if let maxUses = body.maxUses, !(1...10_000).contains(maxUses) {
            throw APIError.validation("max_uses must be 1 to 10000")
        }
        let now = env.clock.now
        let token = Secrets.token()
        let link = ShareLinkRecord(
            id: Secrets.identifier(), companyID: company.id, permission: permission,
            createdBy: context.identity.accountID,
            createdAt: now, expiresAt: body.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) },
            maxUses: body.maxUses,
            uses: 0, revokedAt: nil)
        let client = client(request, context.peerAddress)
        let env = self.env
        try await env.store.transaction { db in
            try await CompanyRepository(db: db).insert(link, tokenHash: Secrets.digest(token))
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(
                    .shareCreated, client, accountID: link.createdBy, companyID: link.companyID,
                    detail: ["share": link.id, "permission": permission.rawValue]))
        }
        let info = ShareLinkInfo(
            id: link.id, permission: permission.rawValue, token: token, url: "\(env.publicURL)/v1/shares/\(token)",
            expiresAt: link.expiresAt?.iso8601, maxUses: link.maxUses, uses: 0, revoked: false, createdAt: now.iso8601)
        return try AuthController.json(info, status: .created)
    }

    @Sendable func revokeShare(_ request: Request, context: CompanyContext) async throws -> Response {
        _ = try await shareRights(context)
        let shareID = try context.parameters.require("id")
        let cid = context.companyID
        let actor = context.identity.accountID
        let client = client(request, context.peerAddress)
        let env = self.env
        let revoked = try await env.store.transaction { db in
            let revoked = try await CompanyRepository(db: db).revokeShare(cid, shareID: shareID, now: env.clock.now)
            if revoked {
                try await AuditLog(db: db, clock: env.clock).record(
                    self.event(.shareRevoked, client, accountID: actor, companyID: cid, detail: ["share": shareID]))
            }
            return revoked
        }
        guard revoked else { throw APIError.notFound("No such share link") }
        return Response(status: .noContent)
    }

    private static let shareExpired = APIError(
        .gone, code: .shareExpired, message: "This share link has expired, was revoked, or is used up")

    /// What accepting a link would join, without joining.
    @Sendable func preview(_ request: Request, context: AuthenticatedContext) async throws -> SharePreview {
        let token = try context.parameters.require("token")
        // A share token is a secret: looking one up is limited per IP like every other secret check.
        try await env.limit(
            "share", env.settings.limits.verificationsPerIP, client: client(request, context.peerAddress))
        let companies = CompanyRepository(db: env.store.database)
        guard let link = try await companies.share(tokenHash: Secrets.digest(token)) else { throw Self.shareExpired }
        guard link.usable(at: env.clock.now), let company = try await companies.company(link.companyID) else {
            throw Self.shareExpired
        }
        let inviter = try await AccountRepository(db: env.store.database).find(id: link.createdBy)
        return SharePreview(
            companyName: company.name, logoURL: company.logoURL,
            inviterName: inviter.map { CompanyRepository.displayName(AccountRepository.encode($0.userMetadata)) }
                ?? "Member",
            permission: link.permission.rawValue)
    }

    /// Joins the company with the link's permission, within the tier's participant limit.
    @Sendable func accept(_ request: Request, context: AuthenticatedContext) async throws -> CompanySummary {
        let token = try context.parameters.require("token")
        let accountID = context.identity.accountID
        let client = client(request, context.peerAddress)
        try await env.limit("share", env.settings.limits.verificationsPerIP, client: client)
        let env = self.env
        let now = env.clock.now
        let companyID: String
        do {
            companyID = try await acceptShare(token: token, accountID: accountID, client: client, now: now)
        } catch let error as APIError {
            // A refusal the link's holder hit (tier, limit, expiry) is a security decision: it goes in the trail.
            let link = try? await CompanyRepository(db: env.store.database).share(tokenHash: Secrets.digest(token))
            await env.sessions.audit(
                AuditEvent(
                    .shareRefused, accountID: accountID, companyID: link?.companyID, ip: client.ip,
                    userAgent: client.userAgent, detail: ["reason": error.code]))
            throw error
        }
        let summaries = try await CompanyRepository(db: env.store.database).summaries(accountID: accountID)
        guard let summary = summaries.first(where: { $0.id == companyID }) else { throw Self.companyNotFound }
        return summary
    }

    private func acceptShare(token: String, accountID: String, client: ClientInfo, now: Date) async throws -> String {
        let env = self.env
        return try await env.store.transaction { db in
            let companies = CompanyRepository(db: db)
            guard let link = try await companies.share(tokenHash: Secrets.digest(token)), link.usable(at: now) else {
                throw Self.shareExpired
            }
            // Take the company row's lock first, so concurrent acceptances count participants one at a time.
            try await db.update("companies").set("updated_at", to: SQLColumn("updated_at"))
                .where("id", .equal, link.companyID).run()
            guard let company = try await companies.company(link.companyID) else { throw Self.shareExpired }
            if let existing = try await companies.membership(company.id, accountID: accountID) {
                if existing.isOwner {
                    throw APIError(.conflict, code: .ownerCannotAccept, message: "You own this company")
                }
                return company.id
            }
            guard company.tier.allowsSharing else {
                throw APIError(
                    .forbidden, code: .tierForbidsSharing, message: "This company's tier does not allow sharing")
            }
            guard
                CompanyRules.admits(participants: try await companies.participantCount(company.id), tier: company.tier)
            else {
                throw APIError(
                    .forbidden, code: .participantLimitReached,
                    message: "This company has reached its tier's participant limit")
            }
            guard try await companies.useShare(company.id, shareID: link.id, now: now) else { throw Self.shareExpired }
            try await companies.addMember(company.id, accountID: accountID, role: link.permission.role, now: now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(
                    .shareAccepted, client, accountID: accountID, companyID: company.id,
                    detail: ["share": link.id, "permission": link.permission.rawValue]))
            return company.id
        }
    }

    // MARK: Members

    @Sendable func members(_ request: Request, context: CompanyContext) async throws -> MemberList {
        MemberList(
            members: try await CompanyRepository(db: env.store.database).members(
                context.companyID, publicURL: env.publicURL))
    }

    @Sendable func updateMember(_ request: Request, context: CompanyContext) async throws -> MemberInfo {
        let targetID = try context.parameters.require("accountId")
        let body = try await request.decodeJSON(as: UpdateMemberRequest.self, context: context)
        var parsedRole: MemberRole?
        if let raw = body.role {
            guard let parsed = MemberRole(rawValue: raw) else {
                throw APIError.validation("role must be member or read_only")
            }
            parsedRole = parsed
        }
        let role = parsedRole
        guard (body.deptMask ?? 0) >= 0, (body.managerMask ?? 0) >= 0 else {
            throw APIError.validation("dept_mask and manager_mask are non-negative bitmasks")
        }
        let cid = context.companyID
        let actor = context.membership
        let client = client(request, context.peerAddress)
        let env = self.env
        let change = CompanyRules.MemberChange(role: role, deptMask: body.deptMask, managerMask: body.managerMask)
        try await env.store.transaction { db in
            let companies = CompanyRepository(db: db)
            guard let target = try await companies.membership(cid, accountID: targetID) else {
                throw APIError.notFound("No such member")
            }
            if case .forbidden(let reason) = CompanyRules.judge(change, by: actor, on: target) {
                throw Self.forbidden(reason)
            }
            try await companies.updateMember(
                cid, accountID: targetID, role: role ?? target.role, deptMask: body.deptMask ?? target.deptMask,
                managerMask: body.managerMask ?? target.managerMask)
            var detail = ["member": targetID]
            if let role { detail["role"] = role.rawValue }
            if let mask = body.deptMask { detail["dept_mask"] = String(mask) }
            if let mask = body.managerMask { detail["manager_mask"] = String(mask) }
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.memberChanged, client, accountID: actor.accountID, companyID: cid, detail: detail))
        }
        let members = try await CompanyRepository(db: env.store.database).members(cid, publicURL: env.publicURL)
        guard let member = members.first(where: { $0.accountID == targetID }) else {
            throw APIError.notFound("No such member")
        }
        return member
    }

    /// The owner removes a participant; their company sessions end at once.
    @Sendable func removeMember(_ request: Request, context: CompanyContext) async throws -> Response {
        guard context.membership.isOwner else { throw Self.forbidden("Only the owner may remove members") }
        let targetID = try context.parameters.require("accountId")
        guard targetID != context.identity.accountID else {
            throw APIError(.conflict, code: .ownerCannotLeave, message: "Transfer ownership before leaving")
        }
        try await remove(targetID, from: context, action: .memberRemoved, request: request)
        return Response(status: .noContent)
    }

    /// A participant leaves; the owner must transfer ownership first.
    @Sendable func leave(_ request: Request, context: CompanyContext) async throws -> Response {
        guard !context.membership.isOwner else {
            throw APIError(.conflict, code: .ownerCannotLeave, message: "Transfer ownership before leaving")
        }
        try await remove(context.identity.accountID, from: context, action: .memberLeft, request: request)
        return Response(status: .noContent)
    }

    private func remove(_ targetID: String, from context: CompanyContext, action: AuditAction, request: Request)
        async throws
    {
        let cid = context.companyID
        let actor = context.identity.accountID
        let client = client(request, context.peerAddress)
        let env = self.env
        try await env.store.transaction { db in
            let companies = CompanyRepository(db: db)
            guard try await companies.membership(cid, accountID: targetID) != nil else {
                throw APIError.notFound("No such member")
            }
            try await companies.removeMember(cid, accountID: targetID, now: env.clock.now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(action, client, accountID: actor, companyID: cid, detail: ["member": targetID]))
        }
    }

    /// Hands ownership to another member; the old owner stays as a member.
    @Sendable func transfer(_ request: Request, context: CompanyContext) async throws -> CompanyDetail {
        guard context.membership.isOwner else { throw Self.forbidden("Only the owner may transfer ownership") }
        let body = try await request.decodeJSON(as: TransferOwnershipRequest.self, context: context)
        let cid = context.companyID
        let owner = context.identity.accountID
        guard body.accountID != owner else { throw APIError.validation("You already own this company") }
        let client = client(request, context.peerAddress)
        let env = self.env
        try await env.store.transaction { db in
            let companies = CompanyRepository(db: db)
            guard let target = try await companies.membership(cid, accountID: body.accountID),
                var company = try await companies.company(cid)
            else { throw APIError.notFound("No such member") }
            try await companies.updateMember(
                cid, accountID: owner, role: .member, deptMask: context.membership.deptMask,
                managerMask: context.membership.managerMask)
            try await companies.updateMember(
                cid, accountID: target.accountID, role: .owner, deptMask: target.deptMask,
                managerMask: target.managerMask)
            company.ownerID = target.accountID
            company.updatedAt = env.clock.now
            try await companies.update(company)
            try await CredentialRepository(db: db).setSuperUser(cid, accountID: owner, false)
            try await CredentialRepository(db: db).setSuperUser(cid, accountID: target.accountID, true)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(
                    .ownershipTransferred, client, accountID: owner, companyID: cid, detail: ["to": target.accountID]))
        }
        return try await detail(cid)
    }

    // MARK: Audit

    /// The company's audit trail: everything for the owner, one's own events for participants.
    @Sendable func audit(_ request: Request, context: CompanyContext) async throws -> AuditPage {
        let (before, limit) = try AuditLog.paging(request)
        let events = try await AuditLog(db: env.store.database, clock: env.clock).page(
            companyID: context.companyID, accountID: context.membership.isOwner ? nil : context.identity.accountID,
            before: before, limit: limit)
        return AuditPage(events: events, nextBefore: events.count == limit ? events.last?.id : nil)
    }
}

extension CompanyList: ResponseGenerator, ResponseEncodable {}
extension CompanySummary: ResponseGenerator, ResponseEncodable {}
extension CompanyDetail: ResponseGenerator, ResponseEncodable {}
extension ShareLinkList: ResponseGenerator, ResponseEncodable {}
extension SharePreview: ResponseGenerator, ResponseEncodable {}
extension MemberList: ResponseGenerator, ResponseEncodable {}
extension MemberInfo: ResponseGenerator, ResponseEncodable {}
