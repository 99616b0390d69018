import Foundation
import GatehouseClientAPI
import OpenAPIRuntime

// Passkeys, when the server has them on (else `passkey_disabled`): account passkeys to sign in without a password,
// and company passkeys to log in to one company without the credential's password. Each ceremony asks the server for
// a challenge, lets the authenticator answer it, and sends the answer back within five minutes.

extension Auth {
    /// Registers a passkey for the signed-in account with `authenticator`. The account's passkeys are excluded, so a
    /// device that holds one already refuses (`authenticator(.credentialExcluded)`). An account with a verified
    /// second factor needs an aal2 session (`insufficient_aal`); ten passkeys at most (`too_many_passkeys`). A new
    /// passkey needs recent proof: a sign-in in the last ten minutes, or `currentPassword`, or a `nonce` from
    /// `reauthenticate()` (else `reauthentication_needed`); the account is mailed when one is added or removed.
    @discardableResult
    public func registerPasskey(
        using authenticator: some PasskeyAuthenticator, currentPassword: String? = nil, nonce: String? = nil
    ) async throws(GatehouseError) -> Passkey {
        let proof = Components.Schemas.RecentProof(currentPassword: currentPassword, nonce: nonce)
        let challenge = try await sessions.authorized {
            try await $0.passkeyRegistrationOptions(body: .json(proof)).ok.body.json
        }
        let request = try PasskeyRegistrationRequest(challenge.options)
        let body = Components.Schemas.PasskeyVerifyRequest(
            challengeId: challenge.challengeId,
            credential: try await PasskeyWire.credential { try await authenticator.createCredential(request) })
        return Passkey(
            try await sessions.authorized { try await $0.passkeyRegistrationVerify(body: .json(body)).ok.body.json })
    }

    /// Signs in with one of the account's passkeys, as `signIn(email:password:)` does (leaving the company, and
    /// telling `signedIn`). The passkey names its account; the session is aal1 with the method `passkey`. A passkey
    /// the server does not know (deleted, or a company's) throws `webauthn_credential_not_found`.
    @discardableResult
    public func signInWithPasskey(using authenticator: some PasskeyAuthenticator) async throws(GatehouseError)
        -> AuthSession
    {
        let client = self.client
        let challenge = try await call { try await client.passkeyAuthenticationOptions().ok.body.json }
        let request = try PasskeyAssertionRequest(challenge.options)
        let body = Components.Schemas.PasskeyVerifyRequest(
            challengeId: challenge.challengeId,
            credential: try await PasskeyWire.credential { try await authenticator.getAssertion(request) })
        return try await signIn { try await client.passkeyAuthenticationVerify(body: .json(body)).ok.body.json }
    }

    /// The account's passkeys, oldest first.
    public func listPasskeys() async throws(GatehouseError) -> [Passkey] {
        try await sessions.authorized { try await $0.listPasskeys().ok.body.json }.map(Passkey.init)
    }

    /// Renames one of the account's passkeys (at most 120 characters).
    @discardableResult
    public func renamePasskey(id: String, to name: String) async throws(GatehouseError) -> Passkey {
        let body = Components.Schemas.RenamePasskeyRequest(friendlyName: name)
        return Passkey(
            try await sessions.authorized {
                try await $0.renamePasskey(path: .init(passkeyId: id), body: .json(body)).ok.body.json
            })
    }

    /// Removes one of the account's passkeys; it no longer signs in (the device may still hold it).
    public func deletePasskey(id: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.deletePasskey(path: .init(passkeyId: id)).noContent }
    }
}

extension Companies {
    /// Registers a passkey that logs the account in to `companyID` beside the credential's password. It needs
    /// the company session of that company (`login(to:username:password:)` first), else `notSignedIn`, logged in
    /// within the last ten minutes unless `currentPassword` (the account's) or a `nonce` from `reauthenticate()` is
    /// given (else `reauthentication_needed`). Where the company requires a credential, the passkey logs in only
    /// while the member has one (`company_credential_required`).
    @discardableResult
    public func registerPasskey(
        for companyID: String, using authenticator: some PasskeyAuthenticator, currentPassword: String? = nil,
        nonce: String? = nil
    ) async throws(GatehouseError) -> Passkey {
        let proof = Components.Schemas.RecentProof(currentPassword: currentPassword, nonce: nonce)
        let challenge = try await inSession(of: companyID) {
            try await $0.companyPasskeyRegistrationOptions(path: .init(cid: companyID), body: .json(proof)).ok.body
                .json
        }
        let request = try PasskeyRegistrationRequest(challenge.options)
        let body = Components.Schemas.PasskeyVerifyRequest(
            challengeId: challenge.challengeId,
            credential: try await PasskeyWire.credential { try await authenticator.createCredential(request) })
        return Passkey(
            try await inSession(of: companyID) {
                try await $0.companyPasskeyRegistrationVerify(path: .init(cid: companyID), body: .json(body)).ok.body
                    .json
            })
    }

    /// Signs in to a company with one of the account's passkeys for it, as `signIn(to:username:password:)` does
    /// (switching from the company signed in to, if any). Without one: `webauthn_credential_not_found`; a company
    /// that requires a second factor refuses an aal1 account session (`insufficient_aal`).
    @discardableResult
    public func signInWithPasskey(to companyID: String, using authenticator: some PasskeyAuthenticator)
        async throws(GatehouseError) -> AuthSession
    {
        let challenge = try await sessions.authorized {
            try await $0.companyPasskeyLoginOptions(path: .init(cid: companyID)).ok.body.json
        }
        let request = try PasskeyAssertionRequest(challenge.options)
        let body = Components.Schemas.PasskeyVerifyRequest(
            challengeId: challenge.challengeId,
            credential: try await PasskeyWire.credential { try await authenticator.getAssertion(request) })
        let wire: Components.Schemas.Session
        do {
            wire = try await sessions.authorized {
                try await $0.companyPasskeyLogin(path: .init(cid: companyID), body: .json(body)).ok.body.json
            }
        } catch {
            throw error.asLockout()
        }
        return try await adopt(wire, companyID: companyID)
    }

    /// The account's passkeys for `companyID` (its company session), oldest first.
    public func passkeys(for companyID: String) async throws(GatehouseError) -> [Passkey] {
        try await inSession(of: companyID) {
            try await $0.listCompanyPasskeys(path: .init(cid: companyID)).ok.body.json
        }.map(Passkey.init)
    }

    /// Removes one of the account's passkeys for `companyID` (its company session).
    public func deletePasskey(_ passkeyID: String, in companyID: String) async throws(GatehouseError) {
        _ = try await inSession(of: companyID) {
            try await $0.deleteCompanyPasskey(path: .init(cid: companyID, passkeyId: passkeyID)).noContent
        }
    }

    /// Runs a call with the company session of `companyID`: `notSignedIn` when the session is another company's or
    /// none; a revoked membership ends it as any company call does.
    private func inSession<T: Sendable>(
        of companyID: String, _ body: @Sendable (Client) async throws -> T
    ) async throws(GatehouseError) -> T {
        guard await companySessions.current?.companyID == companyID else { throw .notSignedIn }
        do {
            return try await companySessions.authorized(body)
        } catch .companyAccessRevoked {
            await revoked(companyID)
            throw .companyAccessRevoked
        }
    }
}
