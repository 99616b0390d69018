import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import JWTKit
import SQLKit

/// The account endpoints under `/auth/v1`, in Supabase Auth's wire format.
struct AuthController {
    let env: AccountsEnvironment

    func addRoutes(to router: Router<AppRequestContext>) {
        let open = router.group("/auth/v1")
        open.post("signup", use: signUp)
        open.post("otp", use: sendOTP)
        open.post("verify", use: verify)
        open.get("verify", use: linkPage)
        open.post("verify/continue", use: continueLink)
        open.post("token", use: token)
        open.post("resend", use: resend)
        open.post("recover", use: recover)
        open.get("settings", use: settings)
        open.get(".well-known/jwks.json", use: jwks)
        let signedIn = router.group("/auth/v1").add(middleware: AuthMiddleware(sessions: env.sessions))
            .group(context: AuthenticatedContext.self)
        signedIn.get("user", use: user)
        signedIn.put("user", use: updateUser)
        signedIn.post("logout", use: logout)
        signedIn.get("reauthenticate", use: reauthenticate)
    }

    private func client(_ request: Request, _ peerAddress: String?) -> ClientInfo {
        env.client(request, peerAddress)
    }

    /// A company session may sign out, and nothing else under `/auth/v1`: reading or changing the account (its
    /// email, its password) needs the account session itself.
    private func requireAccountSession(_ context: AuthenticatedContext, _ request: Request) async throws {
        guard !context.identity.isAccountSession else { return }
        await env.sessions.audit(
            client(request, context.peerAddress).event(
                .authorizationRefused, accountID: context.identity.accountID,
                detail: ["reason": "account_session_required", "path": request.uri.path]))
        throw APIError.accountSessionRequired
    }

    // MARK: Sign-up and mailed codes

    /// Creates an unverified account and mails a code and link. What the sign-up chose (password, profile) waits on
    /// that code and takes effect only when that code is verified. An existing address gets the same answer (same
    /// ids each time), and its owner a warning mail instead.
    @Sendable func signUp(_ request: Request, context: AppRequestContext) async throws -> AuthUser {
        let body = try await request.decodeJSON(as: SignUpRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try await env.deliverableEmail(body.email)
        if let password = body.password { try env.checkPassword(password, email: email) }
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await env.claimCooldown("signup", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let now = env.clock.now
        // The same work whether or not the address is taken, so the answer's time tells nothing.
        var computed: String? = nil
        if let password = body.password { computed = try await env.hasher.hash(password) }
        let pending = PendingSignup(passwordHash: computed, metadata: body.data ?? [:])
        let metadata = body.data ?? [:]
        let env = self.env
        let accountID: String? = try await env.transactionQueuingMail { db in
            let accounts = AccountRepository(db: db)
            let existing = try await accounts.find(email: email)
            if let existing, existing.emailConfirmedAt != nil {
                try await env.mailer.enqueue(.signupAttempt(signInLink: env.siteURL), to: email, db: db)
                try await AuditLog(db: db, clock: env.clock).record(
                    client.event(.signupExistingEmail, accountID: existing.id))
                return nil
            }
            // An unconfirmed account is never changed by a sign-up: its own code carries this sign-up's choices.
            var account: AccountRecord
            if let existing {
                account = existing
            } else {
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: [:], confirmedAt: nil, now: now)
            }
            let code = try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(
                    email: email, purpose: .signup, accountID: account.id, pending: pending, codeChallenge: challenge)
            try await env.mailer.enqueue(
                .signupConfirmation(
                    code: code.code, link: env.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirect)),
                to: email, db: db)
            try await AuditLog(db: db, clock: env.clock).record(client.event(.signup, accountID: account.id))
            return account.id
        }
        guard let accountID,
            let account = try await AccountRepository(db: env.store.database).find(id: accountID)
        else { return try await env.decoyUser(email: email, metadata: metadata, now: now) }
        var answer = account
        answer.userMetadata = metadata
        let identities = try await AccountRepository(db: env.store.database).identities(accountID: account.id)
        return answer.wire(identities: identities, confirmationSentAt: now)
    }

