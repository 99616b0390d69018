import Foundation
import GatehouseAPI
import SQLKit

/// Companies' OIDC providers as the redirect flow reaches them (`sso:<id>`; OIDC per company is our extension of
/// GoTrue's SSO), and what every single sign-on does at its end: the account made or found, and made a member of the
/// provider's company with the company's default role and mask, within the tier's participant limit.
struct SSOConnections: CompanyIdentityProviders {
    let store: Store
    let clock: any GatehouseClock
    let box: SecretBox
    let keys: CustomProviderKeys
    let external: ExternalSignIn

    func upstream(_ name: String) async throws -> UpstreamProvider {
        let provider = try await enabled(name)
        guard provider.kind == .oidc, let settings = provider.oidc, let sealed = provider.sealedSecret else {
            throw APIError(
                .badRequest, code: .providerDisabled,
                message: "Provider \(name.debugDescription) is a SAML provider: sign in with POST /auth/v1/sso")
        }
        return try await keys.upstream(
            settings, secret: try box.open(sealed, context: SSOProviders.context(provider.id)))
    }

    func signIn(_ identity: ExternalIdentity, provider name: String, startsSession: Bool, client: ClientInfo)
        async throws -> (AccountRecord, IssuedSession?)
    {
        let provider = try await enabled(name)
        guard let email = identity.email.flatMap(EmailAddress.normalize) else {
            throw APIError(
                .badRequest, code: .samlAssertionNoEmail, message: "The identity provider gave no email address")
        }
        let outcome = try await signIn(
            SSOIdentity(subject: identity.subject, email: email, profile: identity.profile, customClaims: [:]),
            provider: provider, method: "sso/oidc", startsSession: startsSession, client: client)
        return (outcome.account, outcome.session)
    }

    /// The account of `identity`, a member of `provider`'s company.
    func signIn(
        _ identity: SSOIdentity, provider: SSOProviderRecord, method: String, startsSession: Bool, client: ClientInfo
    ) async throws -> ExternalSignIn.SSOOutcome {
        let companyID = provider.companyID
        let now = clock.now
        return try await external.ssoSignIn(
            identity, provider: provider.identityProvider, method: method, startsSession: startsSession,
            client: client
        ) { accountID, db in
            try await Self.admit(accountID, to: companyID, now: now, db: db)
        }
    }

    /// Makes the account a member of the company on its first single sign-on, with the company's default role and
    /// mask (the joining-by-domain setting's, on or off); a member already is left as it is.
    static func admit(_ accountID: String, to companyID: String, now: Date, db: any SQLDatabase) async throws {
        try await DomainJoinService.admit(
            accountID, to: companyID, setting: try await DomainJoinService.defaultSetting(companyID, db: db), db: db,
            now: now)
    }

    private func enabled(_ name: String) async throws -> SSOProviderRecord {
        guard let id = Secrets.identifier(String(name.dropFirst("sso:".count))),
            let provider = try await SSOProviderRepository(db: store.database).find(id: id)
        else {
            throw APIError(.notFound, code: .ssoProviderNotFound, message: "No such SSO provider")
        }
        guard !provider.disabled else {
            throw APIError(.notFound, code: .ssoProviderDisabled, message: "SSO Provider is currently disabled")
        }
        return provider
    }
}
