import Foundation
import GatehouseAPI
import Logging
import SQLKit

/// The mails Gatehouse sends, written from the mail templates in the recipient's language as plain text and HTML,
/// and queued for the worker that sends them.
public struct Mailer: Sendable {
    let queue: MailQueue
    let from: String
    let templates: Templates
    /// How long mailed codes and links live, in minutes, for the templates' `expires_minutes`.
    var expiresMinutes = AuthSettings().codeLifetimeMinutes
    /// The auth hooks: with the send email hook on, the mails with codes and links go to it instead of the queue.
    var hooks: AuthHooks? = nil
    /// The site URL a send email hook is told (`email_data.site_url`).
    var siteURL = ""

    static let productName = "Gatehouse"

    /// Which mail to write. Codes and links appear only in the mail body, never in logs.
    enum Template: Sendable {
        case signupConfirmation(code: String, link: String)
        /// An invitation from the admin API: its link confirms the address and signs in.
        case invite(code: String, link: String)
        case magicLink(code: String, link: String)
        case recovery(code: String, link: String)
        case emailChange(code: String, link: String, newEmail: String)
        /// The current address's half of a secure email change.
        case emailChangeCurrent(code: String, link: String, newEmail: String)
        /// Told to the old address once a change completed.
        case emailChanged(newEmail: String)
        case reauthentication(code: String)
        case signupAttempt(signInLink: String)
        case emailChangeRequested(newEmail: String)
        case accountDeleted
        /// A recovery code stood in for the second factor; `remaining` are left.
        case recoveryCodeUsed(remaining: Int)
        /// A way in was added to the account or removed from it: told to the owner every time, so a passkey or
        /// factor added with a stolen session does not go unseen.
        case signInMethodAdded(SignInMethod, name: String)
        case signInMethodRemoved(SignInMethod, name: String)
        /// A company's App Store subscription stopped giving its tier: `state` is expired, billing_retry, refunded
        /// or revoked.
        case subscriptionEnded(company: String, state: String)
        /// A company's domain failed its re-checks in a row and no longer counts as the company's.
        case domainVerificationLost(company: String, domain: String)
        /// An invitation to join a company by email: its link and six-digit code, valid for `days` days.
        case companyInvitation(company: String, inviter: String, readOnly: Bool, code: String, link: String, days: Int)
        /// To every operator: a webhook endpoint stopped receiving events; `reason` is `gone` (it answered 410) or
        /// `failing` (a delivery failed through the whole retry schedule).
        case webhookDisabled(url: String, reason: String)

        /// Its templates' file name: `magic_link` for `LOCALE/magic_link.{subject,text,html}.mustache`.
        var name: String {
            switch self {
            case .signupConfirmation: "signup_confirmation"
            case .invite: "invite"
            case .magicLink: "magic_link"
            case .recovery: "recovery"
            case .emailChange: "email_change"
            case .emailChangeCurrent: "email_change_current"
            case .emailChanged: "email_changed"
            case .reauthentication: "reauthentication"
            case .signupAttempt: "signup_attempt"
            case .emailChangeRequested: "email_change_requested"
            case .accountDeleted: "account_deleted"
            case .recoveryCodeUsed: "recovery_code_used"
            case .signInMethodAdded: "sign_in_method_added"
            case .signInMethodRemoved: "sign_in_method_removed"
            case .subscriptionEnded: "subscription_ended"
            case .domainVerificationLost: "domain_verification_lost"
            case .companyInvitation: "company_invitation"
            case .webhookDisabled: "webhook_disabled"
            }
        }