    /// Mails a sign-in code and magic link, creating the account when allowed. The answer is `{}` either way, and the
    /// mail is queued, so its time does not tell either.
    @Sendable func sendOTP(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: OTPRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try await env.deliverableEmail(body.email)
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await env.claimCooldown("otp", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let now = env.clock.now
        let env = self.env
        let createUser = body.createUser ?? true
        try await env.transactionQueuingMail { db in
            let accounts = AccountRepository(db: db)
            var account = try await accounts.find(email: email)
            if account == nil, createUser {
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: [:], confirmedAt: nil, now: now)
            }
            guard let account, account.disabledAt == nil else { return }
            // Profile data given here applies only if this code is what confirms a new account.
            let pending =
                account.emailConfirmedAt == nil ? PendingSignup(passwordHash: nil, metadata: body.data ?? [:]) : nil
            let code = try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(
                    email: email, purpose: .magiclink, accountID: account.id, pending: pending, codeChallenge: challenge
                )
            try await env.mailer.enqueue(
                .magicLink(
                    code: code.code,
                    link: env.verifyLink(token: code.linkToken, type: "magiclink", redirectTo: redirect)),
                to: email, db: db)
            try await AuditLog(db: db, clock: env.clock).record(client.event(.otpSent, accountID: account.id))
        }
        return [:]
    }

