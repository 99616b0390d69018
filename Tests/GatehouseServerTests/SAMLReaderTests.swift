import Foundation
import Testing

@testable import GatehouseServer

/// The SAML Response reader against documents signed and encrypted at test time by xmlsec (`SAMLFixtures`): what a
/// well-formed response yields, and each attack refused for the reason it should be.
@Suite("SAML: reading a Response")
struct SAMLReaderTests {
    typealias F = SAMLFixtures

    @Test("a signed Response with a plain assertion: every value read from its place")
    func signedResponse() throws {
        let form = try F.post(F.response(F.assertion()), .init(signResponse: "_response1"))
        let response = try F.read(form)
        #expect(response.id == "_response1")
        #expect(response.isSigned && !response.assertion.isSigned && !response.assertion.wasEncrypted)
        #expect(response.inResponseTo == F.requestID)
        #expect(response.destination == F.acsURL)
        #expect(response.issuer == F.idpEntityID)
        #expect(response.issueInstant == F.now)
        let assertion = response.assertion
        #expect(assertion.id == "_assertion1")
        #expect(assertion.issuer == F.idpEntityID)
        #expect(assertion.nameID == "alice@example.com")
        #expect(assertion.nameIDFormat == "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress")
        #expect(assertion.spNameQualifier == F.spEntityID)
        #expect(
            assertion.bearerConfirmations == [
                SAMLBearerConfirmation(
                    recipient: F.acsURL, notOnOrAfter: F.now + 300, notBefore: nil, inResponseTo: F.requestID)
            ])
        #expect(assertion.notBefore == F.now - 60 && assertion.notOnOrAfter == F.now + 600)
        #expect(assertion.audienceRestrictions == [[F.spEntityID]])
        #expect(assertion.authnInstant == F.now - 5 && assertion.sessionIndex == "_session1")
        #expect(assertion.sessionNotOnOrAfter == F.now + 28_800)
        #expect(assertion.attributes["urn:oid:0.9.2342.19200300.100.1.3"] == ["alice@example.com"])
        #expect(assertion.attributes["mail"] == ["alice@example.com"])
        #expect(assertion.attributes["groups"] == ["staff", "admins"])
    }

    @Test("a signed assertion in an unsigned Response; the second of two certificates verifies it (rollover)")
    func signedAssertionAndRollover() throws {
        let form = try F.post(F.response(F.assertion()), .init(signAssertion: "_assertion1"))
        let response = try F.read(form, certificates: [F.otherIdP.certificateDER, F.idp.certificateDER])
        #expect(!response.isSigned && response.assertion.isSigned)
        #expect(response.assertion.nameID == "alice@example.com")
    }

    @Test("both signed, then the checks pass and give the assertion's end")
    func bothSignedAndChecked() throws {
        let form = try F.post(
            F.response(F.assertion()), .init(signAssertion: "_assertion1", signResponse: "_response1"))
        let response = try F.read(form)
        let expectation = SAMLExpectation(
            spEntityID: F.spEntityID, acsURL: F.acsURL, idpEntityID: F.idpEntityID, requestID: F.requestID)
        #expect(try SAMLChecks.check(response, expecting: expectation, now: F.now) == F.now + 300)
    }

    @Test("a signature by another key is refused")
    func wrongKey() throws {
        let form = try F.post(F.response(F.assertion()), .init(signResponse: "_response1", by: F.otherIdP))
        #expect(throws: SAMLRefusal.self) { try F.read(form) }
        do {
            _ = try F.read(form)
        } catch {
            guard case .invalidSignature = error else {
                Issue.record("expected invalidSignature, got \(error)")
                return
            }
        }
        // And with no certificate at all.
        #expect(throws: SAMLRefusal.invalidSignature("no certificate is configured")) {
            try F.read(form, certificates: [])
        }
    }

    @Test("a value changed after signing breaks the signature")
    func tampered() throws {
        let signed = try F.xml(F.response(F.assertion()), .init(signResponse: "_response1"))
        let tampered = signed.replacingOccurrences(
            of: "alice@example.com</saml:NameID>", with: "mallory@example.com</saml:NameID>")
        #expect(tampered != signed)
        #expect(throws: SAMLRefusal.invalidSignature("the signature does not match the signed content")) {
            try F.read(F.post(xml: tampered))
        }
    }

    @Test("RSA-SHA1 is refused as weak")
    func sha1() throws {
        let form = try F.post(F.response(F.assertion()), .init(signResponse: "_response1", sha1: true))
        #expect(throws: SAMLRefusal.weakAlgorithm("http://www.w3.org/2000/09/xmldsig#rsa-sha1")) { try F.read(form) }
    }

    @Test("comment injection in a signed NameID is refused, not read as its first half")
    func commentInjection() throws {
        let signed = try F.xml(
            F.response(F.assertion(nameID: "alice@example.com.evil.example")), .init(signAssertion: "_assertion1"))
        let injected = signed.replacingOccurrences(
            of: "alice@example.com.evil.example", with: "alice@example.com<!---->.evil.example")
        #expect(throws: SAMLRefusal.commentOrInstruction) { try F.read(F.post(xml: injected)) }
    }

    @Test("signature wrapping: the signed assertion moved into Extensions, another in its place")
    func wrapping() throws {
        let signed = try F.xml(F.response(F.assertion()), .init(signAssertion: "_assertion1"))
        let start = try #require(signed.range(of: "<saml:Assertion"))
        let end = try #require(signed.range(of: "</saml:Assertion>"))
        let original = String(signed[start.lowerBound..<end.upperBound])
        let evil = F.assertion(id: "_evil", nameID: "mallory@example.com")
        let wrapped = signed.replacingOccurrences(
            of: original, with: "<samlp:Extensions>\(original)</samlp:Extensions>\(evil)")
        #expect(throws: SAMLRefusal.wrapping) { try F.read(F.post(xml: wrapped)) }
        // The same trick inside the signed assertion's own Advice.
        let advised = signed.replacingOccurrences(
            of: "</saml:Assertion>", with: "<saml:Advice>\(evil)</saml:Advice></saml:Assertion>")
        #expect(throws: SAMLRefusal.wrapping) { try F.read(F.post(xml: advised)) }
    }

    @Test("two assertions, no assertion, duplicate IDs")
    func structure() throws {
        let two = F.response(F.assertion() + F.assertion(id: "_assertion2"))
        #expect(throws: SAMLRefusal.multipleAssertions) { try F.read(F.post(xml: two)) }
        #expect(throws: SAMLRefusal.noAssertion) { try F.read(F.post(xml: F.response(""))) }
        let duplicate = F.response(F.assertion(id: "_response1"))
        #expect(throws: SAMLRefusal.duplicateID) { try F.read(F.post(xml: duplicate)) }
    }

    @Test("an unsigned response and assertion are refused as unsigned")
    func unsigned() throws {
        #expect(throws: SAMLRefusal.unsigned) { try F.read(F.post(xml: F.response(F.assertion()))) }
    }

    @Test("a DOCTYPE, a document that is not a Response, bad base64 and bad XML")
    func malformed() throws {
        let doctype = "<!DOCTYPE samlp:Response [<!ENTITY name \"alice\">]>" + F.response(F.assertion())
        #expect(throws: SAMLRefusal.doctype) { try F.read(F.post(xml: doctype)) }
        let request = SAMLAuthnRequest(
            spEntityID: F.spEntityID, acsURL: F.acsURL, destination: "https://idp.example/sso", nameIDFormat: nil)
        #expect(throws: SAMLRefusal.notAResponse) {
            try F.read(F.post(xml: request.xml(id: "_x", issueInstant: F.now)))
        }
        #expect(throws: SAMLRefusal.malformedBase64) { try F.read("not*base64!") }
        #expect(throws: SAMLRefusal.malformedXML) { try F.read(F.post(xml: "<samlp:Response")) }
        let huge = String(repeating: "A", count: 2 << 20)
        #expect(throws: SAMLRefusal.tooLarge) { try F.read(huge) }
    }

    @Test("the identity provider's refusal is reported with its status codes")
    func status() throws {
        let refused = F.response(
            "",
            status: """
                <samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Responder">\
                <samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:AuthnFailed"/></samlp:StatusCode>
                """)
        #expect(
            throws: SAMLRefusal.identityProviderStatus(
                "urn:oasis:names:tc:SAML:2.0:status:Responder / urn:oasis:names:tc:SAML:2.0:status:AuthnFailed")
        ) { try F.read(F.post(xml: refused)) }
    }

    @Test(
        "an encrypted, signed assertion is decrypted with our key (AES-CBC and AES-GCM, RSA-OAEP)",
        arguments: [false, true])
    func encrypted(gcm: Bool) throws {
        let form = try F.post(
            F.response(F.assertion()),
            .init(
                signAssertion: "_assertion1", encryptAssertion: (gcm, F.oaep), signResponse: "_response1"))
        let response = try F.read(form)
        #expect(response.isSigned && response.assertion.isSigned && response.assertion.wasEncrypted)
        #expect(response.assertion.nameID == "alice@example.com")
        #expect(throws: SAMLRefusal.encryptedButNoKey) { try F.read(form, key: nil) }
        #expect(throws: SAMLRefusal.self) { try F.read(form, key: F.otherIdP.keyPEM) }
    }

    @Test("RSA PKCS#1 v1.5 key transport is refused")
    func pkcs1Transport() throws {
        let form = try F.post(
            F.response(F.assertion()), .init(encryptAssertion: (false, F.pkcs1), signResponse: "_response1"))
        #expect(throws: SAMLRefusal.weakAlgorithm(F.pkcs1)) { try F.read(form) }
    }

    @Test("the unverified issuer, to choose the provider of an IdP-initiated sign-in")
    func unverifiedIssuer() throws {
        #expect(SAMLResponseReader.unverifiedIssuer(F.post(xml: F.response(F.assertion()))) == F.idpEntityID)
        #expect(SAMLResponseReader.unverifiedIssuer("bm90IHhtbA==") == nil)
    }
}

