import Foundation
import GatehouseJSON
import HTTPTypes
import Hummingbird

/// The provider's token side on the router (`OAuthTokens`): the token endpoint, device authorization, userinfo,
/// revocation, introspection, RP-initiated logout and discovery. Router routes rather than generated operations:
/// their bodies are forms (RFC 6749 §4.1.3) or JSON (GoTrue reads both), and their refusals are the RFCs'
/// `{"error", "error_description"}` with the headers the RFCs ask for, not the API's envelope. While the provider is
/// off each answers 404 oauth_server_disabled in the API's words, but `/.well-known/openid-configuration`.
struct OAuthProviderRoutes: Sendable {
    let tokens: OAuthTokens
    let access: Access
    let discovery: OAuthDiscovery

    init(_ api: API) {
        tokens = OAuthTokens(
            oauth: api.oauth, clients: api.oauthClients, sessions: api.access.sessions, users: api.users,
            store: api.access.store, clock: api.oauth.clock, trail: api.access.trail)
        access = api.access
        discovery = OAuthDiscovery(issuer: api.access.sessions.issuer, settings: api.oauth.settings.oauthServer)
    }

    func register(on router: Router<AppRequestContext>) {
        router.post("/auth/v1/oauth/token") { request, context in
            try await reading(request, context) { form in
                Self.answer(
                    try await tokens.token(
                        form: form, authorization: request.headers[.authorization], from: access.client()))
            }
        }
        router.post("/auth/v1/oauth/device_authorization") { request, context in
            try await reading(request, context) { form in
                Self.answer(
                    try await tokens.deviceAuthorization(form: form, authorization: request.headers[.authorization]))
            }
        }
        router.get("/auth/v1/oauth/userinfo") { request, _ in try await userinfo(request) }
        router.post("/auth/v1/oauth/userinfo") { request, _ in try await userinfo(request) }
        router.post("/auth/v1/oauth/revoke") { request, context in
            try await reading(request, context) { form in
                let refusal = try await tokens.revoke(
                    form: form, authorization: request.headers[.authorization], from: access.client())
                if let refusal { return Self.refuse(refusal) }
                return Self.noStore(WebAnswer(status: .ok, html: nil))
            }
        }
        router.post("/auth/v1/oauth/introspect") { request, context in
            try await reading(request, context) { form in
                Self.answer(try await tokens.introspect(form: form, authorization: request.headers[.authorization]))
            }
        }
        router.get("/auth/v1/oauth/logout") { request, _ in
            var query: [String: String] = [:]
            for (key, value) in request.uri.queryParameters where query[String(key)] == nil {
                query[String(key)] = String(value)
            }
            switch try await tokens.logout(query: query, from: access.client()) {
            case .failure(let refusal): return Self.refuse(refusal)
            case .success(.redirect(let location)):
                return WebAnswer(status: .found, html: nil, headers: [.location: location])
            case .success(.signedOut):
                return WebAnswer(status: .ok, html: "Signed out.\n", contentType: "text/plain; charset=utf-8")
            }
        }
        router.get("/auth/v1/.well-known/openid-configuration") { _, _ in
            try WebAnswer.json(discovery.document())
        }
        router.get("/auth/v1/.well-known/oauth-authorization-server") { _, _ in
            try tokens.oauth.checkEnabled()
            return try WebAnswer.json(discovery.document())
        }
    }

    private func userinfo(_ request: Request) async throws -> WebAnswer {
        try tokens.oauth.checkEnabled()
        let header = request.headers[.authorization]
        let bearer = header.flatMap {
            $0.lowercased().hasPrefix("bearer ")
                ? String(String($0.dropFirst("bearer ".count)).trimmingHTTPWhitespace) : nil
        }
        switch try await tokens.userinfo(bearer: bearer) {
        case .success(let claims): return Self.noStore(try WebAnswer.json(claims))
        case .failure(let refusal):
            var answer = try WebAnswer.json(
                ["error": "invalid_token", "error_description": refusal.description], status: .unauthorized)
            answer.headers[HTTPField.Name.wwwAuthenticate] =
                bearer == nil
                ? "Bearer realm=\"gatehouse\""
                : "Bearer realm=\"gatehouse\", error=\"invalid_token\", error_description=\"\(refusal.description)\""
            return answer
        }
    }

