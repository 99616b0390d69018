import Foundation
import GatehouseAPI
import HTTPTypes
import SQLKit

/// The signed-in account's own record: reading it, changing profile, password or email (with recent
/// re-authentication), and the code that re-authenticates. Account sessions only: the caller comes from
/// `Access.account()`.
struct ProfileService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let hasher: PasswordHasher
    let mailer: Mailer
    let mail: AccountMail
    let throttling: AccountThrottling
    let passwords: PasswordRules
    let users: UserReader

    /// The caller's account (account sessions only).
    func user(_ caller: Caller) async throws -> Schemas.User {
        guard let user = try await users.user(id: caller.accountID) else { throw Self.userNotFound }
        return user
    }

    static let userNotFound = APIError(.notFound, code: .userNotFound, message: "User not found")

    func account(_ caller: Caller) async throws -> AccountRecord {
        guard let account = try await AccountRepository(db: store.database).find(id: caller.accountID) else {
            throw Self.userNotFound
        }
        return account
    }

    /// Changes profile data, password or email, as GoTrue does. A new password needs the current one or a
    /// `reauthenticate` code only when the session signed in longer ago than `passwordReauthenticationWindow` (a
    /// recovery sign-in in the last ten minutes always may). A new email needs nothing more with secure email change:
    /// a code goes to the new address and one to the current address, and the change completes when both are
    /// confirmed (`VerificationService`); without it, the new address alone confirms and asking takes what a password
    /// change takes. The answer is the same whether the new address is taken (a taken one gets no code).
    func update(_ body: Schemas.UpdateUserRequest, by caller: Caller) async throws -> Schemas.User {
        let client = caller.client
        let identity = caller.identity
        var account = try await account(caller)
        let now = clock.now
        // Refused before any slow check; the merge is checked again on the row as the transaction reads it.
        if let data = body.data {
            try UserMetadata.check(UserMetadata.merged(account.userMetadata, data), before: account.userMetadata)
        }
        // A single sign-on account's address and way in are its identity provider's (GoTrue's user_sso_managed): a
        // password or an address of its own would let it sign in around the provider.
        if account.isSSOUser, body.email != nil || body.password != nil {
            throw APIError(
                .unprocessableContent, code: .userSsoManaged,
                message: "Updating email address or password is not allowed for SSO users")
        }
        var newEmail: String?
        if let raw = body.email {
            let email = try await mail.deliverableEmail(raw)
            if email != account.email { newEmail = email }
        }
        if let password = body.password { try passwords.checkPassword(password, email: account.email) }
        if body.password != nil || newEmail != nil {
            try await FactorService.requireAAL2IfEnrolled(
                identity, db: store.database,
                message: "AAL2 session is required to update email or password when MFA is enabled.")
        }
        // Not even with an email in the same request: the address's owner, confirming it, would take over an account
        // whose password someone else chose. A password comes once the account is permanent.
        if account.isAnonymous, body.password != nil {
            throw APIError(
                .unprocessableContent, code: .validationFailed,
                message: "Updating password of an anonymous user is not allowed until its email is confirmed")
        }
        var needed: Freshness = .none
        // An anonymous user's session is all it has to prove itself with: it re-authenticates with nothing.
        if !account.isAnonymous, body.password != nil || (newEmail != nil && !settings.secureEmailChange) {
            needed = passwordFreshness(allowingRecovery: body.password != nil && newEmail == nil)
        }
        if needed != .none || body.currentPassword != nil || body.nonce != nil {
            try await authorizeSensitiveChange(
                account: account, currentPassword: body.currentPassword, nonce: body.nonce, identity: identity,
                client: client, needed: needed, neededStatus: .badRequest, refusal: .passwordChangeRefused,
                what: body.password != nil ? "Password update" : "Email update")
        }
        var newHash: String?
        if let password = body.password {
            if let current = account.passwordHash, case .valid = await hasher.verify(password, against: current) {
                throw APIError(
                    .unprocessableContent, code: .samePassword,
                    message: "New password should be different from the old password")
            }
            newHash = try await hasher.hash(password)
        }
        if let newEmail {
            try await throttling.limit(
                "mail", settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
            _ = try await throttling.claimCooldown("email_change", email: newEmail)
            // The current address gets mail too, and `resend` names it: one change's mail a minute, as GoTrue's
            // `email_change_sent_at` allows.
            _ = try await throttling.claimCooldown("email_change", email: account.email)
        }
        let passwordChanged = newHash != nil
        let requestedEmail = newEmail
        let hash = newHash
        account = try await mail.transactionQueuingMail { db in
            // The changes apply to the row as it is now, not as it was read before the slow checks: a disable or
            // another change made meanwhile is kept.
            guard var updated = try await AccountRepository(db: db).findLocked(id: identity.accountID),
                updated.disabledAt == nil
            else { throw APIError(.forbidden, code: .userBanned, message: "This account is disabled") }
            if let data = body.data {
                let merged = UserMetadata.merged(updated.userMetadata, data)
                try UserMetadata.check(merged, before: updated.userMetadata)
                updated.userMetadata = merged
            }
            if let hash { updated.passwordHash = hash }
            updated.updatedAt = now
            let audit = trail.within(db)
            if body.data != nil {
                try await audit.record(client.event(.profileUpdated, accountID: updated.id))
            }
            if passwordChanged {
                try await sessions.revoke(
                    accountID: updated.id, current: identity.sessionID, scope: .others, db: db)
                try await audit.record(client.event(.passwordChanged, accountID: updated.id))
            }
            if let newEmail = requestedEmail {
                updated.emailChange = PendingEmailChange(newEmail: newEmail, sentAt: now)
                try await audit.record(
                    client.event(
                        .emailChangeRequested, accountID: updated.id,
                        detail: ["new_email": Secrets.emailDigest(newEmail)]))
            }
            try await AccountRepository(db: db).update(updated)
            if requestedEmail != nil { try await mail.mailEmailChange(updated, db: db) }
            return updated
        }
        return try await users.user(account, db: store.database)
    }

    /// What a password change needs, by `passwordReauthenticationWindow`.
    private func passwordFreshness(allowingRecovery: Bool) -> Freshness {
        guard let window = settings.passwordReauthenticationWindow else { return .none }
        return .signedInWithin(window, orRecoveryWithin: allowingRecovery ? 600 : nil)
    }

    /// How recently a session must have signed in to make a sensitive change without the current password or a
    /// `reauthenticate` code.
    enum Freshness: Equatable {
        /// Nothing more (what is given is still checked).
        case none
        /// A sign-in by any method within the interval (0: never enough), or by a recovery link within the second.
        case signedInWithin(TimeInterval, orRecoveryWithin: TimeInterval?)
    }

    /// Whether the session's sign-in was in the last ten minutes, by one of `methods` (nil: any method).
    func signedInRecently(_ identity: Identity, by methods: Set<String>?) -> Bool {
        signedIn(identity, within: 600, by: methods)
    }

    /// Whether the session signed in (by one of `methods`; nil: any) in the last `interval` seconds. A refresh keeps
    /// the sign-in's time (the `amr` claim), as GoTrue keeps its session's `created_at`.
    private func signedIn(_ identity: Identity, within interval: TimeInterval, by methods: Set<String>?) -> Bool {
        let now = Int64(clock.now.timeIntervalSince1970)
        return identity.claims.amr.contains {
            (methods?.contains($0.method) ?? true) && Double(now - $0.timestamp) < interval
        }
    }

    /// Recent re-authentication for a sensitive change: the current password (throttled like sign-in), a code from
    /// `/auth/v1/reauthenticate`, or a sign-in recent enough for `needed`. A password or code that is given is always
    /// checked, recent sign-in or not: a wrong one is refused and counts toward the backoff, so a session cannot be
    /// used to test guesses for free. (An account without a password has nothing to guess: a password given for it,
    /// as the account page's form always sends one, leaves the recent sign-in to decide.) Refusals use GoTrue's codes:
    /// `current_password_invalid` (400), `reauthentication_not_valid` (422), `reauthentication_needed`
    /// (`neededStatus`: GoTrue's 400 for `PUT /user`).
    func authorizeSensitiveChange(
        account: AccountRecord, currentPassword: String?, nonce: String?, identity: Identity, client: ClientInfo,
        needed: Freshness, neededStatus: HTTPResponse.Status, refusal: AuditAction, what: String
    ) async throws {
        let givesPassword = currentPassword != nil && account.passwordHash != nil
        if !givesPassword, nonce == nil, fresh(identity, needed) { return }
        if let current = currentPassword, account.passwordHash != nil || nonce == nil {
            try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
            let key = AccountThrottling.passwordKey(account.email)
            try await throttling.admit(key, rule: throttling.passwordRule, client: client, accountID: account.id)
            if let hash = account.passwordHash, case .valid = await hasher.verify(current, against: hash) {
                try await throttling.clearThrottle(key)
                return
            }
            await trail.record(
                client.event(refusal, accountID: account.id, detail: ["reason": "wrong_current_password"]))
            throw APIError(.badRequest, code: .currentPasswordInvalid, message: "The current password is not correct")
        }
        if let nonce {
            let consumed = try await throttling.consumeCode(
                email: account.email, code: nonce, purposes: [.reauthentication], client: client)
            if consumed != nil { return }
            await trail.record(
                client.event(refusal, accountID: account.id, detail: ["reason": "wrong_reauthentication_code"]))
            throw APIError(
                .unprocessableContent, code: .reauthenticationNotValid, message: "Nonce has expired or is invalid")
        }
        await trail.record(
            client.event(refusal, accountID: account.id, detail: ["reason": "reauthentication_needed"]))
        throw APIError(
            neededStatus, code: .reauthenticationNeeded,
            message: "\(what) requires reauthentication: the current password or a code from /auth/v1/reauthenticate")
    }

    /// Recent proof before a new way into the account is added (a passkey, account or company, or a first factor): a
    /// sign-in in the last ten minutes (the session's `amr`; a company session's own login counts), the current
    /// password, or a code from `/auth/v1/reauthenticate`. A session stolen later than that cannot add one. 400
    /// `reauthentication_needed`, as `PUT /user` answers.
    func requireRecentProof(
        _ identity: Identity, client: ClientInfo, currentPassword: String?, nonce: String?, refusal: AuditAction,
        what: String
    ) async throws {
        guard let account = try await AccountRepository(db: store.database).find(id: identity.accountID) else {
            throw Self.userNotFound
        }
        try await authorizeSensitiveChange(
            account: account, currentPassword: currentPassword, nonce: nonce, identity: identity, client: client,
            needed: .signedInWithin(Self.recentProofWindow, orRecoveryWithin: nil), neededStatus: .badRequest,
            refusal: refusal, what: what)
    }

    /// How recent a sign-in must be to stand as proof on its own: ten minutes.
    static let recentProofWindow: TimeInterval = 600

    private func fresh(_ identity: Identity, _ needed: Freshness) -> Bool {
        switch needed {
        case .none: return true
        case .signedInWithin(let window, let recovery):
            return signedIn(identity, within: window, by: nil)
                || recovery.map { signedIn(identity, within: $0, by: ["recovery"]) } == true
        }
    }

    /// Mails a code that authorizes a password or email change.
    func reauthenticate(_ caller: Caller) async throws {
        let client = caller.client
        let account = try await account(caller)
        guard !account.isAnonymous else {
            throw APIError(
                .unprocessableContent, code: .validationFailed,
                message: "Reauthentication requires the user to have an email or a phone number")
        }
        try await throttling.limit("mail", settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await throttling.claimCooldown("reauthentication", email: account.email)
        try await mail.transactionQueuingMail { db in
            try await mail.issueAndMail(to: account.email, purpose: .reauthentication, accountID: account.id, db: db) {
                .reauthentication(code: $0.code)
            }
            try await trail.within(db).record(
                client.event(.reauthenticationRequested, accountID: account.id))
        }
    }
}
