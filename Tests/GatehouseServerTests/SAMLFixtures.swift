import CSAML
import CXMLSec
import Crypto
import CryptoExtras
import Foundation
import SwiftASN1
import X509

@testable import GatehouseServer

/// Signed (and encrypted) SAML documents made at test time with xmlsec itself (`gh_saml_sign`, `gh_saml_encrypt`),
/// by keys and self-signed certificates made here: no file, no clock but the fixed `now`.
enum SAMLFixtures {
    /// An RSA key (PEM) and its self-signed certificate (DER).
    struct Identity: Sendable {
        let keyPEM: String
        let certificateDER: Data
    }

    static let idp = identity("Test IdP")
    static let otherIdP = identity("Another IdP")
    static let sp = identity("Test SP")

    static let spEntityID = "https://sp.example/auth/v1/sso/saml/metadata"
    static let acsURL = "https://sp.example/auth/v1/sso/saml/acs"
    static let idpEntityID = "https://idp.example/saml/metadata"
    static let requestID = "_request1"
    static let now = Date(timeIntervalSince1970: 1_750_000_000)

    static func identity(_ name: String) -> Identity {
        do {
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let subject = try DistinguishedName { CommonName(name) }
            let certificate = try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
                notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(86_400 * 365),
                issuer: subject, subject: subject, signatureAlgorithm: .sha256WithRSAEncryption,
                extensions: Certificate.Extensions(), issuerPrivateKey: .init(key))
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Identity(keyPEM: key.pemRepresentation, certificateDER: Data(serializer.serializedBytes))
        } catch {
            fatalError("test identity: \(error)")
        }
    }

    static func time(_ offset: TimeInterval) -> String { SAMLTime.format(now.addingTimeInterval(offset)) }

    /// An Assertion as an IdP sends it; `subjectExtra` and `extra` go inside Subject and after the statements.
    static func assertion(
        id: String = "_assertion1", nameID: String = "alice@example.com", inResponseTo: String? = requestID,
        extra: String = ""
    ) -> String {
        let answer = inResponseTo.map { " InResponseTo=\"\($0)\"" } ?? ""
        return """
            <saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="\(id)" Version="2.0" \
            IssueInstant="\(time(0))"><saml:Issuer>\(idpEntityID)</saml:Issuer><saml:Subject>\
            <saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress" \
            SPNameQualifier="\(spEntityID)">\(nameID)</saml:NameID>\
            <saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">\
            <saml:SubjectConfirmationData\(answer) NotOnOrAfter="\(time(300))" Recipient="\(acsURL)"/>\
            </saml:SubjectConfirmation></saml:Subject>\
            <saml:Conditions NotBefore="\(time(-60))" NotOnOrAfter="\(time(600))"><saml:AudienceRestriction>\
            <saml:Audience>\(spEntityID)</saml:Audience></saml:AudienceRestriction></saml:Conditions>\
            <saml:AuthnStatement AuthnInstant="\(time(-5))" SessionIndex="_session1" \
            SessionNotOnOrAfter="\(time(28_800))"><saml:AuthnContext><saml:AuthnContextClassRef>\
            urn:oasis:names:tc:SAML:2.0:ac:classes:Password</saml:AuthnContextClassRef></saml:AuthnContext>\
            </saml:AuthnStatement><saml:AttributeStatement>\
            <saml:Attribute Name="urn:oid:0.9.2342.19200300.100.1.3" FriendlyName="mail">\
            <saml:AttributeValue>alice@example.com</saml:AttributeValue></saml:Attribute>\
            <saml:Attribute Name="groups"><saml:AttributeValue>staff</saml:AttributeValue>\
            <saml:AttributeValue>admins</saml:AttributeValue></saml:Attribute>\
            </saml:AttributeStatement>\(extra)</saml:Assertion>
            """
    }

    /// A Response around `body` (an assertion, or anything a test puts there).
    static func response(
        _ body: String, id: String = "_response1", inResponseTo: String? = requestID,
        status: String = "<samlp:StatusCode Value=\"urn:oasis:names:tc:SAML:2.0:status:Success\"/>"
    ) -> String {
        let answer = inResponseTo.map { " InResponseTo=\"\($0)\"" } ?? ""
        return """
            <samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" \
            xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="\(id)" Version="2.0" IssueInstant="\(time(0))" \
            Destination="\(acsURL)"\(answer)><saml:Issuer>\(idpEntityID)</saml:Issuer>\
            <samlp:Status>\(status)</samlp:Status>\(body)</samlp:Response>
            """
    }

    /// What to do to the document before it is posted, in this order.
    struct Treatment {
        var signAssertion: String? = nil
        var encryptAssertion: (gcm: Bool, transport: String)? = nil
        var signResponse: String? = nil
        var by: Identity = SAMLFixtures.idp
        var sha1 = false
    }

    static let oaep = "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"
    static let pkcs1 = "http://www.w3.org/2001/04/xmlenc#rsa-1_5"

    /// The serialised document after `treatment`.
    static func xml(_ text: String, _ treatment: Treatment) throws -> String {
        guard let document = SAMLDocument.parse(Array(text.utf8)), let root = document.root else {
            throw FixtureError.notXML
        }
        _ = try SAMLResponseReader.survey(root, in: document.pointer)  // registers the IDs
        var error = [CChar](repeating: 0, count: 256)
        func sign(_ id: String) throws {
            guard let attribute = xmlGetID(document.pointer, id), let element = attribute.pointee.parent else {
                throw FixtureError.noSuchID
            }
            let status = Array(treatment.by.keyPEM.utf8).withUnsafeBufferPointer { pem in
                pem.withMemoryRebound(to: CChar.self) {
                    gh_saml_sign(element, id, $0.baseAddress, $0.count, treatment.sha1 ? 1 : 0, &error, error.count)
                }
            }
            guard status == 0 else { throw FixtureError.xmlsec(String(cString: error)) }
        }
        if let id = treatment.signAssertion { try sign(id) }
        if let encryption = treatment.encryptAssertion {
            guard let assertion = root.children("Assertion", in: SAMLNamespace.assertion).first else {
                throw FixtureError.noSuchID
            }
            // The EncryptedAssertion wrapper first, then the assertion inside it is encrypted in place.
            // Its namespace is the Response's declaration: the Assertion's own goes with the Assertion.
            let namespace = xmlSearchNsByHref(document.pointer, root.pointer, SAMLNamespace.assertion)
            let wrapper = xmlNewDocNode(document.pointer, namespace, "EncryptedAssertion", nil)
            xmlReplaceNode(assertion.pointer, wrapper)
            xmlAddChild(wrapper, assertion.pointer)
            let status = sp.certificateDER.withUnsafeBytes { der in
                gh_saml_encrypt(
                    assertion.pointer, der.bindMemory(to: UInt8.self).baseAddress, der.count, encryption.gcm ? 1 : 0,
                    encryption.transport, &error, error.count)
            }
            guard status == 0 else { throw FixtureError.xmlsec(String(cString: error)) }
        }
        if let id = treatment.signResponse { try sign(id) }
        var buffer: UnsafeMutablePointer<xmlChar>?
        var size: Int32 = 0
        xmlDocDumpMemory(document.pointer, &buffer, &size)
        guard let buffer else { throw FixtureError.notXML }
        defer { free(buffer) }  // libxml2's default allocator is malloc
        return String(decoding: UnsafeBufferPointer(start: buffer, count: Int(size)), as: UTF8.self)
    }

    /// The form value of `text` after `treatment`.
    static func post(_ text: String, _ treatment: Treatment = Treatment()) throws -> String {
        Data(try xml(text, treatment).utf8).base64EncodedString()
    }

    static func post(xml: String) -> String { Data(xml.utf8).base64EncodedString() }

    enum FixtureError: Error {
        case notXML
        case noSuchID
        case xmlsec(String)
    }

    /// The reader as the sign-in builds it: the IdP's certificate, our key.
    static func read(_ form: String, certificates: [Data] = [idp.certificateDER], key: String? = sp.keyPEM)
        throws(SAMLRefusal) -> SAMLResponse
    {
        try SAMLResponseReader.read(form, certificates: certificates, privateKeyPEM: key)
    }
}
