import Foundation
import GatehouseAPI
import SQLKit

/// Mailed codes and links spent: verification by code, the link's landing page and its button, and the sign-in a
/// verified code earns.
struct VerificationService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let throttling: AccountThrottling
    let users: UserReader
    let mail: AccountMail

    /// What a verified code earned.
    enum Verified: Sendable {
        case session(Schemas.Session)
        /// The first of a secure email change's two confirmations: no session, until the other address confirms.
        case confirmedOnce
    }

    /// GoTrue's words for the first of the two confirmations, in its `POST /verify` answer and link redirects.
    static let confirmedOnceMessage =
        "Confirmation link accepted. Please proceed to confirm link sent to the other email"

    static let otpExpired = APIError(.forbidden, code: .otpExpired, message: "Token has expired or is invalid")

    /// Verifies a mailed code (or a link token as `token_hash`) and signs in. Wrong codes count per code (five
    /// tries) and per address across all its codes (a ceiling a day), each counted before the code is compared.
    func verify(_ body: Schemas.VerifyRequest, client: ClientInfo) async throws -> Verified {
        try await throttling.limit("verify", settings.limits.verificationsPerIP, client: client)
        let type = body._type.rawValue
        guard let purposes = CodePurpose.accepted(byVerifyType: type) else {
            throw APIError.validation("Unsupported verification type '\(type)'")
        }
        let consumed: ConsumedCode?
        var emailDigest: String?
        if let tokenHash = body.tokenHash {
            consumed = try await store.transaction { [self] db in
                try await OneTimeCodes(db: db, clock: clock, settings: settings)
                    .consume(linkToken: tokenHash, purposes: purposes)
            }
        } else {
            guard let rawEmail = body.email, let token = body.token else {
                throw APIError.validation("Verify requires an email and a token")
            }
            let email = try PasswordRules.validEmail(rawEmail)
            emailDigest = Secrets.emailDigest(email)
            consumed = try await throttling.consumeCode(
                email: email, code: token.trimmingCharacters(in: .whitespaces), purposes: purposes, client: client)
        }
        guard let consumed else {
            var detail = ["type": type]
            detail["email"] = emailDigest
            await trail.recordRefusal(client.event(.verifyFailed, accountID: nil, detail: detail))
            throw Self.otpExpired
        }
        return try await signIn(after: consumed, method: body.tokenHash == nil ? "otp" : "magiclink", client: client)
    }

    /// What the landing page's button did.
    enum LinkOutcome {
        /// To the app: the session or PKCE's code, or the failure, in the redirect.
        case app(LinkRedirect)
        /// The link lands on this server (no app redirect): this browser is signed in, for `purpose`.
        case here(Schemas.Session, purpose: CodePurpose)
        /// The link lands on this server and confirmed one address of a secure email change.
        case confirmedOnce
        /// The link was used or expired, and lands on this server.
        case spent(LinkState)
    }

    /// The landing page's button: spends the link. To the app, it redirects with the session in the fragment, or
    /// with `?code=` in the PKCE flow (the code is useless without the app's verifier). A link without an app redirect
    /// (`landsHere`) signs this browser in instead. A form posted from another site is refused, so nobody can sign a
    /// visitor in to the attacker's account.
    func continueLink(
        token: String, type: String, target: String, landsHere: Bool, sameOrigin: Bool, client: ClientInfo
    ) async throws -> LinkOutcome {
        guard sameOrigin else {
            await trail.recordRefusal(
                client.event(.authorizationRefused, accountID: nil, detail: ["reason": "cross_site_link_post"]))
            throw APIError(.forbidden, code: .crossSiteRequest, message: "This form can only be sent from its own page")
        }
        try await throttling.limit("verify", settings.limits.verificationsPerIP, client: client)
        var consumed: ConsumedCode?
        if let purposes = CodePurpose.accepted(byVerifyType: type) {
            consumed = try await store.transaction { [self] db in
                try await OneTimeCodes(db: db, clock: clock, settings: settings)
                    .consume(linkToken: token, purposes: purposes)
            }
        }
        guard let consumed else {
            await trail.record(
                client.event(.verifyFailed, accountID: nil, detail: ["type": String(type.prefix(32))]))
            if landsHere {
                return .spent(
                    try await OneTimeCodes(db: store.database, clock: clock, settings: settings)
                        .spentState(linkToken: token))
            }
            return .app(
                Self.failure(target, code: ErrorCode.otpExpired.rawValue, "Email link is invalid or has expired"))
        }
        if let challenge = consumed.codeChallenge, !landsHere {
            let code = try await store.transaction { [self] db in
                try await FlowStates(db: db, clock: clock).create(for: consumed, challenge: challenge)
            }
            await trail.record(
                client.event(
                    .verified, accountID: consumed.accountID,
                    detail: ["purpose": consumed.purpose.rawValue, "flow": "pkce"]))
            return .app(LinkPage.redirect(target, query: [("code", code)]))
        }
        do {
            guard case .session(let session) = try await signIn(after: consumed, method: "magiclink", client: client)
            else {
                return landsHere
                    ? .confirmedOnce
                    : .app(LinkPage.redirect(target, fragment: [("message", Self.confirmedOnceMessage)]))
            }
            if landsHere { return .here(session, purpose: consumed.purpose) }
            return .app(
                LinkPage.redirect(
                    target,
                    fragment: LinkPage.sessionFragment(session) + [("type", type)]))
        } catch let error as APIError where !landsHere {
            return .app(Self.failure(target, code: error.code, error.message))
        }
    }

    private static func failure(_ target: String, code: String, _ description: String) -> LinkRedirect {
        LinkPage.redirect(
            target, fragment: [("error", "access_denied"), ("error_code", code), ("error_description", description)])
    }

    /// A session for a verified code that cannot be half of an email change (a PKCE exchange).
    func session(
        after consumed: ConsumedCode, method: String, client: ClientInfo,
        started: @escaping @Sendable (String, any SQLDatabase) async throws -> Void = { _, _ in }
    ) async throws -> Schemas.Session {
        guard
            case .session(let session) = try await signIn(
                after: consumed, method: method, client: client, started: started)
        else { throw Self.otpExpired }
        return session
    }

    /// Applies what a verified code proves (a confirmed email, a new email) and starts a session. An unconfirmed
    /// account takes the password and profile of the sign-up whose code this is; confirmed any other way, whatever a
    /// sign-up had chosen is dropped. An email change's code applies to the change the account is waiting for: with
    /// secure email change, the first of its two codes only marks it confirmed once (`confirmedOnce`), and the second
    /// changes the address, tells the old one, and signs in.
    func signIn(
        after consumed: ConsumedCode, method: String, client: ClientInfo,
        started: @escaping @Sendable (String, any SQLDatabase) async throws -> Void = { _, _ in }
    ) async throws -> Verified {
        let now = clock.now
        let amrMethod =
            consumed.purpose == .recovery ? "recovery" : consumed.purpose == .emailChange ? "email_change" : method
        let secureEmailChange = settings.secureEmailChange
        let done = try await mail.transactionQueuingMail { [self] db -> (AccountRecord, IssuedSession)? in
            let accounts = AccountRepository(db: db)
            var found: AccountRecord? = nil
            if let id = consumed.accountID { found = try await accounts.findLocked(id: id) }
            if found == nil, let byEmail = try await accounts.find(email: consumed.email) {
                found = try await accounts.findLocked(id: byEmail.id)
            }
            guard var account = found else { throw Self.otpExpired }
            guard account.disabledAt == nil else {
                throw APIError(.forbidden, code: .userBanned, message: "This account is disabled")
            }
            let audit = trail.within(db)
            if consumed.purpose == .emailChange, let newEmail = consumed.newEmail {
                // A code of a change replaced since (its codes are void) or already done no longer applies.
                guard let change = account.emailChange, change.newEmail == newEmail else { throw Self.otpExpired }
                // Both addresses must confirm: a second code of the side that confirmed first (a resent or generated
                // one) confirms it again, never the other side.
                let side: PendingEmailChange.Side = consumed.email == newEmail ? .new : .current
                if secureEmailChange, !account.isAnonymous {
                    let first = try await accounts.confirmEmailChangeOnce(
                        accountID: account.id, newEmail: newEmail, by: side)
                    if first || change.confirmedBy == side {
                        try await audit.record(
                            client.event(
                                .verified, accountID: account.id,
                                detail: [
                                    "purpose": consumed.purpose.rawValue, "confirmed": side == .new ? "new" : "current",
                                ]))
                        return nil
                    }
                }
                if let other = try await accounts.find(email: newEmail), other.id != account.id {
                    throw APIError(
                        .unprocessableContent, code: .emailExists,
                        message: "A user with this email address has already been registered")
                }
                let oldEmail = account.email
                account.email = newEmail
                account.emailChange = nil
                if account.isAnonymous {
                    // Made permanent, with the same id: the address is its first identity, and confirmed now (the
                    // password and profile it set while anonymous are its own, not a sign-up's to replace).
                    account.isAnonymous = false
                    account.emailConfirmedAt = now
                    try await accounts.insert(
                        IdentityRecord(
                            id: Secrets.identifier(), accountID: account.id, provider: "email", providerID: account.id,
                            email: newEmail, createdAt: now, lastSignInAt: nil))
                } else {
                    try await accounts.updateEmailIdentity(accountID: account.id, email: newEmail)
                }
                try await OneTimeCodeRepository(db: db).voidEmailChanges(accountID: account.id, at: now)
                try await mail.mailer.enqueue(.emailChanged(newEmail: newEmail), to: oldEmail, db: db)
            }
            let pending = consumed.pending ?? PendingSignup(passwordHash: nil, metadata: [:])
            if account.emailConfirmedAt == nil,
                account.passwordHash != nil || !account.userMetadata.isEmpty || pending.passwordHash != nil
            {
                try await audit.record(
                    client.event(
                        .pendingSignupResolved, accountID: account.id,
                        detail: ["password": pending.passwordHash == nil ? "none" : "set_by_this_code"]))
            }
            try await ProvenEmailSignIn(clock: clock).confirmAndSignIn(
                &account, pending: pending, provider: "email", now: now, db: db)
            let issued = try await sessions.start(
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
        guard let (account, issued) = done else { return .confirmedOnce }
        return .session(
            try await sessions.response(for: issued, user: try await users.user(account, db: store.database)))
    }
}
