import Foundation

// Wire types of the account API. Field names follow Supabase Auth (GoTrue) so its clients decode them unchanged.

/// A signed-in session: what sign-in, verification and refresh return.
public struct AuthSession: Codable, Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int
    public var expiresAt: Int64
    public var refreshToken: String
    public var user: AuthUser

    public init(accessToken: String, expiresIn: Int, expiresAt: Int64, refreshToken: String, user: AuthUser) {
        self.accessToken = accessToken
        self.tokenType = "bearer"
        self.expiresIn = expiresIn
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case expiresAt = "expires_at"
        case refreshToken = "refresh_token"
        case user
    }
}

/// An account as its owner sees it.
public struct AuthUser: Codable, Sendable, Equatable {
    public var id: String
    public var aud: String
    public var role: String
    public var email: String
    public var emailConfirmedAt: String?
    public var confirmedAt: String?
    public var confirmationSentAt: String?
    public var phone: String
    public var lastSignInAt: String?
    public var appMetadata: [String: JSONValue]
    public var userMetadata: [String: JSONValue]
    public var identities: [AuthIdentity]
    public var createdAt: String
    public var updatedAt: String
    public var isAnonymous: Bool

    public init(
        id: String, email: String, emailConfirmedAt: String?, confirmationSentAt: String? = nil,
        lastSignInAt: String?, appMetadata: [String: JSONValue], userMetadata: [String: JSONValue],
        identities: [AuthIdentity], createdAt: String, updatedAt: String
    ) {
        self.id = id
        self.aud = "authenticated"
        self.role = "authenticated"
        self.email = email
        self.emailConfirmedAt = emailConfirmedAt
        self.confirmedAt = emailConfirmedAt
        self.confirmationSentAt = confirmationSentAt
        self.phone = ""
        self.lastSignInAt = lastSignInAt
        self.appMetadata = appMetadata
        self.userMetadata = userMetadata
        self.identities = identities
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.isAnonymous = false
    }

    enum CodingKeys: String, CodingKey {
        case id, aud, role, email, phone, identities
        case emailConfirmedAt = "email_confirmed_at"
        case confirmedAt = "confirmed_at"
        case confirmationSentAt = "confirmation_sent_at"
        case lastSignInAt = "last_sign_in_at"
        case appMetadata = "app_metadata"
        case userMetadata = "user_metadata"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case isAnonymous = "is_anonymous"
    }
}

/// One way an account signs in: its email, or a linked Apple ID.
public struct AuthIdentity: Codable, Sendable, Equatable {
    public var identityID: String
    public var id: String
    public var userID: String
    public var identityData: [String: JSONValue]
    public var provider: String
    public var email: String?
    public var lastSignInAt: String?
    public var createdAt: String
    public var updatedAt: String

    public init(
        identityID: String, id: String, userID: String, identityData: [String: JSONValue], provider: String,
        email: String?, lastSignInAt: String?, createdAt: String, updatedAt: String
    ) {
        self.identityID = identityID
        self.id = id
        self.userID = userID
        self.identityData = identityData
        self.provider = provider
        self.email = email
        self.lastSignInAt = lastSignInAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id, provider, email
        case identityID = "identity_id"
        case userID = "user_id"
        case identityData = "identity_data"
        case lastSignInAt = "last_sign_in_at"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }
}

/// `POST /auth/v1/signup`.
public struct SignUpRequest: Codable, Sendable {
    public var email: String
    public var password: String?
    public var data: [String: JSONValue]?
    /// PKCE: base64url SHA-256 of the client's verifier, and `s256`.
    public var codeChallenge: String?
    public var codeChallengeMethod: String?
    public init(email: String, password: String? = nil, data: [String: JSONValue]? = nil) {
        self.email = email
        self.password = password
        self.data = data
    }
    enum CodingKeys: String, CodingKey {
        case email, password, data
        case codeChallenge = "code_challenge"
        case codeChallengeMethod = "code_challenge_method"
    }
}

/// `POST /auth/v1/otp`: mail a code and a magic link.
public struct OTPRequest: Codable, Sendable {
    public var email: String
    public var createUser: Bool?
    public var data: [String: JSONValue]?
    public var codeChallenge: String?
    public var codeChallengeMethod: String?
    public init(email: String, createUser: Bool? = nil, data: [String: JSONValue]? = nil) {
        self.email = email
        self.createUser = createUser
        self.data = data
    }
    enum CodingKeys: String, CodingKey {
        case email, data
        case createUser = "create_user"
        case codeChallenge = "code_challenge"
        case codeChallengeMethod = "code_challenge_method"
    }
}

/// `POST /auth/v1/verify`: a mailed code (or link token) for one purpose.
public struct VerifyRequest: Codable, Sendable {
    public var type: String
    public var email: String?
    public var token: String?
    public var tokenHash: String?
    public init(type: String, email: String?, token: String?) {
        self.type = type
        self.email = email
        self.token = token
    }
    enum CodingKeys: String, CodingKey {
        case type, email, token
        case tokenHash = "token_hash"
    }
}