    /// Mails a new sign-up code to an unconfirmed address. `{}` whatever the address. The code carries no password:
    /// a password chosen at sign-up takes effect only through that sign-up's own code.
    @Sendable func resend(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: EmailRequest.self, context: context)
        guard body.type == nil || body.type == "signup" else {
            throw APIError.validation("Only type 'signup' can be resent; ask for a new code instead")
        }
        let client = client(request, context.peerAddress)
        let email = try await env.deliverableEmail(body.email)
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await env.claimCooldown("signup", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let env = self.env
        try await env.mailCode(
            to: email, purpose: .signup, client: client, auditAction: .signupCodeResent, codeChallenge: challenge,
            eligible: { $0.emailConfirmedAt == nil }
        ) { code in
            .signupConfirmation(
                code: code.code, link: env.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirect))
        }
        return [:]
    }

    /// Mails a password reset code and link to an address with an account. `{}` whatever the address.
    @Sendable func recover(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: EmailRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try await env.deliverableEmail(body.email)
        let challenge = try PKCE.challenge(body.codeChallenge, method: body.codeChallengeMethod)
        try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await env.claimCooldown("recovery", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let env = self.env
        try await env.mailCode(
            to: email, purpose: .recovery, client: client, auditAction: .recoveryRequested, codeChallenge: challenge,
            eligible: { _ in true }
        ) { code in
            .recovery(
                code: code.code, link: env.verifyLink(token: code.linkToken, type: "recovery", redirectTo: redirect))
        }
        return [:]
    }

    // MARK: Verification

    /// Verifies a mailed code (or a link token as `token_hash`) and signs in. Wrong codes count per code (five
    /// tries) and per address across all its codes (a ceiling a day), each counted before the code is compared.
    @Sendable func verify(_ request: Request, context: AppRequestContext) async throws -> AuthSession {
        let body = try await request.decodeJSON(as: VerifyRequest.self, context: context)
        let client = client(request, context.peerAddress)
        try await env.limit("verify", env.settings.limits.verificationsPerIP, client: client)
        guard let purposes = CodePurpose.accepted(byVerifyType: body.type) else {
            throw APIError.validation("Unsupported verification type '\(body.type.prefix(32))'")
        }
        let env = self.env
        let consumed: ConsumedCode?
        var emailDigest: String?
        if let tokenHash = body.tokenHash {
            consumed = try await env.store.transaction { db in
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                    .consume(linkToken: tokenHash, purposes: purposes)
            }
        } else {
            guard let rawEmail = body.email, let token = body.token else {
                throw APIError.validation("Verify requires an email and a token")
            }
            let email = try env.validEmail(rawEmail)
            emailDigest = Secrets.emailDigest(email)
            consumed = try await env.consumeCode(
                email: email, code: token.trimmingCharacters(in: .whitespaces), purposes: purposes, client: client)
        }
        guard let consumed else {
            var detail = ["type": String(body.type.prefix(32))]
            detail["email"] = emailDigest
            await env.sessions.audit(client.event(.verifyFailed, accountID: nil, detail: detail))
            throw APIError(.forbidden, code: .otpExpired, message: "Token has expired or is invalid")
        }
        return try await signIn(after: consumed, method: body.tokenHash == nil ? "otp" : "magiclink", client: client)
    }

    /// The magic link's landing page. A GET never spends the link, so a mail scanner that fetches it changes nothing;
    /// the person's one tap on the page posts to `verify/continue`, which does.
    @Sendable func linkPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let token = query["token"].map(String.init) ?? ""
        let type = query["type"].map(String.init) ?? "magiclink"
        let redirect = env.allowedRedirect(query["redirect_to"].map(String.init)) ?? env.siteURL
        let live: Bool
        if let purposes = CodePurpose.accepted(byVerifyType: type), !token.isEmpty {
            live = try await OneTimeCodes(db: env.store.database, clock: env.clock, settings: env.settings)
                .isLive(linkToken: token, purposes: purposes)
        } else {
            live = false
        }
        return LinkPage.response(
            live
                ? .confirm(token: token, type: type, redirectTo: redirect, action: "/auth/v1/verify/continue")
                : .expired)
    }

    /// The landing page's button: verifies the link and answers 303 to the redirect URL, with the session in the
    /// fragment, or with `?code=` in the PKCE flow (the code is useless without the app's verifier). A form posted
    /// from another site is refused, so nobody can sign a visitor in to the attacker's account.
    @Sendable func continueLink(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await request.decodeForm(context: context)
        let client = client(request, context.peerAddress)
        guard LinkPage.isSameOrigin(request, publicURL: env.publicURL) else {
            await env.sessions.audit(
                client.event(.authorizationRefused, accountID: nil, detail: ["reason": "cross_site_link_post"]))
            throw APIError(.forbidden, code: .crossSiteRequest, message: "This form can only be sent from its own page")
        }
        try await env.limit("verify", env.settings.limits.verificationsPerIP, client: client)
        guard let type = form["type"], form["token"] != nil else {
            throw APIError.validation("The form needs its token and type")
        }
        let target = env.allowedRedirect(form["redirect_to"]) ?? env.siteURL
        let env = self.env
        var consumed: ConsumedCode?
        if let token = form["token"], let purposes = CodePurpose.accepted(byVerifyType: type) {
            consumed = try await env.store.transaction { db in
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                    .consume(linkToken: token, purposes: purposes)
            }
        }
        guard let consumed else {
            await env.sessions.audit(
                client.event(.verifyFailed, accountID: nil, detail: ["type": String(type.prefix(32))]))
            return LinkPage.redirect(
                target,
                fragment: [
                    ("error", "access_denied"), ("error_code", ErrorCode.otpExpired.rawValue),
                    ("error_description", "Email link is invalid or has expired"),
                ])
        }
        if let challenge = consumed.codeChallenge {
            let code = try await env.store.transaction { db in
                try await FlowStates(db: db, clock: env.clock).create(for: consumed, challenge: challenge)
            }
            await env.sessions.audit(
                client.event(
                    .verified, accountID: consumed.accountID,
                    detail: ["purpose": consumed.purpose.rawValue, "flow": "pkce"]))
            return LinkPage.redirect(target, query: [("code", code)])
        }
        do {
            let session = try await signIn(after: consumed, method: "magiclink", client: client)
            return LinkPage.redirect(
                target,
                fragment: [
                    ("access_token", session.accessToken), ("expires_at", String(session.expiresAt)),
                    ("expires_in", String(session.expiresIn)), ("refresh_token", session.refreshToken),
                    ("token_type", "bearer"), ("type", type),
                ])
        } catch let error as APIError {
            return LinkPage.redirect(
                target,
                fragment: [
                    ("error", "access_denied"), ("error_code", error.code), ("error_description", error.message),
                ])
        }
    }

    /// Applies what a verified code proves (a confirmed email, a new email) and starts a session. An unconfirmed
    /// account takes the password and profile of the sign-up whose code this is; confirmed any other way, whatever a
    /// sign-up had chosen is dropped.
    private func signIn(
        after consumed: ConsumedCode, method: String, client: ClientInfo,
        started: @escaping @Sendable (String, any SQLDatabase) async throws -> Void = { _, _ in }
    ) async throws -> AuthSession {
        let now = env.clock.now
        let env = self.env
        let amrMethod =
            consumed.purpose == .recovery ? "recovery" : consumed.purpose == .emailChange ? "email_change" : method
        let (account, issued) = try await env.store.transaction { db in
            let accounts = AccountRepository(db: db)
            var found: AccountRecord? = nil
            if let id = consumed.accountID { found = try await accounts.find(id: id) }
            if found == nil { found = try await accounts.find(email: consumed.email) }
            guard var account = found else {
                throw APIError(.forbidden, code: .otpExpired, message: "Token has expired or is invalid")
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            let audit = AuditLog(db: db, clock: env.clock)
            if consumed.purpose == .emailChange, let newEmail = consumed.newEmail {
                if let other = try await accounts.find(email: newEmail), other.id != account.id {
                    throw APIError(
                        .unprocessableContent, code: .emailExists,
                        message: "A user with this email address has already been registered")
                }
                account.email = newEmail
                try await accounts.updateEmailIdentity(accountID: account.id, email: newEmail)
            }
            if account.emailConfirmedAt == nil {
                let pending = consumed.pending ?? PendingSignup(passwordHash: nil, metadata: [:])
                if account.passwordHash != nil || !account.userMetadata.isEmpty || pending.passwordHash != nil {
                    try await audit.record(
                        client.event(
                            .pendingSignupResolved, accountID: account.id,
                            detail: ["password": pending.passwordHash == nil ? "none" : "set_by_this_code"]))
                }
                account.passwordHash = pending.passwordHash
                account.userMetadata = pending.metadata
                account.emailConfirmedAt = now
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings).voidSignups(
                    email: account.email)
            }
            account.lastSignInAt = now
            account.updatedAt = now
            try await accounts.update(account)
            try await accounts.touchIdentity(provider: "email", accountID: account.id, at: now)
            let issued = try await env.sessions.start(
                accountID: account.id, method: amrMethod, ip: client.ip, userAgent: client.userAgent, db: db)
            try await started(issued.sessionID, db)
            try await audit.record(
                client.event(.verified, accountID: account.id, detail: ["purpose": consumed.purpose.rawValue]))
            if consumed.purpose == .emailChange {
                try await audit.record(client.event(.emailChanged, accountID: account.id))
            }
            try await audit.record(client.event(.signedIn, accountID: account.id, detail: ["method": amrMethod]))
            return (account, issued)
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    // MARK: Tokens

    /// `grant_type=password | refresh_token | id_token | pkce`.
    @Sendable func token(_ request: Request, context: AppRequestContext) async throws -> AuthSession {
        let client = client(request, context.peerAddress)
        switch request.uri.queryParameters["grant_type"].map(String.init) {
        case "password":
            return try await passwordGrant(
                try await request.decodeJSON(as: PasswordGrant.self, context: context), client)
        case "refresh_token":
            return try await refreshGrant(try await request.decodeJSON(as: RefreshGrant.self, context: context), client)
        case "id_token":
            return try await idTokenGrant(try await request.decodeJSON(as: IDTokenGrant.self, context: context), client)
        case "pkce":
            return try await pkceGrant(try await request.decodeJSON(as: PKCEGrant.self, context: context), client)
        default:
            throw APIError(
                .badRequest, code: .unsupportedGrantType,
                message: "grant_type must be password, refresh_token, id_token or pkce")
        }
    }

    static let invalidCredentials = APIError(
        .badRequest, code: .invalidCredentials, message: "Invalid login credentials")

    private func passwordGrant(_ body: PasswordGrant, _ client: ClientInfo) async throws -> AuthSession {
        try await env.limit("sign-in", env.settings.limits.signInsPerIP, client: client)
        let email = EmailAddress.normalize(body.email) ?? body.email
        let throttleKey = AccountsEnvironment.passwordKey(email)
        let now = env.clock.now
        // Counted before the password is checked: parallel guesses cannot slip past the backoff.
        try await env.admit(throttleKey, rule: env.passwordRule, client: client)
        let account = try await AccountRepository(db: env.store.database).find(email: email)
        let verification: PasswordVerification
        if let account, let hash = account.passwordHash, account.disabledAt == nil {
            verification = await env.hasher.verify(body.password, against: hash)
        } else if let account, account.emailConfirmedAt == nil, account.disabledAt == nil,
            let pending = try await OneTimeCodes(db: env.store.database, clock: env.clock, settings: env.settings)
                .pendingPasswordHashes(email: email).first
        {
            // The password of a sign-up still waiting for its code: right, it only earns "confirm your email".
            if case .valid = await env.hasher.verify(body.password, against: pending) {
                try await env.clearThrottle(throttleKey)
                throw APIError(.badRequest, code: .emailNotConfirmed, message: "Email not confirmed")
            }
            verification = .invalid
        } else {
            await env.hasher.dummyVerify(body.password)
            verification = .invalid
        }
        guard case .valid(let needsRehash) = verification, let account else {
            let reason =
                account == nil ? "no_account" : account?.passwordHash == nil ? "no_password" : "wrong_password"
            await env.sessions.audit(
                client.event(
                    .signInFailed, accountID: account?.id,
                    detail: ["method": "password", "reason": reason, "email": Secrets.emailDigest(email)]))
            throw Self.invalidCredentials
        }
        // An unconfirmed account with a password (imported, or written by an older release) does not sign in by it.
        guard account.emailConfirmedAt != nil else {
            throw APIError(.badRequest, code: .emailNotConfirmed, message: "Email not confirmed")
        }
        // A failed rehash (an imported hash of a password libxcrypt cannot take) keeps the old hash; sign-in goes on.
        let rehashed = needsRehash ? try? await env.hasher.hash(body.password) : nil
        let env = self.env
        let checkedHash = account.passwordHash
        let issued = try await env.store.transaction { db in
            // Only what this sign-in changes is written, against the row as it is now: a password changed or an
            // account disabled while the hash was being checked stays changed.
            let accounts = AccountRepository(db: db)
            guard let current = try await accounts.find(id: account.id), current.disabledAt == nil,
                current.passwordHash == checkedHash
            else { throw Self.invalidCredentials }
            try await accounts.recordSignIn(account.id, at: now, rehashed: rehashed, replacing: checkedHash)
            try await accounts.touchIdentity(provider: "email", accountID: account.id, at: now)
            try await ThrottleRepository(db: db).clear(throttleKey)
            try await AuditLog(db: db, clock: env.clock).record(
                client.event(.signedIn, accountID: account.id, detail: ["method": "password"]))
            return try await env.sessions.start(
                accountID: account.id, method: "password", ip: client.ip, userAgent: client.userAgent, db: db)
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    /// Exchanges the authorization code a link redirected with, and the app's verifier, for a session.
    private func pkceGrant(_ body: PKCEGrant, _ client: ClientInfo) async throws -> AuthSession {
        try await env.limit("verify", env.settings.limits.verificationsPerIP, client: client)
        guard !body.authCode.isEmpty, !body.codeVerifier.isEmpty else {
            throw APIError.validation("both auth code and code verifier should be non-empty")
        }
        let env = self.env
        let outcome = try await env.store.transaction { db in
            try await FlowStates(db: db, clock: env.clock).redeem(body.authCode, verifier: body.codeVerifier)
        }
        switch outcome {
        case .success(let consumed):
            // The session is bound to its code, so a replayed code can end what the first exchange started.
            return try await signIn(after: consumed, method: "magiclink", client: client) {
                [clock = env.clock] sessionID, db in
                try await FlowStates(db: db, clock: clock).bind(body.authCode, sessionID: sessionID)
            }
        case .failure(let refusal):
            if case .reused(let sessionID?) = refusal {
                try await env.store.transaction { [env] db in
                    try await SessionRepository(db: db).revoke(.session(sessionID), now: env.clock.now)
                }
            }
            await env.sessions.audit(
                client.event(.verifyFailed, accountID: nil, detail: ["type": "pkce", "reason": refusal.reason]))
            throw refusal.apiError
        }
    }

    private func refreshGrant(_ body: RefreshGrant, _ client: ClientInfo) async throws -> AuthSession {
        try await env.limit("refresh", env.settings.limits.refreshesPerIP, client: client)
        let issued: IssuedSession
        do {
            issued = try await env.sessions.refresh(body.refreshToken) { issued in
                client.event(.tokenRefreshed, accountID: issued.accountID, detail: ["session": issued.sessionID])
            }
        } catch SessionService.RefreshFailure.notFound {
            throw APIError(
                .badRequest, code: .refreshTokenNotFound, message: "Invalid Refresh Token: Refresh Token Not Found")
        } catch SessionService.RefreshFailure.sessionEnded {
            throw APIError(.badRequest, code: .sessionExpired, message: "Invalid Refresh Token: Session Expired")
        } catch SessionService.RefreshFailure.alreadyUsed(let sessionID, let accountID) {
            await env.sessions.audit(
                client.event(
                    .refreshTokenReused, accountID: accountID,
                    detail: ["session": sessionID, "outcome": "session revoked"]))
            throw APIError(
                .badRequest, code: .refreshTokenAlreadyUsed, message: "Invalid Refresh Token: Already Used")
        }
        guard let account = try await AccountRepository(db: env.store.database).find(id: issued.accountID) else {
            throw APIError(
                .badRequest, code: .refreshTokenNotFound, message: "Invalid Refresh Token: Refresh Token Not Found")
        }
        // A company session refreshes into a company session, with the membership as it is now.
        var membership: Membership?
        if let companyID = issued.companyID {
            membership = try await CompanyRepository(db: env.store.database).membership(
                companyID, accountID: account.id)
            guard membership != nil else {
                throw APIError(.badRequest, code: .sessionExpired, message: "Invalid Refresh Token: Session Expired")
            }
        }
        return try await env.sessions.response(
            for: issued, user: try await env.user(account, db: env.store.database), membership: membership)
    }

    private func idTokenGrant(_ body: IDTokenGrant, _ client: ClientInfo) async throws -> AuthSession {
        try await env.limit("sign-in", env.settings.limits.signInsPerIP, client: client)
        guard body.provider == "apple" else {
            throw APIError(.badRequest, code: .providerDisabled, message: "Only the apple provider is supported")
        }
        guard !env.settings.appleAudiences.isEmpty else {
            throw APIError(.badRequest, code: .providerDisabled, message: "Sign in with Apple is not configured")
        }
        let apple: AppleIdentity
        do {
            apple = try await env.apple.verify(body.idToken, nonce: body.nonce)
        } catch {
            await env.sessions.audit(
                client.event(.signInFailed, accountID: nil, detail: ["method": "apple", "reason": "\(error)"]))
            throw APIError(.badRequest, code: .badJwt, message: "The Apple identity token is invalid: \(error)")
        }
        let now = env.clock.now
        let env = self.env
        let tokenDigest = Secrets.digest(body.idToken)
        let (account, issued) = try await env.store.transaction { db in
            // One sign-in per identity token: a token seen before is refused until it expires.
            try await db.delete(from: "used_identity_tokens").where("expires_at", .lessThan, now.epochMilliseconds)
                .run()
            let fresh = try await db.insert(into: "used_identity_tokens").columns("token_hash", "expires_at")
                .values(SQLBind(tokenDigest), SQLBind(apple.expiresAt.epochMilliseconds))
                .ignoringConflicts(with: "token_hash").returning("token_hash").all()
            guard !fresh.isEmpty else {
                throw APIError(.badRequest, code: .badJwt, message: "The Apple identity token was already used")
            }
            let accounts = AccountRepository(db: db)
            var account: AccountRecord
            if let linked = try await accounts.identity(provider: "apple", providerID: apple.subject),
                let existing = try await accounts.find(id: linked.accountID)
            {
                account = existing
            } else {
                guard let email = apple.email.flatMap(EmailAddress.normalize), apple.emailVerified else {
                    throw APIError.validation("The Apple identity token carries no verified email")
                }
                if let existing = try await accounts.find(email: email) {
                    account = existing
                } else {
                    account = try await accounts.create(
                        email: email, passwordHash: nil, metadata: [:], confirmedAt: now, now: now)
                }
                try await accounts.insert(
                    IdentityRecord(
                        id: Secrets.identifier(), accountID: account.id, provider: "apple", providerID: apple.subject,
                        email: email, createdAt: now, lastSignInAt: nil))
                try await AuditLog(db: db, clock: env.clock).record(
                    client.event(.identityLinked, accountID: account.id, detail: ["provider": "apple"]))
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            if account.emailConfirmedAt == nil {
                // Apple confirmed the address, not a sign-up's code: whatever a sign-up had chosen is dropped.
                account.passwordHash = nil
                account.userMetadata = [:]
                account.emailConfirmedAt = now
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings).voidSignups(
                    email: account.email)
            }
            account.lastSignInAt = now
            account.updatedAt = now
            try await accounts.update(account)
            try await accounts.touchIdentity(provider: "apple", accountID: account.id, at: now)
            try await AuditLog(db: db, clock: env.clock).record(
                client.event(.signedIn, accountID: account.id, detail: ["method": "apple"]))
            return (
                account,
                try await env.sessions.start(
                    accountID: account.id, method: "oauth", ip: client.ip, userAgent: client.userAgent, db: db)
            )
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    // MARK: Signed in

    /// The caller's account (account sessions only).
    @Sendable func user(_ request: Request, context: AuthenticatedContext) async throws -> AuthUser {
        try await requireAccountSession(context, request)
        guard let account = try await AccountRepository(db: env.store.database).find(id: context.identity.accountID)
        else {
            throw APIError(.notFound, code: .userNotFound, message: "User not found")
        }
        return try await env.user(account, db: env.store.database)
    }

    /// Changes profile data, password or email. A new password needs the current one, a `reauthenticate` code, or a
    /// recovery sign-in in the last ten minutes; a new email needs the current password or a code. The new address
    /// confirms with a mailed code, the old one is told, and the answer is the same whether the new one is taken.
    @Sendable func updateUser(_ request: Request, context: AuthenticatedContext) async throws -> AuthUser {
        try await requireAccountSession(context, request)
        let body = try await request.decodeJSON(as: UpdateUserRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let identity = context.identity
        guard var account = try await AccountRepository(db: env.store.database).find(id: identity.accountID) else {
            throw APIError(.notFound, code: .userNotFound, message: "User not found")
        }
        let now = env.clock.now
        var newEmail: String?
        if let raw = body.email {
            let email = try await env.deliverableEmail(raw)
            if email != account.email { newEmail = email }
        }
        var newHash: String?
        if body.password != nil || newEmail != nil {
            try await authorizeSensitiveChange(
                account: account, body: body, identity: identity, client: client, allowRecovery: newEmail == nil)
        }
        if let password = body.password {
            try env.checkPassword(password, email: account.email)
            if let current = account.passwordHash, case .valid = await env.hasher.verify(password, against: current) {
                throw APIError(
                    .unprocessableContent, code: .samePassword,
                    message: "New password should be different from the old password")
            }
            newHash = try await env.hasher.hash(password)
        }
        if let newEmail {
            try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
            _ = try await env.claimCooldown("email_change", email: newEmail)
        }
        let passwordChanged = newHash != nil
        let env = self.env
        let requestedEmail = newEmail
        let hash = newHash
        account = try await env.transactionQueuingMail { db in
            // The changes apply to the row as it is now, not as it was read before the slow checks: a disable or
            // another change made meanwhile is kept.
            guard var updated = try await AccountRepository(db: db).find(id: identity.accountID),
                updated.disabledAt == nil
            else { throw APIError(.forbidden, code: .userBanned, message: "This account is disabled") }
            for (key, value) in body.data ?? [:] {
                if value == .null {
                    updated.userMetadata.removeValue(forKey: key)
                } else {
                    updated.userMetadata[key] = value
                }
            }
            if let hash { updated.passwordHash = hash }
            updated.updatedAt = now
            let audit = AuditLog(db: db, clock: env.clock)
            if body.data != nil {
                try await audit.record(client.event(.profileUpdated, accountID: updated.id))
            }
            if passwordChanged {
                try await env.sessions.revoke(
                    accountID: updated.id, current: identity.sessionID, scope: .others, db: db)
                try await audit.record(client.event(.passwordChanged, accountID: updated.id))
            }
            try await AccountRepository(db: db).update(updated)
            guard let newEmail = requestedEmail else { return updated }
            let taken = try await AccountRepository(db: db).find(email: newEmail) != nil
            try await audit.record(
                client.event(
                    .emailChangeRequested, accountID: updated.id, detail: ["new_email": Secrets.emailDigest(newEmail)]))
            try await env.mailer.enqueue(.emailChangeRequested(newEmail: newEmail), to: updated.email, db: db)
            // A taken address gets no code (it could never be confirmed), and the answer does not say so.
            guard !taken else { return updated }
            let code = try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(email: newEmail, purpose: .emailChange, accountID: updated.id, newEmail: newEmail)
            try await env.mailer.enqueue(
                .emailChange(
                    code: code.code, link: env.verifyLink(token: code.linkToken, type: "email_change", redirectTo: nil),
                    newEmail: newEmail),
                to: newEmail, db: db)
            return updated
        }
        return try await env.user(account, db: env.store.database)
    }

    /// Recent re-authentication for a password or email change: the current password (throttled like sign-in), a
    /// code from `/auth/v1/reauthenticate`, or, for a password only, a recovery sign-in in the last ten minutes.
    private func authorizeSensitiveChange(
        account: AccountRecord, body: UpdateUserRequest, identity: Identity, client: ClientInfo, allowRecovery: Bool
    ) async throws {
        let now = Int64(env.clock.now.timeIntervalSince1970)
        if allowRecovery,
            identity.claims.amr.contains(where: { $0.method == "recovery" && now - $0.timestamp <= 600 })
        {
            return
        }
        if let current = body.currentPassword {
            try await env.limit("sign-in", env.settings.limits.signInsPerIP, client: client)
            let key = AccountsEnvironment.passwordKey(account.email)
            try await env.admit(key, rule: env.passwordRule, client: client, accountID: account.id)
            if let hash = account.passwordHash, case .valid = await env.hasher.verify(current, against: hash) {
                try await env.clearThrottle(key)
                return
            }
            await env.sessions.audit(
                client.event(
                    .passwordChangeRefused, accountID: account.id, detail: ["reason": "wrong_current_password"]))
            throw APIError(.badRequest, code: .invalidCredentials, message: "The current password is not correct")
        }
        if let nonce = body.nonce {
            let consumed = try await env.consumeCode(
                email: account.email, code: nonce, purposes: [.reauthentication], client: client)
            if consumed != nil { return }
            await env.sessions.audit(
                client.event(
                    .passwordChangeRefused, accountID: account.id, detail: ["reason": "wrong_reauthentication_code"]))
            throw APIError(
                .badRequest, code: .reauthenticationNotValid, message: "Verification code is invalid or has expired")
        }
        await env.sessions.audit(
            client.event(.passwordChangeRefused, accountID: account.id, detail: ["reason": "reauthentication_needed"]))
        throw APIError(
            .unauthorized, code: .reauthenticationNeeded,
            message:
                "Changing the password or email requires the current password or a code from /auth/v1/reauthenticate")
    }

    /// Mails a code that authorizes a password or email change.
    @Sendable func reauthenticate(_ request: Request, context: AuthenticatedContext) async throws -> [String: String] {
        try await requireAccountSession(context, request)
        let client = client(request, context.peerAddress)
        guard let account = try await AccountRepository(db: env.store.database).find(id: context.identity.accountID)
        else {
            throw APIError(.notFound, code: .userNotFound, message: "User not found")
        }
        try await env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: .overEmailSendRateLimit)
        _ = try await env.claimCooldown("reauthentication", email: account.email)
        let env = self.env
        try await env.transactionQueuingMail { db in
            let code = try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(email: account.email, purpose: .reauthentication, accountID: account.id)
            try await env.mailer.enqueue(.reauthentication(code: code.code), to: account.email, db: db)
            try await AuditLog(db: db, clock: env.clock).record(
                client.event(.reauthenticationRequested, accountID: account.id))
        }
        return [:]
    }

    /// Ends this session (`local`), every session (`global`, the default) or every other one (`others`).
    @Sendable func logout(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let raw = request.uri.queryParameters["scope"].map(String.init) ?? "global"
        guard let scope = SessionService.Scope(rawValue: raw) else {
            throw APIError.validation("scope must be local, global or others")
        }
        let client = client(request, context.peerAddress)
        let identity = context.identity
        let env = self.env
        try await env.store.transaction { db in
            let ended = try await env.sessions.revoke(
                accountID: identity.accountID, current: identity.sessionID, scope: scope, db: db)
            try await AuditLog(db: db, clock: env.clock).record(
                client.event(
                    .loggedOut, accountID: identity.accountID, detail: ["scope": raw, "sessions": String(ended)]))
        }
        return Response(status: .noContent)
    }

    // MARK: Public information

    /// Which sign-in methods this server offers, in Supabase's settings shape.
    @Sendable func settings(_ request: Request, context: AppRequestContext) async throws -> Response {
        let body: [String: JSONValue] = [
            "external": .object([
                "email": .bool(true), "apple": .bool(!env.settings.appleAudiences.isEmpty), "phone": .bool(false),
                "anonymous_users": .bool(false),
            ]),
            "disable_signup": .bool(false), "mailer_autoconfirm": .bool(false), "phone_autoconfirm": .bool(false),
            "sms_provider": .string(""), "saml_enabled": .bool(false),
        ]
        return try Self.json(body)
    }

    /// The public keys access tokens are signed with.
    @Sendable func jwks(_ request: Request, context: AppRequestContext) async throws -> Response {
        var response = try Self.json(try await env.keys.jwks())
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder.sortedKeys.encode(value))))
    }
}
