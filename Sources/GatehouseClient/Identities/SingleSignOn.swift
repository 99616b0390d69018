import Foundation
import GatehouseClientAPI

// Single sign-on through a company's identity provider (SAML, or OpenID Connect), as GoTrue's `POST /auth/v1/sso`
// and supabase-swift's `signInWithSSO` run it: the server answers the provider's page, which the app opens in a
// browser; the provider's answer goes back through the server to the app's `redirectTo` with a PKCE code, which
// `handleOpenURL(_:)` exchanges as it does a web sign-in's.

extension Auth {
    /// The sign-in page of the identity provider of the company that holds `domain` (the part of the address after
    /// `@`), for the app to open in a browser (`ASWebAuthenticationSession`). This client keeps the page's PKCE
    /// verifier, and `handleOpenURL(_:)` signs in with the URL the browser comes back to the app with at
    /// `redirectTo` (one of the server's allowed redirect URLs; without it, the server's site URL). Asking again
    /// replaces the verifier. No provider for the domain is `ssoProviderNotFound`, a disabled one
    /// `ssoProviderDisabled`.
    public func signInWithSSO(domain: String, redirectTo: URL? = nil) async throws(GatehouseError) -> URL {
        try await singleSignOnPage(.domain(domain), redirectTo: redirectTo)
    }

    /// The sign-in page of the identity provider `providerID` names (as `GatehouseError.ssoRequired` gives it), for
    /// the app to open in a browser, as `signInWithSSO(domain:redirectTo:)` answers it.
    public func signInWithSSO(providerID: String, redirectTo: URL? = nil) async throws(GatehouseError) -> URL {
        try await singleSignOnPage(.provider(providerID), redirectTo: redirectTo)
    }

    /// Asks the server for the provider's page with a new verifier's challenge, and keeps the verifier for the code
    /// the page comes back with.
    private func singleSignOnPage(
        _ target: SingleSignOn.Target, redirectTo: URL?
    ) async throws(GatehouseError) -> URL {
        let verifier = PKCEVerifier()
        let body = try SingleSignOn.body(target, redirectTo: redirectTo, challenge: verifier.challenge)
        let raw = self.raw
        let answer = try await call {
            try await raw.post(SingleSignOn.path, json: body, operationID: SingleSignOn.operationID)
        }
        let page = try OAuthRedirect.page(in: Data(answer), missing: "The server answered no sign-in page")
        await pkce.keep(verifier, for: .signIn)
        return page
    }

    /// Opens the page of provider `providerID` through `authenticator` and signs in with the URL it comes back with,
    /// through `handleOpenURL(_:)`: the driver of `LoginFlowModel`'s single sign-on step.
    @discardableResult
    func signInWithSSO(
        providerID: String, redirectTo: URL, using authenticator: some WebAuthenticator
    ) async throws(GatehouseError) -> AuthSession {
        let scheme = try OAuthRedirect.callbackScheme(of: redirectTo)
        let page = try await signInWithSSO(providerID: providerID, redirectTo: redirectTo)
        let callback = try await askAuthenticator {
            try await authenticator.authenticate(url: page, callbackScheme: scheme)
        }
        return try await handleOpenURL(callback)
    }
}

/// `POST /auth/v1/sso` as plain rules, with no I/O: the body the SDK sends.
enum SingleSignOn {
    /// Which provider: the company's for an address's domain, or one by its id.
    enum Target: Equatable {
        case domain(String)
        case provider(String)
    }

    /// The call (a router route outside the generated client: its 303 is not for apps).
    static let path = "/auth/v1/sso"
    /// The call's name where a transport sees it (as the contract's operation id names it).
    static let operationID = "signInWithSSO"

    /// GoTrue's SingleSignOnParams: always PKCE (S256), and the page's URL answered as JSON.
    struct Body: Encodable, Equatable {
        var domain: String?
        var providerID: String?
        var redirectTo: String?
        var skipHTTPRedirect = true
        var codeChallenge: String
        var codeChallengeMethod = PKCEVerifier.method

        enum CodingKeys: String, CodingKey {
            case domain
            case providerID = "provider_id"
            case redirectTo = "redirect_to"
            case skipHTTPRedirect = "skip_http_redirect"
            case codeChallenge = "code_challenge"
            case codeChallengeMethod = "code_challenge_method"
        }
    }

    /// The JSON body for `target`, returning to `redirectTo` (left out when nil), with `challenge`.
    static func body(_ target: Target, redirectTo: URL?, challenge: String) throws(GatehouseError) -> Data {
        var body = Body(redirectTo: redirectTo?.absoluteString, codeChallenge: challenge)
        switch target {
        case .domain(let domain): body.domain = domain
        case .provider(let id): body.providerID = id
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(body) else {
            throw .server(status: 400, code: "validation_failed", message: "The sign-in request cannot be made")
        }
        return data
    }
}

extension GatehouseError.Code {
    /// Single sign-on is required for the address: sign in through the company's provider
    /// (`GatehouseError.ssoRequired(providerID:)`).
    public static let ssoRequired = Self(rawValue: "sso_required")
    /// No identity provider has that id, or holds that domain.
    public static let ssoProviderNotFound = Self(rawValue: "sso_provider_not_found")
    /// The company's identity provider is turned off.
    public static let ssoProviderDisabled = Self(rawValue: "sso_provider_disabled")
}
