import Foundation
import GatehouseAPI
import Logging
import SQLKit

/// Signing in, and linking, with another provider's identity: the id_token grant (Apple, Google), the user's
/// identities unlinked, and what an Apple identity carries besides (the name given once, the refresh token revoked
/// when the identity or the account goes).
///
/// Which account an identity signs in to (docs/security.md, "Linking identities"): the account it is linked to;
/// otherwise the account with the same address only when the provider verified the address (an unconfirmed account
/// is confirmed by that proof, and whatever its unproven sign-up chose is dropped); otherwise a new account. An
/// address the provider did not verify neither joins an account nor makes one (422
/// `provider_email_needs_verification`), so nobody can pre-register someone else's address and wait for them.
struct ExternalSignIn: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let users: UserReader
    let providers: IDTokenProviders
    let apple: AppleSignInAPI?
    let revocations: AppleRevocations?
    let box: SecretBox
    let logger: Logger

    static let manualLinkingDisabled = APIError(
        .notFound, code: .manualLinkingDisabled, message: "Manual linking is disabled")

    /// `POST /auth/v1/token?grant_type=id_token`. With `link_identity` and the caller's session, links the identity
    /// to that account (manual linking) and answers a new session for it.
    func idToken(_ body: Schemas.IDTokenGrant, linkingTo caller: Caller?, client: ClientInfo) async throws
        -> Schemas.Session
    {
        if body.linkIdentity == true {
            guard settings.manualLinking else { throw Self.manualLinkingDisabled }
            guard caller != nil else { throw APIError.noAuthorization }
        }
        let verifier = try await providers.verifier(for: body.provider)
        let identity: ExternalIdentity
        do {
            identity = try await verifier.verify(body.idToken, nonce: body.nonce)
        } catch {
            await trail.record(
                client.event(
                    .signInFailed, accountID: caller?.accountID,
                    detail: ["method": verifier.provider, "reason": "\(error)"]))
            throw APIError.idToken(error, provider: verifier.provider)
        }
        // Apple's code is exchanged before anything is written: the call leaves the machine.
        let appleRefreshToken: String? =
            if identity.provider == "apple", let code = body.authorizationCode, !code.isEmpty {
                try await exchange(code, subject: identity.subject, client: client)
            } else {
                nil
            }
        let arrival = Arrival(
            linkTo: body.linkIdentity == true ? caller?.accountID : nil, tokenDigest: Secrets.digest(body.idToken),
            givenName: body.fullName?.givenName, familyName: body.fullName?.familyName,
            appleRefreshToken: appleRefreshToken)
        let (account, issued) = try await signIn(identity, arrival, client: client)
        guard let issued else { throw APIError.sessionNotFound }
        return try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
    }

    /// What a sign-in brings beside the identity.
    struct Arrival: Sendable {
        /// The account the identity is linked to (manual linking), rather than the one it finds.
        var linkTo: String? = nil
        /// The id token's digest: a token signs in once.
        var tokenDigest: String? = nil
        var givenName: String? = nil
        var familyName: String? = nil
        var appleRefreshToken: String? = nil
        /// False when the session starts later: the redirect flow's PKCE, when the app exchanges its code.
        var startsSession = true
    }

    /// Signs `identity` in, or links it, in one transaction; an unverified address meeting an account is audited
    /// after the transaction rolled back.
    func signIn(_ identity: ExternalIdentity, _ arrival: Arrival, client: ClientInfo) async throws
        -> (AccountRecord, IssuedSession?)
    {
        do {
            let newAccountID = try await beforeCreating(identity, arrival)
            return try await transaction(identity, arrival, client: client, now: clock.now, newAccountID: newAccountID)
        } catch let error as APIError where error.code == ErrorCode.providerEmailNeedsVerification.rawValue {
            await trail.record(
                client.event(
                    .signInFailed, accountID: nil,
                    detail: [
                        "method": identity.provider, "reason": "email_unverified",
                        "email": Secrets.emailDigest(identity.email ?? ""),
                    ]))
            throw error
        }
    }

    /// The session of a trip through a provider, when the app exchanges its code (`grant_type=pkce`).
    func session(
        after grant: ProviderGrant, client: ClientInfo,
        started: @escaping @Sendable (String, any SQLDatabase) async throws -> Void
    ) async throws -> Schemas.Session {
        let (account, issued) = try await store.transaction { db in
            guard let account = try await AccountRepository(db: db).find(id: grant.accountID) else {
                throw FlowStates.Refusal.notFound.apiError
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            try await trail.within(db).record(
                client.event(
                    .signedIn, accountID: account.id,
                    detail: ["method": grant.provider, "linked": grant.linked ? "manual" : "no", "flow": "pkce"]))
            let issued = try await sessions.start(
                accountID: account.id, method: "oauth", ip: client.ip, userAgent: client.userAgent, db: db)
            try await started(issued.sessionID, db)
            return (account, issued)
        }
        return try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
    }

    /// The sign-in's one transaction: the token spent, the account found or made, the identity linked, the name and
    /// Apple's token kept, the session started.
    private func transaction(
        _ identity: ExternalIdentity, _ arrival: Arrival, client: ClientInfo, now: Date, newAccountID: String
    ) async throws -> (AccountRecord, IssuedSession?) {
        try await store.transaction { db in
            let accounts = AccountRepository(db: db)
            // One sign-in per id token: a token seen before is refused until it expires.
            if let tokenDigest = arrival.tokenDigest {
                guard try await accounts.claimIdentityToken(tokenDigest, expiresAt: identity.expiresAt, now: now)
                else {
                    throw APIError(
                        .badRequest, code: .badJwt, message: "The \(identity.provider) id token was already used",
                        details: [
                            "error": .string("invalid request"),
                            "error_description": .string("id_token already used"),
                        ])
                }
            }
            var (account, identityID) = try await resolve(
                identity, linkingTo: arrival.linkTo, client: client, now: now, newAccountID: newAccountID, db: db)
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            if arrival.linkTo == nil {
                // The provider confirmed the address, not a sign-up's code: whatever a sign-up had chosen is dropped.
                try await ProvenEmailSignIn(clock: clock).confirmAndSignIn(
                    &account, pending: PendingSignup(passwordHash: nil, metadata: [:]), provider: identity.provider,
                    now: now, db: db)
            }
            if identity.provider == "apple",
                Self.keepName(&account.userMetadata, given: arrival.givenName, family: arrival.familyName)
            {
                account.updatedAt = now
                try await accounts.update(account)
            }
            let providers = ProviderRepository(db: db)
            if let appleRefreshToken = arrival.appleRefreshToken {
                let sealed = try box.seal(appleRefreshToken, context: AppleRevocations.context(identityID: identityID))
                try await providers.setProviderToken(identityID: identityID, accountID: account.id, sealed: sealed)
            }
            try await providers.clearConsentRevoked(identityID: identityID)
            guard arrival.startsSession else { return (account, nil) }
            try await trail.within(db).record(
                client.event(
                    .signedIn, accountID: account.id,
                    detail: ["method": identity.provider, "linked": arrival.linkTo == nil ? "no" : "manual"]))
            return (
                account,
                try await sessions.start(
                    accountID: account.id, method: "oauth", ip: client.ip, userAgent: client.userAgent, db: db)
            )
        }
    }

    /// The account `identity` signs in to (or is linked to), and the id of its identity row, created when new.
    private func resolve(
        _ identity: ExternalIdentity, linkingTo linkTo: String?, client: ClientInfo, now: Date, newAccountID: String,
        db: any SQLDatabase
    ) async throws -> (AccountRecord, String) {
        let accounts = AccountRepository(db: db)
        let linked = try await accounts.identity(provider: identity.provider, providerID: identity.subject)
        var account: AccountRecord
        var created = false
        if let linkTo {
            guard let own = try await accounts.find(id: linkTo) else { throw APIError.sessionNotFound }
            if let linked {
                guard linked.accountID == own.id else {
                    throw APIError(
                        .unprocessableContent, code: .identityAlreadyExists,
                        message: "Identity is already linked to another user")
                }
                return (own, linked.id)
            }
            account = own
        } else if let linked, let existing = try await accounts.find(id: linked.accountID) {
            return (existing, linked.id)
        } else {
            guard let email = identity.email.flatMap(EmailAddress.normalize) else {
                throw APIError.validation("The \(identity.provider) id token carries no email address")
            }
            guard identity.emailVerified else {
                // Recorded by `idToken` once the transaction is rolled back.
                throw APIError(
                    .unprocessableContent, code: .providerEmailNeedsVerification,
                    message:
                        "The \(identity.provider) account's email address is not verified: verify it with "
                        + "\(identity.provider) first")
            }
            if let existing = try await accounts.find(email: email) {
                account = existing
            } else {
                created = true
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: identity.accountMetadata, confirmedAt: now, now: now,
                    id: newAccountID)
            }
        }
        let id = Secrets.identifier()
        try await accounts.insert(
            IdentityRecord(
                id: id, accountID: account.id, provider: identity.provider, providerID: identity.subject,
                email: identity.email.flatMap(EmailAddress.normalize), createdAt: now, lastSignInAt: now))
        try await trail.within(db).record(
            client.event(
                .identityLinked, accountID: account.id,
                detail: [
                    "provider": identity.provider, "how": linkTo == nil ? "email" : "manual",
                    "account": created ? "new" : "existing",
                ]))
        return (account, id)
    }

    /// The id a new account would get, shown first to the before user created hook when it is on and this sign-in
    /// would make an account (GoTrue asks before its transaction, as here): a refusal stops the sign-in.
    private func beforeCreating(_ identity: ExternalIdentity, _ arrival: Arrival) async throws -> String {
        let id = Secrets.identifier()
        guard let hooks = sessions.hooks, hooks.isOn(.beforeUserCreated), arrival.linkTo == nil,
            identity.emailVerified, let email = identity.email.flatMap(EmailAddress.normalize)
        else { return id }
        let accounts = AccountRepository(db: store.database)
        guard try await accounts.identity(provider: identity.provider, providerID: identity.subject) == nil
        else { return id }
        try await hooks.beforeCreatingAccount(
            id: id, email: email, provider: identity.provider, metadata: identity.accountMetadata, confirmed: true,
            now: clock.now, store: store)
        return id
    }

    /// Exchanges Apple's authorization code for its refresh token. A code Apple refuses (used, expired, another
    /// app's) or one for another Apple ID refuses the sign-in; Apple unreachable, or codes not configured, signs in
    /// without a token to revoke later, and says so in the log.
    private func exchange(_ code: String, subject: String, client: ClientInfo) async throws -> String? {
        guard let apple else {
            logger.info("an Apple authorization code was sent, but --apple-team-id, -key-id and -private-key are unset")
            return nil
        }
        do {
            let tokens = try await apple.exchange(code: code, now: clock.now)
            if let idToken = tokens.id_token, let sub = Self.unverifiedSubject(idToken), sub != subject {
                throw AppleSignInAPI.Failure(refused: true, description: "the code belongs to another Apple ID")
            }
            return tokens.refresh_token
        } catch let failure as AppleSignInAPI.Failure where failure.refused {
            await trail.record(
                client.event(
                    .signInFailed, accountID: nil,
                    detail: ["method": "apple", "reason": "apple_code_rejected", "error": failure.description]))
            throw APIError(
                .badRequest, code: .appleCodeRejected,
                message: "Apple refused the authorization code: \(failure.description)")
        } catch {
            logger.warning(
                "Apple's authorization code could not be exchanged; signing in without a token to revoke",
                metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// The `sub` of a JWT whose signature is not checked: Apple's own answer over TLS, compared, never trusted alone.
    static func unverifiedSubject(_ jwt: String) -> String? {
        JWKSCache.unverifiedPart(1, of: jwt)?["sub"] as? String
    }

    /// Keeps the name Apple gave the app on the first authorization in `user_metadata` as GoTrue's Apple web flow
    /// does (`full_name`, `name`), with `given_name` and `family_name` beside them. A name kept before is never
    /// replaced, and an empty one changes nothing. True when `metadata` changed.
    static func keepName(_ metadata: inout [String: JSONValue], given: String?, family: String?) -> Bool {
        let given = given?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let family = family?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard !(given.isEmpty && family.isEmpty) else { return false }
        if case .string(let kept) = metadata["full_name"], !kept.isEmpty { return false }
        let full = [given, family].filter { !$0.isEmpty }.joined(separator: " ")
        metadata["full_name"] = .string(full)
        metadata["name"] = .string(full)
        if !given.isEmpty { metadata["given_name"] = .string(given) }
        if !family.isEmpty { metadata["family_name"] = .string(family) }
        return true
    }

    /// The account's identities, oldest first, as the account page lists them.
    func identities(of caller: Caller) async throws -> [IdentityRecord] {
        try await AccountRepository(db: store.database).identities(accountID: caller.accountID)
    }

    // MARK: Unlinking

    /// `DELETE /auth/v1/user/identities/{identity_id}`, as GoTrue answers it. The email identity is the account's
    /// address and is not unlinked (change the address instead). An Apple identity's token is queued for revocation
    /// in the same transaction.
    func unlink(identityID: String, by caller: Caller) async throws {
        guard settings.manualLinking else { throw Self.manualLinkingDisabled }
        try await FactorService.requireAAL2IfEnrolled(
            caller.identity, db: store.database,
            message: "AAL2 session is required to unlink an identity when MFA is enabled.")
        let now = clock.now
        let queued = try await store.transaction { db in
            let identities = try await AccountRepository(db: db).identities(accountID: caller.accountID)
            guard let target = identities.first(where: { $0.id == identityID }) else {
                throw APIError(.unprocessableContent, code: .identityNotFound, message: "Identity doesn't exist")
            }
            guard identities.count > 1 else {
                throw APIError(
                    .unprocessableContent, code: .singleIdentityNotDeletable,
                    message: "User must have at least 1 identity after unlinking")
            }
            guard target.provider != "email" else {
                throw APIError(
                    .unprocessableContent, code: .validationFailed,
                    message: "The email identity is the account's address: change the address instead of unlinking it")
            }
            var queued = 0
            if let revocations {
                queued = try await AppleRevocations.enqueue(
                    accountID: caller.accountID, identityID: target.id, clientID: revocations.api.clientID,
                    now: now, db: db)
            }
            _ = try await ProviderRepository(db: db).deleteIdentity(id: target.id, accountID: caller.accountID)
            try await trail.within(db).record(
                caller.client.event(
                    .identityUnlinked, accountID: caller.accountID,
                    detail: ["provider": target.provider, "identity": target.id]))
            return queued
        }
        if queued > 0 { revocations?.wake() }
    }
}
