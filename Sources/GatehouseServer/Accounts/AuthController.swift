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
        open.get("verify", use: verifyLink)
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
        ClientInfo(request, peerAddress: peerAddress, settings: env.settings)
    }

    // MARK: Sign-up and mailed codes

    /// Creates an unverified account and mails a code and link. An existing address gets the same answer, and its
    /// owner a warning mail instead.
    @Sendable func signUp(_ request: Request, context: AppRequestContext) async throws -> AuthUser {
        let body = try await request.decodeJSON(as: SignUpRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try env.validEmail(body.email)
        if let password = body.password { try env.checkPassword(password, email: email) }
        try env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: "over_email_send_rate_limit")
        let cooldown = try await env.claimCooldown("signup", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let now = env.clock.now

        if let existing = try await AccountRepository(db: env.store.database).find(email: email),
            existing.emailConfirmedAt != nil
        {
            // The same work as a real sign-up, so neither the answer nor its time tells the address is taken.
            if let password = body.password { _ = try await env.hasher.hash(password) }
            try await env.deliver(.signupAttempt(signInLink: env.siteURL), to: email, cooldownKey: cooldown)
            try await env.audit(client.event("signup_existing_email", accountID: existing.id))
            return Self.decoy(email: email, metadata: body.data ?? [:], now: now)
        }

        var computed: String? = nil
        if let password = body.password { computed = try await env.hasher.hash(password) }
        let hash = computed
        let settings = env.settings
        let clock = env.clock
        let (account, code, created) = try await env.store.transaction { db in
            let accounts = AccountRepository(db: db)
            var created = false
            var account: AccountRecord
            if var unconfirmed = try await accounts.find(email: email) {
                if let hash { unconfirmed.passwordHash = hash }
                if let data = body.data { unconfirmed.userMetadata = data }
                unconfirmed.updatedAt = now
                try await accounts.update(unconfirmed)
                account = unconfirmed
            } else {
                account = try await accounts.create(
                    email: email, passwordHash: hash, metadata: body.data ?? [:], confirmedAt: nil, now: now)
                created = true
            }
            let code = try await OneTimeCodes(db: db, clock: clock, settings: settings)
                .issue(email: email, purpose: .signup, accountID: account.id)
            try await AuditLog(db: db, clock: clock).record(client.event("signup", accountID: account.id))
            return (account, code, created)
        }
        let accountID = account.id
        try await env.deliver(
            .signupConfirmation(code: code.code, link: env.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirect)),
            to: email, cooldownKey: cooldown
        ) { db in
            try await OneTimeCodes(db: db, clock: clock, settings: settings).withdraw(id: code.id)
            if created { try await AccountRepository(db: db).delete(id: accountID) }
        }
        let identities = try await AccountRepository(db: env.store.database).identities(accountID: account.id)
        return account.wire(identities: identities, confirmationSentAt: now)
    }

    /// An answer shaped exactly like a new sign-up's, for an address that already has an account.
    static func decoy(email: String, metadata: [String: JSONValue], now: Date) -> AuthUser {
        let id = Secrets.identifier()
        let identity = IdentityRecord(
            id: Secrets.identifier(), accountID: id, provider: "email", providerID: id, email: email, createdAt: now,
            lastSignInAt: nil)
        return AccountRecord(
            id: id, email: email, emailConfirmedAt: nil, passwordHash: nil, userMetadata: metadata, createdAt: now,
            updatedAt: now, lastSignInAt: nil, disabledAt: nil
        ).wire(identities: [identity], confirmationSentAt: now)
    }

    /// Mails a sign-in code and magic link, creating the account when allowed. The answer is `{}` either way.
    @Sendable func sendOTP(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: OTPRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try env.validEmail(body.email)
        try env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: "over_email_send_rate_limit")
        let cooldown = try await env.claimCooldown("otp", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let now = env.clock.now
        let settings = env.settings
        let clock = env.clock
        let createUser = body.createUser ?? true
        let issued: (code: IssuedCode, accountID: String, created: Bool)? = try await env.store.transaction { db in
            let accounts = AccountRepository(db: db)
            var created = false
            var account = try await accounts.find(email: email)
            if account == nil, createUser {
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: body.data ?? [:], confirmedAt: nil, now: now)
                created = true
            }
            guard let account, account.disabledAt == nil else { return nil }
            let code = try await OneTimeCodes(db: db, clock: clock, settings: settings)
                .issue(email: email, purpose: .magiclink, accountID: account.id)
            try await AuditLog(db: db, clock: clock).record(client.event("otp_sent", accountID: account.id))
            return (code, account.id, created)
        }
        if let issued {
            try await env.deliver(
                .magicLink(
                    code: issued.code.code,
                    link: env.verifyLink(token: issued.code.linkToken, type: "magiclink", redirectTo: redirect)),
                to: email, cooldownKey: cooldown
            ) { db in
                try await OneTimeCodes(db: db, clock: clock, settings: settings).withdraw(id: issued.code.id)
                if issued.created { try await AccountRepository(db: db).delete(id: issued.accountID) }
            }
        }
        return [:]
    }

    /// Mails a new sign-up code to an unconfirmed address. `{}` whatever the address.
    @Sendable func resend(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: EmailRequest.self, context: context)
        guard body.type == nil || body.type == "signup" else {
            throw APIError.validation("Only type 'signup' can be resent; ask for a new code instead")
        }
        let client = client(request, context.peerAddress)
        let email = try env.validEmail(body.email)
        try env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: "over_email_send_rate_limit")
        let cooldown = try await env.claimCooldown("signup", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let env = self.env
        try await env.mailCode(
            to: email, purpose: .signup, cooldownKey: cooldown, client: client,
            auditAction: "signup_code_resent", eligible: { $0.emailConfirmedAt == nil }
        ) { code in
            .signupConfirmation(
                code: code.code, link: env.verifyLink(token: code.linkToken, type: "signup", redirectTo: redirect))
        }
        return [:]
    }

    /// Mails a password reset code and link to a confirmed address. `{}` whatever the address.
    @Sendable func recover(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        let body = try await request.decodeJSON(as: EmailRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let email = try env.validEmail(body.email)
        try env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: "over_email_send_rate_limit")
        let cooldown = try await env.claimCooldown("recovery", email: email)
        let redirect = request.uri.queryParameters["redirect_to"].map(String.init)
        let env = self.env
        try await env.mailCode(
            to: email, purpose: .recovery, cooldownKey: cooldown, client: client,
            auditAction: "recovery_requested", eligible: { _ in true }
        ) { code in
            .recovery(code: code.code, link: env.verifyLink(token: code.linkToken, type: "recovery", redirectTo: redirect))
        }
        return [:]
    }

    // MARK: Verification

    /// Verifies a mailed code (or a link token as `token_hash`) and signs in.
    @Sendable func verify(_ request: Request, context: AppRequestContext) async throws -> AuthSession {
        let body = try await request.decodeJSON(as: VerifyRequest.self, context: context)
        let client = client(request, context.peerAddress)
        try env.limit("verify", env.settings.limits.verificationsPerIP, client: client)
        guard let purposes = CodePurpose.accepted(byVerifyType: body.type) else {
            throw APIError.validation("Unsupported verification type '\(body.type.prefix(32))'")
        }
        let codes = OneTimeCodes(db: env.store.database, clock: env.clock, settings: env.settings)
        let consumed: ConsumedCode?
        let method: String
        if let tokenHash = body.tokenHash {
            consumed = try await env.store.transaction { db in
                try await OneTimeCodes(db: db, clock: codes.clock, settings: codes.settings)
                    .consume(linkToken: tokenHash, purposes: purposes)
            }
            method = "magiclink"
        } else {
            guard let rawEmail = body.email, let token = body.token else {
                throw APIError.validation("Verify requires an email and a token")
            }
            let email = try env.validEmail(rawEmail)
            consumed = try await env.store.transaction { db in
                try await OneTimeCodes(db: db, clock: codes.clock, settings: codes.settings)
                    .consume(email: email, code: token.trimmingCharacters(in: .whitespaces), purposes: purposes)
            }
            method = "otp"
        }
        guard let consumed else {
            try await env.audit(client.event("verify_failed", accountID: nil, detail: ["type": body.type]))
            throw APIError(.forbidden, code: "otp_expired", message: "Token has expired or is invalid")
        }
        return try await signIn(after: consumed, method: method, client: client)
    }

    /// The magic link: verifies and answers 303 to the redirect URL with the session in the fragment.
    @Sendable func verifyLink(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let target = env.allowedRedirect(query["redirect_to"].map(String.init)) ?? env.siteURL
        let client = client(request, context.peerAddress)
        try env.limit("verify", env.settings.limits.verificationsPerIP, client: client)
        let type = query["type"].map(String.init) ?? "magiclink"
        let consumed: ConsumedCode?
        if let token = query["token"].map(String.init), let purposes = CodePurpose.accepted(byVerifyType: type) {
            consumed = try await env.store.transaction { [env] db in
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                    .consume(linkToken: token, purposes: purposes)
            }
        } else {
            consumed = nil
        }
        var fragment: [(String, String)]
        if let consumed {
            do {
                let session = try await signIn(after: consumed, method: "magiclink", client: client)
                fragment = [
                    ("access_token", session.accessToken), ("expires_at", String(session.expiresAt)),
                    ("expires_in", String(session.expiresIn)), ("refresh_token", session.refreshToken),
                    ("token_type", "bearer"), ("type", type),
                ]
            } catch let error as APIError {
                fragment = [("error", "access_denied"), ("error_code", error.code), ("error_description", error.message)]
            }
        } else {
            try await env.audit(client.event("verify_failed", accountID: nil, detail: ["type": String(type.prefix(32))]))
            fragment = [
                ("error", "access_denied"), ("error_code", "otp_expired"),
                ("error_description", "Email link is invalid or has expired"),
            ]
        }
        var components = URLComponents()
        components.queryItems = fragment.map { URLQueryItem(name: $0.0, value: $0.1) }
        let encoded = components.percentEncodedQuery ?? ""
        return Response(
            status: .seeOther,
            headers: [
                .location: target + "#" + encoded, .cacheControl: "no-store",
                HTTPField.Name("Referrer-Policy")!: "no-referrer",
            ])
    }

    /// Applies what a verified code proves (a confirmed email, a new email) and starts a session.
    private func signIn(after consumed: ConsumedCode, method: String, client: ClientInfo) async throws -> AuthSession {
        let now = env.clock.now
        let env = self.env
        let amrMethod = consumed.purpose == .recovery ? "recovery" : consumed.purpose == .emailChange ? "email_change" : method
        let (account, issued) = try await env.store.transaction { db in
            let accounts = AccountRepository(db: db)
            var found: AccountRecord? = nil
            if let id = consumed.accountID { found = try await accounts.find(id: id) }
            if found == nil { found = try await accounts.find(email: consumed.email) }
            guard var account = found else {
                throw APIError(.forbidden, code: "otp_expired", message: "Token has expired or is invalid")
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: "user_banned", message: "This account is disabled")
            }
            if consumed.purpose == .emailChange, let newEmail = consumed.newEmail {
                if let other = try await accounts.find(email: newEmail), other.id != account.id {
                    throw APIError(
                        .unprocessableContent, code: "email_exists",
                        message: "A user with this email address has already been registered")
                }
                account.email = newEmail
                try await accounts.updateEmailIdentity(accountID: account.id, email: newEmail)
            }
            if account.emailConfirmedAt == nil { account.emailConfirmedAt = now }
            account.lastSignInAt = now
            account.updatedAt = now
            try await accounts.update(account)
            try await accounts.touchIdentity(provider: "email", accountID: account.id, at: now)
            let issued = try await env.sessions.start(
                accountID: account.id, method: amrMethod, ip: client.ip, userAgent: client.userAgent, db: db)
            let audit = AuditLog(db: db, clock: env.clock)
            try await audit.record(client.event("verified", accountID: account.id, detail: ["purpose": consumed.purpose.rawValue]))
            if consumed.purpose == .emailChange {
                try await audit.record(client.event("email_changed", accountID: account.id))
            }
            try await audit.record(client.event("signed_in", accountID: account.id, detail: ["method": amrMethod]))
            return (account, issued)
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    // MARK: Tokens

    /// `grant_type=password | refresh_token | id_token`.
    @Sendable func token(_ request: Request, context: AppRequestContext) async throws -> AuthSession {
        let client = client(request, context.peerAddress)
        switch request.uri.queryParameters["grant_type"].map(String.init) {
        case "password":
            return try await passwordGrant(try await request.decodeJSON(as: PasswordGrant.self, context: context), client)
        case "refresh_token":
            return try await refreshGrant(try await request.decodeJSON(as: RefreshGrant.self, context: context), client)
        case "id_token":
            return try await idTokenGrant(try await request.decodeJSON(as: IDTokenGrant.self, context: context), client)
        default:
            throw APIError(
                .badRequest, code: "unsupported_grant_type",
                message: "grant_type must be password, refresh_token or id_token")
        }
    }

    static let invalidCredentials = APIError(.badRequest, code: "invalid_credentials", message: "Invalid login credentials")

    private func passwordGrant(_ body: PasswordGrant, _ client: ClientInfo) async throws -> AuthSession {
        try env.limit("sign-in", env.settings.limits.signInsPerIP, client: client)
        let email = EmailAddress.normalize(body.email) ?? body.email
        let throttleKey = "password:" + Secrets.digest(email)
        let now = env.clock.now
        let previous = try await ThrottleRepository(db: env.store.database).load(throttleKey)
        if let wait = previous?.retryAfter(now: now, ceiling: env.settings.limits.failuresPerHour) {
            throw APIError.rateLimited("over_request_rate_limit", retryAfter: wait)
        }
        let account = try await AccountRepository(db: env.store.database).find(email: email)
        let verification: PasswordVerification
        if let account, let hash = account.passwordHash, account.disabledAt == nil {
            verification = await env.hasher.verify(body.password, against: hash)
        } else {
            await env.hasher.dummyVerify(body.password)
            verification = .invalid
        }
        guard case .valid(let needsRehash) = verification, let account else {
            let failed = (previous ?? FailureBackoff(failures: 0, windowStartedAt: now, lastFailureAt: now))
                .recordingFailure(now: now)
            let reason = account == nil ? "no_account" : account?.passwordHash == nil ? "no_password" : "wrong_password"
            try await env.store.transaction { [env] db in
                try await ThrottleRepository(db: db).save(throttleKey, failed)
                try await AuditLog(db: db, clock: env.clock).record(
                    client.event(
                        "sign_in_failed", accountID: account?.id,
                        detail: ["method": "password", "reason": reason, "email": Secrets.emailDigest(email)]))
            }
            throw Self.invalidCredentials
        }
        guard account.emailConfirmedAt != nil else {
            throw APIError(.badRequest, code: "email_not_confirmed", message: "Email not confirmed")
        }
        // A failed rehash (an imported hash of a password libxcrypt cannot take) keeps the old hash; sign-in goes on.
        let rehashed = needsRehash ? try? await env.hasher.hash(body.password) : nil
        var signedIn = account
        if let rehashed { signedIn.passwordHash = rehashed }
        signedIn.lastSignInAt = now
        let env = self.env
        let updated = signedIn
        let issued = try await env.store.transaction { db in
            try await AccountRepository(db: db).update(updated)
            try await AccountRepository(db: db).touchIdentity(provider: "email", accountID: account.id, at: now)
            try await ThrottleRepository(db: db).clear(throttleKey)
            try await AuditLog(db: db, clock: env.clock).record(
                client.event("signed_in", accountID: account.id, detail: ["method": "password"]))
            return try await env.sessions.start(
                accountID: account.id, method: "password", ip: client.ip, userAgent: client.userAgent, db: db)
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    private func refreshGrant(_ body: RefreshGrant, _ client: ClientInfo) async throws -> AuthSession {
        try env.limit("refresh", env.settings.limits.refreshesPerIP, client: client)
        let issued: IssuedSession
        do {
            issued = try await env.sessions.refresh(body.refreshToken) { issued in
                client.event("token_refreshed", accountID: issued.accountID, detail: ["session": issued.sessionID])
            }
        } catch SessionService.RefreshFailure.notFound {
            throw APIError(
                .badRequest, code: "refresh_token_not_found", message: "Invalid Refresh Token: Refresh Token Not Found")
        } catch SessionService.RefreshFailure.sessionEnded {
            throw APIError(.badRequest, code: "session_expired", message: "Invalid Refresh Token: Session Expired")
        } catch SessionService.RefreshFailure.alreadyUsed(let sessionID, let accountID) {
            try await env.audit(
                client.event("refresh_token_reused", accountID: accountID, detail: ["session": sessionID, "outcome": "session revoked"]))
            throw APIError(
                .badRequest, code: "refresh_token_already_used", message: "Invalid Refresh Token: Already Used")
        }
        guard let account = try await AccountRepository(db: env.store.database).find(id: issued.accountID) else {
            throw APIError(.badRequest, code: "refresh_token_not_found", message: "Invalid Refresh Token: Refresh Token Not Found")
        }
        // A company session refreshes into a company session, with the membership as it is now.
        var membership: Membership?
        if let companyID = issued.companyID {
            membership = try await CompanyRepository(db: env.store.database).membership(companyID, accountID: account.id)
            guard membership != nil else {
                throw APIError(.badRequest, code: "session_expired", message: "Invalid Refresh Token: Session Expired")
            }
        }
        return try await env.sessions.response(
            for: issued, user: try await env.user(account, db: env.store.database), membership: membership)
    }

    private func idTokenGrant(_ body: IDTokenGrant, _ client: ClientInfo) async throws -> AuthSession {
        try env.limit("sign-in", env.settings.limits.signInsPerIP, client: client)
        guard body.provider == "apple" else {
            throw APIError(.badRequest, code: "provider_disabled", message: "Only the apple provider is supported")
        }
        guard !env.settings.appleAudiences.isEmpty else {
            throw APIError(.badRequest, code: "provider_disabled", message: "Sign in with Apple is not configured")
        }
        let apple: AppleIdentity
        do {
            apple = try await env.apple.verify(body.idToken, nonce: body.nonce)
        } catch {
            try await env.audit(client.event("sign_in_failed", accountID: nil, detail: ["method": "apple", "reason": "\(error)"]))
            throw APIError(.badRequest, code: "bad_jwt", message: "The Apple identity token is invalid: \(error)")
        }
        let now = env.clock.now
        let env = self.env
        let (account, issued) = try await env.store.transaction { db in
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
                try await AuditLog(db: db, clock: env.clock).record(client.event("identity_linked", accountID: account.id, detail: ["provider": "apple"]))
            }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: "user_banned", message: "This account is disabled")
            }
            if account.emailConfirmedAt == nil { account.emailConfirmedAt = now }
            account.lastSignInAt = now
            account.updatedAt = now
            try await accounts.update(account)
            try await accounts.touchIdentity(provider: "apple", accountID: account.id, at: now)
            try await AuditLog(db: db, clock: env.clock).record(client.event("signed_in", accountID: account.id, detail: ["method": "apple"]))
            return (account, try await env.sessions.start(
                accountID: account.id, method: "oauth", ip: client.ip, userAgent: client.userAgent, db: db))
        }
        return try await env.sessions.response(for: issued, user: try await env.user(account, db: env.store.database))
    }

    // MARK: Signed in

    /// The caller's account.
    @Sendable func user(_ request: Request, context: AuthenticatedContext) async throws -> AuthUser {
        guard let account = try await AccountRepository(db: env.store.database).find(id: context.identity.accountID) else {
            throw APIError(.notFound, code: "user_not_found", message: "User not found")
        }
        return try await env.user(account, db: env.store.database)
    }

    /// Changes profile data, password (with the current password, a fresh code, or a sign-in by code in the last
    /// ten minutes) or email (confirmed by a code mailed to the new address).
    @Sendable func updateUser(_ request: Request, context: AuthenticatedContext) async throws -> AuthUser {
        let body = try await request.decodeJSON(as: UpdateUserRequest.self, context: context)
        let client = client(request, context.peerAddress)
        let identity = context.identity
        guard var account = try await AccountRepository(db: env.store.database).find(id: identity.accountID) else {
            throw APIError(.notFound, code: "user_not_found", message: "User not found")
        }
        let now = env.clock.now
        var newHash: String?
        if let password = body.password {
            try env.checkPassword(password, email: account.email)
            try await authorizePasswordChange(account: account, body: body, identity: identity, client: client)
            if let current = account.passwordHash, case .valid = await env.hasher.verify(password, against: current) {
                throw APIError(
                    .unprocessableContent, code: "same_password",
                    message: "New password should be different from the old password")
            }
            newHash = try await env.hasher.hash(password)
        }
        var newEmail: String?
        if let raw = body.email {
            let email = try env.validEmail(raw)
            if email != account.email {
                if try await AccountRepository(db: env.store.database).find(email: email) != nil {
                    throw APIError(
                        .unprocessableContent, code: "email_exists",
                        message: "A user with this email address has already been registered")
                }
                newEmail = email
            }
        }
        if let data = body.data {
            for (key, value) in data {
                if value == .null { account.userMetadata.removeValue(forKey: key) } else { account.userMetadata[key] = value }
            }
        }
        if let newHash { account.passwordHash = newHash }
        account.updatedAt = now
        let passwordChanged = newHash != nil
        let env = self.env
        let updated = account
        let requestedEmail = newEmail
        let code: IssuedCode? = try await env.store.transaction { db in
            let audit = AuditLog(db: db, clock: env.clock)
            if body.data != nil {
                try await audit.record(client.event("profile_updated", accountID: updated.id))
            }
            if passwordChanged {
                try await env.sessions.revoke(accountID: updated.id, current: identity.sessionID, scope: .others, db: db)
                try await audit.record(client.event("password_changed", accountID: updated.id))
            }
            try await AccountRepository(db: db).update(updated)
            guard let newEmail = requestedEmail else { return nil }
            try await audit.record(client.event("email_change_requested", accountID: updated.id))
            return try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(email: newEmail, purpose: .emailChange, accountID: updated.id, newEmail: newEmail)
        }
        if let code, let newEmail {
            let cooldown = try await env.claimCooldown("email_change", email: newEmail)
            try await env.deliver(
                .emailChange(
                    code: code.code, link: env.verifyLink(token: code.linkToken, type: "email_change", redirectTo: nil),
                    newEmail: newEmail),
                to: newEmail, cooldownKey: cooldown
            ) { db in try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings).withdraw(id: code.id) }
        }
        return try await env.user(account, db: env.store.database)
    }

    private func authorizePasswordChange(
        account: AccountRecord, body: UpdateUserRequest, identity: Identity, client: ClientInfo
    ) async throws {
        let now = Int64(env.clock.now.timeIntervalSince1970)
        if identity.claims.amr.contains(where: { ["recovery", "otp", "magiclink"].contains($0.method) && now - $0.timestamp <= 600 }) {
            return
        }
        if let current = body.currentPassword {
            if let hash = account.passwordHash, case .valid = await env.hasher.verify(current, against: hash) { return }
            try await env.audit(client.event("password_change_refused", accountID: account.id, detail: ["reason": "wrong_current_password"]))
            throw APIError(.badRequest, code: "invalid_credentials", message: "The current password is not correct")
        }
        if let nonce = body.nonce {
            let consumed = try await env.store.transaction { [env] db in
                try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                    .consume(email: account.email, code: nonce, purposes: [.reauthentication])
            }
            if consumed != nil { return }
            throw APIError(.badRequest, code: "reauthentication_not_valid", message: "Verification code is invalid or has expired")
        }
        throw APIError(
            .unauthorized, code: "reauthentication_needed",
            message: "Password update requires the current password or a code from /auth/v1/reauthenticate")
    }

    /// Mails a code that authorizes a password change.
    @Sendable func reauthenticate(_ request: Request, context: AuthenticatedContext) async throws -> [String: String] {
        let client = client(request, context.peerAddress)
        guard let account = try await AccountRepository(db: env.store.database).find(id: context.identity.accountID) else {
            throw APIError(.notFound, code: "user_not_found", message: "User not found")
        }
        try env.limit("mail", env.settings.limits.emailsPerIP, client: client, code: "over_email_send_rate_limit")
        let cooldown = try await env.claimCooldown("reauthentication", email: account.email)
        let env = self.env
        let code = try await env.store.transaction { db in
            try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings)
                .issue(email: account.email, purpose: .reauthentication, accountID: account.id)
        }
        try await env.deliver(.reauthentication(code: code.code), to: account.email, cooldownKey: cooldown) { db in
            try await OneTimeCodes(db: db, clock: env.clock, settings: env.settings).withdraw(id: code.id)
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
                client.event("logged_out", accountID: identity.accountID, detail: ["scope": raw, "sessions": String(ended)]))
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
