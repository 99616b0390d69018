import Foundation

/// How a client proved who it is at the token, revocation and introspection endpoints (RFC 6749 §2.3): the
/// credentials as the request carried them, before any is checked.
struct OAuthClientCredentials: Sendable, Equatable {
    enum Method: String, Sendable {
        /// `Authorization: Basic base64(id:secret)`, each part form-encoded first (RFC 6749 §2.3.1).
        case basic = "client_secret_basic"
        /// `client_id` and `client_secret` in the body.
        case post = "client_secret_post"
        /// `client_id` alone: a public client.
        case none
    }

    let clientID: String
    let secret: String?
    let method: Method

    /// The credentials of a request: its Basic header, else its body's `client_id` (and `client_secret`). Nil when it
    /// names no client; `malformed` for a Basic header that is not `id:secret` in base64, or one that disagrees with the
    /// body's `client_id`, or a secret without an id.
    static func read(authorization: String?, form: [String: String]) -> Result<Self?, OAuthError> {
        if let authorization, authorization.lowercased().hasPrefix("basic ") {
            let encoded = authorization.dropFirst("basic ".count).trimmingCharacters(in: .whitespaces)
            guard let data = Data(base64Encoded: encoded), let text = String(data: data, encoding: .utf8),
                let colon = text.firstIndex(of: ":")
            else { return .failure(.invalidClient("Client authentication failed: malformed Basic credentials")) }
            let id = String(text[..<colon]).removingPercentEncoding ?? ""
            let secret = String(text[text.index(after: colon)...]).removingPercentEncoding ?? ""
            if let named = form["client_id"], named.lowercased() != id.lowercased() {
                return .failure(.invalidRequest("client_id differs from the Basic credentials"))
            }
            guard !id.isEmpty else { return .failure(.invalidClient("Client authentication failed")) }
            return .success(Self(clientID: id, secret: secret, method: .basic))
        }
        guard let id = form["client_id"], !id.isEmpty else {
            if form["client_secret"] != nil { return .failure(.invalidRequest("client_secret without client_id")) }
            return .success(nil)
        }
        if let secret = form["client_secret"] { return .success(Self(clientID: id, secret: secret, method: .post)) }
        return .success(Self(clientID: id, secret: nil, method: .none))
    }

    /// The rule, pure: whether `credentials` authenticate `client` (nil: no such client). A public client sends no
    /// secret (a secret is refused, not ignored); a confidential client sends its secret by its registered method.
    static func check(_ credentials: Self, against client: OAuthClient?) -> OAuthError? {
        guard let client else { return .invalidClient("Client authentication failed") }
        switch client.type {
        case .public:
            guard credentials.secret == nil else {
                return .invalidClient("Public clients must not send a client_secret")
            }
            return nil
        case .confidential:
            guard let secret = credentials.secret, let hash = client.secretHash,
                Secrets.constantTimeEquals(Secrets.digest(secret), hash)
            else { return .invalidClient("Client authentication failed") }
            guard credentials.method.rawValue == client.authMethod else {
                return .invalidClient("Client authentication failed: use \(client.authMethod)")
            }
            return nil
        }
    }
}

/// An error as the OAuth 2.0 RFCs name them (RFC 6749 §5.2, RFC 7009, RFC 7662, RFC 8628 §3.5): the JSON body
/// `{"error", "error_description"}`, and at the authorization endpoint the same names on the redirect.
struct OAuthError: Error, Sendable, Equatable {
    let error: String
    let description: String
    /// 400, except 401 for a client that failed to authenticate (RFC 6749 §5.2).
    let status: Int

    init(_ error: String, _ description: String, status: Int = 400) {
        self.error = error
        self.description = description
        self.status = status
    }

    static func invalidRequest(_ description: String) -> Self { Self("invalid_request", description) }
    static func invalidClient(_ description: String) -> Self { Self("invalid_client", description, status: 401) }
    static func invalidGrant(_ description: String) -> Self { Self("invalid_grant", description) }
    static func unauthorizedClient(_ description: String) -> Self { Self("unauthorized_client", description) }
    static func unsupportedGrantType(_ description: String) -> Self { Self("unsupported_grant_type", description) }
    static func invalidScope(_ description: String) -> Self { Self("invalid_scope", description) }
    static func accessDenied(_ description: String) -> Self { Self("access_denied", description) }
    static func serverError(_ description: String) -> Self { Self("server_error", description, status: 500) }
}