/// The Web Browser SSO profile's rules over a read response: each one passes, and fails for its own reason.
@Suite("SAML: checking a Response")
struct SAMLChecksTests {
    typealias F = SAMLFixtures

    static let base = SAMLResponse(
        id: "_r", inResponseTo: F.requestID, destination: F.acsURL, issueInstant: F.now, issuer: F.idpEntityID,
        isSigned: true,
        assertion: SAMLAssertion(
            id: "_a", issueInstant: F.now, issuer: F.idpEntityID, isSigned: false, wasEncrypted: false,
            nameID: "alice@example.com", nameIDFormat: nil, spNameQualifier: nil,
            bearerConfirmations: [
                SAMLBearerConfirmation(
                    recipient: F.acsURL, notOnOrAfter: F.now + 300, notBefore: nil, inResponseTo: F.requestID)
            ],
            notBefore: F.now - 60, notOnOrAfter: F.now + 600, audienceRestrictions: [[F.spEntityID]],
            authnInstant: F.now, sessionIndex: nil, sessionNotOnOrAfter: nil, attributes: [:]))
    static let expectation = SAMLExpectation(
        spEntityID: F.spEntityID, acsURL: F.acsURL, idpEntityID: F.idpEntityID, requestID: F.requestID)

    /// The refusal after `change`, nil when the response passes.
    func refusal(
        now: Date = F.now, _ change: (inout SAMLResponse, inout SAMLExpectation) -> Void = { _, _ in }
    ) -> SAMLRefusal? {
        var response = Self.base
        var expectation = Self.expectation
        change(&response, &expectation)
        do {
            _ = try SAMLChecks.check(response, expecting: expectation, now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test("a good response passes and lasts until the earliest NotOnOrAfter")
    func passes() throws {
        #expect(refusal() == nil)
        #expect(try SAMLChecks.check(Self.base, expecting: Self.expectation, now: F.now) == F.now + 300)
        var shorter = Self.base
        shorter.assertion.notOnOrAfter = F.now + 100
        #expect(try SAMLChecks.check(shorter, expecting: Self.expectation, now: F.now) == F.now + 100)
    }

    @Test("issuer: the assertion's, and the response's when present")
    func issuer() {
        #expect(refusal { r, _ in r.assertion.issuer = "https://evil.example" } == .wrongIssuer)
        #expect(refusal { r, _ in r.issuer = "https://evil.example" } == .wrongIssuer)
        #expect(refusal { r, _ in r.issuer = nil } == nil)
    }

    @Test("audience: at least one restriction, and every one names us")
    func audience() {
        #expect(refusal { r, _ in r.assertion.audienceRestrictions = [] } == .wrongAudience)
        #expect(refusal { r, _ in r.assertion.audienceRestrictions = [["https://other.example"]] } == .wrongAudience)
        #expect(
            refusal { r, _ in r.assertion.audienceRestrictions = [[F.spEntityID], ["https://other.example"]] }
                == .wrongAudience)
        #expect(
            refusal { r, _ in r.assertion.audienceRestrictions = [["https://other.example", F.spEntityID]] } == nil)
    }

    @Test("conditions: not before, not on or after, within the clock skew")
    func conditions() {
        #expect(refusal { r, _ in r.assertion.notBefore = F.now + 181 } == .notYetValid)
        #expect(refusal { r, _ in r.assertion.notBefore = F.now + 179 } == nil)
        #expect(refusal(now: F.now + 600 + 180) == .expired)
        #expect(refusal { r, _ in r.assertion.notOnOrAfter = F.now - 179 } == nil)
        #expect(refusal { r, _ in r.assertion.notOnOrAfter = F.now - 180 } == .expired)
    }

    @Test("bearer confirmation: recipient, NotOnOrAfter, InResponseTo; one good among bad ones is enough")
    func bearer() {
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations = [] } == .noValidBearerConfirmation("none is present"))
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations[0].recipient = "https://evil.example/acs" }
                == .noValidBearerConfirmation("its Recipient is not our assertion consumer service"))
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations[0].notOnOrAfter = nil }
                == .noValidBearerConfirmation("it has no NotOnOrAfter"))
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations[0].notOnOrAfter = F.now - 200 }
                == .noValidBearerConfirmation("it has expired"))
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations[0].notBefore = F.now + 200 }
                == .noValidBearerConfirmation("it is not valid yet"))
        #expect(
            refusal { r, _ in r.assertion.bearerConfirmations[0].inResponseTo = "_other" }
                == .noValidBearerConfirmation("its InResponseTo does not match our request"))
        #expect(
            refusal { r, _ in
                var bad = r.assertion.bearerConfirmations[0]
                bad.recipient = "https://evil.example/acs"
                r.assertion.bearerConfirmations.insert(bad, at: 0)
            } == nil)
    }

    @Test("destination and InResponseTo of the response; IdP-initiated answers no request")
    func response() {
        #expect(refusal { r, _ in r.destination = "https://evil.example/acs" } == .wrongDestination)
        #expect(refusal { r, _ in r.destination = nil } == nil)
        #expect(refusal { r, _ in r.inResponseTo = "_other" } == .wrongInResponseTo)
        // IdP-initiated: no request ID, so any InResponseTo is refused, and none passes.
        #expect(refusal { _, e in e.requestID = nil } == .wrongInResponseTo)
        #expect(
            refusal { r, e in
                e.requestID = nil
                r.inResponseTo = nil
            } == .noValidBearerConfirmation("its InResponseTo does not match our request"))
        #expect(
            refusal { r, e in
                e.requestID = nil
                r.inResponseTo = nil
                r.assertion.bearerConfirmations[0].inResponseTo = nil
            } == nil)
    }

    @Test("a NameID is required")
    func nameID() {
        #expect(refusal { r, _ in r.assertion.nameID = nil } == .missingNameID)
        #expect(refusal { r, _ in r.assertion.nameID = "" } == .missingNameID)
    }
}