        /// What it carries, under the names its templates use.
        var variables: [String: String] {
            switch self {
            case .signupConfirmation(let code, let link), .invite(let code, let link), .magicLink(let code, let link),
                .recovery(let code, let link):
                ["code": code, "link": link]
            case .emailChange(let code, let link, let newEmail), .emailChangeCurrent(let code, let link, let newEmail):
                ["code": code, "link": link, "new_email": newEmail]
            case .emailChanged(let newEmail): ["new_email": newEmail]
            case .reauthentication(let code): ["code": code]
            case .signupAttempt(let signInLink): ["sign_in_link": signInLink]
            case .emailChangeRequested(let newEmail): ["new_email": newEmail]
            case .accountDeleted: [:]
            case .recoveryCodeUsed(let remaining): ["remaining": String(remaining)]
            case .signInMethodAdded(let method, let name), .signInMethodRemoved(let method, let name):
                method.variables.merging(["name": name]) { $1 }
            case .subscriptionEnded(let company, let state): ["company": company, state: "yes"]
            case .domainVerificationLost(let company, let domain): ["company": company, "domain": domain]
            case .companyInvitation(let company, let inviter, let readOnly, let code, let link, let days):
                [
                    "company": company, "inviter": inviter, readOnly ? "read_only" : "member": "yes", "code": code,
                    "link": link, "expires_days": String(days),
                ]
            case .webhookDisabled(let url, let reason): ["url": url, reason: "yes"]
            }
        }

        /// Every mail, filled with sample values, for previews.
        static let samples: [Template] = [
            .signupConfirmation(code: "123456", link: sampleLink("signup")),
            .invite(code: "123456", link: sampleLink("invite")),
            .magicLink(code: "123456", link: sampleLink("magiclink")),
            .recovery(code: "123456", link: sampleLink("recovery")),
            .emailChange(code: "123456", link: sampleLink("email_change"), newEmail: "new@example.com"),
            .emailChangeCurrent(code: "123456", link: sampleLink("email_change"), newEmail: "new@example.com"),
            .emailChanged(newEmail: "new@example.com"),
            .reauthentication(code: "123456"),
            .signupAttempt(signInLink: "https://app.example.com"),
            .emailChangeRequested(newEmail: "new@example.com"),
            .accountDeleted,
            .recoveryCodeUsed(remaining: 9),
            .signInMethodAdded(.passkey, name: "iCloud Keychain"),
            .signInMethodRemoved(.authenticator, name: "Authenticator app"),
            .subscriptionEnded(company: "Acme Corp", state: "refunded"),
            .domainVerificationLost(company: "Acme Corp", domain: "acme.example"),
            .companyInvitation(
                company: "Acme Corp", inviter: "Ada Lovelace", readOnly: false, code: "123456",
                link: "https://auth.example.com/account?invitation=sample-link-token", days: 7),
            .webhookDisabled(url: "https://hooks.example.com/gatehouse", reason: "failing"),
        ]

        private static func sampleLink(_ type: String) -> String {
            "https://auth.example.com/auth/v1/verify?token=sample-link-token&type=\(type)"
                + "&redirect_to=https%3A%2F%2Fapp.example.com"
        }
    }

    /// Which way in a `signInMethodAdded` or `signInMethodRemoved` mail names; its templates choose the words.
    enum SignInMethod: Sendable, Equatable {
        case passkey
        case companyPasskey(company: String)
        case authenticator

        var variables: [String: String] {
            switch self {
            case .passkey: ["passkey": "yes"]
            case .companyPasskey(let company): ["company_passkey": "yes", "company": company]
            case .authenticator: ["authenticator": "yes"]
            }
        }
    }

    /// The name of every mail, as `gatehouse mail preview` takes it.
    public static var names: [String] { Template.samples.map(\.name) }

    /// Queues the mail in the caller's transaction (`AccountMail.transactionQueuingMail` wakes the worker),
    /// in `locale` when the caller knows it (a sign-up's own choice, before its account holds it), else in the
    /// language of the account at `recipient`, if there is one.
    /// With the send email hook on, a mail it takes over (`HookEmailData`) is handed to it here, at once, and a
    /// failing hook fails the caller's transaction; `accountID` names the account when the recipient is not its
    /// address yet (an email change's new address).
    func enqueue(
        _ template: Template, to recipient: String, locale: String? = nil, accountID: String? = nil,
        db: any SQLDatabase
    ) async throws {
        // An anonymous user's placeholder address receives nothing.
        guard !recipient.hasSuffix("@" + AccountRecord.anonymousDomain) else { return }
        // Nor does an Apple relay address the person stopped Apple forwarding to.
        guard try await !AccountDirectory(db: db).mailDisabled(email: recipient) else { return }
        if let hooks, hooks.isOn(.sendEmail), let data = HookEmailData(template, siteURL: siteURL) {
            try await sendThroughHook(hooks, data: data, to: recipient, accountID: accountID, db: db)
            return
        }
        var tag = locale
        if tag == nil {
            tag = Self.locale(in: try await AccountDirectory(db: db).find(email: recipient)?.userMetadata)
        }
        try await queue.enqueue(render(template, to: recipient, locale: Self.language(tag, in: templates)), db: db)
    }

