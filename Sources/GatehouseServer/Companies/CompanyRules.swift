import Foundation

/// What a company may do with sharing, enforced by the server.
public enum CompanyTier: String, Sendable, CaseIterable, Codable {
    case free, business, enterprise

    /// Participants allowed besides the owner; nil is unlimited.
    var participantLimit: Int? {
        switch self {
        case .free: 0
        case .business: 10
        case .enterprise: nil
        }
    }

    var allowsSharing: Bool { self != .free }
}

/// A member's role in one company.
public enum MemberRole: String, Sendable, CaseIterable, Codable {
    case owner, member
    case readOnly = "read_only"
}

/// What a share link makes its acceptor.
enum SharePermission: String, Sendable, Codable {
    case readWrite = "read_write"
    case readOnly = "read_only"

    var role: MemberRole { self == .readWrite ? .member : .readOnly }
}

/// How an account's last membership of a company ended, kept after the membership row is gone.
struct FormerMembership: Sendable, Equatable {
    /// The last time the owner removed the account; nil if never.
    var removedAt: Date?
    /// The last time the account left, and the role it held then; nil if it never left.
    var leftAt: Date?
    var leftRole: MemberRole?
    /// The access epoch the membership had reached: the next membership's epochs start after it.
    var epoch: Int64
}

/// The caller's standing in a company, read fresh from the store on every company request.
public struct Membership: Sendable, Equatable {
    public let companyID: String
    public let accountID: String
    public let role: MemberRole
    public let deptMask: Int64
    public let managerMask: Int64
    /// The access epoch this membership began at: change tokens from before it (an earlier membership, ended by a
    /// removal or a departure) are refused.
    public var joinedEpoch: Int64 = 0

    public var isOwner: Bool { role == .owner }
    /// A manager is a member with at least one department they manage.
    public var isManager: Bool { role != .readOnly && managerMask != 0 }
    public var canWrite: Bool { role != .readOnly }
}

/// Company policy: what logging in and its sessions require.
struct CompanyPolicy: Sendable, Equatable {
    var requiresCredential = true
    var passwordMinLength = 8
    var sessionIdleTimeout: TimeInterval = 8 * 3600
    var sessionLifetime: TimeInterval = 30 * 24 * 3600
    var managersCanShare = false
    /// Company login needs the account session at aal2: a second factor verified in it.
    var requiresMFA = false
}

/// Pure decisions about members, shares and changes (no I/O), so every rule is tested without a server.
enum CompanyRules {
    /// Whether `actor` may create or revoke share links.
    static func canManageShares(_ actor: Membership, policy: CompanyPolicy) -> Bool {
        actor.isOwner || (policy.managersCanShare && actor.isManager)
    }

    /// Whether a link still admits anyone: its creator must still be a member who may make links today (a manager
    /// demoted or removed, or `managers_can_share` turned off, leaves their links dead).
    static func linkStillValid(creator: Membership?, policy: CompanyPolicy) -> Bool {
        creator.map { canManageShares($0, policy: policy) } ?? false
    }

    /// What accepting a link makes an account that was in the company before.
    enum Readmission: Equatable {
        case admit(MemberRole)
        /// The owner removed the account after the link was made.
        case removed
    }

    /// Removal and demotion stick: a link made before the account was removed does not re-admit it (only a link
    /// made after the removal does), and a link made before the account left re-admits it with at most the role it
    /// held when it left. A link made after both admits with its own permission: someone who may share chose to
    /// invite again. Times compare at the store's millisecond: a link made in the same millisecond counts as older.
    static func readmission(linkCreatedAt: Date, permission: SharePermission, former: FormerMembership?)
        -> Readmission
    {
        let role = permission.role
        guard let former else { return .admit(role) }
        if let removedAt = former.removedAt, linkCreatedAt <= removedAt { return .removed }
        if let leftAt = former.leftAt, linkCreatedAt <= leftAt, let held = former.leftRole {
            return .admit(held == .readOnly ? .readOnly : role)
        }
        return .admit(role)
    }

    /// Whether another acceptance fits in the tier, given the current participant count (owner excluded).
    static func admits(participants: Int, tier: CompanyTier) -> Bool {
        guard let limit = tier.participantLimit else { return true }
        return participants < limit
    }

    /// A requested change to a member.
    struct MemberChange: Equatable {
        var role: MemberRole?
        var deptMask: Int64?
        var managerMask: Int64?
    }

    enum ChangeVerdict: Equatable {
        case allowed
        case forbidden(String)
    }

    /// The owner may change anyone but themselves (never into a second owner); a manager may only set or clear
    /// department bits inside their own manager mask, on members other than the owner.
    static func judge(_ change: MemberChange, by actor: Membership, on target: Membership) -> ChangeVerdict {
        if target.role == .owner {
            return .forbidden(
                actor.accountID == target.accountID
                    ? "Owners cannot change their own membership" : "The owner cannot be changed")
        }
        if change.role == .owner { return .forbidden("Ownership moves only by transfer") }
        if actor.isOwner { return .allowed }
        guard actor.isManager else { return .forbidden("Only the owner or a manager may change members") }
        guard change.role == nil, change.managerMask == nil else {
            return .forbidden("Managers may change department bits only")
        }
        guard let deptMask = change.deptMask else { return .allowed }
        let touched = deptMask ^ target.deptMask
        return touched & ~actor.managerMask == 0
            ? .allowed : .forbidden("Managers may only grant or clear departments they manage")
    }
}
