import Foundation
import Testing

@testable import GatehouseServer

/// The pages' languages: the account's `locale`, then the browser's `Accept-Language`, then English; the words from
/// the string tables under `pages/<lang>/`, which an operator's `--templates-dir` overrides or adds to.
@Suite("Page languages: the account's locale, then Accept-Language; string tables per language")
struct PageLanguageTests {
    /// A page as a browser asking for `language` gets it (with the session's cookie when given).
    static func page(
        _ h: AccountHarness, _ path: String, language: String?, session: String? = nil
    ) async throws -> HTTPReply {
        var headers = h.client.headers
        if let language { headers.append(("Accept-Language", language)) }
        if let session { headers.append(("Cookie", "\(WebSession.accessCookie)=\(session)")) }
        return try await h.http.send(.GET, h.server.baseURL + path, headers: headers)
    }

    /// A form posted from this site's page, by a browser asking for `language`.
    static func form(
        _ h: AccountHarness, _ path: String, _ body: String, language: String, site: String = "same-origin"
    ) async throws -> HTTPReply {
        try await h.http.send(
            .POST, h.server.baseURL + path, rawBody: body,
            headers: h.client.headers + [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", site),
                ("Accept-Language", language),
            ])
    }

    @Test("the sign-in page speaks the browser's first language it has: de; fr, de;q=0.5 is de; fr alone is English")
    func acceptLanguage() async throws {
        try await AccountHarness.with { h in
            let german = try await Self.page(h, "/account/sign-in", language: "de-DE,de;q=0.9,en;q=0.8")
            #expect(german.status == 200)
            #expect(german.body.contains("<html lang=\"de\">"))
            #expect(german.body.contains("<title>Anmelden · "))
            #expect(german.body.contains("<h2>Passwort vergessen?</h2>"))
            #expect(!german.body.contains("Forgot your password?"))

            let ranked = try await Self.page(h, "/account/sign-in", language: "fr, de;q=0.5, en;q=0.1")
            #expect(ranked.body.contains("<html lang=\"de\">") && ranked.body.contains("Passwort vergessen?"))

            let french = try await Self.page(h, "/account/sign-in", language: "fr")
            #expect(french.body.contains("<html lang=\"en\">") && french.body.contains("Forgot your password?"))

            let none = try await Self.page(h, "/account/sign-in", language: nil)
            #expect(none.body.contains("<html lang=\"en\">") && none.body.contains("<h2>No password?</h2>"))
        }
    }

    @Test("refusals are said in the page's language: a wrong password, a cross-site form, a form the server can't read")
    func refusals() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            let wrong = try await Self.form(
                h, "/account/sign-in",
                "email=\(email.replacingOccurrences(of: "@", with: "%40"))&password=nope-nope-nope",
                language: "de")
            #expect(wrong.status == 400)
            #expect(wrong.body.contains("E-Mail-Adresse oder Passwort ist falsch."))
            #expect(!wrong.body.contains("Invalid login credentials"))
            let english = try await Self.form(
                h, "/account/sign-in",
                "email=\(email.replacingOccurrences(of: "@", with: "%40"))&password=nope-nope-nope",
                language: "en")
            #expect(english.body.contains("Invalid login credentials"))

            let crossSite = try await Self.form(
                h, "/account/sign-in", "email=a%40example.com&password=x", language: "de", site: "cross-site")
            #expect(crossSite.status == 403)
            #expect(crossSite.body.contains("Dieses Formular kann nur von seiner eigenen Seite gesendet werden"))

