import Foundation
import HTTPTypes
import Hummingbird

/// GoTrue's redirect flow on the router (`OAuthFlow`): `GET /auth/v1/authorize`, its continue URL, the provider's
/// return at `/auth/v1/callback`, and linking's `GET /auth/v1/user/identities/authorize`. Router routes rather than
/// generated operations: they answer redirects whose Location is written as it is, and set the browser's cookie.
/// `/authorize` and linking refuse in the API's JSON; the continue URL, opened in a browser, with a page; the
/// callback never refuses, it redirects with the error.
struct ProviderRedirectRoutes: Sendable {
    let flow: OAuthFlow
    let access: Access
    let publicURL: String
    /// The page that hands a link started on the account page back to it.
    let kit: PageKit

    /// Parameters the flow reads itself; every other one goes on to the provider, as GoTrue passes `queryParams`.
    static let own: Set<String> = [
        "provider", "redirect_to", "scopes", "code_challenge", "code_challenge_method", "skip_http_redirect",
    ]

    var secureCookie: Bool { publicURL.lowercased().hasPrefix("https://") }

    func register(on router: Router<AppRequestContext>) {
        router.get("/auth/v1/authorize") { request, _ in
            let start = try Self.request(Self.pairs(request))
            return try await answer(
                flow.start(start, browser: browser(request), client: access.client(), secureCookie: secureCookie))
        }
        router.get("/auth/v1/user/identities/authorize") { request, _ in
            let caller = try await access.account()
            let start = try Self.request(Self.pairs(request))
            return try await answer(
                flow.start(
                    start, linking: caller.accountID, browser: browser(request), client: caller.client,
                    secureCookie: secureCookie))
        }
        router.get("/auth/v1/authorize/continue") { request, _ in
            guard let token = request.uri.queryParameters["flow"].map(String.init), !token.isEmpty else {
                throw PageInput.invalidParameter
            }
            return try await answer(flow.resume(flow: token, browser: browser(request), secureCookie: secureCookie))
        }
        router.get("/auth/v1/callback") { request, _ in
            var query: [String: String] = [:]
            for (key, value) in Self.pairs(request) where query[key] == nil { query[key] = value }
            switch await flow.callback(query: query, browser: browser(request), client: try access.client()) {
            case .app(let redirect):
                return WebAnswer(status: .found, html: nil, headers: redirect.headers)
            case .accountPage(let notice):
                // Back through a page of ours: the browser came from the provider, and its SameSite=Strict session
                // cookies go only with a navigation this site starts.
                return kit.message(
                    page: "returning", titleKey: "returning_title", keys: ["returning"],
                    language: kit.language(account: nil), accountLink: true, refresh: "/account?notice=\(notice)")
            }
        }
    }

    /// The query's parameters, in order.
    static func pairs(_ request: Request) -> [(String, String)] {
        request.uri.queryParameters.map { (String($0.key), String($0.value)) }
    }

    /// The app's request, from `/authorize`'s query (a parameter given twice counts once, the first).
    static func request(_ pairs: [(String, String)]) throws -> OAuthFlow.Request {
        var query: [String: String] = [:]
        var passed: [(String, String)] = []
        for (key, value) in pairs where query[key] == nil {
            query[key] = value
            if !own.contains(key) { passed.append((key, value)) }
        }
        guard let provider = query["provider"], !provider.isEmpty else {
            throw APIError.validation("Unsupported provider: missing provider")
        }
        var request = OAuthFlow.Request(provider: provider)
        request.redirectTo = query["redirect_to"]
        let scopes = query["scopes"] ?? ""
        request.scopes = scopes.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        request.codeChallenge = query["code_challenge"].flatMap { $0.isEmpty ? nil : $0 }
        request.codeChallengeMethod = query["code_challenge_method"].flatMap { $0.isEmpty ? nil : $0 }
        request.skipHTTPRedirect = query["skip_http_redirect"]?.lowercased() == "true"
        request.parameters = passed
        return request
    }

    private func browser(_ request: Request) -> String? {
        WebSession.read(OAuthFlow.browserCookie, from: request.headers)
    }

    private func answer(_ departure: OAuthFlow.Departure) throws -> WebAnswer {
        switch departure {
        case .redirect(let location, let cookie):
            var answer = WebAnswer(
                status: .found, html: nil,
                headers: [.location: location, HTTPField.Name("Referrer-Policy")!: "no-referrer"])
            answer.setCookies([cookie])
            return answer
        case .url(let url):
            return try .json(["url": url])
        }
    }
}
