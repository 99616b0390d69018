import Crypto
import Foundation
import GatehouseAPI
import JWTKit

/// An OpenID Connect id token (OpenID Connect Core §2), signed ES256 by the keys of the JWKS. Optional claims are
/// left out, not null: which appear depends on the session's scopes (`UserClaims`).
struct OAuthIDTokenClaims: JWTPayload, Equatable {
    var iss: String
    var sub: String
    /// The client it was issued to (also `azp`: one audience, the authorized party).
    var aud: String
    var exp: Int64
    var iat: Int64
    var authTime: Int64?
    var nonce: String?
    /// `aal1` or `aal2`, the level the session was at when the user approved.
    var acr: String?
    /// The method names (`password`, `totp`, `passkey`, …): OIDC's `amr` is a list of strings, not GoTrue's objects.
    var amr: [String]?
    /// The session, which RP-initiated logout names back in `id_token_hint`.
    var sid: String?
    var azp: String?
    var atHash: String?
    var email: String?
    var emailVerified: Bool?
    var name: String?
    var picture: String?
    var preferredUsername: String?
    var updatedAt: Int64?
    var phoneNumber: String?
    var phoneNumberVerified: Bool?
    var companyID: String?
    var companyRole: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, acr, amr, sid, azp, email, name, picture
        case authTime = "auth_time"
        case atHash = "at_hash"
        case emailVerified = "email_verified"
        case preferredUsername = "preferred_username"
        case updatedAt = "updated_at"
        case phoneNumber = "phone_number"
        case phoneNumberVerified = "phone_number_verified"
        case companyID = "company_id"
        case companyRole = "company_role"
    }

    /// Time and audience are the reader's to check: RP-initiated logout takes an expired token as its hint.
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// `at_hash` (OpenID Connect Core §3.1.3.6): the left half of the SHA-256 of the access token, base64url.
    static func accessTokenHash(_ accessToken: String) -> String {
        let digest = Array(SHA256.hash(data: Data(accessToken.utf8)))
        return Secrets.base64URL(Data(digest.prefix(digest.count / 2)))
    }

    /// Puts the user's claims the scopes allow into the token (the same as userinfo answers, in OIDC's names).
    mutating func add(_ claims: UserClaims) {
        email = claims.email
        emailVerified = claims.emailVerified
        name = claims.name
        picture = claims.picture
        preferredUsername = claims.preferredUsername
        updatedAt = claims.updatedAt
        phoneNumber = claims.phone
        phoneNumberVerified = claims.phoneVerified
        companyID = claims.companyID
        companyRole = claims.companyRole
    }
}

/// What a client may know of its user under the session's scopes, pure: `email` gives the address and whether it is
/// confirmed; `profile` the name, picture, username and last change (GoTrue's reading of `user_metadata`); `phone`
/// the number; `company` the company chosen during the authorization and the member's role.
struct UserClaims: Sendable, Equatable {
    var email: String?
    var emailVerified: Bool?
    var name: String?
    var picture: String?
    var preferredUsername: String?
    var updatedAt: Int64?
    var userMetadata: JSONFields?
    var phone: String?
    var phoneVerified: Bool?
    var companyID: String?
    var companyRole: String?

    init(user: Schemas.User, scope: [String], membership: Membership?) {
        let metadata = user.userMetadata
        func text(_ keys: String...) -> String? {
            keys.lazy.compactMap { metadata[$0]?.stringValue }.first { !$0.isEmpty }
        }
        if scope.contains(OAuthScopes.email), !user.email.isEmpty {
            email = user.email
            emailVerified = user.emailConfirmedAt != nil
        }
        if scope.contains(OAuthScopes.profile) {
            // The address stands in for a missing name only where the client may know the address.
            name = text("name", "full_name") ?? (user.email.isEmpty || email == nil ? nil : user.email)
            picture = text("picture", "avatar_url")
            preferredUsername = text("preferred_username", "username")
            updatedAt = Int64(user.updatedAt.timeIntervalSince1970)
            userMetadata = metadata
        }
        // No phone sign-in here: a number only when one is on the account, never shown as verified.
        if scope.contains(OAuthScopes.phone), !user.phone.isEmpty {
            phone = user.phone
            phoneVerified = false
        }
        if scope.contains(OAuthScopes.company), let membership {
            companyID = membership.companyID
            companyRole = membership.role.rawValue
        }
    }

    /// Userinfo's answer (`/oauth/userinfo`): `sub` and the claims, in GoTrue's names (`phone`, `phone_verified`,
    /// `user_metadata`) and OpenID Connect's (`phone_number`, `phone_number_verified`) both.
    func userinfo(sub: String) -> JSONFields {
        var fields: JSONFields = ["sub": .string(sub)]
        func put(_ key: String, _ value: String?) { if let value { fields[key] = .string(value) } }
        func put(_ key: String, _ value: Bool?) { if let value { fields[key] = .bool(value) } }
        put("email", email)
        put("email_verified", emailVerified)
        put("name", name)
        put("picture", picture)
        put("preferred_username", preferredUsername)
        if let updatedAt { fields["updated_at"] = .int(updatedAt) }
        if let userMetadata { fields["user_metadata"] = .object(userMetadata) }
        put("phone", phone)
        put("phone_verified", phoneVerified)
        put("phone_number", phone)
        put("phone_number_verified", phoneVerified)
        put("company_id", companyID)
        put("company_role", companyRole)
        return fields
    }
}

/// The token of the client credentials grant: the client itself (`sub` = `client_id`), no user and no session. Its
/// audience is the issuer (the provider's own resource), never `authenticated`, so the account API refuses it.
struct ClientTokenClaims: JWTPayload, Equatable {
    var iss: String
    var sub: String
    var aud: String
    var exp: Int64
    var iat: Int64
    var nbf: Int64
    var jti: String
    var clientID: String
    var scope: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nbf, jti, scope
        case clientID = "client_id"
    }

    /// Time and issuer are checked by introspection against the injected clock.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