/// Metadata both ways and the AuthnRequest of the HTTP-Redirect binding.
@Suite("SAML: metadata and AuthnRequest")
struct SAMLMetadataTests {
    typealias F = SAMLFixtures

    static func idpMetadata(
        root: String = "", keyUse: String = " use=\"signing\"",
        certificate: String = F.idp.certificateDER
            .base64EncodedString(options: .lineLength64Characters),
        redirect: Bool = true, validUntil: String = ""
    ) -> String {
        let redirectService =
            redirect
            ? "<md:SingleSignOnService Binding=\"\(SAMLBinding.httpRedirect)\" Location=\"https://idp.example/sso?x=1\"/>"
            : ""
        return """
            <md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" \
            xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="\(F.idpEntityID)"\(validUntil)>
              <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
                <md:KeyDescriptor\(keyUse)><ds:KeyInfo><ds:X509Data><ds:X509Certificate>
            \(certificate)
                </ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
                <md:KeyDescriptor use="encryption"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>\
            \(F.otherIdP.certificateDER.base64EncodedString())</ds:X509Certificate></ds:X509Data></ds:KeyInfo>\
            </md:KeyDescriptor>
                <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
                \(redirectService)
                <md:SingleSignOnService Binding="\(SAMLBinding.httpPost)" Location="https://idp.example/sso/post"/>
              </md:IDPSSODescriptor>
            </md:EntityDescriptor>
            """
    }

