import Foundation
import GatehouseClientAPI

/// The signed-in account.
public struct AuthUser: Sendable, Equatable {
    /// The account's id.
    public let id: String
    /// Its email address (empty for an Apple account that hid it).
    public let email: String
    /// When the address was confirmed; nil until then.
    public let emailConfirmedAt: Date?
    /// The profile values the app stored, as strings (other JSON values are left out).
    public let profile: [String: String]
    /// Its second factors, verified or not (empty when it has none).
    public let factors: [Factor]
    /// The ways into it: its email, and the Apple and Google IDs linked to it.
    public let identities: [UserIdentity]
    /// An account made by single sign-on (its identity `sso:<provider id>`): its `email` is the one its company's
    /// identity provider gave, which no email sign-in reaches.
    public let isSSOUser: Bool

    init(_ wire: Components.Schemas.User) {
        id = wire.id
        email = wire.email
        emailConfirmedAt = wire.emailConfirmedAt
        profile = wire.userMetadata.compactMapValues(\.stringValue)
        factors = (wire.factors ?? []).map(Factor.init)
        identities = wire.identities.map(UserIdentity.init)
        isSSOUser = wire.isSsoUser ?? false
    }
}

/// One of the account's sessions, as listed for "signed-in devices".
public struct DeviceSession: Sendable, Equatable, Identifiable {
    /// The session's id (for `revokeSession(id:)`).
    public let id: String
    /// The user agent it signed in with.
    public let userAgent: String?
    /// The address it signed in from.
    public let ip: String?
    /// When it started.
    public let createdAt: Date
    /// When it last refreshed.
    public let refreshedAt: Date
    /// Whether it is the session of this client.
    public let isCurrent: Bool

    init(_ wire: Components.Schemas.SessionInfo) {
        id = wire.id
        userAgent = wire.userAgent
        ip = wire.ip
        createdAt = wire.createdAt
        refreshedAt = wire.refreshedAt
        isCurrent = wire.current
    }
}

/// A company's plan, which decides sharing and the participant limit.
public enum Tier: String, Sendable, Equatable {
    /// One person; no sharing.
    case free
    /// Sharing, with a participant limit.
    case business
    /// Sharing, without a limit.
    case enterprise
}

/// What a member is in a company.
public enum CompanyRole: String, Sendable, Equatable {
    /// Owns it: policy, sharing, members.
    case owner
    /// Reads and writes.
    case member
    /// Reads only.
    case readOnly = "read_only"
}

/// What a share link lets its takers do.
public enum Permission: String, Sendable, Equatable {
    /// Join as a member.
    case readWrite = "read_write"
    /// Join read-only.
    case readOnly = "read_only"
}

/// A company in the account's list: one it owns or was invited into.
public struct CompanySummary: Sendable, Equatable, Identifiable {
    /// The company's id.
    public let id: String
    /// Its name.
    public let name: String
    /// Its plan.
    public let tier: Tier
    /// Its logo, when it has one.
    public let logoURL: URL?
    /// What the account is in it.
    public let role: CompanyRole
    /// How many members it has, the owner included.
    public let memberCount: Int
    /// Whether the account has made its credential (username and password) for it.
    public let hasCredential: Bool
    /// Whether logging in to it takes the credential (otherwise the account session is enough).
    public let requiresCredential: Bool
    /// Whether logging in to it takes a second factor verified in the account session (aal2).
    public let requiresMFA: Bool

    init(_ wire: Components.Schemas.CompanySummary) {
        id = wire.id
        name = wire.name
        tier = Tier(rawValue: wire.tier.rawValue) ?? .free
        logoURL = wire.logoUrl.flatMap(URL.init(string:))
        role = CompanyRole(rawValue: wire.role.rawValue) ?? .readOnly
        memberCount = wire.memberCount
        hasCredential = wire.hasCredential
        requiresCredential = wire.requiresCredential
        requiresMFA = wire.requiresMfa
    }

    /// A summary as the app would list it (for previews and tests of a login flow).
    public init(
        id: String, name: String, tier: Tier = .free, logoURL: URL? = nil, role: CompanyRole = .owner,
        memberCount: Int = 1, hasCredential: Bool, requiresCredential: Bool = true, requiresMFA: Bool = false
    ) {
        self.id = id
        self.name = name
        self.tier = tier
        self.logoURL = logoURL
        self.role = role
        self.memberCount = memberCount
        self.hasCredential = hasCredential
        self.requiresCredential = requiresCredential
        self.requiresMFA = requiresMFA
    }
}

