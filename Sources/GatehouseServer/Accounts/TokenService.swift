import Foundation
import GatehouseAPI
import JWTKit
import SQLKit

/// `POST /auth/v1/token`: the four grants. Password sign-in (counted before the hash runs), refresh-token rotation
/// with reuse detection, id tokens (Apple, Google: `ExternalSignIn`), and the PKCE code exchange.
struct TokenService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let hasher: PasswordHasher
    let external: ExternalSignIn
    let throttling: AccountThrottling
    let users: UserReader
    /// Signs in once a magic link's authorization code is exchanged.
    let verification: VerificationService

    static let invalidCredentials = APIError(
        .badRequest, code: .invalidCredentials, message: "Invalid login credentials")

    func password(_ body: Schemas.PasswordGrant, client: ClientInfo) async throws -> Schemas.Session {
        try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
        let email = EmailAddress.normalize(body.email) ?? body.email
        let throttleKey = AccountThrottling.passwordKey(email)
        let now = clock.now
        // Counted before the password is checked: parallel guesses cannot slip past the backoff.
        try await throttling.admit(throttleKey, rule: throttling.passwordRule, client: client)
        let account = try await AccountRepository(db: store.database).find(email: email)
        let verification: PasswordVerification
        if let account, let hash = account.passwordHash {
            verification = await hasher.verify(body.password, against: hash)
        } else if let account, account.emailConfirmedAt == nil, account.disabledAt == nil,
            let pending = try await OneTimeCodes(db: store.database, clock: clock, settings: settings)
                .pendingPasswordHashes(email: email).first
        {
            // The password of a sign-up still waiting for its code: right, it only earns "confirm your email".
            if case .valid = await hasher.verify(body.password, against: pending) {
                try await throttling.clearThrottle(throttleKey)
                throw APIError(.badRequest, code: .emailNotConfirmed, message: "Email not confirmed")
            }
            verification = .invalid
        } else {
            await hasher.dummyVerify(body.password)
            verification = .invalid
        }
        if let account, account.passwordHash != nil {
            try await passwordAttemptHook(accountID: account.id, valid: verification != .invalid)
        }
        guard case .valid(let needsRehash) = verification, let account else {
            let reason =
                account == nil ? "no_account" : account?.passwordHash == nil ? "no_password" : "wrong_password"
            await trail.record(
                client.event(
                    .signInFailed, accountID: account?.id,
                    detail: ["method": "password", "reason": reason, "email": Secrets.emailDigest(email)]))
            throw Self.invalidCredentials
        }
        // A banned account hears so, as from GoTrue, but only with its right password: a guess learns nothing.
        guard account.disabledAt == nil else {
            await trail.record(
                client.event(.signInFailed, accountID: account.id, detail: ["method": "password", "reason": "banned"]))
            throw APIError(.badRequest, code: .userBanned, message: "User is banned")
        }
        // An unconfirmed account with a password (imported, or written by an older release) does not sign in by it.
        guard account.emailConfirmedAt != nil else {
            throw APIError(.badRequest, code: .emailNotConfirmed, message: "Email not confirmed")
        }
        // Its company may send it to its identity provider instead; said only after the right password.
        try await SSOEnforcement.check(email: email, accountID: account.id, db: store.database)
        // A failed rehash (an imported hash of a password libxcrypt cannot take) keeps the old hash; sign-in goes on.
        let rehashed = needsRehash ? try? await hasher.hash(body.password) : nil
        let checkedHash = account.passwordHash
        let issued = try await store.transaction { db in
            // Only what this sign-in changes is written, against the row as it is now: a password changed or an
            // account disabled while the hash was being checked stays changed.
            let accounts = AccountRepository(db: db)
            guard let current = try await accounts.find(id: account.id), current.disabledAt == nil,
                current.passwordHash == checkedHash
            else { throw Self.invalidCredentials }
            try await accounts.recordSignIn(account.id, at: now, rehashed: rehashed, replacing: checkedHash)
            try await accounts.touchIdentity(provider: "email", accountID: account.id, at: now)
            try await Throttles(db: db).clear(throttleKey)
            try await trail.within(db).record(
                client.event(.signedIn, accountID: account.id, detail: ["method": "password"]))
            return try await sessions.start(
                accountID: account.id, method: "password", ip: client.ip, userAgent: client.userAgent, db: db)
        }
        return try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
    }

    /// The password verification attempt hook, when it is on, told of every checked password of an account that
    /// has one, as GoTrue tells it: a `reject` fails the sign-in with 400 `invalid_credentials` and the hook's
    /// message, ending every session of the account first when it asks (`should_logout_user`).
    private func passwordAttemptHook(accountID: String, valid: Bool) async throws {
        guard let decision = try await sessions.hooks?.passwordAttempt(userID: accountID, valid: valid),
            decision.reject
        else { return }
        if decision.logOut {
            try await store.transaction { [sessions] db in
                try await sessions.revoke(accountID: accountID, current: "", scope: .global, db: db)
            }
        }
        throw APIError(
            .badRequest, code: .invalidCredentials, message: decision.message ?? AuthHooks.passwordRejected)
    }

    /// Exchanges the authorization code a link redirected with, and the app's verifier, for a session.
    func pkce(_ body: Schemas.PKCEGrant, client: ClientInfo) async throws -> Schemas.Session {
        try await throttling.limit("verify", settings.limits.verificationsPerIP, client: client)
        guard !body.authCode.isEmpty, !body.codeVerifier.isEmpty else {
            throw APIError.validation("both auth code and code verifier should be non-empty")
        }
        let outcome = try await store.transaction { db in
            try await FlowStates(db: db, clock: clock).redeem(body.authCode, verifier: body.codeVerifier)
        }
        switch outcome {
        case .success(let grant):
            // The session is bound to its code, so a replayed code can end what the first exchange started.
            let bind: @Sendable (String, any SQLDatabase) async throws -> Void = { [clock] sessionID, db in
                try await FlowStates(db: db, clock: clock).bind(body.authCode, sessionID: sessionID)
            }
            switch grant {
            case .link(let consumed):
                return try await verification.session(
                    after: consumed, method: "magiclink", client: client, started: bind)
            case .provider(let grant):
                return try await external.session(after: grant, client: client, started: bind)
            }
        case .failure(let refusal):
            if case .reused(let sessionID?) = refusal {
                try await store.transaction { [self] db in
                    try await SessionChanges(db: db).end(.session(sessionID), now: clock.now)
                }
            }
            await trail.record(
                client.event(.verifyFailed, accountID: nil, detail: ["type": "pkce", "reason": refusal.reason]))
            throw refusal.apiError
        }
    }

    func refresh(_ body: Schemas.RefreshGrant, client: ClientInfo) async throws -> Schemas.Session {
        let (issued, user, membership) = try await rotate(body, client: client)
        return try await sessions.response(for: issued, user: user.user, membership: membership)
    }

    /// The same answer as JSON, the user's spliced in as the cache keeps it (`FastPath`).
    func refreshJSON(_ body: Schemas.RefreshGrant, client: ClientInfo) async throws -> [UInt8] {
        let (issued, user, membership) = try await rotate(body, client: client)
        return try await sessions.responseJSON(for: issued, user: user, membership: membership)
    }

    /// A refresh up to its answer: the rotation, the user, and a company session's membership as it is now.
    private func rotate(_ body: Schemas.RefreshGrant, client: ClientInfo) async throws -> (
        IssuedSession, AuthCache.CachedUser, Membership?
    ) {
        try await throttling.limit("refresh", settings.limits.refreshesPerIP, client: client)
        let issued: IssuedSession
        do {
            issued = try await sessions.refresh(body.refreshToken) { issued in
                client.event(.tokenRefreshed, accountID: issued.accountID, detail: ["session": issued.sessionID])
            }
        } catch SessionService.RefreshFailure.notFound {
            throw APIError(
                .badRequest, code: .refreshTokenNotFound, message: "Invalid Refresh Token: Refresh Token Not Found")
        } catch SessionService.RefreshFailure.sessionEnded {
            throw APIError(.badRequest, code: .sessionExpired, message: "Invalid Refresh Token: Session Expired")
        } catch SessionService.RefreshFailure.signedOut {
            throw APIError(
                .badRequest, code: .refreshTokenNotFound, message: "Invalid Refresh Token: Refresh Token Not Found")
        } catch SessionService.RefreshFailure.banned {
            throw APIError(.badRequest, code: .userBanned, message: "Invalid Refresh Token: User Banned")
        } catch SessionService.RefreshFailure.alreadyUsed(let sessionID, let accountID) {
            await trail.record(
                client.event(
                    .refreshTokenReused, accountID: accountID,
                    detail: ["session": sessionID, "outcome": "session revoked"]))
            throw APIError(
                .badRequest, code: .refreshTokenAlreadyUsed, message: "Invalid Refresh Token: Already Used")
        }
        guard let user = try await users.cached(id: issued.accountID) else {
            throw APIError(
                .badRequest, code: .refreshTokenNotFound, message: "Invalid Refresh Token: Refresh Token Not Found")
        }
        // A company session refreshes into a company session, with the membership as it is now.
        var membership: Membership?
        if let companyID = issued.companyID {
            membership = try await CompanyDirectory(db: store.database).membership(
                companyID, accountID: issued.accountID)
            guard membership != nil else {
                throw APIError(.badRequest, code: .sessionExpired, message: "Invalid Refresh Token: Session Expired")
            }
        }
        return (issued, user, membership)
    }

    /// The id_token grant (Apple, Google), and manual linking through it: `ExternalSignIn`.
    func idToken(_ body: Schemas.IDTokenGrant, linkingTo caller: Caller?, client: ClientInfo) async throws
        -> Schemas.Session
    {
        try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
        return try await external.idToken(body, linkingTo: caller, client: client)
    }
}
