import Foundation
import GatehouseAPI
import SQLKit

/// Invitations by email: the company's side (invite, list, resend, revoke) and the invitee's (list, accept,
/// decline). An invitation is for one address: only an account that holds it, confirmed, may use it.
struct InvitationService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let mail: AccountMail
    let publicURL: String
    let throttling: AccountThrottling

    static let notFound = APIError(.notFound, code: .invitationNotFound, message: "No such invitation")
    static let mismatch = APIError(
        .forbidden, code: .invitationEmailMismatch,
        message: "This invitation is for another address: sign in with the invited address, confirmed")
    static let expired = APIError(
        .gone, code: .invitationExpired, message: "This invitation has expired; ask for a new one")
    static let used = APIError(
        .gone, code: .invitationUsed, message: "This invitation was already accepted or declined")
    static let revoked = APIError(
        .gone, code: .invitationRevoked, message: "This invitation was revoked or replaced by a newer one")
    static let removed = APIError(
        .forbidden, code: .removedFromCompany,
        message: "You were removed from this company after this invitation was sent; ask for a new one")
    static let alreadyMember = APIError(
        .conflict, code: .alreadyMember, message: "That account is already a member of this company")

    /// The link a mail carries: the account page, which lists the invitation once the invitee is signed in.
    func link(token: String) -> String { "\(publicURL)/account?invitation=\(token)" }

    // MARK: The company's side

    /// The company, when the caller may invite (who may share may invite).
    private func rights(_ caller: CompanyCaller) async throws -> CompanyRecord {
        guard let company = try await CompanyDirectory(db: store.database).company(caller.companyID) else {
            throw CompanyService.companyNotFound
        }
        guard CompanyRules.canManageShares(caller.membership, policy: company.policy) else {
            throw CompanyService.forbidden("Only the owner (or a manager, if the company allows) may invite")
        }
        return company
    }

    /// The company's invitations, newest first, without their tokens or codes.
    func list(_ caller: CompanyCaller) async throws -> Schemas.InvitationList {
        _ = try await rights(caller)
        let now = clock.now
        return .init(
            invitations: try await InvitationRepository(db: store.database).invitations(caller.companyID).map {
                Self.wire($0, now: now)
            })
    }

    /// Invites an address and mails it; replaces an earlier invitation to the same address that is not used yet.
    func invite(_ body: Schemas.CreateInvitationRequest, by caller: CompanyCaller) async throws -> Schemas.Invitation {
        let company = try await rights(caller)
        let role: MemberRole = body.role == .readOnly ? .readOnly : .member
        let deptMask = body.deptMask ?? 0
        let managerMask = body.managerMask ?? 0
        guard deptMask >= 0, managerMask >= 0 else { throw APIError.validation("masks must not be negative") }
        switch InvitationRules.judge(
            role: role, deptMask: deptMask, managerMask: managerMask, by: caller.membership, policy: company.policy)
        {
        case .allowed: break
        case .forbidden(let message): throw CompanyService.forbidden(message)
        case .masksForbidden(let message): throw APIError(.forbidden, code: .deptMaskForbidden, message: message)
        }
        guard company.tier.allowsSharing else {
            throw APIError(
                .forbidden, code: .tierForbidsSharing,
                message: "The Free tier does not allow sharing; upgrade to invite")
        }
        let email = try await mail.deliverableEmail(body.email)
        let now = clock.now
        let invitation = InvitationRecord(
            id: Secrets.identifier(), companyID: company.id, email: email, role: role, deptMask: deptMask,
            managerMask: managerMask, invitedBy: caller.accountID, createdAt: now, sentAt: now,
            expiresAt: now.addingTimeInterval(InvitationRules.lifetime))
        let token = Secrets.token()
        let code = Secrets.sixDigitCode(linkedTo: token)
        let inviter = try await inviterName(caller.accountID)
        try await mail.transactionQueuingMail { [self] db in
            let accounts = AccountDirectory(db: db)
            let directory = CompanyDirectory(db: db)
            // The company's lock first: two invitations to one address at once leave one open.
            try await directory.lock(company.id)
            if let invitee = try await accounts.find(email: email),
                try await directory.membership(company.id, accountID: invitee.id) != nil
            {
                throw Self.alreadyMember
            }
            let replaced = try await InvitationRepository(db: db).insert(
                invitation, tokenHash: Secrets.digest(token), codeHash: Secrets.digest(code))
            var detail = ["invitation": invitation.id, "role": role.rawValue]
            if !replaced.isEmpty { detail["replaces"] = replaced.joined(separator: ",") }
            try await trail.within(db).record(caller.event(.invitationSent, detail: detail))
            try await mailInvitation(invitation, company: company.name, inviter: inviter, token: token, db: db)
        }
        return Self.wire(invitation, now: now)
    }

    /// Mails the invitation again with a new link and code and a fresh expiry, at most once a minute.
    func resend(_ invitationID: String, by caller: CompanyCaller) async throws -> Schemas.Invitation {
        let company = try await rights(caller)
        guard let id = Secrets.identifier(invitationID),
            var invitation = try await InvitationRepository(db: store.database).invitation(company.id, id: id),
            [.open, .expired].contains(invitation.state(at: clock.now))
        else { throw Self.notFound }
        let now = clock.now
        if let wait = InvitationRules.resendWait(lastSent: invitation.sentAt, now: now) {
            throw APIError.rateLimited(
                .overEmailSendRateLimit, retryAfter: wait,
                message: "This invitation was just sent; try again in \(wait) seconds")
        }
        let previousSent = invitation.sentAt
        invitation.sentAt = now
        invitation.expiresAt = now.addingTimeInterval(InvitationRules.lifetime)
        let token = Secrets.token()
        let code = Secrets.sixDigitCode(linkedTo: token)
        let inviter = try await inviterName(caller.accountID)
        let sent = invitation
        try await mail.transactionQueuingMail { [self] db in
            guard
                try await InvitationRepository(db: db).resend(
                    company.id, id: id, previousSent: previousSent, tokenHash: Secrets.digest(token),
                    codeHash: Secrets.digest(code), now: now, expiresAt: sent.expiresAt)
            else {
                throw APIError.rateLimited(
                    .overEmailSendRateLimit, retryAfter: Int(InvitationRules.resendCooldown),
                    message: "This invitation was just sent")
            }
            try await trail.within(db).record(
                caller.event(.invitationResent, detail: ["invitation": id, "role": sent.role.rawValue]))
            try await mailInvitation(sent, company: company.name, inviter: inviter, token: token, db: db)
        }
        return Self.wire(sent, now: now)
    }

    /// Revokes an invitation that is not used yet: its link and code stop working.
    func revoke(_ invitationID: String, by caller: CompanyCaller) async throws {
        _ = try await rights(caller)
        guard let id = Secrets.identifier(invitationID) else { throw Self.notFound }
        let event = caller.event(.invitationRevoked, detail: ["invitation": id])
        let revoked = try await store.transaction { [clock, trail] db in
            let revoked = try await InvitationRepository(db: db).revoke(caller.companyID, id: id, now: clock.now)
            if revoked { try await trail.within(db).record(event) }
            return revoked
        }
        guard revoked else { throw Self.notFound }
    }

    private func inviterName(_ accountID: String) async throws -> String {
        guard let account = try await AccountDirectory(db: store.database).find(id: accountID) else { return "Member" }
        return CompanyDirectory.displayName(account.userMetadata)
    }

    private func mailInvitation(
        _ invitation: InvitationRecord, company: String, inviter: String, token: String, db: any SQLDatabase
    ) async throws {
        try await mail.mailer.enqueue(
            .companyInvitation(
                company: company, inviter: inviter, readOnly: invitation.role == .readOnly,
                code: Secrets.sixDigitCode(linkedTo: token), link: link(token: token),
                days: Int(InvitationRules.lifetime / 86400)),
            to: invitation.email, db: db)
    }

    static func wire(_ invitation: InvitationRecord, now: Date) -> Schemas.Invitation {
        Schemas.Invitation(
            id: invitation.id, email: invitation.email,
            role: invitation.role == .readOnly ? .readOnly : .member, deptMask: invitation.deptMask,
            managerMask: invitation.managerMask,
            state: Schemas.InvitationState(rawValue: invitation.state(at: now).rawValue) ?? .open,
            invitedBy: invitation.invitedBy, createdAt: invitation.createdAt, sentAt: invitation.sentAt,
            expiresAt: invitation.expiresAt)
    }

    // MARK: The invitee's side

    /// The caller's confirmed address, normalized; nil while it is not confirmed.
    private func confirmedEmail(_ accountID: String, db: any SQLDatabase) async throws -> String? {
        guard let account = try await AccountDirectory(db: db).find(id: accountID), account.emailConfirmedAt != nil,
            !account.isAnonymous
        else { return nil }
        return EmailAddress.normalize(account.email)
    }

    /// The open invitations to the caller's confirmed address.
    func received(by caller: Caller) async throws -> [ReceivedInvitationRecord] {
        guard let email = try await confirmedEmail(caller.accountID, db: store.database) else { return [] }
        return try await InvitationRepository(db: store.database).received(email: email, now: clock.now).map {
            invitation, row in
            ReceivedInvitationRecord(
                invitation: invitation, companyName: row.companyName, logoURL: row.logoURL,
                inviterName: row.inviterMetadata.map(CompanyDirectory.displayName) ?? "Member")
        }
    }

    /// The same, on the wire.
    func mine(_ caller: Caller) async throws -> Schemas.ReceivedInvitationList {
        .init(
            invitations: try await received(by: caller).map { received in
                Schemas.ReceivedInvitation(
                    id: received.invitation.id, companyId: received.invitation.companyID,
                    companyName: received.companyName, logoUrl: received.logoURL, inviterName: received.inviterName,
                    role: received.invitation.role == .readOnly ? .readOnly : .member,
                    expiresAt: received.invitation.expiresAt)
            })
    }

    /// The id of the invitation a mailed link's token names, when it is to the caller's confirmed address.
    func identify(_ token: String, by caller: Caller) async throws -> String? {
        guard let email = try await confirmedEmail(caller.accountID, db: store.database),
            let invitation = try await InvitationRepository(db: store.database).invitation(
                tokenHash: Secrets.digest(token)),
            invitation.email == email
        else { return nil }
        return invitation.id
    }

    /// The invitation `reference` names (its id, the link's token or the mailed code), checked against the caller's
    /// confirmed address and its state.
    private func usable(_ reference: String, caller: Caller, db: any SQLDatabase, now: Date) async throws
        -> InvitationRecord
    {
        let invitations = InvitationRepository(db: db)
        let email = try await confirmedEmail(caller.accountID, db: db)
        let found: InvitationRecord?
        switch InvitationRules.reference(reference) {
        case .id(let id): found = try await invitations.invitation(id: id)
        case .token(let token): found = try await invitations.invitation(tokenHash: Secrets.digest(token))
        case .code(let code):
            // A code names an invitation only among those to the caller's own address.
            if let email {
                found = try await invitations.invitation(email: email, codeHash: Secrets.digest(code))
            } else {
                found = nil
            }
        }
        guard let invitation = found else { throw Self.notFound }
        switch InvitationRules.refusal(invitation, callerEmail: email, confirmed: email != nil, now: now) {
        case nil: return invitation
        case .emailMismatch: throw Self.mismatch
        case .expired: throw Self.expired
        case .used: throw Self.used
        case .revoked: throw Self.revoked
        }
    }

    /// Joins the company with the invitation's role and masks, within the tier's participant limit; the invitation
    /// is used in the same transaction, once.
    func accept(_ reference: String, by caller: Caller) async throws -> Schemas.CompanySummary {
        try await throttling.limit("invitation", settings.limits.verificationsPerIP, client: caller.client)
        let now = clock.now
        let companyID: String = try await store.transaction { [self] db in
            let invitation = try await usable(reference, caller: caller, db: db, now: now)
            let directory = CompanyDirectory(db: db)
            // The company row's lock first, so concurrent acceptances count participants one at a time.
            try await directory.lock(invitation.companyID)
            guard let company = try await directory.company(invitation.companyID) else { throw Self.notFound }
            if try await directory.membership(company.id, accountID: caller.accountID) != nil {
                throw Self.alreadyMember
            }
            guard company.tier.allowsSharing else {
                throw APIError(
                    .forbidden, code: .tierForbidsSharing, message: "This company's tier does not allow sharing")
            }
            // A removal sticks: an invitation sent before the owner removed the account does not bring it back.
            if let removedAt = try await directory.former(company.id, accountID: caller.accountID)?.removedAt,
                invitation.sentAt <= removedAt
            {
                throw Self.removed
            }
            guard
                CompanyRules.admits(participants: try await directory.participantCount(company.id), tier: company.tier)
            else {
                throw APIError(
                    .forbidden, code: .participantLimitReached,
                    message: "This company has reached its tier's participant limit")
            }
            guard try await InvitationRepository(db: db).use(invitation.id, by: caller.accountID, now: now) else {
                throw Self.used
            }
            try await directory.admit(
                company.id, accountID: caller.accountID, role: invitation.role, deptMask: invitation.deptMask,
                managerMask: invitation.managerMask, now: now)
            try await trail.within(db).record(
                AuditEvent(
                    .invitationAccepted, accountID: caller.accountID, companyID: company.id, ip: caller.client.ip,
                    userAgent: caller.client.userAgent,
                    detail: ["invitation": invitation.id, "role": invitation.role.rawValue]))
            return company.id
        }
        guard
            let summary = try await CompanyDirectory(db: store.database).summaries(accountID: caller.accountID)
                .first(where: { $0.id == companyID })
        else { throw CompanyService.companyNotFound }
        return Schemas.CompanySummary(summary)
    }

    /// Declines the invitation: it cannot be accepted afterwards.
    func decline(_ reference: String, by caller: Caller) async throws {
        try await throttling.limit("invitation", settings.limits.verificationsPerIP, client: caller.client)
        let now = clock.now
        try await store.transaction { [self] db in
            let invitation = try await usable(reference, caller: caller, db: db, now: now)
            guard try await InvitationRepository(db: db).decline(invitation.id, now: now) else { throw Self.used }
            try await trail.within(db).record(
                AuditEvent(
                    .invitationDeclined, accountID: caller.accountID, companyID: invitation.companyID,
                    ip: caller.client.ip, userAgent: caller.client.userAgent,
                    detail: ["invitation": invitation.id]))
        }
    }
}
