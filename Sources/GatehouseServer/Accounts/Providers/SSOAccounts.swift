import Foundation
import GatehouseAPI
import SQLKit

/// What a company's identity provider says of a user: its lasting id there, its address, the profile claims (name,
/// picture) and any other mapped claims (GoTrue's `custom_claims`).
struct SSOIdentity: Sendable {
    let subject: String
    let email: String
    let profile: [String: JSONValue]
    let customClaims: [String: JSONValue]
}

/// The identity providers of companies as the redirect flow reaches them (`sso:<id>`, OIDC): their side of the trip,
/// and the sign-in of the identity they name. SSO/ implements it; the flow knows no more of single sign-on.
protocol CompanyIdentityProviders: Sendable {
    func upstream(_ name: String) async throws -> UpstreamProvider
    func signIn(_ identity: ExternalIdentity, provider: String, startsSession: Bool, client: ClientInfo) async throws
        -> (AccountRecord, IssuedSession?)
}

extension ExternalSignIn {
    /// A single sign-on's account and, unless the app exchanges a code later, its session.
    struct SSOOutcome: Sendable {
        let account: AccountRecord
        let session: IssuedSession?
    }

    /// Signs in the account of the identity `sso:<provider id>` names, made on its first sign-in: a single sign-on
    /// account (`is_sso_user`), confirmed by the provider, never found by its address and never linked to another
    /// account by it, as GoTrue keeps one user per provider subject. `admit` makes it a member of the provider's
    /// company in the same transaction.
    func ssoSignIn(
        _ identity: SSOIdentity, provider: String, method: String, startsSession: Bool,
        client: ClientInfo, admit: @escaping @Sendable (String, any SQLDatabase) async throws -> Void
    ) async throws -> SSOOutcome {
        let now = clock.now
        return try await store.transaction { db in
            let accounts = AccountRepository(db: db)
            var account: AccountRecord
            if let linked = try await accounts.identity(provider: provider, providerID: identity.subject),
                let existing = try await accounts.find(id: linked.accountID)
            {
                account = existing
                try await accounts.touchIdentity(provider: provider, accountID: account.id, at: now)
            } else {
                let id = Secrets.identifier()
                var metadata = identity.profile
                if let name = metadata["name"], metadata["full_name"] == nil { metadata["full_name"] = name }
                account = AccountRecord(
                    id: id, email: AccountRecord.ssoEmail(id: id), emailConfirmedAt: now, passwordHash: nil,
                    userMetadata: metadata, createdAt: now, updatedAt: now, lastSignInAt: nil, disabledAt: nil,
                    ssoProviderID: String(provider.dropFirst("sso:".count)), ssoAddress: identity.email)
                try await accounts.insert(account)
                try await accounts.insert(
                    IdentityRecord(
                        id: Secrets.identifier(), accountID: id, provider: provider, providerID: identity.subject,
                        email: identity.email, createdAt: now, lastSignInAt: now))
                try await trail.within(db).record(
                    client.event(
                        .identityLinked, accountID: id, detail: ["provider": provider, "how": "sso", "account": "new"]))
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            // The provider's word is the address's: a change there is the account's too.
            account.lastSignInAt = now
            if account.ssoAddress != identity.email { account.ssoAddress = identity.email }
            account.updatedAt = now
            try await accounts.update(account)
            try await admit(account.id, db)
            guard startsSession else { return SSOOutcome(account: account, session: nil) }
            try await trail.within(db).record(
                client.event(.signedIn, accountID: account.id, detail: ["method": method, "provider": provider]))
            let issued = try await sessions.start(
                accountID: account.id, method: method, ip: client.ip, userAgent: client.userAgent, db: db)
            return SSOOutcome(account: account, session: issued)
        }
    }
}
