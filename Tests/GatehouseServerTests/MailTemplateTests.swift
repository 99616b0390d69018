import Foundation
import Testing

@testable import GatehouseServer

@Suite("Mail templates")
struct MailTemplateTests {
    static let templates = Result { try Templates.load(overrides: nil) }

    static func preview(_ name: String, locale: String = "en") throws -> MailMessage {
        try Mailer.preview(name: name, locale: locale, templates: try templates.get())
    }

    @Test("every mail has a subject, a text and an HTML part in English and German, with its code in both bodies")
    func everyMailRenders() throws {
        #expect(Mailer.names.count == 18)
        #expect(Mailer.names.contains("webhook_disabled"))
        #expect(Mailer.names.contains("account_deleted"))
        for name in Mailer.names {
            for locale in ["en", "de"] {
                let message = try Self.preview(name, locale: locale)
                #expect(!message.subject.isEmpty && !message.subject.contains("\n"), "\(locale)/\(name)")
                #expect(message.text.hasSuffix("— Gatehouse\n"), "\(locale)/\(name)")
                #expect(message.html.contains("<html lang=\"\(locale)\">"), "\(locale)/\(name)")
                #expect(message.html.contains("</html>") && !message.html.contains("{{"), "\(locale)/\(name)")
                let coded = [
                    "signup_confirmation", "invite", "magic_link", "recovery", "email_change", "email_change_current",
                ]
                if (coded + ["reauthentication"]).contains(name) {
                    #expect(message.text.contains("\n123456\n"), "\(locale)/\(name)")
                    #expect(message.html.contains(">123456</p>"), "\(locale)/\(name)")
                }
            }
        }
    }

    @Test("Finding 5: a way in added or removed is named in the owner's language: passkey, company passkey, app")
    func signInMethodMails() throws {
        let templates = try Self.templates.get()
        func render(_ template: Mailer.Template, _ locale: String) -> MailMessage {
            Mailer.render(
                template, from: "no-reply@gatehouse.local", to: "ada@example.com", locale: locale,
                templates: templates, expiresMinutes: 10)
        }
        let company = render(.signInMethodAdded(.companyPasskey(company: "Acme & Co"), name: "YubiKey"), "de")
        #expect(company.subject == "Ein Passkey wurde zu Ihrem Konto hinzugefügt")
        #expect(company.text.contains("ein Passkey für die Firma Acme & Co mit dem Namen „YubiKey“"))
        #expect(company.html.contains("Acme &amp; Co"))
        let app = render(.signInMethodRemoved(.authenticator, name: "phone"), "en")
        #expect(app.subject == "An authenticator app was removed from your account")
        #expect(app.text.contains("removed from your account: an authenticator app, named \"phone\"."))
        let passkey = render(.signInMethodAdded(.passkey, name: "iCloud Keychain"), "en")
        #expect(passkey.text.contains("added to your account: a passkey, named \"iCloud Keychain\"."))
    }

