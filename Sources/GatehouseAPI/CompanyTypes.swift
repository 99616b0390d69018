import Foundation

// Wire types of Gatehouse's company API (snake_case JSON).

/// A company in the caller's list.
public struct CompanySummary: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var tier: String
    public var logoURL: String?
    public var role: String
    public var memberCount: Int
    public var hasCredential: Bool
    public var requiresCredential: Bool

    public init(
        id: String, name: String, tier: String, logoURL: String?, role: String, memberCount: Int, hasCredential: Bool,
        requiresCredential: Bool
    ) {
        self.id = id
        self.name = name
        self.tier = tier
        self.logoURL = logoURL
        self.role = role
        self.memberCount = memberCount
        self.hasCredential = hasCredential
        self.requiresCredential = requiresCredential
    }

    enum CodingKeys: String, CodingKey {
        case id, name, tier, role
        case logoURL = "logo_url"
        case memberCount = "member_count"
        case hasCredential = "has_credential"
        case requiresCredential = "requires_credential"
    }
}

/// `GET /v1/companies`.
public struct CompanyList: Codable, Sendable, Equatable {
    public var companies: [CompanySummary]
    public init(companies: [CompanySummary]) { self.companies = companies }
}

/// One company with its policy, as its members see it.
public struct CompanyDetail: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var tier: String
    public var logoURL: String?
    public var ownerID: String
    public var requiresCredential: Bool
    public var passwordMinLength: Int
    public var sessionIdleTimeout: Int
    public var sessionLifetime: Int
    public var managersCanShare: Bool
    public var memberCount: Int
    public var createdAt: String

    public init(
        id: String, name: String, tier: String, logoURL: String?, ownerID: String, requiresCredential: Bool,
        passwordMinLength: Int, sessionIdleTimeout: Int, sessionLifetime: Int, managersCanShare: Bool, memberCount: Int,
        createdAt: String
    ) {
        self.id = id
        self.name = name
        self.tier = tier
        self.logoURL = logoURL
        self.ownerID = ownerID
        self.requiresCredential = requiresCredential
        self.passwordMinLength = passwordMinLength
        self.sessionIdleTimeout = sessionIdleTimeout
        self.sessionLifetime = sessionLifetime
        self.managersCanShare = managersCanShare
        self.memberCount = memberCount
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case id, name, tier
        case logoURL = "logo_url"
        case ownerID = "owner_id"
        case requiresCredential = "requires_credential"
        case passwordMinLength = "password_min_length"
        case sessionIdleTimeout = "session_idle_timeout"
        case sessionLifetime = "session_lifetime"
        case managersCanShare = "managers_can_share"
        case memberCount = "member_count"
        case createdAt = "created_at"
    }
}

/// `POST /v1/companies`.
public struct CreateCompanyRequest: Codable, Sendable {
    public var name: String
    public var logoURL: String?
    public init(name: String, logoURL: String? = nil) {
        self.name = name
        self.logoURL = logoURL
    }
    enum CodingKeys: String, CodingKey {
        case name
        case logoURL = "logo_url"
    }
}

/// `PATCH /v1/companies/{cid}`: any subset.
public struct UpdateCompanyRequest: Codable, Sendable {
    public var name: String?
    public var logoURL: String?
    public var requiresCredential: Bool?
    public var passwordMinLength: Int?
    public var sessionIdleTimeout: Int?
    public var sessionLifetime: Int?
    public var managersCanShare: Bool?
    enum CodingKeys: String, CodingKey {
        case name
        case logoURL = "logo_url"
        case requiresCredential = "requires_credential"
        case passwordMinLength = "password_min_length"
        case sessionIdleTimeout = "session_idle_timeout"
        case sessionLifetime = "session_lifetime"
        case managersCanShare = "managers_can_share"
    }
}

/// `PUT /v1/companies/{cid}/credential`: the caller's private login for one company.
public struct CreateCredentialRequest: Codable, Sendable {
    public var username: String
    public var password: String
    public var email: String?
    /// Base64 PNG or JPEG, at most 1 MiB decoded: the picture other members see.
    public var image: String?
    public init(username: String, password: String, email: String? = nil, image: String? = nil) {
        self.username = username
        self.password = password
        self.email = email
        self.image = image
    }
}

/// The caller's own credential; never a hash.
public struct CredentialInfo: Codable, Sendable, Equatable {
    public var username: String
    public var email: String?
    public var superUser: Bool
    public var hasImage: Bool
    public var createdAt: String
    public init(username: String, email: String?, superUser: Bool, hasImage: Bool, createdAt: String) {
        self.username = username
        self.email = email
        self.superUser = superUser
        self.hasImage = hasImage
        self.createdAt = createdAt
    }
    enum CodingKeys: String, CodingKey {
        case username, email
        case superUser = "super_user"
        case hasImage = "has_image"
        case createdAt = "created_at"
    }
}

