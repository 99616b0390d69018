import CSAML
import Foundation

/// Our AuthnRequest, sent by the HTTP-Redirect binding (SAML bindings, section 3.4): the XML, raw DEFLATE, base64,
/// as the `SAMLRequest` query parameter of the IdP's single sign-on URL, unsigned (our metadata says
/// AuthnRequestsSigned="false"). The response comes back by HTTP-POST to our assertion consumer service.
struct SAMLAuthnRequest: Sendable, Equatable {
    var spEntityID: String
    var acsURL: String
    /// The IdP's SingleSignOnService for the HTTP-Redirect binding.
    var destination: String
    /// The NameIDPolicy format; nil asks for `unspecified`.
    var nameIDFormat: String?

    static let unspecifiedNameID = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"

    /// A fresh request ID: "_" (an XML ID may not start with a digit) and 20 random bytes in hex.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        return "_" + (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The request's XML.
    func xml(id: String, issueInstant: Date) -> String {
        """
        <samlp:AuthnRequest xmlns:samlp="\(SAMLNamespace.samlProtocol)" xmlns:saml="\(SAMLNamespace.assertion)" \
        ID="\(samlEscape(id))" Version="2.0" IssueInstant="\(SAMLTime.format(issueInstant))" \
        Destination="\(samlEscape(destination))" AssertionConsumerServiceURL="\(samlEscape(acsURL))" \
        ProtocolBinding="\(SAMLBinding.httpPost)">\
        <saml:Issuer>\(samlEscape(spEntityID))</saml:Issuer>\
        <samlp:NameIDPolicy Format="\(samlEscape(nameIDFormat ?? Self.unspecifiedNameID))" AllowCreate="true"/>\
        </samlp:AuthnRequest>
        """
    }

    /// The redirect to the IdP: its URL (which may already carry a query) with SAMLRequest and, when given,
    /// RelayState appended. Returns the request's ID, which the Response's InResponseTo must match.
    func redirect(relayState: String?, now: Date) -> (id: String, url: String) {
        let id = Self.newID()
        let encoded = SAMLRedirectEncoding.deflate(Data(xml(id: id, issueInstant: now).utf8)).base64EncodedString()
        var url = Self.appending("SAMLRequest", encoded, to: destination)
        if let relayState { url = Self.appending(relayState: relayState, to: url) }
        return (id, url)
    }

    /// A new request to `destination` and its redirect URL, without RelayState (`appending(relayState:to:)`).
    static func make(destination: String, acsURL: String, spEntityID: String, nameIDFormat: String?, now: Date)
        -> (id: String, url: String)
    {
        SAMLAuthnRequest(spEntityID: spEntityID, acsURL: acsURL, destination: destination, nameIDFormat: nameIDFormat)
            .redirect(relayState: nil, now: now)
    }

    /// `url` with the RelayState query parameter added.
    static func appending(relayState: String, to url: String) -> String {
        appending("RelayState", relayState, to: url)
    }

    /// `url` with `name=value` added to its query (created if there is none), before any fragment.
    static func appending(_ name: String, _ value: String, to url: String) -> String {
        let fragmentStart = url.firstIndex(of: "#") ?? url.endIndex
        let base = url[..<fragmentStart]
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + name + "=" + SAMLRedirectEncoding.percentEncode(value) + url[fragmentStart...]
    }
}

/// Raw DEFLATE and the query encoding of the HTTP-Redirect binding.
enum SAMLRedirectEncoding {
    /// Compresses `data` as raw DEFLATE.
    static func deflate(_ data: Data) -> Data {
        let input = Array(data)
        var output = [UInt8](repeating: 0, count: input.count + input.count / 8 + 64)
        let written = gh_deflate_raw(input, input.count, &output, output.count)
        precondition(written >= 0, "raw DEFLATE into a buffer larger than its worst case cannot fail")
        return Data(output.prefix(written))
    }

    /// Decompresses raw DEFLATE, nil when it is not DEFLATE or would exceed `limit` bytes.
    static func inflate(_ data: Data, limit: Int = 1 << 20) -> Data? {
        let input = Array(data)
        var output = [UInt8](repeating: 0, count: limit)
        let written = gh_inflate_raw(input, input.count, &output, output.count)
        guard written >= 0 else { return nil }
        return Data(output.prefix(written))
    }

    /// Percent-encodes all but RFC 3986's unreserved characters, so that `+`, `/` and `=` of base64 survive.
    static func percentEncode(_ text: String) -> String {
        var unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        unreserved.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }
}
