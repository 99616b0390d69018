import Foundation
import GatehouseAPI
import SQLKit

/// The signed-in account's own record: reading it, changing profile, password or email (with recent
/// re-authentication), and the code that re-authenticates. Account sessions only: the caller comes from
/// `Access.account()`.
struct ProfileService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let hasher: PasswordHasher
    let mailer: Mailer
    let mail: AccountMail
    let throttling: AccountThrottling
    let passwords: CredentialRules
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

    /// Changes profile data, password or email. A new password needs the current one, a `reauthenticate` code, or a
    /// recovery sign-in in the last ten minutes; a new email needs the current password or a code. The new address
    /// confirms with a mailed code, the old one is told, and the answer is the same whether the new one is taken.
    func update(_ body: Schemas.UpdateUserRequest, by caller: Caller) async throws -> Schemas.User {
        let client = caller.client
        let identity = caller.identity
        var account = try await account(caller)
        let now = clock.now
        // Refused before any slow check; the merge is checked again on the row as the transaction reads it.
        if let data = body.data {
            try UserMetadata.check(UserMetadata.merged(account.userMetadata, data), before: account.userMetadata)
        }
        var newEmail: String?
        if let raw = body.email {
            let email = try await mail.deliverableEmail(raw)
            if email != account.email { newEmail = email }
        }
        var newHash: String?
        if body.password != nil || newEmail != nil {
            try await authorizeSensitiveChange(
                account: account, currentPassword: body.currentPassword, nonce: body.nonce, identity: identity,
                client: client, recentMethods: newEmail == nil ? ["recovery"] : [], refusal: .passwordChangeRefused,
                what: "Changing the password or email")
        }
        if let password = body.password {
            try passwords.checkPassword(password, email: account.email)
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
        }
        let passwordChanged = newHash != nil
        let requestedEmail = newEmail
        let hash = newHash
        account = try await mail.transactionQueuingMail { db in
            // The changes apply to the row as it is now, not as it was read before the slow checks: a disable or
            // another change made meanwhile is kept.
            guard var updated = try await AccountRepository(db: db).find(id: identity.accountID),
                updated.disabledAt == nil
            else { throw APIError(.forbidden, code: .userBanned, message: "This account is disabled") }
            if let data = body.data {
                let merged = UserMetadata.merged(updated.userMetadata, data)
                try UserMetadata.check(merged, before: updated.userMetadata)
                updated.userMetadata = merged
            }
            if let hash { updated.passwordHash = hash }
            updated.updatedAt = now
            let audit = AuditRepository(db: db, clock: clock)
            if body.data != nil {
                try await audit.record(client.event(.profileUpdated, accountID: updated.id))
            }
            if passwordChanged {
                try await sessions.revoke(
                    accountID: updated.id, current: identity.sessionID, scope: .others, db: db)
                try await audit.record(client.event(.passwordChanged, accountID: updated.id))
            }
            try await AccountRepository(db: db).update(updated)
            guard let newEmail = requestedEmail else { return updated }
            let taken = try await AccountRepository(db: db).find(email: newEmail) != nil
            try await audit.record(
                client.event(
                    .emailChangeRequested, accountID: updated.id, detail: ["new_email": Secrets.emailDigest(newEmail)]))
            try await mailer.enqueue(.emailChangeRequested(newEmail: newEmail), to: updated.email, db: db)
            // A taken address gets no code (it could never be confirmed), and the answer does not say so.
            guard !taken else { return updated }
            try await mail.issueAndMail(
                to: newEmail, purpose: .emailChange, accountID: updated.id, newEmail: newEmail, db: db
            ) { code in
                .emailChange(
                    code: code.code,
                    link: mail.verifyLink(token: code.linkToken, type: "email_change", redirectTo: nil),
                    newEmail: newEmail)
            }
            return updated
        }
        return try await users.user(account, db: store.database)
    }

    /// Whether the session's sign-in was in the last ten minutes, by one of `methods` (nil: any method).
    func signedInRecently(_ identity: Identity, by methods: Set<String>?) -> Bool {
        let now = Int64(clock.now.timeIntervalSince1970)
        return identity.claims.amr.contains { (methods?.contains($0.method) ?? true) && now - $0.timestamp <= 600 }
    }

    /// Recent re-authentication for a sensitive change: the current password (throttled like sign-in), a code from
    /// `/auth/v1/reauthenticate`, or a sign-in in the last ten minutes by one of `recentMethods` (nil: any method; a
    /// password or email change takes a recovery sign-in only). A password or code that is given is always checked,
    /// recent sign-in or not: a wrong one is refused and counts toward the backoff, so a session cannot be used to
    /// test guesses for free. (An account without a password has nothing to guess: a password given for it, as the
    /// account page's form always sends one, leaves the recent sign-in to decide.)
    func authorizeSensitiveChange(
        account: AccountRecord, currentPassword: String?, nonce: String?, identity: Identity, client: ClientInfo,
        recentMethods: Set<String>?, refusal: AuditAction, what: String
    ) async throws {
        let givesPassword = currentPassword != nil && account.passwordHash != nil
        if !givesPassword, nonce == nil, signedInRecently(identity, by: recentMethods) { return }
        if let current = currentPassword {
            try await throttling.limit("sign-in", settings.limits.signInsPerIP, client: client)
            let key = AccountThrottling.passwordKey(account.email)
            try await throttling.admit(key, rule: throttling.passwordRule, client: client, accountID: account.id)
            if let hash = account.passwordHash, case .valid = await hasher.verify(current, against: hash) {
                try await throttling.clearThrottle(key)
                return
            }
            await sessions.audit(
                client.event(refusal, accountID: account.id, detail: ["reason": "wrong_current_password"]))
            throw APIError(.badRequest, code: .invalidCredentials, message: "The current password is not correct")
        }
        if let nonce {
            let consumed = try await throttling.consumeCode(
                email: account.email, code: nonce, purposes: [.reauthentication], client: client)
            if consumed != nil { return }
            await sessions.audit(
                client.event(refusal, accountID: account.id, detail: ["reason": "wrong_reauthentication_code"]))
            throw APIError(
                .badRequest, code: .reauthenticationNotValid, message: "Verification code is invalid or has expired")
        }
        await sessions.audit(
            client.event(refusal, accountID: account.id, detail: ["reason": "reauthentication_needed"]))
        throw APIError(
            .unauthorized, code: .reauthenticationNeeded,
            message: "\(what) requires the current password or a code from /auth/v1/reauthenticate")
    }

    /// Mails a code that authorizes a password or email change.
    func reauthenticate(_ caller: Caller) async throws {
        let client = caller.client
        let account = try await account(caller)
        try await throttling.limit("mail", settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await throttling.claimCooldown("reauthentication", email: account.email)
        try await mail.transactionQueuingMail { db in
            try await mail.issueAndMail(to: account.email, purpose: .reauthentication, accountID: account.id, db: db) {
                .reauthentication(code: $0.code)
            }
            try await AuditRepository(db: db, clock: clock).record(
                client.event(.reauthenticationRequested, accountID: account.id))
        }
    }
}