    @Test("English keeps the wording the mails always had; links are buttons with the address under them")
    func englishWording() throws {
        let magic = try Self.preview("magic_link")
        #expect(magic.subject == "Your sign-in code")
        let link =
            "https://auth.example.com/auth/v1/verify?token=sample-link-token&type=magiclink"
            + "&redirect_to=https%3A%2F%2Fapp.example.com"
        #expect(
            magic.text == """
                Enter this code in the app to sign in:

                123456

                Or open the link below on this device. The code and link expire in 10 minutes.

                Sign in: \(link)

                — Gatehouse

                """)
        let escaped = link.replacingOccurrences(of: "&", with: "&amp;")
        #expect(magic.html.contains("<a href=\"\(escaped)\" style="))
        #expect(magic.html.contains(">\(escaped)</a>"))
        #expect(try Self.preview("signup_confirmation").subject == "Confirm your email")
        #expect(try Self.preview("email_change").text.contains("Confirm that new@example.com is the new address"))
        let deleted = try Self.preview("account_deleted")
        #expect(deleted.subject == "Your account was deleted")
        #expect(deleted.text.contains("Gatehouse account for ada@example.com was deleted"))
        #expect(deleted.text.contains("sign up again"))
    }

    @Test("a value is HTML-escaped in the HTML part and left as it is in the text and the subject")
    func escaping() throws {
        let hostile = "<script>alert('x')</script>@example.com"
        let message = Mailer.render(
            .emailChange(code: "654321", link: "https://auth.example.com/v?a=1&b=2", newEmail: hostile),
            from: "no-reply@gatehouse.test", to: "ada@example.com", locale: "en", templates: try Self.templates.get(),
            expiresMinutes: 10)
        #expect(message.text.contains("Confirm that \(hostile) is the new address"))
        #expect(!message.html.contains("<script>"))
        #expect(message.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;@example.com"))
        #expect(message.html.contains("https://auth.example.com/v?a=1&amp;b=2"))
        #expect(message.text.contains("https://auth.example.com/v?a=1&b=2"))
        #expect(message.text.contains("expire in 10 minutes"))
    }

    @Test(
        "the locale's language picks the mails, English when there are none in it",
        arguments: [
            ("de", "de"), ("de-AT", "de"), ("de_CH", "de"), ("DE-de", "de"), ("en-GB", "en"), ("fr", "en"),
            ("xx-YY", "en"), ("", "en"), ("../de", "en"), ("de/", "en"),
        ])
    func language(tag: String, expected: String) throws {
        #expect(Mailer.language(tag, in: try Self.templates.get()) == expected)
    }

    @Test("a German locale gets the German mail; an unknown one the English mail")
    func germanPreview() throws {
        let german = try Self.preview("magic_link", locale: "de-AT")
        #expect(german.subject == "Ihr Anmeldecode")
        #expect(german.text.contains("Geben Sie diesen Code in der App ein, um sich anzumelden:\n\n123456"))
        #expect(german.html.contains("Anmelden</a>"))
        #expect(Mailer.language(nil, in: try Self.templates.get()) == "en")
        #expect(try Self.preview("magic_link", locale: "tlh") == Self.preview("magic_link", locale: "en"))
    }

    @Test("an override folder replaces only the files it has; other parts and languages stay built in")
    func overrideOneFile() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/en"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "Sign in to {{product_name}} & more\n".write(
            toFile: folder + "/magic_link.subject.mustache", atomically: true, encoding: .utf8)
        let templates = try Templates.load(overrides: base.path)
        let builtIn = try Self.preview("magic_link")
        let message = try Mailer.preview(name: "magic_link", locale: "en", templates: templates)
        #expect(message.subject == "Sign in to Gatehouse & more")
        #expect(message.text == builtIn.text)
        #expect(message.html == builtIn.html)
        #expect(try Mailer.preview(name: "magic_link", locale: "de", templates: templates).subject == "Ihr Anmeldecode")
        #expect(
            try Mailer.preview(name: "recovery", locale: "en", templates: templates).subject == "Reset your password")
    }

    @Test("a language with only some files falls back to English file by file")
    func partialLanguage() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/fr"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "Votre code de connexion\n".write(
            toFile: folder + "/magic_link.subject.mustache", atomically: true, encoding: .utf8)
        let templates = try Templates.load(overrides: base.path)
        let message = try Mailer.preview(name: "magic_link", locale: "fr-CA", templates: templates)
        #expect(message.subject == "Votre code de connexion")
        #expect(message.text == (try Self.preview("magic_link")).text)
        #expect(
            try Mailer.preview(name: "recovery", locale: "fr", templates: templates).subject == "Reset your password")
    }

    @Test("a template that does not parse stops the load, naming its file")
    func brokenTemplate() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let folder = base.path + "/mail/de"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "<p>{{#code}}never closed</p>\n".write(
            toFile: folder + "/recovery.html.mustache", atomically: true, encoding: .utf8)
        let error = #expect(throws: TemplateError.self) { try Templates.load(overrides: base.path) }
        #expect(error?.file == "de/recovery.html.mustache")
        #expect(error?.description.contains("de/recovery.html.mustache") == true)
    }

    @Test("an unknown mail name is an error that lists the mails")
    func unknownName() throws {
        let error = #expect(throws: UnknownMail.self) { try Self.preview("welcome") }
        #expect(error?.description.contains("no mail named welcome") == true)
        for name in Mailer.names { #expect(error?.description.contains(name) == true) }
    }

    @Test("an account whose profile says German gets its sign-in mail in German")
    func germanAccountEndToEnd() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("deutsch")
            let signUp = try await h.client.signUp(email, password: "correct horse battery", data: ["locale": "de"])
            #expect(signUp.status == 200)
            // The sign-up's own choice of language already writes its confirmation.
            let confirm = try #require(try await h.mail(to: email, subject: "Bestätigen Sie Ihre E-Mail-Adresse").code)
            #expect(try await h.client.verify(email, code: confirm, type: "signup").status == 200)

            #expect(try await h.client.otp(email).status == 200)
            let mail = try await h.mail(to: email, subject: "Ihr Anmeldecode")
            #expect(mail.text.contains("Geben Sie diesen Code in der App ein, um sich anzumelden:"))
            #expect(mail.text.contains("<html lang=\"de\">"))
            let code = try #require(mail.code)
            let verified = try await h.client.verify(email, code: code, type: "email")
            #expect(verified.status == 200)

            // The new address has no account yet: its confirmation goes out in the account's language.
            let access = try #require(verified.json["access_token"] as? String)
            let newEmail = AccountHarness.newEmail("neu")
            let change = try await h.client.put(
                "/auth/v1/user", ["email": newEmail, "current_password": "correct horse battery"], bearer: access)
            #expect(change.status == 200)
            _ = try await h.mail(to: newEmail, subject: "Bestätigen Sie Ihre neue E-Mail-Adresse")
            _ = try await h.mail(to: email, subject: "Bestätigen Sie die Änderung Ihrer E-Mail-Adresse")
        }
    }
}
