import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import NIOCore

/// The redirects the mailed link's page answers with, and the check that a form post came from this server's own
/// page. The page itself is `LinkPages.linkLanding`.
enum LinkPage {
    /// 303 to `target` with `fragment` (the implicit flow's tokens) or `query` items added (PKCE's `code`); the
    /// target's own query and fragment are kept.
    static func redirect(_ target: String, fragment: [(String, String)] = [], query: [(String, String)] = [])
        -> LinkRedirect
    {
        var components = URLComponents(string: target) ?? URLComponents()
        if !query.isEmpty {
            let names = Set(query.map(\.0))
            components.queryItems =
                (components.queryItems ?? []).filter { !names.contains($0.name) }
                + query.map { URLQueryItem(name: $0.0, value: $0.1) }
        }
        var location = components.string ?? target
        if !fragment.isEmpty {
            var encoded = URLComponents()
            encoded.queryItems = fragment.map { URLQueryItem(name: $0.0, value: $0.1) }
            if let hash = location.firstIndex(of: "#") { location = String(location[..<hash]) }
            location += "#" + (encoded.percentEncodedQuery ?? "")
        }
        return LinkRedirect(location: location)
    }

    /// The implicit flow's session in a redirect's fragment, as GoTrue writes it (a link's, a provider's, a single
    /// sign-on's); the caller adds what its flow carries besides.
    static func sessionFragment(_ session: Schemas.Session) -> [(String, String)] {
        [
            ("access_token", session.accessToken), ("expires_at", String(session.expiresAt)),
            ("expires_in", String(session.expiresIn)), ("refresh_token", session.refreshToken),
            ("token_type", "bearer"),
        ]
    }

    /// The OAuth `error` a refusal redirects with, from its status (RFC 6749 4.1.2.1's names).
    static func oauthError(_ error: APIError) -> String {
        error.status == .forbidden ? "access_denied" : error.status.code >= 500 ? "server_error" : "invalid_request"
    }

    /// Whether a form post came from this server's own page. A browser says so in `Sec-Fetch-Site: same-origin`, or
    /// names the page's origin in `Origin`; a cross-site post says `cross-site` or names another origin (or `null`,
    /// from a sandboxed or no-referrer page). A request with neither header is not a browser's cross-site post.
    static func isSameOrigin(_ headers: HTTPFields, publicURL: String) -> Bool {
        if let site = headers[HTTPField.Name("Sec-Fetch-Site")!] {
            return site == "same-origin" || site == "none"
        }
        guard let origin = headers[HTTPField.Name("Origin")!] else { return true }
        guard let own = URLComponents(string: publicURL), let given = URLComponents(string: origin), given.host != nil
        else { return false }
        return own.scheme?.lowercased() == given.scheme?.lowercased()
            && own.host?.lowercased() == given.host?.lowercased()
            && own.port == given.port
    }
}

/// The link button's answer: 303 to the app, with the session in the fragment or PKCE's `code` in the query. The
/// Location is written as it is (a generated operation's serializer would percent-encode its `?`, `#`, `&` and `=`).
struct LinkRedirect: Sendable {
    let location: String

    var headers: HTTPFields {
        [.location: location, .cacheControl: "no-store", HTTPField.Name("Referrer-Policy")!: "no-referrer"]
    }
}
