import CSAML
import CXMLSec
import Foundation

/// Reads the `SAMLResponse` form value an identity provider posts to our assertion consumer service, and returns
/// what it says only when its structure is the one SAML allows and its signatures verify with the IdP's certificates.
///
/// The order matters and is fixed: parse without DTD or entities; refuse comments, processing instructions and
/// duplicate IDs anywhere; report a non-Success status; require exactly one Assertion (or EncryptedAssertion), as the
/// Response's child, and no other anywhere; verify the Response's signature before decrypting anything; decrypt;
/// verify the Assertion's signature; require at least one of the two. Values are then read only from the Response
/// element and that one Assertion, at their places in the schema, never found by searching the document. xmlsec
/// checks each signature (`gh_saml_verify_signature`) with the configured key, never one from the document.
struct SAMLResponseReader: Sendable {
    /// The largest decoded response read.
    static let maximumSize = 1 << 20

    /// The IdP's signing certificates (DER); a signature verifying with any one of them is accepted (key rollover).
    let certificates: [Data]
    /// Our private key (PEM), for assertions encrypted to our metadata's encryption certificate.
    let decryptionKeyPEM: String?

    init(certificates: [Data], decryptionKeyPEM: String? = nil) {
        self.certificates = certificates
        self.decryptionKeyPEM = decryptionKeyPEM
    }

    /// Reads the base64 `SAMLResponse` form value with the IdP's certificates and our key.
    static func read(_ formValue: String, certificates: [Data], privateKeyPEM: String?) throws(SAMLRefusal)
        -> SAMLResponse
    {
        try SAMLResponseReader(certificates: certificates, decryptionKeyPEM: privateKeyPEM).read(formValue: formValue)
    }

    /// Reads the base64 form value (white space and line breaks are ignored).
    func read(formValue: String) throws(SAMLRefusal) -> SAMLResponse {
        try read(xml: try Self.decode(formValue))
    }