extension CompanySummary {
    /// The same company once the account has made its credential.
    var withCredential: CompanySummary {
        CompanySummary(
            id: id, name: name, tier: tier, logoURL: logoURL, role: role, memberCount: memberCount, hasCredential: true,
            requiresCredential: requiresCredential, requiresMFA: requiresMFA)
    }
}

/// A company and its policy.
public struct Company: Sendable, Equatable, Identifiable {
    /// The company's id.
    public let id: String
    /// Its name.
    public let name: String
    /// Its plan.
    public let tier: Tier
    /// Its logo, when it has one.
    public let logoURL: URL?
    /// The owner's account id.
    public let ownerID: String
    /// Whether logging in takes the credential.
    public let requiresCredential: Bool
    /// Whether logging in takes a second factor verified in the account session (aal2).
    public let requiresMFA: Bool
    /// The shortest credential password it accepts.
    public let passwordMinLength: Int
    /// Seconds of inactivity after which a company session ends.
    public let sessionIdleTimeout: Int
    /// Seconds after which a company session ends regardless.
    public let sessionLifetime: Int
    /// Whether managers may make share links.
    public let managersCanShare: Bool
    /// How many members it has.
    public let memberCount: Int
    /// When it was made.
    public let createdAt: Date
    /// What the app sets as a purchase's `appAccountToken` (StoreKit's `Product.PurchaseOption.appAccountToken`), so
    /// that the purchase counts for this company and no other.
    public let appAccountToken: UUID?
    /// The tier's source and the App Store subscription behind it.
    public let subscription: CompanySubscription

    init(_ wire: Components.Schemas.CompanyDetail) {
        id = wire.id
        name = wire.name
        tier = Tier(rawValue: wire.tier.rawValue) ?? .free
        logoURL = wire.logoUrl.flatMap(URL.init(string:))
        ownerID = wire.ownerId
        requiresCredential = wire.requiresCredential
        requiresMFA = wire.requiresMfa
        passwordMinLength = wire.passwordMinLength
        sessionIdleTimeout = wire.sessionIdleTimeout
        sessionLifetime = wire.sessionLifetime
        managersCanShare = wire.managersCanShare
        memberCount = wire.memberCount
        createdAt = wire.createdAt
        appAccountToken = UUID(uuidString: wire.appAccountToken)
        subscription = CompanySubscription(wire.subscription)
    }
}

/// A company's tier, where it comes from, and the App Store subscription behind it (docs/app-store.md).
public struct CompanySubscription: Sendable, Equatable {
    /// Who set the tier.
    public enum Source: String, Sendable {
        /// A subscription bought in the app.
        case appStore = "app_store"
        /// An operator, whose choice holds whatever the App Store says until they hand it back.
        case `operator`
    }

    /// Where a subscription stands.
    public enum State: String, Sendable {
        /// Paid and running.
        case active
        /// Billing failed; Apple retries and the company keeps its tier until the grace period ends.
        case gracePeriod = "grace_period"
        /// Billing failed; Apple retries, and the company is on the Free tier meanwhile.
        case billingRetry = "billing_retry"
        /// Ended.
        case expired
        /// Apple refunded it.
        case refunded
        /// Family Sharing access was withdrawn.
        case revoked
    }

    /// The company's tier now.
    public let tier: Tier
    /// Who set it; nil for a company that never had a subscription or an operator's choice.
    public let source: Source?
    /// The newest subscription's state, if it ever had one.
    public let state: State?
    /// The product bought.
    public let productID: String?
    /// When the paid period ends.
    public let expiresAt: Date?
    /// When the grace period ends, while billing is retried.
    public let gracePeriodExpiresAt: Date?

    init(
        tier: Tier, source: Source? = nil, state: State? = nil, productID: String? = nil, expiresAt: Date? = nil,
        gracePeriodExpiresAt: Date? = nil
    ) {
        self.tier = tier
        self.source = source
        self.state = state
        self.productID = productID
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
    }

    init(_ wire: Components.Schemas.CompanySubscription) {
        tier = Tier(rawValue: wire.tier.rawValue) ?? .free
        source = wire.tierSource.flatMap { Source(rawValue: $0.rawValue) }
        state = wire.state.flatMap { State(rawValue: $0.rawValue) }
        productID = wire.productId
        expiresAt = wire.expiresAt
        gracePeriodExpiresAt = wire.gracePeriodExpiresAt
    }
}