    /// Hands a mail to the send email hook with the user it is for (its account, found by id or by the recipient's
    /// address); the hook writes and sends it.
    private func sendThroughHook(
        _ hooks: AuthHooks, data: HookEmailData, to recipient: String, accountID: String?, db: any SQLDatabase
    ) async throws {
        let directory = AccountDirectory(db: db)
        var account: AccountRecord? = nil
        if let accountID { account = try await directory.find(id: accountID) }
        if account == nil { account = try await directory.find(email: recipient) }
        var data = data
        if let account, data.actionType == "email_change", !data.tokenNew.isEmpty { data.oldEmail = account.email }
        if data.actionType == "email_changed_notification" { data.oldEmail = recipient }
        let user =
            account?.wire(identities: [])
            ?? AuthHooks.prospectiveUser(id: "", email: recipient, provider: "email", now: Date())
        try await hooks.sendEmail(user: user, data: data)
    }

    /// Whether `address` can be delivered at all: a non-ASCII address needs a server that offers SMTPUTF8.
    func canDeliver(to address: String) async -> Bool {
        if address.utf8.allSatisfy({ $0 < 0x80 }) { return true }
        return await queue.transport.acceptsInternationalAddresses()
    }

    /// Writes `template` to `recipient` in `locale` (a language the templates have), each of its subject, text and
    /// HTML from that language's file, or from the English one where that language has none.
    func render(_ template: Template, to recipient: String, locale: String) -> MailMessage {
        Self.render(
            template, from: from, to: recipient, locale: locale, templates: templates,
            expiresMinutes: expiresMinutes)
    }

    /// Writes `template` with `templates`, the one step that previews and the queue share.
    static func render(
        _ template: Template, from: String, to recipient: String, locale: String, templates: Templates,
        expiresMinutes: Int
    ) -> MailMessage {
        var context: [String: Any] = template.variables
        context["email"] = recipient
        context["product_name"] = productName
        context["expires_minutes"] = expiresMinutes
        func part(_ kind: String) -> String {
            templates.mail("\(locale)/\(template.name).\(kind)", context)
                ?? templates.mail("en/\(template.name).\(kind)", context) ?? ""
        }
        return MailMessage(
            from: from, to: recipient, subject: part("subject").trimmingCharacters(in: .whitespacesAndNewlines),
            text: part("text"), html: part("html"))
    }

    /// The `locale` a profile names (an account's `user_metadata`, a sign-up's `data`), if any.
    static func locale(in metadata: [String: JSONValue]?) -> String? {
        guard case .string(let locale) = metadata?["locale"] else { return nil }
        return locale
    }

    /// The language of locale `tag` ("de", "de-AT", "de_CH": "de") when the templates have mails in it, else "en".
    static func language(_ tag: String?, in templates: Templates) -> String {
        let language = tag?.split(whereSeparator: { $0 == "-" || $0 == "_" }).first?.lowercased() ?? ""
        guard !language.isEmpty, language.allSatisfy({ $0.isASCII && $0.isLetter }),
            templates.mailNames.contains(where: { $0.hasPrefix(language + "/") })
        else { return "en" }
        return language
    }

    /// Mail `name` written with sample values (code 123456, a sample link, new@example.com) in the language of
    /// `locale`, as the templates in `templates` write it; no store or server is needed.
    public static func preview(name: String, locale: String, templates: Templates) throws -> MailMessage {
        guard let sample = Template.samples.first(where: { $0.name == name }) else { throw UnknownMail(name: name) }
        return render(
            sample, from: "no-reply@gatehouse.local", to: "ada@example.com", locale: language(locale, in: templates),
            templates: templates, expiresMinutes: AuthSettings().codeLifetimeMinutes)
    }
}

/// A mail name that is not one of Gatehouse's mails.
public struct UnknownMail: Error, CustomStringConvertible {
    public let name: String
    public var description: String {
        "no mail named \(name); the mails are \(Mailer.names.joined(separator: ", "))"
    }
}
