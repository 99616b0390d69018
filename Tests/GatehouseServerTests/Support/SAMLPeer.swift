import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A SAML 2.0 identity provider for the SSO tests: `Tests/saml/idp.py` (pysaml2, signing through Debian's xmlsec1) on
/// a loopback port. The test registers our service provider's metadata with it, says what its next answer looks
/// like (a mode: signed, encrypted, or one of the classic attacks), and has it answer an AuthnRequest.
final class SAMLPeer {
    private let peer: PythonPeer

    var baseURL: String { "http://127.0.0.1:\(peer.port)" }
    /// The IdP's entity id.
    var entityID: String { baseURL + "/metadata" }

    private init(peer: PythonPeer) { self.peer = peer }

    static func start() async throws -> SAMLPeer {
        SAMLPeer(
            peer: try await PythonPeer.start(
                PythonPeer.script("saml/idp.py"),
                failure:
                    "the SAML identity provider did not start (pysaml2 from scripts/requirements-test.txt, and "
                    + "Debian's xmlsec1)"))
    }

    /// The IdP's metadata XML.
    func metadata() async throws -> String { try await send(.GET, "/metadata").text }

    /// Registers a service provider by its metadata.
    func register(serviceProvider metadata: String) async throws {
        let reply = try await send(.POST, "/sp", body: Data(metadata.utf8))
        guard reply.status == 204 else { throw PythonPeer.PeerError("the IdP refused our metadata: \(reply.text)") }
    }

    /// The shape of the next answer: `mode`, `name_id`, `attributes`, … (see Tests/saml/idp.py).
    func next(_ shape: [String: Any]) async throws {
        _ = try await send(.POST, "/next", body: try JSONSerialization.data(withJSONObject: shape))
    }

    /// What the IdP's page would post to the ACS for the AuthnRequest in `url` (the HTTP-Redirect binding).
    struct Answer: Sendable {
        let acsURL: String
        let samlResponse: String
        let relayState: String?
    }

    func answer(_ url: String) async throws -> Answer {
        guard url.hasPrefix(baseURL) else { throw PythonPeer.PeerError("not this IdP's URL: \(url)") }
        return try await answer(path: String(url.dropFirst(baseURL.count)))
    }

    /// An unsolicited answer (IdP-initiated) for the service provider `entityID`.
    func initiate(serviceProvider entityID: String, relayState: String? = nil) async throws -> Answer {
        var components = URLComponents()
        components.path = "/sso/initiate"
        components.queryItems = [URLQueryItem(name: "sp", value: entityID)]
        if let relayState { components.queryItems?.append(URLQueryItem(name: "RelayState", value: relayState)) }
        return try await answer(path: components.string ?? "")
    }

    private func answer(path: String) async throws -> Answer {
        let reply = try await send(.GET, path, accept: "application/json")
        guard reply.status == 200,
            let object = try JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [String: Any],
            let acs = object["acs_url"] as? String, let response = object["SAMLResponse"] as? String
        else { throw PythonPeer.PeerError("the IdP answered \(reply.status): \(reply.text)") }
        return Answer(acsURL: acs, samlResponse: response, relayState: object["RelayState"] as? String)
    }

    private func send(_ method: HTTPMethod, _ path: String, body: Data? = nil, accept: String? = nil) async throws
        -> (status: Int, text: String)
    {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let body { request.body = .bytes(ByteBuffer(data: body)) }
        if let accept { request.headers.add(name: "Accept", value: accept) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let collected = try await response.body.collect(upTo: 4 << 20)
        return (Int(response.status.code), String(buffer: collected))
    }

    func stop() { peer.stop() }
}
