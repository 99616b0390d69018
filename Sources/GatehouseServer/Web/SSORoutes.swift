import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// Single sign-on's router routes: GoTrue's `POST /auth/v1/sso`, which sends the browser to the company's identity
/// provider; the SAML assertion consumer service, where the provider's page posts its answer (HTTP-POST binding, a
/// cross-site form by design: what proves it is the signature, the relay state and the request id it answers); and
/// the metadata identity providers are given. Router routes: the first two answer redirects whose Location is
/// written as it is (the generated server would percent-encode it), the third XML.
struct SSORoutes: Sendable {
    let sso: SSOSignIn
    let access: Access
    let secureCookie: Bool

    /// The ACS form's `SAMLResponse` and `RelayState` (the first of each; any other field is ignored).
    static func answer(_ body: String) -> (samlResponse: String?, relayState: String?) {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = parts.first ?? nil, ["SAMLResponse", "RelayState"].contains(name), fields[name] == nil
            else { continue }
            fields[name] = parts.count == 2 ? parts[1] ?? "" : ""
        }
        return (fields["SAMLResponse"], fields["RelayState"])
    }

    func register(on router: Router<AppRequestContext>) {
        router.post("/auth/v1/sso") { request, context in
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                throw APIError.unsupportedMediaType
            }
            let json = try await request.body.collect(upTo: context.maxUploadSize)
            let body = try PageInput.decode(SSOSignIn.Request.self, String(buffer: json))
            switch try await sso.start(body, client: try access.client(), secureCookie: secureCookie) {
            case .url(let url):
                return try WebAnswer.json(["url": url])
            case .redirect(let location, let cookie):
                var answer = WebAnswer.redirect(LinkRedirect(location: location))
                answer.setCookies(cookie.map { [$0] } ?? [])
                return answer
            }
        }
        router.post("/auth/v1/sso/saml/acs") { request, context in
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true
            else { throw APIError.unsupportedMediaType }
            let form = Self.answer(String(buffer: try await request.body.collect(upTo: context.maxUploadSize)))
            let redirect = await sso.consume(
                samlResponse: form.samlResponse, relayState: form.relayState, client: try access.client())
            return WebAnswer.redirect(redirect)
        }
        router.get("/auth/v1/sso/saml/metadata") { request, _ in
            let download: Bool
            switch request.uri.queryParameters.getAll("download").map({ $0.lowercased() }) {
            case []: download = false
            case ["true"]: download = true
            case ["false"]: download = false
            default: throw PageInput.invalidParameter
            }
            var answer = WebAnswer(
                status: .ok, html: try await sso.serviceProvider.metadata(now: sso.clock.now, download: download),
                headers: [.cacheControl: "public, max-age=600"], contentType: "application/xml")
            if download {
                answer.headers[.contentDisposition] = "attachment; filename=\"metadata.xml\""
            }
            return answer
        }
    }
}
