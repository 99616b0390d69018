import Foundation
import GatehouseClientAPI

extension Companies {
    // MARK: Invitations of the company signed in to (owner, or managers when the company allows)

    /// The company's invitations, newest first, with where each stands; never their links or codes.
    public func invitations() async throws(GatehouseError) -> [Invitation] {
        try await inCompany { try await $0.listInvitations(path: .init(cid: $1)).ok.body.json }.invitations
            .map(Invitation.init)
    }

    /// Invites `email` with a role and department masks, and mails it a link and a six-digit code (valid 7 days).
    /// The role and masks cannot exceed the caller's (`dept_mask_forbidden`); a member's address
    /// is ``GatehouseError/Code/alreadyMember``. A second invitation to the same address replaces the first.
    @discardableResult
    public func invite(
        email: String, role: CompanyRole = .member, deptMask: Int64 = 0, managerMask: Int64 = 0
    ) async throws(GatehouseError) -> Invitation {
        let body = Components.Schemas.CreateInvitationRequest(
            email: email, role: role == .readOnly ? .readOnly : .member, deptMask: deptMask, managerMask: managerMask)
        return Invitation(
            try await inCompany {
                try await $0.createInvitation(path: .init(cid: $1), body: .json(body)).created.body.json
            })
    }

    /// Mails an invitation again with a new link and code and a fresh expiry; the old link and code stop working.
    /// At most once a minute: ``GatehouseError/Code/overEmailSendRateLimit`` with the wait in `retryAfter`.
    @discardableResult
    public func resendInvitation(id: String) async throws(GatehouseError) -> Invitation {
        Invitation(try await inCompany { try await $0.resendInvitation(path: .init(cid: $1, id: id)).ok.body.json })
    }

    /// Revokes an invitation that is not used yet.
    public func revokeInvitation(id: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.revokeInvitation(path: .init(cid: $1, id: id)).noContent }
    }

    // MARK: Invitations to the account

    /// The open invitations to the account's confirmed address, to accept or decline.
    public func myInvitations() async throws(GatehouseError) -> [ReceivedInvitation] {
        try await sessions.authorized { try await $0.listMyInvitations().ok.body.json }.invitations
            .map(ReceivedInvitation.init)
    }

    /// Joins the company an invitation is for, with its role and masks. `invitation` is its id (from
    /// ``myInvitations()``), the six-digit code of its mail, or the token of its link
    /// (``invitationToken(in:)``). Only an account whose confirmed address is the invited one may:
    /// ``GatehouseError/Code/invitationEmailMismatch`` otherwise.
    @discardableResult
    public func acceptInvitation(_ invitation: String) async throws(GatehouseError) -> CompanySummary {
        CompanySummary(
            try await sessions.authorized { try await $0.acceptInvitation(path: .init(id: invitation)).ok.body.json })
    }

    /// Declines an invitation (named as for ``acceptInvitation(_:)``); it cannot be accepted afterwards.
    public func declineInvitation(_ invitation: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.declineInvitation(path: .init(id: invitation)).noContent }
    }

    /// The invitation token in a mailed invitation link (`…/account?invitation=<token>`), if it is one.
    public static func invitationToken(in link: URL) -> String? {
        URLComponents(url: link, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "invitation" }?
            .value
    }
}

/// An invitation by email as the company sees it.
public struct Invitation: Sendable, Equatable, Identifiable {
    /// Where an invitation stands.
    public enum State: String, Sendable, Equatable {
        /// Mailed, not used yet, not expired.
        case open
        /// Past its 7 days; a resend revives it.
        case expired
        /// Its invitee joined.
        case accepted
        /// Its invitee declined.
        case declined
        /// Revoked, or replaced by a newer invitation to the same address.
        case revoked
    }

    /// The invitation's id (for resending or revoking it).
    public let id: String
    /// The invited address, normalized.
    public let email: String
    /// The role accepting gives.
    public let role: CompanyRole
    /// The departments accepting gives.
    public let deptMask: Int64
    /// The departments the invitee will manage.
    public let managerMask: Int64
    /// Where it stands now.
    public let state: State
    /// The inviter's account id.
    public let invitedBy: String
    /// When it was made.
    public let createdAt: Date
    /// When it was last mailed.
    public let sentAt: Date
    /// When it stops working.
    public let expiresAt: Date

    init(_ wire: Components.Schemas.Invitation) {
        id = wire.id
        email = wire.email
        role = CompanyRole(rawValue: wire.role.rawValue) ?? .readOnly
        deptMask = wire.deptMask
        managerMask = wire.managerMask
        state = State(rawValue: wire.state.rawValue) ?? .open
        invitedBy = wire.invitedBy
        createdAt = wire.createdAt
        sentAt = wire.sentAt
        expiresAt = wire.expiresAt
    }
}

/// An open invitation to the account, as its invitee sees it.
public struct ReceivedInvitation: Sendable, Equatable, Identifiable {
    /// The invitation's id (for accepting or declining it).
    public let id: String
    /// The company it is to.
    public let companyID: String
    /// The company's name.
    public let companyName: String
    /// Its logo.
    public let logoURL: URL?
    /// Who invited.
    public let inviterName: String
    /// The role accepting gives.
    public let role: CompanyRole
    /// When it stops working.
    public let expiresAt: Date

    init(_ wire: Components.Schemas.ReceivedInvitation) {
        id = wire.id
        companyID = wire.companyId
        companyName = wire.companyName
        logoURL = wire.logoUrl.flatMap(URL.init(string:))
        inviterName = wire.inviterName
        role = CompanyRole(rawValue: wire.role.rawValue) ?? .readOnly
        expiresAt = wire.expiresAt
    }
}

extension GatehouseError.Code {
    /// The account is a member of the company already.
    public static let alreadyMember = GatehouseError.Code(rawValue: "already_member")
    /// The invitation is for another address, or the account's address is not confirmed.
    public static let invitationEmailMismatch = GatehouseError.Code(rawValue: "invitation_email_mismatch")
    /// The invitation is past its 7 days; ask for a new one.
    public static let invitationExpired = GatehouseError.Code(rawValue: "invitation_expired")
    /// No invitation has that id, code or token.
    public static let invitationNotFound = GatehouseError.Code(rawValue: "invitation_not_found")
    /// The invitation was accepted or declined already.
    public static let invitationUsed = GatehouseError.Code(rawValue: "invitation_used")
    /// The company revoked the invitation, or replaced it with a newer one.
    public static let invitationRevoked = GatehouseError.Code(rawValue: "invitation_revoked")
}