    /// The Issuer a Response claims, before anything is verified: the Response's own, else its one plain
    /// Assertion's. Only to choose whose certificates to verify it with (an IdP-initiated sign-in names no request
    /// of ours); nil when the form value is not a Response that could pass `read`.
    static func unverifiedIssuer(_ formValue: String) -> String? {
        guard let xml = try? decode(formValue), let document = SAMLDocument.parse(Array(xml)), !document.hasDoctype,
            let root = document.root, root.is("Response", in: SAMLNamespace.samlProtocol)
        else { return nil }
        let a = SAMLNamespace.assertion
        let issuer = try? root.child("Issuer", in: a) ?? root.child("Assertion", in: a)?.child("Issuer", in: a)
        return issuer?.text.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The form value's bytes: base64 once white space and line breaks are taken out, at most `maximumSize`.
    private static func decode(_ formValue: String) throws(SAMLRefusal) -> Data {
        let compact = formValue.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) }
        guard compact.count <= (maximumSize / 3 + 1) * 4 else { throw .tooLarge }
        guard let bytes = Data(base64Encoded: String(String.UnicodeScalarView(compact))), !bytes.isEmpty else {
            throw .malformedBase64
        }
        return bytes
    }

    /// Reads the decoded XML.
    func read(xml: Data) throws(SAMLRefusal) -> SAMLResponse {
        guard xml.count <= Self.maximumSize else { throw .tooLarge }
        guard gh_saml_prepare() == 0 else { throw .unavailable }
        guard let document = SAMLDocument.parse(Array(xml)) else { throw .malformedXML }
        guard !document.hasDoctype else { throw .doctype }
        guard let root = document.root, root.is("Response", in: SAMLNamespace.samlProtocol) else {
            throw .notAResponse
        }
        guard !document.hasTopLevelExtras else { throw .commentOrInstruction }

        // Everything below the root: IDs registered (so that a signature's "#id" finds exactly one element),
        // comments refused, every Assertion found wherever it hides.
        let assertions = try Self.survey(root, in: document.pointer)
        try Self.checkStatus(of: root)
        let placed = assertions.filter { $0.pointer.pointee.parent == root.pointer }
        guard placed.count == assertions.count else { throw .wrapping }
        guard let placedAssertion = placed.first else { throw .noAssertion }
        guard placed.count == 1 else { throw .multipleAssertions }

        guard let responseID = root.attribute("ID"), !responseID.isEmpty else { throw .malformed("Response ID") }
        let responseSigned = try verifySignature(of: root, id: responseID, in: document.pointer)

        var assertion = placedAssertion
        let wasEncrypted = placedAssertion.is("EncryptedAssertion", in: SAMLNamespace.assertion)
        if wasEncrypted {
            assertion = try decrypt(placedAssertion)
            let nested = try Self.survey(assertion, in: document.pointer)
            guard nested.count == 1, nested[0].pointer == assertion.pointer else { throw .wrapping }
        }
        guard let assertionID = assertion.attribute("ID"), !assertionID.isEmpty else {
            throw .malformed("Assertion ID")
        }
        let assertionSigned = try verifySignature(of: assertion, id: assertionID, in: document.pointer)
        guard responseSigned || assertionSigned else { throw .unsigned }

        return SAMLResponse(
            id: responseID,
            inResponseTo: root.attribute("InResponseTo"),
            destination: root.attribute("Destination"),
            issueInstant: try Self.date(root, "IssueInstant"),
            issuer: try root.child("Issuer", in: SAMLNamespace.assertion).map { node throws(SAMLRefusal) in
                try Self.text(node, "Issuer")
            },
            isSigned: responseSigned,
            assertion: try Self.readAssertion(
                assertion, id: assertionID, isSigned: assertionSigned, wasEncrypted: wasEncrypted))
    }

    // MARK: Structure

    /// Walks `node`'s subtree: registers each element's `ID` attribute with libxml2 (a duplicate refuses the
    /// document), refuses comments, processing instructions and entity references, and returns every Assertion and
    /// EncryptedAssertion met, `node` included.
    static func survey(_ node: SAMLNode, in document: xmlDocPtr) throws(SAMLRefusal) -> [SAMLNode] {
        var found: [SAMLNode] = []
        func visit(_ element: xmlNodePtr) throws(SAMLRefusal) {
            let node = SAMLNode(element)
            if let id = node.attributeNode("ID") {
                let value = SAMLNode.value(of: id)
                guard !value.isEmpty, xmlAddID(nil, document, value, id) != nil else { throw .duplicateID }
            }
            if node.is("Assertion", in: SAMLNamespace.assertion)
                || node.is("EncryptedAssertion", in: SAMLNamespace.assertion)
            {
                found.append(node)
            }
            var child = element.pointee.children
            while let current = child {
                switch current.pointee.type {
                case XML_ELEMENT_NODE: try visit(current)
                case XML_TEXT_NODE, XML_CDATA_SECTION_NODE: break
                case XML_COMMENT_NODE, XML_PI_NODE: throw .commentOrInstruction
                default: throw .malformedXML
                }
                child = current.pointee.next
            }
        }
        try visit(node.pointer)
        return found
    }

    /// Refuses a Response whose top-level StatusCode is not Success, naming the codes the IdP gave.
    static func checkStatus(of response: SAMLNode) throws(SAMLRefusal) {
        guard let status = try response.child("Status", in: SAMLNamespace.samlProtocol),
            var code = try status.child("StatusCode", in: SAMLNamespace.samlProtocol)
        else { throw .malformed("Status") }
        let success = "urn:oasis:names:tc:SAML:2.0:status:Success"
        guard code.attribute("Value") != success else { return }
        var values: [String] = []
        while true {
            // Status values are URIs; anything longer is cut rather than echoed whole.
            values.append(String((code.attribute("Value") ?? "no status code").prefix(120)))
            guard values.count < 4, let nested = try code.child("StatusCode", in: SAMLNamespace.samlProtocol)
            else { break }
            code = nested
        }
        throw .identityProviderStatus(values.joined(separator: " / "))
    }

    // MARK: Signatures

    /// Algorithms refused by name before xmlsec sees them (xmlsec's own list refuses them too, and anything else
    /// it does not allow), so that the refusal says why.
    static let weakAlgorithms: Set<String> = [
        "http://www.w3.org/2000/09/xmldsig#rsa-sha1", "http://www.w3.org/2000/09/xmldsig#dsa-sha1",
        "http://www.w3.org/2000/09/xmldsig#hmac-sha1", "http://www.w3.org/2000/09/xmldsig#sha1",
        "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha1", "http://www.w3.org/2001/04/xmldsig-more#md5",
        "http://www.w3.org/2001/04/xmldsig-more#rsa-md5", "http://www.w3.org/2001/04/xmlenc#rsa-1_5",
    ]

    /// Whether `element` is signed: false without a ds:Signature child; true when its one signature verifies, with
    /// one of the IdP's certificates, as a signature over "#" + `id`, which is `element` itself.
    private func verifySignature(of element: SAMLNode, id: String, in document: xmlDocPtr) throws(SAMLRefusal)
        -> Bool
    {
        let signatures = element.children("Signature", in: SAMLNamespace.signature)
        guard let signature = signatures.first else { return false }
        guard signatures.count == 1 else { throw .invalidSignature("more than one signature") }
        if let signedInfo = try signature.child("SignedInfo", in: SAMLNamespace.signature) {
            let methods =
                signedInfo.children("SignatureMethod", in: SAMLNamespace.signature)
                + signedInfo.children("Reference", in: SAMLNamespace.signature).flatMap {
                    $0.children("DigestMethod", in: SAMLNamespace.signature)
                }
            for method in methods {
                if let algorithm = method.attribute("Algorithm"), Self.weakAlgorithms.contains(algorithm) {
                    throw .weakAlgorithm(algorithm)
                }
            }
        }
        // The ID resolves to this element and no other (IDs were registered once each by `survey`).
        guard let registered = xmlGetID(document, id), registered.pointee.parent == element.pointer else {
            throw .invalidSignature("the signed element's ID is not its own")
        }
        guard !certificates.isEmpty else { throw .invalidSignature("no certificate is configured") }
        var reason = "the signature does not verify"
        for certificate in certificates {
            var error = [CChar](repeating: 0, count: 256)
            let status = certificate.withUnsafeBytes { der in
                gh_saml_verify_signature(
                    signature.pointer, der.bindMemory(to: UInt8.self).baseAddress, der.count, "#" + id, &error,
                    error.count)
            }
            if status == 0 { return true }
            reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        throw .invalidSignature(reason)
    }

    // MARK: Decryption

    /// Decrypts an EncryptedAssertion's one EncryptedData with our key; the Assertion takes its place, inside the
    /// EncryptedAssertion.
    private func decrypt(_ encrypted: SAMLNode) throws(SAMLRefusal) -> SAMLNode {
        guard let key = decryptionKeyPEM else { throw .encryptedButNoKey }
        let data = encrypted.children("EncryptedData", in: SAMLNamespace.encryption)
        guard data.count == 1 else { throw .malformed("EncryptedAssertion must hold one EncryptedData") }
        // RSA PKCS#1 v1.5 key transport is open to padding oracles; xmlsec only allows RSA-OAEP, this says why.
        func refuseWeak(_ node: SAMLNode) throws(SAMLRefusal) {
            if node.is("EncryptionMethod", in: SAMLNamespace.encryption), let algorithm = node.attribute("Algorithm"),
                Self.weakAlgorithms.contains(algorithm)
            {
                throw .weakAlgorithm(algorithm)
            }
            for child in node.elements { try refuseWeak(child) }
        }
        try refuseWeak(encrypted)
        var error = [CChar](repeating: 0, count: 256)
        let decrypted = Array(key.utf8).withUnsafeBufferPointer { pem in
            pem.withMemoryRebound(to: CChar.self) { characters in
                gh_saml_decrypt(data[0].pointer, characters.baseAddress, characters.count, &error, error.count)
            }
        }
        guard let decrypted else {
            throw .decryptionFailed(
                String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let assertion = SAMLNode(decrypted)
        guard assertion.is("Assertion", in: SAMLNamespace.assertion) else {
            throw .decryptionFailed("the decrypted element is not an Assertion")
        }
        return assertion
    }

    // MARK: Values

    private static func readAssertion(_ node: SAMLNode, id: String, isSigned: Bool, wasEncrypted: Bool)
        throws(SAMLRefusal) -> SAMLAssertion
    {
        let a = SAMLNamespace.assertion
        guard let issuerNode = try node.child("Issuer", in: a) else { throw .malformed("Assertion Issuer") }
        var assertion = SAMLAssertion(
            id: id, issueInstant: try date(node, "IssueInstant"), issuer: try text(issuerNode, "Issuer"),
            isSigned: isSigned, wasEncrypted: wasEncrypted, nameID: nil, nameIDFormat: nil, spNameQualifier: nil,
            bearerConfirmations: [], notBefore: nil, notOnOrAfter: nil, audienceRestrictions: [], authnInstant: nil,
            sessionIndex: nil, sessionNotOnOrAfter: nil, attributes: [:])

        if let subject = try node.child("Subject", in: a) {
            if let nameID = try subject.child("NameID", in: a) {
                assertion.nameID = try text(nameID, "NameID")
                assertion.nameIDFormat = nameID.attribute("Format")
                assertion.spNameQualifier = nameID.attribute("SPNameQualifier")
            }
            for confirmation in subject.children("SubjectConfirmation", in: a)
            where confirmation.attribute("Method") == "urn:oasis:names:tc:SAML:2.0:cm:bearer" {
                let data = try confirmation.child("SubjectConfirmationData", in: a)
                assertion.bearerConfirmations.append(
                    SAMLBearerConfirmation(
                        recipient: data?.attribute("Recipient"),
                        notOnOrAfter: try data.flatMap { node throws(SAMLRefusal) in try date(node, "NotOnOrAfter") },
                        notBefore: try data.flatMap { node throws(SAMLRefusal) in try date(node, "NotBefore") },
                        inResponseTo: data?.attribute("InResponseTo")))
            }
        }

        if let conditions = try node.child("Conditions", in: a) {
            assertion.notBefore = try date(conditions, "NotBefore")
            assertion.notOnOrAfter = try date(conditions, "NotOnOrAfter")
            for restriction in conditions.children("AudienceRestriction", in: a) {
                var audiences: [String] = []
                for audience in restriction.children("Audience", in: a) {
                    audiences.append(try text(audience, "Audience"))
                }
                assertion.audienceRestrictions.append(audiences)
            }
        }

        if let statement = node.children("AuthnStatement", in: a).first {
            assertion.authnInstant = try date(statement, "AuthnInstant")
            assertion.sessionIndex = statement.attribute("SessionIndex")
            assertion.sessionNotOnOrAfter = try date(statement, "SessionNotOnOrAfter")
        }

        for statement in node.children("AttributeStatement", in: a) {
            for attribute in statement.children("Attribute", in: a) {
                guard let name = attribute.attribute("Name"), !name.isEmpty else {
                    throw .malformed("Attribute without a Name")
                }
                let values = attribute.children("AttributeValue", in: a).compactMap(\.text)
                assertion.attributes[name, default: []] += values
                if let friendly = attribute.attribute("FriendlyName"), !friendly.isEmpty, friendly != name {
                    assertion.attributes[friendly, default: []] += values
                }
            }
        }
        return assertion
    }

    /// An element's plain text value; an element inside it refuses the message.
    private static func text(_ node: SAMLNode, _ name: String) throws(SAMLRefusal) -> String {
        guard let text = node.text else { throw .malformed("\(name) is not plain text") }
        return text
    }

    /// A date attribute, nil when absent; one that is not a date refuses the message.
    private static func date(_ node: SAMLNode, _ attribute: String) throws(SAMLRefusal) -> Date? {
        guard let value = node.attribute(attribute) else { return nil }
        guard let date = SAMLTime.parse(value) else { throw .malformed("\(attribute) is not a date") }
        return date
    }
}