/// `POST /v1/companies/{cid}/credential/password`.
public struct ChangeCredentialPasswordRequest: Codable, Sendable {
    public var currentPassword: String
    public var newPassword: String
    enum CodingKeys: String, CodingKey {
        case currentPassword = "current_password"
        case newPassword = "new_password"
    }
}

/// `POST /v1/companies/{cid}/login`; empty when the company requires no credential.
public struct CompanyLoginRequest: Codable, Sendable {
    public var username: String?
    public var password: String?
}

/// `POST /v1/companies/{cid}/shares`.
public struct CreateShareRequest: Codable, Sendable {
    public var permission: String
    public var expiresIn: Int?
    public var maxUses: Int?
    enum CodingKeys: String, CodingKey {
        case permission
        case expiresIn = "expires_in"
        case maxUses = "max_uses"
    }
}

/// A share link; `token` and `url` appear only in the answer that creates it.
public struct ShareLinkInfo: Codable, Sendable, Equatable {
    public var id: String
    public var permission: String
    public var token: String?
    public var url: String?
    public var expiresAt: String?
    public var maxUses: Int?
    public var uses: Int
    public var revoked: Bool
    public var createdAt: String
    public init(
        id: String, permission: String, token: String?, url: String?, expiresAt: String?, maxUses: Int?, uses: Int,
        revoked: Bool, createdAt: String
    ) {
        self.id = id
        self.permission = permission
        self.token = token
        self.url = url
        self.expiresAt = expiresAt
        self.maxUses = maxUses
        self.uses = uses
        self.revoked = revoked
        self.createdAt = createdAt
    }
    enum CodingKeys: String, CodingKey {
        case id, permission, token, url, uses, revoked
        case expiresAt = "expires_at"
        case maxUses = "max_uses"
        case createdAt = "created_at"
    }
}

/// `GET /v1/companies/{cid}/shares`.
public struct ShareLinkList: Codable, Sendable, Equatable {
    public var shares: [ShareLinkInfo]
    public init(shares: [ShareLinkInfo]) { self.shares = shares }
}

/// `GET /v1/shares/{token}`: what accepting would join, without joining.
public struct SharePreview: Codable, Sendable, Equatable {
    public var companyName: String
    public var logoURL: String?
    public var inviterName: String
    public var permission: String
    public init(companyName: String, logoURL: String?, inviterName: String, permission: String) {
        self.companyName = companyName
        self.logoURL = logoURL
        self.inviterName = inviterName
        self.permission = permission
    }
    enum CodingKeys: String, CodingKey {
        case permission
        case companyName = "company_name"
        case logoURL = "logo_url"
        case inviterName = "inviter_name"
    }
}

/// A member as other members see them: never a username, email or hash.
public struct MemberInfo: Codable, Sendable, Equatable {
    public var accountID: String
    public var displayName: String
    public var imageURL: String?
    public var role: String
    public var deptMask: Int64
    public var managerMask: Int64
    public var joinedAt: String
    public init(
        accountID: String, displayName: String, imageURL: String?, role: String, deptMask: Int64, managerMask: Int64,
        joinedAt: String
    ) {
        self.accountID = accountID
        self.displayName = displayName
        self.imageURL = imageURL
        self.role = role
        self.deptMask = deptMask
        self.managerMask = managerMask
        self.joinedAt = joinedAt
    }
    enum CodingKeys: String, CodingKey {
        case role
        case accountID = "account_id"
        case displayName = "display_name"
        case imageURL = "image_url"
        case deptMask = "dept_mask"
        case managerMask = "manager_mask"
        case joinedAt = "joined_at"
    }
}

/// `GET /v1/companies/{cid}/members`.
public struct MemberList: Codable, Sendable, Equatable {
    public var members: [MemberInfo]
    public init(members: [MemberInfo]) { self.members = members }
}

/// `PATCH /v1/companies/{cid}/members/{accountId}`.
public struct UpdateMemberRequest: Codable, Sendable {
    public var role: String?
    public var deptMask: Int64?
    public var managerMask: Int64?
    enum CodingKeys: String, CodingKey {
        case role
        case deptMask = "dept_mask"
        case managerMask = "manager_mask"
    }
}

/// `POST /v1/companies/{cid}/transfer`.
public struct TransferOwnershipRequest: Codable, Sendable {
    public var accountID: String
    enum CodingKeys: String, CodingKey { case accountID = "account_id" }
}
