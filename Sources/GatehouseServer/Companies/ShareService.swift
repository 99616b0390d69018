import Foundation
import GatehouseAPI
import SQLKit

/// Share links: who may make them, what a holder sees before joining, and joining within the tier's limits.
struct ShareService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let publicURL: String
    let throttling: AccountThrottling

    static let shareExpired = APIError(
        .gone, code: .shareExpired, message: "This share link has expired, was revoked, or is used up")
    static let removed = APIError(
        .forbidden, code: .removedFromCompany,
        message: "You were removed from this company after this link was made; ask for a new link")

    /// Whether the link's maker may still make links in `company`: a link dies with its maker's right to share.
    private static func makerMayShare(
        _ link: ShareLinkRecord, in company: CompanyRecord, _ companies: CompanyRepository
    )
        async throws -> Bool
    {
        CompanyRules.linkStillValid(
            creator: try await companies.membership(company.id, accountID: link.createdBy), policy: company.policy)
    }

    /// The company, when the caller may manage its links (the owner, or a manager if the company allows).
    private func rights(_ caller: CompanyCaller) async throws -> CompanyRecord {
        guard let company = try await CompanyRepository(db: store.database).company(caller.companyID) else {
            throw CompanyService.companyNotFound
        }
        guard CompanyRules.canManageShares(caller.membership, policy: company.policy) else {
            throw CompanyService.forbidden(
                "Only the owner (or a manager, if the company allows) may manage share links")
        }
        return company
    }

    /// The company's links, without their tokens.
    func list(_ caller: CompanyCaller) async throws -> Schemas.ShareLinkList {
        _ = try await rights(caller)
        return .init(
            shares: try await CompanyRepository(db: store.database).shares(caller.companyID).map { link in
                Schemas.ShareLinkInfo(
                    id: link.id, permission: Schemas.Permission(link.permission), expiresAt: link.expiresAt,
                    maxUses: link.maxUses, uses: link.uses, revoked: link.revokedAt != nil, createdAt: link.createdAt)
            })
    }

    /// Creates a share link; its token appears in this answer only.
    func create(_ body: Schemas.CreateShareRequest, by caller: CompanyCaller) async throws -> Schemas.ShareLinkInfo {
        let company = try await rights(caller)
        guard company.tier.allowsSharing else {
            throw APIError(
                .forbidden, code: .tierForbidsSharing, message: "The Free tier does not allow sharing; upgrade to share"
            )
        }
        if let expiresIn = body.expiresIn, !(60...(90 * 86400)).contains(expiresIn) {
            throw APIError.validation("expires_in must be 60 seconds to 90 days")
        }
        if let maxUses = body.maxUses, !(1...10_000).contains(maxUses) {
            throw APIError.validation("max_uses must be 1 to 10000")
        }
        let permission = SharePermission(body.permission)
        let now = clock.now
        let token = Secrets.token()
        let link = ShareLinkRecord(
            id: Secrets.identifier(), companyID: company.id, permission: permission, createdBy: caller.accountID,
            createdAt: now, expiresAt: body.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) },
            maxUses: body.maxUses, uses: 0, revokedAt: nil)
        let event = caller.event(.shareCreated, detail: ["share": link.id, "permission": permission.rawValue])
        try await store.transaction { [clock] db in
            try await CompanyRepository(db: db).insert(link, tokenHash: Secrets.digest(token))
            try await trail.within(db).record(event)
        }
        return Schemas.ShareLinkInfo(
            id: link.id, permission: body.permission, token: token, url: "\(publicURL)/share/\(token)",
            expiresAt: link.expiresAt, maxUses: link.maxUses, uses: 0, revoked: false, createdAt: now)
    }

    func revoke(_ shareID: String, by caller: CompanyCaller) async throws {
        _ = try await rights(caller)
        let event = caller.event(.shareRevoked, detail: ["share": shareID])
        let revoked = try await store.transaction { [clock] db in
            let revoked = try await CompanyRepository(db: db).revokeShare(
                caller.companyID, shareID: shareID, now: clock.now)
            if revoked { try await trail.within(db).record(event) }
            return revoked
        }
        guard revoked else { throw APIError.notFound("No such share link") }
    }

    /// What accepting a link would join, without joining.
    func preview(_ token: String, by caller: Caller) async throws -> Schemas.SharePreview {
        guard let landing = try await landing(token, client: caller.client) else { throw Self.shareExpired }
        return landing.preview
    }

    /// The preview and the link's expiry, for the API and the link's web page; nil when the link is unusable.
    func landing(_ token: String, client: ClientInfo) async throws -> (preview: Schemas.SharePreview, expiresAt: Date?)?
    {
        // A share token is a secret: looking one up is limited per IP like every other secret check.
        try await throttling.limit("share", settings.limits.verificationsPerIP, client: client)
        let companies = CompanyRepository(db: store.database)
        guard let link = try await companies.share(tokenHash: Secrets.digest(token)), link.usable(at: clock.now),
            let company = try await companies.company(link.companyID),
            try await Self.makerMayShare(link, in: company, companies)
        else { return nil }
        let inviter = try await AccountDirectory(db: store.database).find(id: link.createdBy)
        let preview = Schemas.SharePreview(
            companyName: company.name, logoUrl: company.logoURL,
            inviterName: inviter.map { CompanyRepository.displayName($0.userMetadata) }
                ?? "Member",
            permission: Schemas.Permission(link.permission))
        return (preview, link.expiresAt)
    }

    /// Joins the company with the link's permission, within the tier's participant limit. A refusal the holder hit
    /// (tier, limit, expiry) is a security decision: it goes in the trail.
    func accept(_ token: String, by caller: Caller) async throws -> Schemas.CompanySummary {
        try await throttling.limit("share", settings.limits.verificationsPerIP, client: caller.client)
        let companyID: String
        do {
            companyID = try await join(token: token, caller: caller, now: clock.now)
        } catch let error as APIError {
            let link = try? await CompanyRepository(db: store.database).share(tokenHash: Secrets.digest(token))
            await trail.record(
                AuditEvent(
                    .shareRefused, accountID: caller.accountID, companyID: link?.companyID, ip: caller.client.ip,
                    userAgent: caller.client.userAgent, detail: ["reason": error.code]))
            throw error
        }
        let summaries = try await CompanyRepository(db: store.database).summaries(accountID: caller.accountID)
        guard let summary = summaries.first(where: { $0.id == companyID }) else {
            throw CompanyService.companyNotFound
        }
        return Schemas.CompanySummary(summary)
    }

    private func join(token: String, caller: Caller, now: Date) async throws -> String {
        try await store.transaction { [clock] db in
            let companies = CompanyRepository(db: db)
            guard let link = try await companies.share(tokenHash: Secrets.digest(token)), link.usable(at: now) else {
                throw Self.shareExpired
            }
            // Take the company row's lock first, so concurrent acceptances count participants one at a time.
            try await companies.lock(link.companyID)
            guard let company = try await companies.company(link.companyID),
                try await Self.makerMayShare(link, in: company, companies)
            else { throw Self.shareExpired }
            if let existing = try await companies.membership(company.id, accountID: caller.accountID) {
                if existing.isOwner {
                    throw APIError(.conflict, code: .ownerCannotAccept, message: "You own this company")
                }
                return company.id
            }
            guard company.tier.allowsSharing else {
                throw APIError(
                    .forbidden, code: .tierForbidsSharing, message: "This company's tier does not allow sharing")
            }
            let role: MemberRole
            switch CompanyRules.readmission(
                linkCreatedAt: link.createdAt, permission: link.permission,
                former: try await companies.former(company.id, accountID: caller.accountID))
            {
            case .admit(let admitted): role = admitted
            case .removed: throw Self.removed
            }
            guard
                CompanyRules.admits(participants: try await companies.participantCount(company.id), tier: company.tier)
            else {
                throw APIError(
                    .forbidden, code: .participantLimitReached,
                    message: "This company has reached its tier's participant limit")
            }
            guard try await companies.useShare(company.id, shareID: link.id, now: now) else { throw Self.shareExpired }
            try await companies.addMember(company.id, accountID: caller.accountID, role: role, now: now)
            try await trail.within(db).record(
                AuditEvent(
                    .shareAccepted, accountID: caller.accountID, companyID: company.id, ip: caller.client.ip,
                    userAgent: caller.client.userAgent,
                    detail: ["share": link.id, "permission": link.permission.rawValue, "role": role.rawValue]))
            return company.id
        }
    }
}
