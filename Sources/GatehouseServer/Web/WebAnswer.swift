import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import NIOCore

/// A page or a redirect, as the page routes answer (`PageRoutes`). A guard that ends a page early (no web session,
/// a cross-site form post) throws it, and the route answers it like a returned one. The passkey script and its
/// requests are answered the same way, with another content type.
struct WebAnswer: Error, ResponseGenerator {
    var status: HTTPResponse.Status
    /// The body: HTML, unless `contentType` says otherwise.
    var html: String?
    var headers: HTTPFields = [:]
    var contentType = "text/html; charset=utf-8"

    static func page(_ html: String, status: HTTPResponse.Status = .ok, cookies: [String] = []) -> WebAnswer {
        var answer = WebAnswer(status: status, html: html)
        answer.setCookies(cookies)
        return answer
    }

    static func redirect(_ location: String, cookies: [String] = []) -> WebAnswer {
        var answer = WebAnswer(status: .seeOther, html: nil, headers: [.location: location])
        answer.setCookies(cookies)
        return answer
    }

    /// An answer to the passkey script's request: `value` as JSON.
    static func json(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, cookies: [String] = []
    ) throws -> WebAnswer {
        let text = String(decoding: try JSONEncoder.sortedKeys.encode(value), as: UTF8.self)
        var answer = WebAnswer(status: status, html: text, contentType: "application/json; charset=utf-8")
        answer.setCookies(cookies)
        return answer
    }

    /// A refusal of the passkey script's request, as the API words it (`{code, message}`), with its headers
    /// (`Retry-After`).
    static func json(_ error: APIError) -> WebAnswer {
        var body = error.details
        body["code"] = .string(error.code)
        body["message"] = .string(error.message)
        var answer = (try? json(body, status: error.status)) ?? WebAnswer(status: error.status, html: nil)
        for field in error.headers where field.name != .contentType { answer.headers.append(field) }
        return answer
    }

    /// The link button's redirect to the app.
    static func redirect(_ link: LinkRedirect) -> WebAnswer {
        WebAnswer(status: .seeOther, html: nil, headers: link.headers)
    }

    mutating func setCookies(_ cookies: [String]) {
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.cacheControl] = "no-store"
        guard let html else { return Response(status: status, headers: headers) }
        headers[.contentType] = contentType
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}

/// The browser's session on the account pages: the access token in one cookie, the refresh token in another (sent
/// only to /account), both HttpOnly and SameSite=Strict, and Secure when the public URL is https. They are session
/// cookies: closing the browser forgets them, and the server-side session ends by its own timeouts.
struct WebSession: Sendable {
    static let accessCookie = "gh_session"
    static let refreshCookie = "gh_refresh"

    let secure: Bool

    func cookies(for session: Schemas.Session) -> [String] {
        [
            cookie(Self.accessCookie, session.accessToken, path: "/"),
            cookie(Self.refreshCookie, session.refreshToken, path: "/account"),
        ]
    }

    var clearing: [String] {
        [
            cookie(Self.accessCookie, "", path: "/", expire: true),
            cookie(Self.refreshCookie, "", path: "/account", expire: true),
        ]
    }

    private func cookie(_ name: String, _ value: String, path: String, expire: Bool = false) -> String {
        var cookie = "\(name)=\(value); Path=\(path); HttpOnly; SameSite=Strict"
        if secure { cookie += "; Secure" }
        if expire { cookie += "; Max-Age=0" }
        return cookie
    }

    /// The value of cookie `name` in the request's `Cookie` headers.
    static func read(_ name: String, from headers: HTTPFields) -> String? {
        for header in headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                    let value = parts[1].trimmingCharacters(in: .whitespaces)
                    return value.isEmpty ? nil : value
                }
            }
        }
        return nil
    }
}
