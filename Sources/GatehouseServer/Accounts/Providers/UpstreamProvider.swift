import AsyncHTTPClient
import Foundation
import GatehouseAPI
import NIOCore
import NIOHTTP1

/// Why the trip through a provider failed after it came back: its own refusal, an answer we could not use, or a
/// user it would not vouch for. `description` goes to the app as `error_description`; it never holds a token.
struct UpstreamFailure: Error, CustomStringConvertible {
    let description: String
}

/// A provider's endpoints for the browser's trip: from its discovery document (OIDC) or its registration (OAuth 2.0).
struct UpstreamEndpoints: Sendable, Equatable {
    var authorization: String
    var token: String
    var userinfo: String?
    /// Whether the token endpoint takes the client's secret in the body (`client_secret_post`) rather than HTTP
    /// Basic (`client_secret_basic`, OAuth's default). GitHub-style OAuth 2.0 providers take it in the body.
    var secretInBody: Bool
}

/// What the token endpoint answered.
struct UpstreamTokens: Sendable {
    let accessToken: String
    let refreshToken: String?
    let idToken: String?
}

/// One custom provider's side of GoTrue's redirect flow: the URL the browser is sent to, the code's exchange at the
/// token endpoint, and the user the answer names: from the verified id token (OIDC), else from the userinfo endpoint
/// with `attribute_mapping` applied (OAuth 2.0, as GitHub).
struct UpstreamProvider: Sendable {
    let settings: CustomProviderSettings
    let clientSecret: String
    let endpoints: UpstreamEndpoints
    /// OIDC providers' id token check (issuer, audiences, keys); nil for OAuth 2.0.
    let verifier: IDTokenVerifier?

    var isOIDC: Bool { verifier != nil }

    /// The scopes asked for: OIDC's `openid` first, the registration's (`email profile` when it names none), and
    /// what the app added, each once.
    func scopes(adding extra: [String]) -> [String] {
        var scopes = isOIDC ? ["openid"] : []
        let registered = settings.scopes.isEmpty && isOIDC ? ["email", "profile"] : settings.scopes
        for scope in registered + extra where !scope.isEmpty && !scopes.contains(scope) { scopes.append(scope) }
        return scopes
    }

    /// The authorization request (RFC 6749 4.1.1): the registration's `authorization_params`, then what the app
    /// passed through, then the parameters the flow sets itself, which nothing else may replace.
    func authorizationURL(
        state: String, redirectURI: String, nonce: String?, challenge: String?, scopes extra: [String],
        parameters: [(String, String)]
    ) -> String {
        var items: [String: String] = [:]
        for (key, value) in settings.authorizationParams {
            switch value {
            case .string(let text): items[key] = text
            case .null: continue
            default: items[key] = (try? String(decoding: JSONEncoder().encode(value), as: UTF8.self)) ?? ""
            }
        }
        for (key, value) in parameters where !CustomProviders.reservedParameters.contains(key) { items[key] = value }
        items["response_type"] = "code"
        items["client_id"] = settings.clientID
        items["redirect_uri"] = redirectURI
        items["state"] = state
        items["scope"] = scopes(adding: extra).joined(separator: " ")
        if let nonce { items["nonce"] = nonce }
        if let challenge {
            items["code_challenge"] = challenge
            items["code_challenge_method"] = "S256"
        }
        var components = URLComponents(string: endpoints.authorization) ?? URLComponents()
        components.queryItems =
            (components.queryItems ?? [])
            + items.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return components.string ?? endpoints.authorization
    }

