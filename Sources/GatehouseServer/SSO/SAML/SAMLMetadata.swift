import CXMLSec
import Foundation
import X509

/// SAML's binding URIs.
enum SAMLBinding {
    static let httpRedirect = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
    static let httpPost = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"
}

/// What we use of an identity provider's metadata: who it is, where to send the user and which certificates sign
/// its assertions. Read from the XML an administrator uploads or we fetch; it is not itself signature-checked.
struct SAMLMetadata: Sendable, Equatable {
    var entityID: String
    /// The SingleSignOnService for the HTTP-Redirect binding, where our AuthnRequest goes.
    var redirectURL: String
    /// The SingleSignOnService for the HTTP-POST binding, if the IdP offers one.
    var postURL: String?
    /// Signing certificates (DER), each parsed as X.509: KeyDescriptors with use="signing" or no use.
    var signingCertificates: [Data]
    var nameIDFormats: [String]
    /// The earliest validUntil on the way from the document's root to the IdP's descriptor.
    var validUntil: Date?

    /// Parses an EntityDescriptor, or an EntitiesDescriptor holding exactly one entity with an IdP descriptor;
    /// metadata whose validUntil has passed at `now` is refused.
    static func parse(_ xml: String, now: Date = .now) throws(SAMLMetadataError) -> SAMLMetadata {
        try parse(Data(xml.utf8), now: now)
    }

    /// Parses metadata from its bytes.
    static func parse(_ xml: Data, now: Date) throws(SAMLMetadataError) -> SAMLMetadata {
        guard xml.count <= 4 << 20 else { throw .tooLarge }
        guard let document = SAMLDocument.parse(Array(xml)) else { throw .malformedXML }
        guard !document.hasDoctype else { throw .doctype }
        guard let root = document.root else { throw .malformedXML }
        let md = SAMLNamespace.metadata

        var validUntil: [Date] = []
        var candidates: [SAMLNode] = []
        func collect(_ node: SAMLNode) throws(SAMLMetadataError) {
            if let date = try Self.date(node, "validUntil") { validUntil.append(date) }
            if node.is("EntityDescriptor", in: md) {
                if !identityProviders(of: node).isEmpty { candidates.append(node) }
            } else if node.is("EntitiesDescriptor", in: md) {
                for child in node.elements { try collect(child) }
            }
        }
        guard root.is("EntityDescriptor", in: md) || root.is("EntitiesDescriptor", in: md) else {
            throw .notMetadata
        }
        try collect(root)
        guard candidates.count <= 1 else { throw .severalIdentityProviders }
        guard let entity = candidates.first else {
            throw root.is("EntityDescriptor", in: md) && root.attribute("entityID") == nil
                ? .noEntityID : .noIdentityProviderDescriptor
        }
        guard let entityID = entity.attribute("entityID")?.trimmingCharacters(in: .whitespaces), !entityID.isEmpty
        else { throw .noEntityID }
        guard let descriptor = identityProviders(of: entity).first else { throw .noIdentityProviderDescriptor }
        // The entity's own validUntil was collected with its ancestors'; the descriptor's is added here.
        if let date = try Self.date(descriptor, "validUntil") { validUntil.append(date) }
        let expiry = validUntil.min()
        if let expiry, expiry <= now { throw .expired }

        let services = descriptor.children("SingleSignOnService", in: md)
        func location(_ binding: String) -> String? {
            services.first { $0.attribute("Binding") == binding }?.attribute("Location")?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let redirect = location(SAMLBinding.httpRedirect), Self.isHTTPURL(redirect) else {
            throw .noRedirectEndpoint
        }
        let post = location(SAMLBinding.httpPost).flatMap { Self.isHTTPURL($0) ? $0 : nil }

        var certificates: [Data] = []
        for key in descriptor.children("KeyDescriptor", in: md) where [nil, "signing"].contains(key.attribute("use")) {
            let x509 = key.children("KeyInfo", in: SAMLNamespace.signature)
                .flatMap { $0.children("X509Data", in: SAMLNamespace.signature) }
                .flatMap { $0.children("X509Certificate", in: SAMLNamespace.signature) }
            for element in x509 {
                let base64 = String(
                    String.UnicodeScalarView(
                        element.looseText.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) }))
                guard let der = Data(base64Encoded: base64), (try? Certificate(derEncoded: Array(der))) != nil else {
                    throw .badCertificate
                }
                if !certificates.contains(der) { certificates.append(der) }
            }
        }
        guard !certificates.isEmpty else { throw .noSigningCertificate }