            // Answered by the error middleware, outside the request's scope: the headers still say the language.
            let unreadable = try await Self.form(h, "/account/sign-in", "email=a%40example.com", language: "de")
            #expect(unreadable.status == 400)
            #expect(unreadable.body.contains("data-page=\"error\"") && unreadable.body.contains("<html lang=\"de\">"))
            #expect(unreadable.body.contains("Das hat nicht geklappt"))
        }
    }

    @Test("an account whose locale is de sees its account page in German, whatever the browser asks for")
    func accountLocale() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let english = try await Self.page(h, "/account", language: "en", session: account.access)
            #expect(english.status == 200 && english.body.contains("Where you are signed in"))

            // The session's token still carries the old metadata: the account page reads the account itself.
            let changed = try await h.client.put("/auth/v1/user", ["data": ["locale": "de-AT"]], bearer: account.access)
            #expect(changed.status == 200)
            let german = try await Self.page(h, "/account", language: "en", session: account.access)
            #expect(german.status == 200)
            #expect(german.body.contains("<html lang=\"de\">"))
            #expect(german.body.contains("Wo Sie angemeldet sind") && german.body.contains("Konto löschen"))
            #expect(!german.body.contains("Where you are signed in"))

            let notice = try await Self.page(
                h, "/account?notice=password_changed", language: "en", session: account.access)
            #expect(notice.body.contains("Ihr Passwort ist geändert."))
        }
    }

    @Test("the passkey script's words come in the page's language, in its section's data-words")
    func passkeyWords() async throws {
        try await AccountHarness.withPasskeys { h in
            for (language, cancelled) in [("de", "Abgebrochen."), ("en", "Cancelled.")] {
                let page = try await Self.page(h, "/account/sign-in", language: language)
                let attribute = try #require(
                    page.body.firstMatch(of: /id="passkey-sign-in"[^>]* data-words="([^"]*)"/).map { String($0.1) })
                let json = attribute.replacingOccurrences(of: "&quot;", with: "\"")
                    .replacingOccurrences(of: "&amp;", with: "&")
                let words = try #require(
                    try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String])
                #expect(words["cancelled"] == cancelled, "\(language)")
                #expect(words["fallback"] != nil && words.keys.allSatisfy { !$0.hasPrefix("passkey_script_") })
            }
            let german = try await Self.page(h, "/account/sign-in", language: "de")
            #expect(german.body.contains("Mit einem Passkey anmelden"))
        }
    }

    @Test(
        "a key a language lacks is said in English; an operator's table overrides a key, and a new folder is a language"
    )
    func overridesAndFallback() async throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        let pages = base.path + "/pages"
        try FileManager.default.createDirectory(atPath: pages + "/fr", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: pages + "/de", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: pages + "/en", withIntermediateDirectories: true)
        try """
        # Quelques mots en français; the rest stays English.
        sign_in_title = Connexion
        sign_in_forgot = Mot de passe oublié ?
        """.write(toFile: pages + "/fr/pages.strings", atomically: true, encoding: .utf8)
        try "sign_in_no_password = Ohne Passwort?\n".write(
            toFile: pages + "/de/acme.strings", atomically: true, encoding: .utf8)
        try "acme_welcome = Welcome to Acme, {{product}}\n".write(
            toFile: pages + "/en/acme.strings", atomically: true, encoding: .utf8)

        let templates = try Templates.load(overrides: base.path)
        #expect(templates.pageLanguages == ["en", "de", "fr"])
        let german = templates.strings("de", ["product": "Gatehouse"])
        #expect(german["acme_welcome"] == "Welcome to Acme, Gatehouse")
        #expect(german["sign_in_no_password"] == "Ohne Passwort?")
        #expect(german["sign_in_forgot"] == "Passwort vergessen?")

        try await AccountHarness.with({ $0.templatesDirectory = base.path }) { h in
            let french = try await Self.page(h, "/account/sign-in", language: "fr-CA, en;q=0.5")
            #expect(french.body.contains("<html lang=\"fr\">"))
            #expect(french.body.contains("<h1>Connexion</h1>") && french.body.contains("Mot de passe oublié ?"))
            #expect(french.body.contains("<h2>No password?</h2>"))
            let german = try await Self.page(h, "/account/sign-in", language: "de")
            #expect(german.body.contains("<h2>Ohne Passwort?</h2>") && german.body.contains("<h1>Anmelden</h1>"))
        }
    }

    @Test("a string table line that is not `key = text` stops the load, naming its file and line")
    func brokenTable() throws {
        let base = try TemporaryFolder()
        defer { base.remove() }
        try FileManager.default.createDirectory(atPath: base.path + "/pages/de", withIntermediateDirectories: true)
        try "# Wörter\nsign_in_title = Anmelden\nKonto löschen\n".write(
            toFile: base.path + "/pages/de/broken.strings", atomically: true, encoding: .utf8)
        let error = #expect(throws: TemplateError.self) { try Templates.load(overrides: base.path) }
        #expect(error?.file.hasSuffix("pages/de/broken.strings") == true)
        #expect(error?.description.contains("line 3") == true)
    }

    // MARK: The bundled tables

    /// `Sources/GatehouseServer/Web/pages`, found from this file.
    static let pages = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/GatehouseServer/Web/pages")

    /// The bundled tables' keys, by language: the files that define each.
    static func tables() throws -> [String: [String: [String]]] {
        var tables: [String: [String: [String]]] = [:]
        for language in try FileManager.default.contentsOfDirectory(atPath: pages.path) {
            let folder = pages.appendingPathComponent(language)
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue
            else { continue }
            for file in try FileManager.default.contentsOfDirectory(atPath: folder.path)
            where file.hasSuffix(".strings") {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    guard !trimmed.hasPrefix("#"), let equals = trimmed.firstIndex(of: "=") else { continue }
                    let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
                    tables[language, default: [:]][key, default: []].append(file)
                }
            }
        }
        return tables
    }

    /// The bundled tables' keys, by language.
    static func keys() throws -> [String: Set<String>] {
        try tables().mapValues { Set($0.keys) }
    }

    @Test("every {{t.key}} of a bundled template, console pages too, and every key the page code names is in English")
    func templateKeysExist() throws {
        let english = try #require(try Self.keys()["en"])
        var used: [String: Set<String>] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: Self.pages.path)
        where file.hasSuffix(".mustache") {
            let text = try String(contentsOf: Self.pages.appendingPathComponent(file), encoding: .utf8)
            for match in text.matches(of: /\{\{[#^\/]?\s*t\.([a-zA-Z0-9_]+)\s*\}\}/) {
                used[file, default: []].insert(String(match.1))
            }
        }
        #expect(used["sign-in.mustache"]?.contains("sign_in_forgot") == true)
        for (file, keys) in used {
            #expect(keys.subtracting(english).isEmpty, "\(file) uses \(keys.subtracting(english).sorted())")
        }

        let code = Self.pages.deletingLastPathComponent()
        for file in try FileManager.default.contentsOfDirectory(atPath: code.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: code.appendingPathComponent(file), encoding: .utf8)
            var named: Set<String> = []
            for match in text.matches(of: /(?:text\(|titleKey: )\s*"([a-z0-9_]+)"\s*[,)]/) {
                named.insert(String(match.1))
            }
            for match in text.matches(of: /keys: \[([^\]]*)\]/) {
                for key in match.1.matches(of: /"([a-z0-9_]+)"/) { named.insert(String(key.1)) }
            }
            #expect(named.subtracting(english).isEmpty, "\(file) names \(named.subtracting(english).sorted())")
        }
        let notices = Set(AccountPageRoutes.notices.map { "account_notice_" + $0 })
        #expect(notices.subtracting(english).isEmpty, "\(notices.subtracting(english).sorted())")
        for key in ["email", "apple", "google"] { #expect(english.contains("account_provider_" + key)) }
        for key in ["recovery", "signup", "email_change", "sign_in"] { #expect(english.contains("link_title_" + key)) }
    }

    @Test("every key of another language is an English key (error_ keys translate the API's words), each key once")
    func languagesMatchEnglish() throws {
        let keys = try Self.keys()
        let english = try #require(keys["en"])
        #expect(keys["de"] != nil)
        for (language, table) in keys where language != "en" {
            let extra = table.filter { !english.contains($0) && !$0.hasPrefix("error_") }
            #expect(extra.isEmpty, "\(language) has keys English lacks: \(extra.sorted())")
        }
        for (language, table) in try Self.tables() {
            let twice = table.filter { $0.value.count > 1 }
            #expect(twice.isEmpty, "\(language) defines keys more than once: \(twice)")
        }
        let german = try #require(keys["de"])
        let untranslated = english.subtracting(german)
        #expect(untranslated.isEmpty, "German lacks \(untranslated.sorted())")
    }
}
