import Foundation

/// An invitation by email as stored: its link's token and its code only as digests.
struct InvitationRecord: Sendable, Equatable {
    let id: String
    let companyID: String
    /// The invited address, normalized (`EmailAddress.normalize`).
    let email: String
    let role: MemberRole
    let deptMask: Int64
    let managerMask: Int64
    /// The account that sent it.
    let invitedBy: String
    let createdAt: Date
    /// The last time it was mailed (at creation or by a resend).
    var sentAt: Date
    var expiresAt: Date
    var usedAt: Date? = nil
    var declinedAt: Date? = nil
    var revokedAt: Date? = nil

    /// Where it stands at `now`.
    func state(at now: Date) -> InvitationState {
        if revokedAt != nil { return .revoked }
        if usedAt != nil { return .accepted }
        if declinedAt != nil { return .declined }
        return expiresAt > now ? .open : .expired
    }
}

/// Where an invitation stands; only an open one can be accepted or declined.
enum InvitationState: String, Sendable, Equatable {
    case open, expired, accepted, declined, revoked
}

/// An open invitation as its invitee sees it: the company, who invited, with what role.
struct ReceivedInvitationRecord: Sendable {
    let invitation: InvitationRecord
    let companyName: String
    let logoURL: String?
    let inviterName: String
}

/// Pure decisions about invitations (no I/O): who may invite with what, when a resend may go, and what an invitee's
/// attempt to accept or decline meets.
enum InvitationRules {
    /// How long an invitation lives after it was last mailed.
    static let lifetime: TimeInterval = 7 * 86400
    /// How long a resend waits after the last mail.
    static let resendCooldown: TimeInterval = 60

    enum Verdict: Equatable {
        case allowed
        /// The inviter may not invite at all (`forbidden`).
        case forbidden(String)
        /// The masks reach beyond what the inviter may grant (`dept_mask_forbidden`).
        case masksForbidden(String)
    }

    /// Who may invite is who may share (`CompanyRules.canManageShares`): the owner, or a manager when the company
    /// allows. No one invites a second owner. The owner grants any masks; a manager grants only departments they
    /// manage, and no manager bits, as with a member's change (`CompanyRules.judge`).
    static func judge(
        role: MemberRole, deptMask: Int64, managerMask: Int64, by inviter: Membership, policy: CompanyPolicy
    ) -> Verdict {
        guard CompanyRules.canManageShares(inviter, policy: policy) else {
            return .forbidden("Only the owner (or a manager, if the company allows) may invite")
        }
        if role == .owner { return .forbidden("Ownership moves only by transfer") }
        if inviter.isOwner { return .allowed }
        guard managerMask == 0 else { return .masksForbidden("Managers may not invite other managers") }
        return deptMask & ~inviter.managerMask == 0
            ? .allowed : .masksForbidden("Managers may only grant departments they manage")
    }

    /// Seconds until a resend may go, or nil when it may go now.
    static func resendWait(lastSent: Date, now: Date) -> Int? {
        let wait = lastSent.addingTimeInterval(resendCooldown).timeIntervalSince(now)
        return wait > 0 ? Int(wait.rounded(.up)) : nil
    }

    /// What an invitee's accept or decline meets.
    enum Refusal: Equatable {
        /// The caller's confirmed address is not the invited one (or not confirmed).
        case emailMismatch
        case expired, used, revoked
    }

    /// The caller must hold the invited address, confirmed; the invitation must be open. The address is checked
    /// first, so that someone else learns nothing of an invitation's state.
    static func refusal(
        _ invitation: InvitationRecord, callerEmail: String?, confirmed: Bool, now: Date
    ) -> Refusal? {
        guard confirmed, let callerEmail, EmailAddress.normalize(callerEmail) == invitation.email else {
            return .emailMismatch
        }
        switch invitation.state(at: now) {
        case .open: return nil
        case .expired: return .expired
        case .accepted, .declined: return .used
        case .revoked: return .revoked
        }
    }

    /// How an invitee names an invitation in `/v1/invitations/{id}/…`: its id, the mailed link's token, or the
    /// mailed six-digit code.
    enum Reference: Equatable {
        case id(String)
        case token(String)
        case code(String)
    }

    static func reference(_ raw: String) -> Reference {
        if let id = Secrets.identifier(raw) { return .id(id) }
        if raw.count == 6, raw.allSatisfy({ $0.isASCII && $0.isNumber }) { return .code(raw) }
        return .token(raw)
    }
}
