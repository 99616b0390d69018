import Foundation
import GatehouseAPI
import SQLKit

/// Sign-up and every mailed code a person asks for without being signed in: sign-up, sign-in code (magic link),
/// a new sign-up code, and password recovery. Each answers the same whether or not the address has an account.
struct SignUpService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let hasher: PasswordHasher
    let mailer: Mailer
    let mail: AccountMail
    let throttling: AccountThrottling
    let passwords: PasswordRules
    let users: UserReader
    let sessions: SessionService

    /// A sign-up's answer: a new user waiting for its code, or an anonymous user's session.
    enum SignedUp: Sendable {
        case user(Schemas.User)
        case anonymous(Schemas.Session)
    }

    /// Spends what every mail costs: the per-IP budget and the address's cooldown.
    private func spendMail(to email: String, cooldown: String, client: ClientInfo) async throws {
        try await throttling.limit("mail", settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await throttling.claimCooldown(cooldown, email: email)
    }

    /// Creates an unverified account and mails a code and link. What the sign-up chose (password, profile) waits on
    /// that code and takes effect only when that code is verified. An existing address gets the same answer (same
    /// ids each time), and its owner a warning mail instead.
    func signUp(_ body: Schemas.SignUpRequest, redirectTo: String?, client: ClientInfo) async throws -> SignedUp {
        // GoTrue's anonymous sign-in is a sign-up without an address.
        guard let raw = body.email else { return .anonymous(try await anonymous(body.data ?? [:], client: client)) }
        return .user(try await signUp(email: raw, body, redirectTo: redirectTo, client: client))
    }

    /// Signs in a new anonymous user (`--anonymous-users on`), 30 an hour from one address: a placeholder address in
    /// the `.invalid` domain, the sign-up's data as its profile, a session whose `amr` is `anonymous`.
    private func anonymous(_ data: [String: JSONValue], client: ClientInfo) async throws -> Schemas.Session {
        guard settings.anonymousUsers else {
            throw APIError(
                .unprocessableContent, code: .anonymousProviderDisabled, message: "Anonymous sign-ins are disabled")
        }
        try UserMetadata.check(data)
        try await throttling.limit("anonymous", settings.limits.anonymousSignInsPerIP, client: client)
        let now = clock.now
        let id = Secrets.identifier()
        try await sessions.hooks?.beforeUserCreated(
            AuthHooks.prospectiveUser(
                id: id, email: nil, provider: "anonymous", metadata: data, isAnonymous: true, now: now))
        let (account, issued) = try await store.transaction { [self] db in
            let account = AccountRecord(
                id: id, email: AccountRecord.anonymousEmail(id: id), emailConfirmedAt: nil, passwordHash: nil,
                userMetadata: data, createdAt: now, updatedAt: now, lastSignInAt: now, disabledAt: nil,
                isAnonymous: true)
            try await AccountRepository(db: db).insert(account)
            let issued = try await sessions.start(
                accountID: id, method: "anonymous", ip: client.ip, userAgent: client.userAgent, db: db)
            try await trail.within(db).record(
                client.event(.signup, accountID: id, detail: ["anonymous": "true"]))
            return (account, issued)
        }
        return try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
    }

    private func signUp(email raw: String, _ body: Schemas.SignUpRequest, redirectTo: String?, client: ClientInfo)
        async throws -> Schemas.User
    {
        let email = try await mail.deliverableEmail(raw)
        try UserMetadata.check(body.data ?? [:])
        if let password = body.password { try passwords.checkPassword(password, email: email) }
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await SSOEnforcement.check(email: email, accountID: nil, db: store.database)
        try await spendMail(to: email, cooldown: "signup", client: client)
        let now = clock.now
        // The same work whether or not the address is taken, so the answer's time tells nothing.
        var computed: String? = nil
        if let password = body.password { computed = try await hasher.hash(password) }
        let metadata = body.data ?? [:]
        let pending = PendingSignup(passwordHash: computed, metadata: metadata)
        let newAccountID = try await beforeCreating(email: email, metadata: metadata)
        let accountID: String? = try await mail.transactionQueuingMail { [self] db in
            let accounts = AccountRepository(db: db)
            let existing = try await accounts.find(email: email)
            if let existing, existing.emailConfirmedAt != nil {
                try await mailer.enqueue(.signupAttempt(signInLink: mail.siteURL), to: email, db: db)
                try await trail.within(db).record(
                    client.event(.signupExistingEmail, accountID: existing.id))
                return nil
            }
            // An unconfirmed account is never changed by a sign-up: its own code carries this sign-up's choices.
            var account = existing
            if account == nil {
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: [:], confirmedAt: nil, now: now, id: newAccountID)
            }
            guard let account else { return nil }
            try await mail.issueAndMail(
                to: email, purpose: .signup, accountID: account.id, pending: pending, codeChallenge: challenge, db: db
            ) { code in
                .signupConfirmation(
                    code: code.code,
                    link: mail.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirectTo))
            }
            // `account: new` says the sign-up made the account (a webhook's `user.created`), not a repeat of an
            // unconfirmed one.
            try await trail.within(db).record(
                client.event(
                    .signup, accountID: account.id, detail: ["account": existing == nil ? "new" : "unconfirmed"]))
            return account.id
        }
        guard let accountID, var account = try await AccountRepository(db: store.database).find(id: accountID)
        else {
            var decoy = try await users.decoyUser(email: email, metadata: metadata, now: now)
            // GoTrue's answer for a confirmed address: a user without identities, which apps test.
            if settings.revealAccounts { decoy.identities = [] }
            return decoy
        }
        account.userMetadata = metadata
        // Shaped as the decoy is: what else went out to an existing address is not the sign-up's to tell.
        account.recoverySentAt = nil
        account.invitedAt = nil
        let identities = try await AccountRepository(db: store.database).identities(accountID: account.id)
        return account.wire(identities: identities, confirmationSentAt: now)
    }

    /// Mails a sign-in code and magic link, creating the account when allowed. The answer is `{}` either way, and the
    /// mail is queued, so its time does not tell either.
    func sendOTP(_ body: Schemas.OTPRequest, redirectTo: String?, client: ClientInfo) async throws {
        let email = try await mail.deliverableEmail(body.email)
        try UserMetadata.check(body.data ?? [:])
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await spendMail(to: email, cooldown: "otp", client: client)
        let now = clock.now
        let createUser = body.createUser ?? true
        try await SSOEnforcement.check(
            email: email, accountID: try await AccountRepository(db: store.database).find(email: email)?.id,
            db: store.database)
        if !createUser, settings.revealAccounts,
            try await AccountRepository(db: store.database).find(email: email) == nil
        {
            throw APIError(.unprocessableContent, code: .otpDisabled, message: "Signups not allowed for otp")
        }
        let newAccountID =
            createUser ? try await beforeCreating(email: email, metadata: body.data ?? [:]) : Secrets.identifier()
        try await mail.transactionQueuingMail { [self] db in
            let accounts = AccountRepository(db: db)
            var account = try await accounts.find(email: email)
            if account == nil, createUser {
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: [:], confirmedAt: nil, now: now, id: newAccountID)
            }
            guard let account, account.disabledAt == nil else { return }
            // Profile data given here applies only if this code is what confirms a new account.
            let pending =
                account.emailConfirmedAt == nil ? PendingSignup(passwordHash: nil, metadata: body.data ?? [:]) : nil
            try await mail.issueAndMail(
                to: email, purpose: .magiclink, accountID: account.id, pending: pending, codeChallenge: challenge,
                db: db
            ) { code in
                .magicLink(
                    code: code.code,
                    link: mail.verifyLink(token: code.linkToken, type: "magiclink", redirectTo: redirectTo))
            }
            try await trail.within(db).record(client.event(.otpSent, accountID: account.id))
        }
    }

    /// The id a new account at `email` would get, shown first to the before user created hook when it is on and
    /// the address has no account yet (GoTrue asks before its transaction, as here): a refusal stops the request.
    private func beforeCreating(email: String, metadata: [String: JSONValue]) async throws -> String {
        let id = Secrets.identifier()
        try await sessions.hooks?.beforeCreatingAccount(
            id: id, email: email, provider: "email", metadata: metadata, now: clock.now, store: store)
        return id
    }

    /// Mails a new sign-up code to an unconfirmed address, whatever the address. The code carries no password: a
    /// password chosen at sign-up takes effect only through that sign-up's own code.
    func resend(_ body: Schemas.EmailRequest, redirectTo: String?, client: ClientInfo) async throws {
        let email = try await mail.deliverableEmail(body.email)
        if body._type == .emailChange {
            try await resendEmailChange(currentEmail: email, client: client)
            return
        }
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await SSOEnforcement.check(email: email, accountID: nil, db: store.database)
        try await spendMail(to: email, cooldown: "signup", client: client)
        try await mail.mailCode(
            to: email, purpose: .signup, client: client, auditAction: .signupCodeResent, codeChallenge: challenge,
            eligible: { $0.emailConfirmedAt == nil }
        ) { [self] code in
            .signupConfirmation(
                code: code.code, link: mail.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirectTo))
        }
    }

    /// Mails new codes for the email change the account at `currentEmail` (its current address, as GoTrue takes it)
    /// is waiting for, to both addresses; the earlier codes stop working. Nothing happens, and the answer is the
    /// same, when there is no such account or change.
    private func resendEmailChange(currentEmail: String, client: ClientInfo) async throws {
        try await spendMail(to: currentEmail, cooldown: "email_change", client: client)
        try await mail.transactionQueuingMail { [self] db in
            let accounts = AccountRepository(db: db)
            guard let found = try await accounts.find(email: currentEmail),
                var account = try await accounts.findLocked(id: found.id), account.disabledAt == nil,
                let change = account.emailChange
            else { return }
            // New codes to both addresses: neither has confirmed these.
            account.emailChange = PendingEmailChange(newEmail: change.newEmail, sentAt: clock.now)
            try await accounts.update(account)
            try await mail.mailEmailChange(account, db: db)
            try await trail.within(db).record(
                client.event(.emailChangeRequested, accountID: account.id, detail: ["resent": "true"]))
        }
    }

    /// Mails a password reset code and link to an address with an account, whatever the address.
    func recover(_ body: Schemas.EmailRequest, redirectTo: String?, client: ClientInfo) async throws {
        let email = try await mail.deliverableEmail(body.email)
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        // A recovery link signs in as a code does: a company's provider may be the only way in.
        try await SSOEnforcement.check(
            email: email, accountID: try await AccountRepository(db: store.database).find(email: email)?.id,
            db: store.database)
        try await spendMail(to: email, cooldown: "recovery", client: client)
        try await mail.mailCode(
            to: email, purpose: .recovery, client: client, auditAction: .recoveryRequested, codeChallenge: challenge,
            eligible: { _ in true }
        ) { [self] code in
            .recovery(
                code: code.code, link: mail.verifyLink(token: code.linkToken, type: "recovery", redirectTo: redirectTo))
        }
    }
}
