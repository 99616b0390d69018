import Foundation

/// What a SAML Response must say to sign someone in to this service provider.
struct SAMLExpectation: Sendable, Equatable {
    /// Our entity ID, which every AudienceRestriction must name.
    var spEntityID: String
    /// Our assertion consumer service URL: the Response's Destination and the bearer confirmation's Recipient.
    var acsURL: String
    /// The identity provider's entity ID, the Issuer of the assertion (and of the Response when it names one).
    var idpEntityID: String
    /// The ID of our AuthnRequest; nil for an IdP-initiated sign-in, which then must answer no request.
    var requestID: String?
    /// How far apart our clock and the IdP's may be.
    var skew: TimeInterval

    init(spEntityID: String, acsURL: String, idpEntityID: String, requestID: String?, skew: TimeInterval = 180) {
        self.spEntityID = spEntityID
        self.acsURL = acsURL
        self.idpEntityID = idpEntityID
        self.requestID = requestID
        self.skew = skew
    }
}

/// The rules of SAML 2.0's Web Browser SSO profile (profiles, section 4.1.4.3) over a read `SAMLResponse`: pure, the
/// clock passed in.
enum SAMLChecks {
    /// Checks `response` against `expectation` at `now`, and returns until when the assertion may be presented: the
    /// earliest of its Conditions' NotOnOrAfter and the accepted bearer confirmation's, so that the caller can keep
    /// the assertion's ID against replay until then.
    static func check(_ response: SAMLResponse, expecting expectation: SAMLExpectation, now: Date)
        throws(SAMLRefusal) -> Date
    {
        let assertion = response.assertion
        let skew = expectation.skew
        guard assertion.issuer == expectation.idpEntityID,
            response.issuer.map({ $0 == expectation.idpEntityID }) ?? true
        else { throw .wrongIssuer }
        if let destination = response.destination, destination != expectation.acsURL { throw .wrongDestination }
        // The Response answers our request, or none when we sent none.
        guard response.inResponseTo == nil || response.inResponseTo == expectation.requestID else {
            throw .wrongInResponseTo
        }

        guard !assertion.audienceRestrictions.isEmpty,
            assertion.audienceRestrictions.allSatisfy({ $0.contains(expectation.spEntityID) })
        else { throw .wrongAudience }

        if let notBefore = assertion.notBefore, notBefore > now + skew { throw .notYetValid }
        if let notOnOrAfter = assertion.notOnOrAfter, notOnOrAfter <= now - skew { throw .expired }

        guard let nameID = assertion.nameID, !nameID.isEmpty else { throw .missingNameID }

        var reason = "none is present"
        for confirmation in assertion.bearerConfirmations {
            guard confirmation.recipient == expectation.acsURL else {
                reason = "its Recipient is not our assertion consumer service"
                continue
            }
            guard let notOnOrAfter = confirmation.notOnOrAfter else {
                reason = "it has no NotOnOrAfter"
                continue
            }
            guard notOnOrAfter > now - skew else {
                reason = "it has expired"
                continue
            }
            if let notBefore = confirmation.notBefore, notBefore > now + skew {
                reason = "it is not valid yet"
                continue
            }
            guard confirmation.inResponseTo == expectation.requestID else {
                reason = "its InResponseTo does not match our request"
                continue
            }
            return min(notOnOrAfter, assertion.notOnOrAfter ?? notOnOrAfter)
        }
        throw .noValidBearerConfirmation(reason)
    }
}
