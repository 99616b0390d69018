import Foundation
import GatehouseJSON

/// The provider's metadata (OpenID Connect Discovery 1.0, RFC 8414), pure: every endpoint under the issuer
/// (`<public URL>/auth/v1`), what it supports, and the methods of what GoTrue has no wire format for.
/// `/.well-known/openid-configuration` always answers: while the provider is off, only what an access token's reader
/// needs (the issuer, its keys and their algorithm).
struct OAuthDiscovery: Sendable {
    let issuer: String
    let settings: OAuthServerSettings

    static let grantTypes = OAuthGrantType.allCases.map(\.rawValue)
    static let clientAuthMethods = ["client_secret_basic", "client_secret_post", "none"]
    static let claims = [
        "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "acr", "amr", "sid", "azp", "at_hash", "email",
        "email_verified", "name", "picture", "preferred_username", "updated_at", "phone_number",
        "phone_number_verified", "company_id", "company_role",
    ]

    /// The document, whole when the provider is on.
    func document() -> JSONFields {
        var fields: JSONFields = [
            "issuer": .string(issuer),
            "jwks_uri": .string(issuer + "/.well-known/jwks.json"),
            "id_token_signing_alg_values_supported": Self.strings(["ES256"]),
        ]
        guard settings.enabled else { return fields }
        let endpoints = [
            "authorization_endpoint": "/oauth/authorize", "token_endpoint": "/oauth/token",
            "userinfo_endpoint": "/oauth/userinfo", "revocation_endpoint": "/oauth/revoke",
            "introspection_endpoint": "/oauth/introspect",
            "device_authorization_endpoint": "/oauth/device_authorization",
            "end_session_endpoint": "/oauth/logout",
        ]
        for (key, path) in endpoints { fields[key] = .string(issuer + path) }
        if settings.allowDynamicRegistration {
            fields["registration_endpoint"] = .string(issuer + "/oauth/clients/register")
        }
        fields["scopes_supported"] = Self.strings(OAuthScopes.supported)
        fields["response_types_supported"] = Self.strings(["code"])
        fields["response_modes_supported"] = Self.strings(["query"])
        fields["grant_types_supported"] = Self.strings(Self.grantTypes)
        fields["subject_types_supported"] = Self.strings(["public"])
        fields["token_endpoint_auth_methods_supported"] = Self.strings(Self.clientAuthMethods)
        fields["revocation_endpoint_auth_methods_supported"] = Self.strings(Self.clientAuthMethods)
        // Introspection is for confidential clients only.
        fields["introspection_endpoint_auth_methods_supported"] = Self.strings(
            ["client_secret_basic", "client_secret_post"])
        fields["code_challenge_methods_supported"] = Self.strings(["S256"])
        fields["claims_supported"] = Self.strings(Self.claims)
        fields["acr_values_supported"] = Self.strings(["aal1", "aal2"])
        fields["prompt_values_supported"] = Self.strings(AuthorizeRequest.prompts.sorted())
        fields["authorization_response_iss_parameter_supported"] = .bool(true)
        fields["claims_parameter_supported"] = .bool(false)
        fields["request_parameter_supported"] = .bool(false)
        fields["request_uri_parameter_supported"] = .bool(false)
        return fields
    }

    private static func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
}