/// `POST /auth/v1/resend` and `POST /auth/v1/recover`.
public struct EmailRequest: Codable, Sendable {
    public var email: String
    public var type: String?
    public var codeChallenge: String?
    public var codeChallengeMethod: String?
    public init(email: String, type: String? = nil) {
        self.email = email
        self.type = type
    }
    enum CodingKeys: String, CodingKey {
        case email, type
        case codeChallenge = "code_challenge"
        case codeChallengeMethod = "code_challenge_method"
    }
}

/// `POST /auth/v1/token?grant_type=pkce`: the authorization code a link redirected with, and the verifier.
public struct PKCEGrant: Codable, Sendable {
    public var authCode: String
    public var codeVerifier: String
    public init(authCode: String, codeVerifier: String) {
        self.authCode = authCode
        self.codeVerifier = codeVerifier
    }
    enum CodingKeys: String, CodingKey {
        case authCode = "auth_code"
        case codeVerifier = "code_verifier"
    }
}

/// `POST /auth/v1/token?grant_type=password`.
public struct PasswordGrant: Codable, Sendable {
    public var email: String
    public var password: String
    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }
}

/// `POST /auth/v1/token?grant_type=refresh_token`.
public struct RefreshGrant: Codable, Sendable {
    public var refreshToken: String
    public init(refreshToken: String) { self.refreshToken = refreshToken }
    enum CodingKeys: String, CodingKey { case refreshToken = "refresh_token" }
}

/// `POST /auth/v1/token?grant_type=id_token`.
public struct IDTokenGrant: Codable, Sendable {
    public var provider: String
    public var idToken: String
    public var nonce: String?
    public init(provider: String, idToken: String, nonce: String? = nil) {
        self.provider = provider
        self.idToken = idToken
        self.nonce = nonce
    }
    enum CodingKeys: String, CodingKey {
        case provider, nonce
        case idToken = "id_token"
    }
}

/// `PUT /auth/v1/user`: change password (with the current one or a fresh code), email, or profile data.
public struct UpdateUserRequest: Codable, Sendable {
    public var email: String?
    public var password: String?
    public var currentPassword: String?
    public var nonce: String?
    public var data: [String: JSONValue]?
    public init(
        email: String? = nil, password: String? = nil, currentPassword: String? = nil, nonce: String? = nil,
        data: [String: JSONValue]? = nil
    ) {
        self.email = email
        self.password = password
        self.currentPassword = currentPassword
        self.nonce = nonce
        self.data = data
    }
    enum CodingKeys: String, CodingKey {
        case email, password, nonce, data
        case currentPassword = "current_password"
    }
}

/// One signed-in device, as `GET /v1/sessions` lists it.
public struct SessionInfo: Codable, Sendable, Equatable {
    public var id: String
    public var userAgent: String?
    public var ip: String?
    public var createdAt: String
    public var refreshedAt: String
    public var current: Bool
    public init(id: String, userAgent: String?, ip: String?, createdAt: String, refreshedAt: String, current: Bool) {
        self.id = id
        self.userAgent = userAgent
        self.ip = ip
        self.createdAt = createdAt
        self.refreshedAt = refreshedAt
        self.current = current
    }
    enum CodingKeys: String, CodingKey {
        case id, ip, current
        case userAgent = "user_agent"
        case createdAt = "created_at"
        case refreshedAt = "refreshed_at"
    }
}

/// `GET /v1/sessions`.
public struct SessionList: Codable, Sendable, Equatable {
    public var sessions: [SessionInfo]
    public init(sessions: [SessionInfo]) { self.sessions = sessions }
}

/// One audit event.
public struct AuditEntry: Codable, Sendable, Equatable {
    public var id: Int64
    public var occurredAt: String
    public var action: String
    public var companyID: String?
    public var ip: String?
    public var userAgent: String?
    public var detail: [String: String]
    public init(
        id: Int64, occurredAt: String, action: String, companyID: String?, ip: String?, userAgent: String?,
        detail: [String: String]
    ) {
        self.id = id
        self.occurredAt = occurredAt
        self.action = action
        self.companyID = companyID
        self.ip = ip
        self.userAgent = userAgent
        self.detail = detail
    }
    enum CodingKeys: String, CodingKey {
        case id, action, ip, detail
        case occurredAt = "occurred_at"
        case companyID = "company_id"
        case userAgent = "user_agent"
    }
}

/// A page of audit events, newest first; `next_before` fetches the next page.
public struct AuditPage: Codable, Sendable, Equatable {
    public var events: [AuditEntry]
    public var nextBefore: Int64?
    public init(events: [AuditEntry], nextBefore: Int64?) {
        self.events = events
        self.nextBefore = nextBefore
    }
    enum CodingKeys: String, CodingKey {
        case events
        case nextBefore = "next_before"
    }
}
