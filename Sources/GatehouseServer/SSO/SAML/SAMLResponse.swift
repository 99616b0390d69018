import Foundation

/// A SAML Response as `SAMLResponseReader` read it: every value comes from the Response element or its one
/// Assertion, after their signatures verified. Nothing here is checked against what we expect; `SAMLChecks` does that.
struct SAMLResponse: Sendable, Equatable {
    var id: String
    var inResponseTo: String?
    var destination: String?
    var issueInstant: Date?
    /// The Response's own Issuer, which is optional.
    var issuer: String?
    /// Whether the Response element itself carried a signature that verified.
    var isSigned: Bool
    var assertion: SAMLAssertion
}

/// The one Assertion of a `SAMLResponse`.
struct SAMLAssertion: Sendable, Equatable {
    var id: String
    var issueInstant: Date?
    var issuer: String
    /// Whether the Assertion carried a signature of its own that verified.
    var isSigned: Bool
    /// Whether it arrived as an EncryptedAssertion.
    var wasEncrypted: Bool
    var nameID: String?
    var nameIDFormat: String?
    var spNameQualifier: String?
    /// Every SubjectConfirmation with the bearer method, in document order.
    var bearerConfirmations: [SAMLBearerConfirmation]
    var notBefore: Date?
    var notOnOrAfter: Date?
    /// The Audience values of each AudienceRestriction, one list per restriction.
    var audienceRestrictions: [[String]]
    var authnInstant: Date?
    var sessionIndex: String?
    var sessionNotOnOrAfter: Date?
    /// Attribute values by Name, and by FriendlyName too where one is given. Values that are not plain text (an
    /// element inside AttributeValue) are left out.
    var attributes: [String: [String]]
}

/// The data of one bearer SubjectConfirmation.
struct SAMLBearerConfirmation: Sendable, Equatable {
    var recipient: String?
    var notOnOrAfter: Date?
    var notBefore: Date?
    var inResponseTo: String?
}

/// Why a SAML Response was not accepted: by `SAMLResponseReader` (its form, structure and signatures) or by
/// `SAMLChecks` (what it says). The messages are short, for logs and the sign-in page's error, and never quote the
/// document.
enum SAMLRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge
    case malformedBase64
    case malformedXML
    case doctype
    case notAResponse
    /// A required element or attribute is missing, repeated or not a plain value; names the element.
    case malformed(String)
    case commentOrInstruction
    case duplicateID
    /// The identity provider answered with a status other than Success: its status code value(s), outermost first.
    case identityProviderStatus(String)
    case noAssertion
    case multipleAssertions
    /// An Assertion somewhere other than as the Response's child: the shape of a signature-wrapping attack.
    case wrapping
    case unsigned
    case invalidSignature(String)
    case weakAlgorithm(String)
    case encryptedButNoKey
    case decryptionFailed(String)
    /// libxml2 or xmlsec could not be initialised.
    case unavailable

    case wrongIssuer
    case wrongAudience
    case noValidBearerConfirmation(String)
    case notYetValid
    case expired
    case wrongDestination
    case wrongInResponseTo
    case missingNameID

    var description: String {
        switch self {
        case .tooLarge: "The SAML response is too large."
        case .malformedBase64: "The SAML response is not valid base64."
        case .malformedXML: "The SAML response is not well-formed XML."
        case .doctype: "The SAML response declares a DOCTYPE."
        case .notAResponse: "The message is not a SAML 2.0 Response."
        case .malformed(let what): "The SAML response is malformed: \(what)."
        case .commentOrInstruction: "The SAML response contains a comment or processing instruction."
        case .duplicateID: "The SAML response uses the same ID twice."
        case .identityProviderStatus(let status): "The identity provider refused the sign-in (\(status))."
        case .noAssertion: "The SAML response holds no assertion."
        case .multipleAssertions: "The SAML response holds more than one assertion."
        case .wrapping: "The SAML response holds an assertion outside its expected place."
        case .unsigned: "Neither the SAML response nor its assertion is signed."
        case .invalidSignature(let reason): "The SAML signature is not valid: \(reason)."
        case .weakAlgorithm(let algorithm): "The SAML response uses an algorithm we do not accept: \(algorithm)."
        case .encryptedButNoKey: "The assertion is encrypted but no decryption key is configured."
        case .decryptionFailed(let reason): "The assertion could not be decrypted: \(reason)."
        case .unavailable: "The XML security library could not be initialised."
        case .wrongIssuer: "The assertion was issued by another identity provider."
        case .wrongAudience: "The assertion is not addressed to this service provider."
        case .noValidBearerConfirmation(let reason): "The assertion has no usable bearer confirmation: \(reason)."
        case .notYetValid: "The assertion is not valid yet."
        case .expired: "The assertion has expired."
        case .wrongDestination: "The SAML response was sent to another address."
        case .wrongInResponseTo: "The SAML response does not answer our request."
        case .missingNameID: "The assertion names no subject."
        }
    }
}