/// Changes to a company's name and policy (owner); nil leaves a value as it is.
public struct CompanyUpdate: Sendable, Equatable {
    /// A new name.
    public var name: String?
    /// A new logo; an empty string removes it.
    public var logoURL: String?
    /// Whether logging in takes the credential.
    public var requiresCredential: Bool?
    /// The shortest credential password (8–64).
    public var passwordMinLength: Int?
    /// Seconds of inactivity that end a company session.
    public var sessionIdleTimeout: Int?
    /// Seconds after which a company session ends.
    public var sessionLifetime: Int?
    /// Whether managers may make share links.
    public var managersCanShare: Bool?
    /// Whether logging in takes a second factor. Turning it on needs the owner's company session at aal2 (log in to
    /// the company after verifying one), and ends the company's sessions opened below aal2.
    public var requiresMFA: Bool?

    /// An update that changes nothing until its values are set.
    public init(
        name: String? = nil, logoURL: String? = nil, requiresCredential: Bool? = nil, passwordMinLength: Int? = nil,
        sessionIdleTimeout: Int? = nil, sessionLifetime: Int? = nil, managersCanShare: Bool? = nil,
        requiresMFA: Bool? = nil
    ) {
        self.name = name
        self.logoURL = logoURL
        self.requiresCredential = requiresCredential
        self.passwordMinLength = passwordMinLength
        self.sessionIdleTimeout = sessionIdleTimeout
        self.sessionLifetime = sessionLifetime
        self.managersCanShare = managersCanShare
        self.requiresMFA = requiresMFA
    }
}

/// The account's own credential in a company: its username, never its password.
public struct Credential: Sendable, Equatable {
    /// The username (case-sensitive, fixed once made).
    public let username: String
    /// The contact address given with it.
    public let email: String?
    /// Whether it is the owner's.
    public let isSuperUser: Bool
    /// Whether it has a picture.
    public let hasImage: Bool
    /// When it was made.
    public let createdAt: Date

    init(_ wire: Components.Schemas.CredentialInfo) {
        username = wire.username
        email = wire.email
        isSuperUser = wire.superUser
        hasImage = wire.hasImage
        createdAt = wire.createdAt
    }
}

/// A share link of a company.
public struct ShareLink: Sendable, Equatable, Identifiable {
    /// The link's id (for revoking it).
    public let id: String
    /// What its takers may do.
    public let permission: Permission
    /// The link to send; only known in the answer that made it.
    public let url: URL?
    /// When it stops working, if ever.
    public let expiresAt: Date?
    /// How many times it may be taken, if limited.
    public let maxUses: Int?
    /// How many times it was taken.
    public let uses: Int
    /// Whether it was revoked.
    public let isRevoked: Bool
    /// When it was made.
    public let createdAt: Date

    init(_ wire: Components.Schemas.ShareLinkInfo) {
        id = wire.id
        permission = Permission(rawValue: wire.permission.rawValue) ?? .readOnly
        url = wire.url.flatMap(URL.init(string:))
        expiresAt = wire.expiresAt
        maxUses = wire.maxUses
        uses = wire.uses
        isRevoked = wire.revoked
        createdAt = wire.createdAt
    }
}

/// What a share link leads to, shown before joining.
public struct SharePreview: Sendable, Equatable {
    /// The company's name.
    public let companyName: String
    /// Its logo.
    public let logoURL: URL?
    /// Who shared it.
    public let inviterName: String
    /// What joining gives.
    public let permission: Permission

    init(_ wire: Components.Schemas.SharePreview) {
        companyName = wire.companyName
        logoURL = wire.logoUrl.flatMap(URL.init(string:))
        inviterName = wire.inviterName
        permission = Permission(rawValue: wire.permission.rawValue) ?? .readOnly
    }
}

/// A member as other members see them: never a username, email or password.
public struct Member: Sendable, Equatable, Identifiable {
    /// The member's account id.
    public let id: String
    /// The name they show.
    public let displayName: String
    /// What they are in the company.
    public let role: CompanyRole
    /// The departments they see (bits).
    public let deptMask: Int64
    /// The departments they manage (bits).
    public let managerMask: Int64
    /// When they joined.
    public let joinedAt: Date

    init(_ wire: Components.Schemas.MemberInfo) {
        id = wire.accountId
        displayName = wire.displayName
        role = CompanyRole(rawValue: wire.role.rawValue) ?? .readOnly
        deptMask = wire.deptMask
        managerMask = wire.managerMask
        joinedAt = wire.joinedAt
    }
}