    @Test("an IdP's metadata: entity, endpoints, the signing certificate only, formats")
    func parseIdP() throws {
        let metadata = try SAMLMetadata.parse(Self.idpMetadata(), now: F.now)
        #expect(metadata.entityID == F.idpEntityID)
        #expect(metadata.redirectURL == "https://idp.example/sso?x=1")
        #expect(metadata.postURL == "https://idp.example/sso/post")
        #expect(metadata.signingCertificates == [F.idp.certificateDER])
        #expect(metadata.nameIDFormats == ["urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"])
        #expect(metadata.validUntil == nil)
        // A KeyDescriptor without `use` signs too; inside an EntitiesDescriptor as well.
        let wrapped =
            "<md:EntitiesDescriptor xmlns:md=\"urn:oasis:names:tc:SAML:2.0:metadata\">"
            + Self.idpMetadata(keyUse: "") + "</md:EntitiesDescriptor>"
        #expect(try SAMLMetadata.parse(wrapped, now: F.now).signingCertificates == [F.idp.certificateDER])
    }

    @Test("unusable metadata is refused for its reason")
    func refusals() {
        #expect(throws: SAMLMetadataError.noRedirectEndpoint) {
            try SAMLMetadata.parse(Self.idpMetadata(redirect: false), now: F.now)
        }
        #expect(throws: SAMLMetadataError.noSigningCertificate) {
            try SAMLMetadata.parse(Self.idpMetadata(keyUse: " use=\"encryption\""), now: F.now)
        }
        #expect(throws: SAMLMetadataError.badCertificate) {
            try SAMLMetadata.parse(Self.idpMetadata(certificate: "AAAA"), now: F.now)
        }
        #expect(throws: SAMLMetadataError.expired) {
            try SAMLMetadata.parse(Self.idpMetadata(validUntil: " validUntil=\"\(F.time(-1))\""), now: F.now)
        }
        #expect(throws: SAMLMetadataError.doctype) {
            try SAMLMetadata.parse("<!DOCTYPE x [<!ENTITY a \"b\">]>" + Self.idpMetadata(), now: F.now)
        }
        let two =
            "<md:EntitiesDescriptor xmlns:md=\"urn:oasis:names:tc:SAML:2.0:metadata\">"
            + Self.idpMetadata() + Self.idpMetadata() + "</md:EntitiesDescriptor>"
        #expect(throws: SAMLMetadataError.severalIdentityProviders) { try SAMLMetadata.parse(two, now: F.now) }
        let noEntity = "<md:EntityDescriptor xmlns:md=\"urn:oasis:names:tc:SAML:2.0:metadata\"/>"
        #expect(throws: SAMLMetadataError.noEntityID) { try SAMLMetadata.parse(noEntity, now: F.now) }
        #expect(throws: SAMLMetadataError.notMetadata) { try SAMLMetadata.parse("<a/>", now: F.now) }
    }

    @Test("our metadata reads back: SPSSODescriptor, encryption key, ACS, escaped values")
    func serviceProviderMetadata() throws {
        let xml = SAMLServiceProviderMetadata.xml(
            entityID: "https://sp.example/m?a=1&b=\"2\"", acsURL: F.acsURL,
            encryptionCertificateDER: F.sp.certificateDER,
            nameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress", validUntil: F.now + 86_400)
        guard let document = SAMLDocument.parse(Array(xml.utf8)) else {
            Issue.record("our metadata is not well-formed XML")
            return
        }
        guard let root = document.root else {
            Issue.record("our metadata has no root")
            return
        }
        let md = SAMLNamespace.metadata
        #expect(root.is("EntityDescriptor", in: md))
        #expect(root.attribute("entityID") == "https://sp.example/m?a=1&b=\"2\"")
        #expect(root.attribute("validUntil").flatMap(SAMLTime.parse) == F.now + 86_400)
        let sp = try #require(try root.child("SPSSODescriptor", in: md))
        #expect(sp.attribute("AuthnRequestsSigned") == "false" && sp.attribute("WantAssertionsSigned") == "true")
        #expect(sp.attribute("protocolSupportEnumeration") == SAMLNamespace.samlProtocol)
        let key = try #require(try sp.child("KeyDescriptor", in: md))
        #expect(key.attribute("use") == "encryption")
        #expect(Data(base64Encoded: key.looseText.filter { !$0.isWhitespace }) == F.sp.certificateDER)
        let acs = try #require(try sp.child("AssertionConsumerService", in: md))
        #expect(acs.attribute("Binding") == SAMLBinding.httpPost && acs.attribute("Location") == F.acsURL)
        #expect(acs.attribute("index") == "0")
        #expect(try sp.child("NameIDFormat", in: md)?.text == "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress")
    }

    @Test("the AuthnRequest: a redirect URL whose SAMLRequest inflates back to the request, RelayState kept")
    func authnRequest() throws {
        let made = SAMLAuthnRequest.make(
            destination: "https://idp.example/sso?tenant=a%20b", acsURL: F.acsURL, spEntityID: F.spEntityID,
            nameIDFormat: nil, now: F.now)
        #expect(made.id.hasPrefix("_") && made.id.count == 41)
        let url = SAMLAuthnRequest.appending(relayState: "state/1+2", to: made.url)
        let components = try #require(URLComponents(string: url))
        #expect(components.host == "idp.example" && components.path == "/sso")
        let items = components.queryItems ?? []
        #expect(items.map(\.name) == ["tenant", "SAMLRequest", "RelayState"])
        #expect(items.first { $0.name == "tenant" }?.value == "a b")
        #expect(items.first { $0.name == "RelayState" }?.value == "state/1+2")
        let encoded = try #require(items.first { $0.name == "SAMLRequest" }?.value)
        let deflated = try #require(Data(base64Encoded: encoded))
        let xml = try #require(SAMLRedirectEncoding.inflate(deflated)).map { Character(UnicodeScalar($0)) }
        let expected = SAMLAuthnRequest(
            spEntityID: F.spEntityID, acsURL: F.acsURL, destination: "https://idp.example/sso?tenant=a%20b",
            nameIDFormat: nil
        ).xml(id: made.id, issueInstant: F.now)
        #expect(String(xml) == expected)
        #expect(expected.contains("IssueInstant=\"\(SAMLTime.format(F.now))\""))
        #expect(SAMLTime.format(F.now).hasSuffix("Z"))
        #expect(expected.contains("Format=\"\(SAMLAuthnRequest.unspecifiedNameID)\" AllowCreate=\"true\""))
        #expect(SAMLAuthnRequest.appending("a", "b", to: "https://x.example/p#f") == "https://x.example/p?a=b#f")
    }

    @Test("inflate stops at its cap and refuses what is not DEFLATE")
    func inflateCap() {
        let big = SAMLRedirectEncoding.deflate(Data(repeating: 0x41, count: 100_000))
        #expect(SAMLRedirectEncoding.inflate(big, limit: 1000) == nil)
        #expect(SAMLRedirectEncoding.inflate(big)?.count == 100_000)
        #expect(SAMLRedirectEncoding.inflate(Data([0xff, 0xff, 0xff])) == nil)
    }

    @Test("SAML times: Z, fractions of any length, offsets")
    func times() {
        #expect(SAMLTime.parse("2025-06-15T15:06:40Z") == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(SAMLTime.parse("2025-06-15T15:06:40.1234567Z")!.timeIntervalSince1970 - 1_750_000_000 > 0.12)
        #expect(SAMLTime.parse("2025-06-15T17:06:40+02:00") == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(SAMLTime.parse("2025-02-30T00:00:00Z") == nil)
        #expect(SAMLTime.parse("yesterday") == nil)
    }
}
