import Foundation
import SQLKit

/// The mail the account flows send: the transaction that queues it, the codes it carries, and the links in it.
struct AccountMail: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let mailer: Mailer
    let publicURL: String
    /// The allow-list with the site URL's own origin and path, parsed once.
    let redirects: RedirectAllowList
    let codeKeys: CodeKeys

    var siteURL: String { settings.siteURL ?? publicURL }

    /// Runs `body` in one transaction that may queue mail, then wakes the mail worker once it has committed, so the
    /// mail leaves when what it announces is stored, and never before.
    func transactionQueuingMail<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let result = try await store.transaction(body)
        mailer.queue.wake()
        return result
    }

    /// Tells the owner of `accountID` that a way in was added or removed, queued in `db`'s transaction (run it in
    /// `transactionQueuingMail`), at the address the account has now.
    func mailSignInMethodChange(_ template: Mailer.Template, accountID: String, db: any SQLDatabase) async throws {
        guard let account = try await AccountRepository(db: db).find(id: accountID) else { return }
        try await mailer.enqueue(template, to: account.email, db: db)
    }

    /// Mails a code of `purpose` to the account at `email` when it exists, is not disabled and is `eligible`;
    /// otherwise does nothing, so the caller answers the same either way. The mail is queued with the code.
    func mailCode(
        to email: String, purpose: CodePurpose, client: ClientInfo, auditAction: AuditAction,
        codeChallenge: String? = nil,
        eligible: @escaping @Sendable (AccountRecord) -> Bool,
        template: @escaping @Sendable (IssuedCode) -> Mailer.Template
    ) async throws {
        try await transactionQueuingMail { [self] db in
            guard let account = try await AccountRepository(db: db).find(email: email), account.disabledAt == nil,
                eligible(account)
            else { return }
            try await trail.within(db).record(client.event(auditAction, accountID: account.id))
            try await issueAndMail(
                to: email, purpose: purpose, accountID: account.id, codeChallenge: codeChallenge, db: db,
                template: template)
        }
    }

    /// Mails the codes of the account's pending email change, voiding any mailed before: to the new address, and with
    /// secure email change to the current one (without it, the current address is only told). A taken new address
    /// gets no code (it could never be confirmed), and nothing says so.
    func mailEmailChange(_ account: AccountRecord, db: any SQLDatabase) async throws {
        guard let change = account.emailChange else { return }
        let newEmail = change.newEmail
        try await OneTimeCodeRepository(db: db).voidEmailChanges(accountID: account.id, at: clock.now)
        if account.isAnonymous {
            // No current address to ask: the new one alone confirms (GoTrue's anonymous user, made permanent).
        } else if settings.secureEmailChange {
            try await issueAndMail(
                to: account.email, purpose: .emailChange, accountID: account.id, newEmail: newEmail, db: db
            ) { code in
                .emailChangeCurrent(
                    code: code.code,
                    link: verifyLink(token: code.linkToken, type: "email_change", redirectTo: nil),
                    newEmail: newEmail)
            }
        } else {
            try await mailer.enqueue(.emailChangeRequested(newEmail: newEmail), to: account.email, db: db)
        }
        guard try await AccountRepository(db: db).find(email: newEmail) == nil else { return }
        try await issueAndMail(
            to: newEmail, purpose: .emailChange, accountID: account.id, newEmail: newEmail, db: db
        ) { code in
            .emailChange(
                code: code.code,
                link: verifyLink(token: code.linkToken, type: "email_change", redirectTo: nil),
                newEmail: newEmail)
        }
    }

    /// Issues a code for `purpose` and queues its mail, in the caller's transaction.
    func issueAndMail(
        to email: String, purpose: CodePurpose, accountID: String, newEmail: String? = nil,
        pending: PendingSignup? = nil, codeChallenge: String? = nil, db: any SQLDatabase,
        template: (IssuedCode) -> Mailer.Template
    ) async throws {
        let code = try await OneTimeCodes(db: db, clock: clock, settings: settings)
            .issue(
                email: email, purpose: purpose, accountID: accountID, newEmail: newEmail, pending: pending,
                codeChallenge: codeChallenge, keys: codeKeys)
        // A sign-up's own choice, else the account's (an email change mails an address no account has yet). English
        // when neither names one: the mailer's own lookup by address would only find this account again.
        var locale = Mailer.locale(in: pending?.metadata)
        if locale == nil {
            locale = Mailer.locale(in: try await AccountRepository(db: db).find(id: accountID)?.userMetadata) ?? "en"
        }
        try await mailer.enqueue(template(code), to: email, locale: locale, accountID: accountID, db: db)
    }

    /// A link into `GET /auth/v1/verify`, carrying the link token and where to land afterwards.
    func verifyLink(token: String, type: String, redirectTo: String?) -> String {
        var components = URLComponents(string: publicURL + "/auth/v1/verify")
        components?.queryItems = [
            URLQueryItem(name: "token", value: token), URLQueryItem(name: "type", value: type),
            URLQueryItem(name: "redirect_to", value: redirectTarget(redirectTo)),
        ]
        return components?.string ?? publicURL
    }

    /// `candidate` when the allow-list (or the site URL's own origin and path) admits it; nil otherwise.
    func allowedRedirect(_ candidate: String?) -> String? {
        guard let candidate, !candidate.isEmpty else { return nil }
        return redirects.admits(candidate) ? candidate : nil
    }

    /// Where a link goes after it is used: `candidate` when allowed, else the site URL.
    func redirectTarget(_ candidate: String?) -> String {
        allowedRedirect(candidate) ?? siteURL
    }

    /// A valid address mail can be sent to: one with non-ASCII characters needs a mail server with SMTPUTF8.
    func deliverableEmail(_ raw: String) async throws -> String {
        let email = try PasswordRules.validEmail(raw)
        // The reserved .invalid domain (RFC 2606) receives no mail; anonymous users' placeholders live there.
        guard !email.hasSuffix(".invalid") else {
            throw APIError.validation("Unable to validate email address: the .invalid domain receives no mail")
        }
        guard await mailer.canDeliver(to: email) else {
            throw APIError(
                .unprocessableContent, code: .emailAddressNotSupported,
                message: "Mail cannot be sent to addresses with non-ASCII characters from this server")
        }
        return email
    }

}