    /// Reads the body's parameters (`form`) after checking the provider is on, and answers what `body` makes of them;
    /// a body that cannot be read is an RFC 6749 `invalid_request`.
    private func reading(
        _ request: Request, _ context: AppRequestContext, _ body: ([String: String]) async throws -> WebAnswer
    ) async throws -> WebAnswer {
        try tokens.oauth.checkEnabled()
        let form: [String: String]
        do {
            form = try await Self.form(request, context)
        } catch let unreadable as FormRefusal {
            return Self.refuse(unreadable.refusal)
        }
        return try await body(form)
    }

    /// A success as JSON, never cached (RFC 6749 §5.1).
    private static func answer(_ result: Result<some Encodable, OAuthError>) -> WebAnswer {
        switch result {
        case .failure(let refusal): return Self.refuse(refusal)
        case .success(let value):
            guard let answer = try? WebAnswer.json(value) else { return Self.refuse(.serverError("Could not answer")) }
            return noStore(answer)
        }
    }

    /// An RFC 6749 §5.2 error; a client that failed to authenticate is asked for Basic credentials.
    static func refuse(_ refusal: OAuthError) -> WebAnswer {
        var answer =
            (try? WebAnswer.json(
                ["error": refusal.error, "error_description": refusal.description],
                status: HTTPResponse.Status(code: refusal.status)))
            ?? WebAnswer(status: HTTPResponse.Status(code: refusal.status), html: nil)
        if refusal.status == 401 { answer.headers[.wwwAuthenticate] = "Basic realm=\"gatehouse\"" }
        return noStore(answer)
    }

    static let pragma = HTTPField.Name("Pragma")!

    private static func noStore(_ answer: WebAnswer) -> WebAnswer {
        var answer = answer
        answer.headers[Self.pragma] = "no-cache"
        return answer
    }

    /// The body's parameters: a form (`application/x-www-form-urlencoded`), or JSON whose values are strings (as
    /// GoTrue reads either). A parameter given twice is refused (RFC 6749 §3.2), as is any other body.
    static func form(_ request: Request, _ context: AppRequestContext) async throws -> [String: String] {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let body = String(buffer: try await request.body.collect(upTo: context.maxUploadSize))
        if type.hasPrefix("application/json") {
            guard let fields = try? JSONDecoder().decode(JSONFields.self, from: Data(body.utf8)) else {
                throw FormRefusal(.invalidRequest("Invalid JSON body"))
            }
            return fields.compactMapValues { value in
                switch value {
                case .string(let text): text
                case .int(let number): String(number)
                case .bool(let flag): String(flag)
                default: nil
                }
            }
        }
        guard type.hasPrefix("application/x-www-form-urlencoded") || body.isEmpty else {
            throw FormRefusal(.invalidRequest("The body must be application/x-www-form-urlencoded"))
        }
        var form: [String: String] = [:]
        for pair in body.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? {
                part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = decode(parts[0]), let value = parts.count > 1 ? decode(parts[1]) : "" else {
                throw FormRefusal(.invalidRequest("The form is not percent-encoded"))
            }
            guard form[name] == nil else { throw FormRefusal(.invalidRequest("\(name.prefix(64)) is given twice")) }
            form[name] = value
        }
        return form
    }
}

/// A body the provider's endpoints could not read, answered as an RFC 6749 error.
struct FormRefusal: Error {
    let refusal: OAuthError

    init(_ refusal: OAuthError) { self.refusal = refusal }
}