        let formats = descriptor.children("NameIDFormat", in: md).map {
            $0.looseText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return SAMLMetadata(
            entityID: entityID, redirectURL: redirect, postURL: post, signingCertificates: certificates,
            nameIDFormats: formats.filter { !$0.isEmpty }, validUntil: expiry)
    }

    /// An entity's IDPSSODescriptors that support SAML 2.0.
    private static func identityProviders(of entity: SAMLNode) -> [SAMLNode] {
        entity.children("IDPSSODescriptor", in: SAMLNamespace.metadata).filter {
            ($0.attribute("protocolSupportEnumeration") ?? "").split(whereSeparator: \.isWhitespace)
                .contains(Substring(SAMLNamespace.samlProtocol))
        }
    }

    private static func date(_ node: SAMLNode, _ attribute: String) throws(SAMLMetadataError) -> Date? {
        guard let value = node.attribute(attribute) else { return nil }
        guard let date = SAMLTime.parse(value.trimmingCharacters(in: .whitespaces)) else { throw .malformedXML }
        return date
    }

    private static func isHTTPURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), url.host != nil else { return false }
        return scheme == "https" || scheme == "http"
    }
}

/// Why an identity provider's metadata could not be used.
enum SAMLMetadataError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge
    case malformedXML
    case doctype
    case notMetadata
    case noEntityID
    case noIdentityProviderDescriptor
    case severalIdentityProviders
    case noRedirectEndpoint
    case noSigningCertificate
    case badCertificate
    case expired

    var description: String {
        switch self {
        case .tooLarge: "The metadata is too large."
        case .malformedXML: "The metadata is not well-formed XML."
        case .doctype: "The metadata declares a DOCTYPE, which we do not accept."
        case .notMetadata: "The document is not SAML metadata (EntityDescriptor or EntitiesDescriptor)."
        case .noEntityID: "The metadata has no entityID."
        case .noIdentityProviderDescriptor: "The metadata describes no SAML 2.0 identity provider (IDPSSODescriptor)."
        case .severalIdentityProviders: "The metadata describes more than one identity provider; upload only one."
        case .noRedirectEndpoint: "The identity provider has no SingleSignOnService with the HTTP-Redirect binding."
        case .noSigningCertificate: "The identity provider's metadata holds no signing certificate."
        case .badCertificate: "A certificate in the metadata is not a valid X.509 certificate."
        case .expired: "The metadata has expired (validUntil is in the past)."
        }
    }
}

/// Our own metadata, for the identity provider's administrator: an SPSSODescriptor that wants signed assertions and
/// receives them by HTTP-POST at one assertion consumer service.
enum SAMLServiceProviderMetadata {
    static func xml(
        entityID: String, acsURL: String, encryptionCertificateDER: Data? = nil, nameIDFormat: String? = nil,
        validUntil: Date? = nil, cacheDuration: String? = nil
    ) -> String {
        var attributes = "entityID=\"\(samlEscape(entityID))\""
        if let validUntil { attributes += " validUntil=\"\(SAMLTime.format(validUntil))\"" }
        if let cacheDuration { attributes += " cacheDuration=\"\(samlEscape(cacheDuration))\"" }
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <md:EntityDescriptor xmlns:md="\(SAMLNamespace.metadata)" \(attributes)>
              <md:SPSSODescriptor AuthnRequestsSigned="false" WantAssertionsSigned="true" \
            protocolSupportEnumeration="\(SAMLNamespace.samlProtocol)">

            """
        if let certificate = encryptionCertificateDER {
            xml += """
                    <md:KeyDescriptor use="encryption">
                      <ds:KeyInfo xmlns:ds="\(SAMLNamespace.signature)">
                        <ds:X509Data>
                          <ds:X509Certificate>\(certificate.base64EncodedString())</ds:X509Certificate>
                        </ds:X509Data>
                      </ds:KeyInfo>
                    </md:KeyDescriptor>

                """
        }
        if let nameIDFormat {
            xml += "    <md:NameIDFormat>\(samlEscape(nameIDFormat))</md:NameIDFormat>\n"
        }
        xml += """
                <md:AssertionConsumerService Binding="\(SAMLBinding.httpPost)" Location="\(samlEscape(acsURL))" \
            index="0" isDefault="true"/>
              </md:SPSSODescriptor>
            </md:EntityDescriptor>

            """
        return xml
    }
}