    /// Exchanges the authorization code at the token endpoint (RFC 6749 4.1.3), with the PKCE verifier when the
    /// request carried a challenge.
    func exchange(code: String, redirectURI: String, verifier: String?) async throws -> UpstreamTokens {
        var form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI)]
        if let verifier { form.append(("code_verifier", verifier)) }
        var request = HTTPClientRequest(url: endpoints.token)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        // GitHub answers form-encoded unless asked for JSON.
        request.headers.add(name: "Accept", value: "application/json")
        if endpoints.secretInBody {
            form += [("client_id", settings.clientID), ("client_secret", clientSecret)]
        } else {
            let pair = Self.formEncode(settings.clientID) + ":" + Self.formEncode(clientSecret)
            request.headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
        }
        request.body = .bytes(ByteBuffer(string: Self.form(form)))
        let object = try await Self.json(request, what: "token endpoint")
        if let error = object["error"] as? String {
            throw UpstreamFailure(description: "the provider refused the code: \(Self.clean(error))")
        }
        guard let accessToken = object["access_token"] as? String, !accessToken.isEmpty else {
            throw UpstreamFailure(description: "the provider's token endpoint answered no access_token")
        }
        return UpstreamTokens(
            accessToken: accessToken, refreshToken: object["refresh_token"] as? String,
            idToken: object["id_token"] as? String)
    }

    /// The user the tokens name. An OIDC provider's id token must be there and verify (issuer, audience, nonce);
    /// its userinfo fills in an address the token left out. An OAuth 2.0 provider's userinfo is read through
    /// `attribute_mapping`.
    func identity(_ tokens: UpstreamTokens, nonce: String?) async throws -> ExternalIdentity {
        if let verifier {
            guard let idToken = tokens.idToken else {
                throw UpstreamFailure(description: "the OpenID provider answered no id_token")
            }
            let identity: ExternalIdentity
            do {
                identity = try await verifier.verify(idToken, nonce: nonce)
            } catch {
                throw UpstreamFailure(description: "the provider's id_token was refused: \(error.description)")
            }
            guard identity.email == nil, endpoints.userinfo != nil else { return identity }
            let info = try await userinfo(tokens.accessToken)
            guard info.subject == identity.subject else { return identity }
            return ExternalIdentity(
                provider: identity.provider, subject: identity.subject, email: info.email,
                emailVerified: info.emailVerified, isPrivateEmail: false, expiresAt: identity.expiresAt,
                profile: identity.profile)
        }
        return try await userinfo(tokens.accessToken)
    }

    /// The userinfo endpoint's claims, mapped.
    private func userinfo(_ accessToken: String) async throws -> ExternalIdentity {
        guard let url = endpoints.userinfo else {
            throw UpstreamFailure(description: "the provider has no userinfo endpoint")
        }
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Gatehouse")
        let object = try await Self.json(request, what: "userinfo endpoint")
        let data = try JSONSerialization.data(withJSONObject: object)
        let claims = try JSONDecoder().decode([String: JSONValue].self, from: data)
        return try Self.identity(
            claims: Self.mapped(claims, by: settings.attributeMapping), provider: settings.identifier,
            expiresAt: Date().addingTimeInterval(300))
    }

    /// GoTrue's `attribute_mapping`: each target claim takes the named source claim when the value is a string (and
    /// that claim exists), or the value itself otherwise (`"email_verified": true`).
    static func mapped(_ claims: [String: JSONValue], by mapping: [String: JSONValue]) -> [String: JSONValue] {
        var mapped = claims
        for (target, source) in mapping {
            if case .string(let name) = source {
                if let value = claims[name] { mapped[target] = value }
            } else {
                mapped[target] = source
            }
        }
        return mapped
    }

    /// The identity userinfo claims describe: `sub` (a number is taken as its digits, as GitHub's `id`), `email`,
    /// and `email_verified` as a boolean or the string "true".
    static func identity(claims: [String: JSONValue], provider: String, expiresAt: Date) throws -> ExternalIdentity {
        let subject: String? =
            switch claims["sub"] ?? claims["id"] {
            case .string(let text): text
            case .int(let number): String(number)
            default: nil
            }
        guard let subject, !subject.isEmpty else {
            throw UpstreamFailure(
                description: "the provider's userinfo carries no sub (map one with attribute_mapping)")
        }
        var email: String? = nil
        if case .string(let text) = claims["email"], !text.isEmpty { email = text }
        let verified: Bool =
            switch claims["email_verified"] {
            case .bool(let flag): flag
            case .string(let text): text.lowercased() == "true"
            default: false
            }
        var profile: [String: JSONValue] = [:]
        for key in ["name", "given_name", "family_name", "picture"] {
            if case .string(let text) = claims[key], !text.isEmpty { profile[key] = .string(text) }
        }
        return ExternalIdentity(
            provider: provider, subject: subject, email: email, emailVerified: verified, isPrivateEmail: false,
            expiresAt: expiresAt, profile: profile)
    }

    /// Sends `request` and reads a JSON object of at most 1 MiB, within 10 seconds.
    private static func json(_ request: HTTPClientRequest, what: String) async throws -> [String: Any] {
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw UpstreamFailure(description: "the provider's \(what) could not be reached")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any]
        guard let object else {
            throw UpstreamFailure(description: "the provider's \(what) answered \(response.status.code), not JSON")
        }
        guard (200..<300).contains(response.status.code) || object["error"] != nil else {
            throw UpstreamFailure(description: "the provider's \(what) answered \(response.status.code)")
        }
        return object
    }

    /// `application/x-www-form-urlencoded` (RFC 6749 appendix B, which Basic credentials use too).
    static func formEncode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return (value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)
    }

    /// A form's body, its pairs in the order given (Apple's calls and the token endpoint's).
    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { formEncode($0.0) + "=" + formEncode($0.1) }.joined(separator: "&")
    }

    /// A provider's error code, kept only when it is one OAuth defines a shape for: letters and underscores.
    static func clean(_ code: String) -> String {
        let kept = code.prefix(64).filter { $0.isLetter || $0 == "_" }
        return kept.isEmpty ? "server_error" : String(kept)
    }
}
