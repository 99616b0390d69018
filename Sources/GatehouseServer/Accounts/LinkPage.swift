import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The page a mailed link opens, and the redirects its button answers with. Opening the page spends nothing (mail
/// scanners prefetch links); one tap on its button does.
enum LinkPage {
    enum Content {
        case confirm(token: String, type: String, redirectTo: String, action: String)
        case expired
    }

    /// The page. `SecurityHeadersMiddleware` gives every HTML answer a strict content security policy (no script, a
    /// form that may only post to this server) and a same-origin referrer policy.
    static func html(_ content: Content) -> String {
        let title: String
        let body: String
        switch content {
        case .confirm(let token, let type, let redirectTo, let action):
            title = type == "recovery" ? "Reset your password" : type == "signup" ? "Confirm your email" : "Sign in"
            body = """
                <h1>\(Mailer.escape(title))</h1>
                <p>Tap the button to continue in the app.</p>
                <form method="post" action="\(Mailer.escape(action))">
                <input type="hidden" name="token" value="\(Mailer.escape(token))">
                <input type="hidden" name="type" value="\(Mailer.escape(type))">
                <input type="hidden" name="redirect_to" value="\(Mailer.escape(redirectTo))">
                <button type="submit">Continue</button>
                </form>
                <p class="note">This link works once and expires 10 minutes after it was sent.</p>
                """
        case .expired:
            title = "This link has expired"
            body = """
                <h1>\(Mailer.escape(title))</h1>
                <p>The link was already used, or is more than 10 minutes old. Ask the app for a new one.</p>
                """
        }
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="same-origin">
            <title>\(Mailer.escape(title))</title>
            <style>
            :root { color-scheme: light dark; font-family: -apple-system, system-ui, sans-serif; }
            body { max-width: 28rem; margin: 4rem auto; padding: 0 1rem; line-height: 1.5; }
            button { font-size: 1.1rem; padding: .7rem 1.6rem; border-radius: .5rem; border: 0;
                     background: #2563eb; color: #fff; }
            .note { color: GrayText; font-size: .9rem; }
            </style></head><body>
            \(body)
            </body></html>
            """
        return html
    }

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

/// The link button's answer: 303 to the app, with the session in the fragment or PKCE's `code` in the query.
///
/// Thrown, not returned as the generated `.seeOther`: the generated serializer percent-encodes header values as URI
/// components, which would turn the Location's `?`, `#`, `&` and `=` into `%3F`, `%23`, `%26` and `%3D`.
struct LinkRedirect: Error, HTTPResponseError {
    let location: String
    var status: HTTPResponse.Status { .seeOther }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: .seeOther,
            headers: [
                .location: location, .cacheControl: "no-store", HTTPField.Name("Referrer-Policy")!: "no-referrer",
            ])
    }
}
