import Foundation
import GatehouseAPI
import SQLKit

/// Signing in through a company's identity provider, in GoTrue's wire format: `POST /auth/v1/sso` sends the browser
/// to the provider, which answers at the assertion consumer service (SAML) or the shared callback (OIDC, through
/// `OAuthFlow` with the provider `sso:<id>`); the browser then goes on to the app with `?code=` (PKCE) or the session
/// in the fragment.
///
/// The account is the provider's identity's (`sso:<provider id>`, subject the assertion's user id), made on its first
/// sign-in and never found by its address (docs/security.md, "Single sign-on"); it becomes a member of the provider's
/// company with the company's default role and mask.
struct SSOSignIn: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let serviceProvider: SAMLServiceProvider
    let connections: SSOConnections
    let flow: OAuthFlow
    let sessions: SessionService
    let users: UserReader
    let trail: AuditTrail
    let throttling: AccountThrottling
    let mail: AccountMail

    /// How long a trip to a SAML provider may take (GoTrue's relay state validity, and our redirect flow's).
    static let lifetime: TimeInterval = 300
    /// How far the provider's clock may be from ours.
    static let skew: TimeInterval = 180

    /// Where `POST /auth/v1/sso` sends the browser.
    enum Departure: Sendable {
        /// 303 to `location`, with the cookie an OIDC trip binds the browser by.
        case redirect(location: String, cookie: String?)
        /// 200 `{"url"}`.
        case url(String)
    }

    /// GoTrue's `SingleSignOnParams`, the body of `POST /auth/v1/sso` (a router route: the document's SSORequest).
    struct Request: Decodable, Sendable {
        var providerId: String?
        var domain: String?
        var redirectTo: String?
        var skipHttpRedirect: Bool?
        var codeChallenge: String?
        var codeChallengeMethod: String?

        enum CodingKeys: String, CodingKey {
            case providerId = "provider_id", domain, redirectTo = "redirect_to"
            case skipHttpRedirect = "skip_http_redirect", codeChallenge = "code_challenge"
            case codeChallengeMethod = "code_challenge_method"
        }
    }

    /// `POST /auth/v1/sso`.
    func start(_ body: Request, client: ClientInfo, secureCookie: Bool) async throws -> Departure {
        try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
        let providerID = body.providerId.flatMap { $0.isEmpty ? nil : $0 }
        let domain = body.domain.flatMap { $0.isEmpty ? nil : $0 }
        if providerID != nil, domain != nil {
            throw APIError.validation("Only one of provider_id or domain supported")
        }
        let repository = SSOProviderRepository(db: store.database)
        let provider: SSOProviderRecord
        if let providerID {
            guard let id = Secrets.identifier(providerID), let found = try await repository.find(id: id) else {
                throw APIError(.notFound, code: .ssoProviderNotFound, message: "No such SSO provider")
            }
            provider = found
        } else if let domain {
            guard let name = DomainRules.normalized(domain), let found = try await repository.find(domain: name) else {
                throw APIError(
                    .notFound, code: .ssoProviderNotFound, message: "No SSO provider assigned for this domain")
            }
            provider = found
        } else {
            throw APIError.validation("A provider_id or domain needs to be provided")
        }
        guard !provider.disabled else {
            throw APIError(.notFound, code: .ssoProviderDisabled, message: "SSO Provider is currently disabled")
        }
        // Unlike GoTrue, whose default is the 303: a client that does not send the flag reads JSON.
        let skipRedirect = body.skipHttpRedirect ?? true
        switch provider.kind {
        case .oidc:
            var request = OAuthFlow.Request(provider: provider.identityProvider)
            request.redirectTo = body.redirectTo
            request.codeChallenge = body.codeChallenge.flatMap { $0.isEmpty ? nil : $0 }
            request.codeChallengeMethod = body.codeChallengeMethod.flatMap { $0.isEmpty ? nil : $0 }
            request.skipHTTPRedirect = skipRedirect
            switch try await flow.start(request, browser: nil, client: client, secureCookie: secureCookie) {
            case .redirect(let location, let cookie): return .redirect(location: location, cookie: cookie)
            case .url(let url): return .url(url)
            }
        case .saml:
            let challenge = try PKCE.challenge(
                body.codeChallenge.flatMap { $0.isEmpty ? nil : $0 },
                method: body.codeChallengeMethod.flatMap { $0.isEmpty ? nil : $0 })
            let now = clock.now
            let idp = try SSOProviders.metadata(provider.metadataXML ?? "", now: now)
            let authn = SAMLAuthnRequest.make(
                destination: idp.redirectURL, acsURL: serviceProvider.acsURL, spEntityID: serviceProvider.entityID,
                nameIDFormat: provider.nameIDFormat, now: now)
            let relayState = Secrets.identifier()
            try await SSOProviderRepository(db: store.database).insert(
                SAMLRelayStateRecord(
                    id: relayState, providerID: provider.id, requestID: authn.id,
                    redirectTo: mail.redirectTarget(body.redirectTo), codeChallenge: challenge,
                    createdAt: now.epochMilliseconds,
                    expiresAt: now.addingTimeInterval(Self.lifetime).epochMilliseconds,
                    usedAt: nil))
            let url = SAMLAuthnRequest.appending(relayState: relayState, to: authn.url)
            return skipRedirect ? .url(url) : .redirect(location: url, cookie: nil)
        }
    }

    // MARK: The assertion consumer service

    /// `POST /auth/v1/sso/saml/acs`: the IdP's answer, verified, and the browser sent on. Every outcome is a
    /// redirect: a refusal goes to the trip's `redirect_to` when the trip is known, else the site URL, with `error`,
    /// `error_code` and `error_description` in the query.
    func consume(samlResponse: String?, relayState: String?, client: ClientInfo) async -> LinkRedirect {
        var target = mail.siteURL
        var pkce = true
        do {
            // GoTrue limits assertions per address too (GOTRUE_SAML_RATE_LIMIT_ASSERTION).
            try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
            guard let samlResponse, !samlResponse.isEmpty else {
                throw APIError.validation("SAMLResponse is missing")
            }
            let now = clock.now
            let repository = SSOProviderRepository(db: store.database)
            let provider: SSOProviderRecord
            var requestID: String?
            var challenge: String?
            let relayState = relayState ?? ""
            if let id = Secrets.identifier(relayState) {
                // SP-initiated: the trip is spent now, whatever the answer, as GoTrue deletes it.
                guard let trip = try await repository.use(relayState: id, now: now.epochMilliseconds) else {
                    let used = try await repository.find(relayState: id) != nil
                    throw APIError(
                        .notFound, code: .samlRelayStateNotFound,
                        message: used
                            ? "This sign-in was finished already: start again"
                            : "SAML RelayState does not exist, try logging in again?")
                }
                target = trip.redirectTo
                pkce = trip.codeChallenge != nil
                guard trip.expiresAt > now.epochMilliseconds else {
                    throw APIError(
                        .unprocessableContent, code: .samlRelayStateExpired,
                        message: "SAML RelayState has expired. Try logging in again?")
                }
                guard let found = try await repository.find(id: trip.providerID) else {
                    throw APIError(.notFound, code: .ssoProviderNotFound, message: "No such SSO provider")
                }
                provider = found
                requestID = trip.requestID
                challenge = trip.codeChallenge
            } else if relayState.isEmpty || URL(string: relayState)?.scheme != nil {
                // IdP-initiated: the provider is the one the (not yet verified) issuer names; the verification
                // below holds it to that provider's keys.
                target = mail.redirectTarget(relayState.isEmpty ? nil : relayState)
                pkce = true
                guard let issuer = SAMLResponseReader.unverifiedIssuer(samlResponse),
                    let found = try await repository.find(entityID: issuer)
                else {
                    throw APIError(
                        .notFound, code: .samlIdpNotFound,
                        message: "A SAML connection has not been established with this Identity Provider")
                }
                provider = found
            } else {
                throw APIError.validation("SAML RelayState is not a valid UUID or URL")
            }
            guard !provider.disabled else {
                throw APIError(
                    .notFound, code: .ssoProviderDisabled,
                    message: "SSO Provider assigned for this domain is currently disabled")
            }
            let assertion = try await verify(samlResponse, provider: provider, requestID: requestID, now: now)
            let outcome = try await signIn(
                assertion, provider: provider, startsSession: challenge == nil, client: client)
            if let challenge {
                let grant = ProviderGrant(
                    accountID: outcome.account.id, provider: provider.identityProvider, linked: false)
                let code = try await FlowStates(db: store.database, clock: clock).create(
                    for: grant, challenge: challenge)
                return LinkPage.redirect(target, query: [("code", code)])
            }
            guard let issued = outcome.session else { throw APIError.sessionNotFound }
            let session = try await sessions.response(
                for: issued, user: try await users.user(outcome.account, db: store.database))
            return LinkPage.redirect(target, fragment: LinkPage.sessionFragment(session))
        } catch let error as APIError {
            if error.code != ErrorCode.samlRelayStateNotFound.rawValue {
                await trail.record(
                    client.event(
                        .signInFailed, accountID: nil, detail: ["method": "sso/saml", "reason": error.code]))
            }
            let items = [
                ("error", LinkPage.oauthError(error)), ("error_code", error.code), ("error_description", error.message),
            ]
            return pkce ? LinkPage.redirect(target, query: items) : LinkPage.redirect(target, fragment: items)
        } catch {
            let items = [
                ("error", "server_error"), ("error_code", ErrorCode.unexpectedFailure.rawValue),
                ("error_description", "The sign-in could not be finished: try again"),
            ]
            return LinkPage.redirect(target, query: items)
        }
    }

    /// The response verified against the provider's keys and held to this trip; its assertion id spent.
    private func verify(_ samlResponse: String, provider: SSOProviderRecord, requestID: String?, now: Date)
        async throws -> SAMLResponse
    {
        let idp = try SSOProviders.metadata(provider.metadataXML ?? "", now: now)
        let keys = try await serviceProvider.keys()
        let response: SAMLResponse
        do {
            response = try SAMLResponseReader.read(
                samlResponse, certificates: idp.signingCertificates, privateKeyPEM: keys.privateKeyPEM)
            let ends = try SAMLChecks.check(
                response,
                expecting: SAMLExpectation(
                    spEntityID: serviceProvider.entityID, acsURL: serviceProvider.acsURL, idpEntityID: idp.entityID,
                    requestID: requestID, skew: Self.skew),
                now: now)
            // An assertion signs in once: its id is kept until it could no longer be accepted.
            guard
                try await SSOProviderRepository(db: store.database).claimAssertion(
                    providerID: provider.id, id: response.assertion.id,
                    expiresAt: ends.addingTimeInterval(Self.skew).epochMilliseconds)
            else {
                throw APIError.validation("SAML Assertion is not valid: it was used already")
            }
        } catch let refusal as SAMLRefusal {
            throw APIError.validation("SAML Assertion is not valid: \(refusal)")
        }
        return response
    }

    // MARK: The account

    /// What the assertion names: the user id (GoTrue's rule: a `subject-id` attribute, else a NameID that is not
    /// transient), the address, and the mapped claims.
    static func identity(_ response: SAMLResponse, mapping: [String: JSONValue]) throws -> SSOIdentity {
        let assertion = response.assertion
        let subjectID = assertion.attributes.first {
            $0.key.lowercased() == "urn:oasis:names:tc:saml:attribute:subject-id"
        }?
        .value.first { !$0.isEmpty }
        var nameID: String? = assertion.nameID?.trimmingCharacters(in: .whitespacesAndNewlines)
        if assertion.nameIDFormat == "urn:oasis:names:tc:SAML:2.0:nameid-format:transient" || nameID?.isEmpty == true {
            nameID = nil
        }
        let isEmailFormat = assertion.nameIDFormat == "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"
        if isEmailFormat { nameID = nameID?.lowercased() }
        guard let subject = subjectID ?? nameID else {
            throw APIError(
                .badRequest, code: .samlAssertionNoUserId,
                message:
                    "SAML Assertion did not contain a persistent Subject Identifier attribute or Subject NameID "
                    + "uniquely identifying this user")
        }
        let claims = SSOAttributeMapping.claims(mapping, from: assertion.attributes)
        var email: String?
        if case .string(let mapped)? = claims["email"], !mapped.isEmpty { email = mapped }
        if email == nil {
            let known = [
                "urn:oid:0.9.2342.19200300.100.1.3",
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
                "http://schemas.xmlsoap.org/claims/emailaddress", "mail", "email",
            ]
            for name in known {
                if let value = assertion.attributes.first(where: { $0.key.lowercased() == name })?.value
                    .first(where: { !$0.isEmpty })
                {
                    email = value
                    break
                }
            }
        }
        if email == nil, isEmailFormat { email = nameID }
        guard let email = email.flatMap(EmailAddress.normalize) else {
            throw APIError(
                .badRequest, code: .samlAssertionNoEmail, message: "SAML Assertion does not contain an email address")
        }
        var profile: [String: JSONValue] = [:]
        for key in ["name", "full_name", "given_name", "family_name", "picture"] { profile[key] = claims[key] }
        var custom = claims
        for key in profile.keys + ["email"] { custom[key] = nil }
        return SSOIdentity(subject: subject, email: email, profile: profile, customClaims: custom)
    }

    private func signIn(
        _ response: SAMLResponse, provider: SSOProviderRecord, startsSession: Bool, client: ClientInfo
    ) async throws -> ExternalSignIn.SSOOutcome {
        try await connections.signIn(
            try Self.identity(response, mapping: provider.attributeMapping), provider: provider, method: "sso/saml",
            startsSession: startsSession, client: client)
    }
}
