import Foundation
import GatehouseAPI
import HTTPTypes

/// What every page shares: rendering (the layout, `page`, `message`), the failure pages `ErrorMiddleware` answers
/// with, the form check (`formClient`) and the browser's web session (`caller`, `signedIn`).
///
/// The pages people see outside the app are the account pages (web sign-in by password or code, sessions, password,
/// deletion), the results of mailed links, and the share-link landing. Each page is a mustache template; each form
/// posts to this server only (the content security policy says so, and a cross-site post is refused), and every
/// action goes through the same services, limits and audit as the API. Each page group is a type of its own holding
/// this kit and the services it uses, with its controller in `PageRoutes.swift`: `LinkPages`, `SignInPages`,
/// `AccountPages`, `FactorPages`, `PasskeyPages` and `SharePages`.
struct PageKit: Sendable {
    let templates: Templates
    let publicURL: String
    /// Records a refused cross-site form post.
    let trail: AuditTrail
    /// The client of a request, and the account behind a session cookie.
    let access: Access
    /// Refreshes the web session when its access token has expired.
    let tokens: TokenService
    /// Whether passkeys are on, so every page loads the passkey script (`page`).
    let passkeysOn: Bool

    var session: WebSession { WebSession(secure: publicURL.lowercased().hasPrefix("https://")) }

    /// The current request's headers (cookies, Origin).
    var requestHeaders: HTTPFields { RequestScope.current?.head.headerFields ?? [:] }

    // MARK: Rendering

    /// Page `name` with the layout's fields, in `language` (else the one the browser asks for): its strings are
    /// `t` (`{{t.key}}`).
    func render(
        _ name: String, page: String, title: String, _ fields: [String: Any] = [:], language: String? = nil
    ) -> String {
        let language = language ?? self.language(account: nil)
        var context: [String: Any] = ["lang": language, "product": Mailer.productName, "page": page, "title": title]
        context.merge(fields) { $1 }
        context["t"] = templates.strings(language, context)
        return templates.page(name, context)
    }

    /// The language a page speaks: the account's `locale` when the pages speak it, else the first language of the
    /// browser's `Accept-Language` they speak (the request's, or `headers`'), else English.
    func language(account locale: String?, headers: HTTPFields? = nil) -> String {
        let spoken = templates.pageLanguages
        func base(_ tag: Substring) -> String {
            String(tag.prefix { $0 != "-" && $0 != "_" }).trimmingCharacters(in: .whitespaces).lowercased()
        }
        if let locale, spoken.contains(base(Substring(locale))) { return base(Substring(locale)) }
        let asked = ((headers ?? requestHeaders)[.acceptLanguage] ?? "").split(separator: ",").map {
            part -> (String, Double) in
            let pieces = part.split(separator: ";")
            let quality =
                pieces.dropFirst().compactMap { piece -> Double? in
                    let trimmed = piece.trimmingCharacters(in: .whitespaces)
                    return trimmed.hasPrefix("q=") ? Double(trimmed.dropFirst(2)) : nil
                }.first ?? 1
            return (base(pieces.first ?? ""), quality)
        }
        let ranked = asked.enumerated().sorted { ($0.element.1, -$0.offset) > ($1.element.1, -$1.offset) }
        return ranked.first { $0.element.1 > 0 && spoken.contains($0.element.0) }?.element.0 ?? "en"
    }

    /// The language of a signed-in caller's pages: the `locale` of the user_metadata its access token carries (no
    /// store read), else the browser's.
    func language(of caller: Caller) -> String {
        language(account: Mailer.locale(in: caller.identity.claims.userMetadata))
    }

    /// The text of `key` in `language` (English when that language lacks it), naming `values`; the key itself when no
    /// table has it, so a missing word shows rather than blanks.
    func text(_ key: String, _ language: String, _ values: [String: Any] = [:]) -> String {
        templates.text(key, language, values) ?? key
    }

    /// What a page says for an API refusal: the language's `error_<code>` when its table has one, else the API's own
    /// message.
    func errorText(_ error: APIError, _ language: String) -> String {
        templates.translation("error_" + error.code, language) ?? error.message
    }

    /// Page `name`, loading the passkey script when passkeys are on: the template's `script_nonce` and the policy
    /// that lets that one script run (`PageKit.scriptPolicy`). With passkeys off the page has no script.
    /// `formTargets`: origins the page's forms are answered with a redirect to (`SecurityHeaders.pagePolicy`).
    func page(
        _ name: String, title: String, _ fields: [String: Any], status: HTTPResponse.Status = .ok,
        cookies: [String] = [], formTargets: [String] = [], language: String? = nil
    ) -> WebAnswer {
        let language = language ?? self.language(account: nil)
        guard passkeysOn else {
            var answer = WebAnswer.page(
                render(name, page: name, title: title, fields, language: language), status: status, cookies: cookies)
            if !formTargets.isEmpty {
                answer.headers[SecurityHeaders.contentSecurityPolicy] = SecurityHeaders.pagePolicy(
                    formTargets: formTargets)
            }
            return answer
        }
        let nonce = Secrets.token()
        var fields = fields
        fields["passkeys_on"] = true
        fields["script_nonce"] = nonce
        fields["passkey_words"] = passkeyWords(language)
        var answer = WebAnswer.page(
            render(name, page: name, title: title, fields, language: language), status: status, cookies: cookies)
        answer.headers[SecurityHeaders.contentSecurityPolicy] = Self.scriptPolicy(
            nonce: nonce, formTargets: formTargets)
        return answer
    }

    /// The passkey script's words in `language` (`passkey_script_*`, without the prefix), as the JSON its page gives it
    /// in `data-words`.
    func passkeyWords(_ language: String) -> String {
        let prefix = "passkey_script_"
        var words: [String: String] = [:]
        for (key, text) in templates.strings(language, [:]) where key.hasPrefix(prefix) {
            words[String(key.dropFirst(prefix.count))] = text
        }
        let json = try? JSONEncoder.sortedKeys.encode(words)
        return json.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The pages' policy with one script allowed, the `<script src>` carrying this answer's nonce (the templates
    /// have no inline code), and its requests to this server. Everything else stays as `SecurityHeaders.pagePolicy`
    /// says.
    static func scriptPolicy(nonce: String, formTargets: [String] = []) -> String {
        SecurityHeaders.pagePolicy(formTargets: formTargets) + "; script-src 'nonce-\(nonce)'; connect-src 'self'"
    }

    /// A page of a heading and paragraphs, optionally with the form that asks for a new link.
    /// `refresh` (a path here) moves the browser on at once, as a navigation from this site's own page.
    func message(
        page: String, title: String, _ paragraphs: [String], status: HTTPResponse.Status = .ok,
        newLink purpose: String? = nil, accountLink: Bool = false, signInLink: Bool = false, cookies: [String] = [],
        refresh: String? = nil, language: String? = nil
    ) -> WebAnswer {
        var fields: [String: Any] = ["paragraphs": paragraphs, "account_link": accountLink, "sign_in_link": signInLink]
        if let purpose { fields["new_link"] = true; fields["purpose"] = purpose }
        if let refresh { fields["refresh"] = refresh }
        return .page(
            render("message", page: page, title: title, fields, language: language), status: status, cookies: cookies)
    }

    /// A message page whose title and paragraphs are keys of the string tables, in `language`, naming `values`.
    func message(
        page: String, titleKey: String, keys: [String], _ values: [String: Any] = [:], language: String,
        status: HTTPResponse.Status = .ok, newLink purpose: String? = nil, accountLink: Bool = false,
        signInLink: Bool = false, cookies: [String] = [], refresh: String? = nil
    ) -> WebAnswer {
        message(
            page: page, title: text(titleKey, language, values), keys.map { text($0, language, values) },
            status: status, newLink: purpose, accountLink: accountLink, signInLink: signInLink, cookies: cookies,
            refresh: refresh, language: language)
    }

    /// Whether `path` is one of the pages rather than the API: the account pages, a share link's landing, and the
    /// link page (`GET /auth/v1/verify`, whose button posts to `/auth/v1/verify/continue`; a POST to the link page's
    /// own path is Supabase's verify), and the redirect flow's continue URL, opened in a browser.
    static func isPage(method: HTTPRequest.Method, path: String) -> Bool {
        path == "/account" || path.hasPrefix("/account/") || path.hasPrefix("/share/")
            || path == "/auth/v1/verify/continue" || (path == "/auth/v1/verify" && (method == .get || method == .head))
            || path == "/auth/v1/authorize/continue" || path == "/console" || path.hasPrefix("/console/")
    }

    /// The page for a failure the API would answer as JSON: a limit (with its `Retry-After`), the store out of
    /// reach, input the server could not read, or a fault of its own. The status and headers stay the API's. It is
    /// answered outside the request's scope (`ErrorMiddleware`), so the request's `headers` say its language.
    func failure(_ error: APIError, headers: HTTPFields) -> WebAnswer {
        let language = language(account: nil, headers: headers)
        let values = ["product": Mailer.productName]
        let (title, paragraphs): (String, [String]) =
            switch error.status.code {
            case 429: ("failure_limit_title", [errorText(error, language), text("failure_limit_wait", language)])
            case 503: ("failure_unavailable_title", [text("failure_unavailable", language, values)])
            case 500...: ("failure_fault_title", [text("failure_fault", language)])
            default: ("failure_title", [errorText(error, language)])
            }
        var answer = message(
            page: "error", title: text(title, language), paragraphs, status: error.status, signInLink: true,
            language: language)
        for field in error.headers where field.name != .contentType { answer.headers.append(field) }
        return answer
    }

    /// What a page says for a refusal: the API's words (`errorText`), but for a change that needs a recent sign-in,
    /// which the pages ask for by signing in again (they have no field for a reauthentication code).
    func pageMessage(_ error: APIError, _ language: String) -> String {
        guard error.code == ErrorCode.reauthenticationNeeded.rawValue else { return errorText(error, language) }
        return text("reauthenticate", language)
    }

    /// The client of a form post; a post from another site is refused before anything else happens.
    func formClient() async throws -> ClientInfo {
        let client = try access.client()
        guard LinkPage.isSameOrigin(requestHeaders, publicURL: publicURL) else {
            await trail.recordRefusal(
                client.event(.authorizationRefused, accountID: nil, detail: ["reason": "cross_site_form_post"]))
            throw message(
                page: "refused", titleKey: "refused_title", keys: ["refused"], language: language(account: nil),
                status: .forbidden)
        }
        return client
    }

    // MARK: The web session

    /// The account session behind the browser's cookies, refreshing an expired access token with the refresh
    /// cookie (the new cookies are returned with it); nil when there is none.
    func caller() async throws -> (caller: Caller, cookies: [String])? {
        if let token = WebSession.read(WebSession.accessCookie, from: requestHeaders),
            let caller = await access.account(token: token)
        {
            return (caller, [])
        }
        guard let refresh = WebSession.read(WebSession.refreshCookie, from: requestHeaders) else { return nil }
        let client = try access.client()
        guard let renewed = try? await tokens.refresh(.init(refreshToken: refresh), client: client),
            let caller = await access.account(token: renewed.accessToken)
        else { return nil }
        return (caller, session.cookies(for: renewed))
    }

    /// The signed-in caller, or the redirect to the sign-in page (clearing cookies that no longer work).
    func signedIn() async throws -> (caller: Caller, cookies: [String]) {
        if let found = try await caller() { return found }
        throw WebAnswer.redirect("/account/sign-in", cookies: session.clearing)
    }

    // MARK: Formatting

    /// A short name for the device behind a user agent, in English.
    static func device(_ userAgent: String?) -> String {
        device(userAgent, unknown: "Unknown device") { "\($0) on \($1)" }
    }

    /// A short name for the device behind a user agent, in `language` (`account_device_on`, `account_device_unknown`).
    func device(_ userAgent: String?, _ language: String) -> String {
        Self.device(userAgent, unknown: text("account_device_unknown", language)) {
            text("account_device_on", language, ["browser": $0, "system": $1])
        }
    }

    private static func device(_ userAgent: String?, unknown: String, on: (String, String) -> String) -> String {
        guard let agent = userAgent, !agent.isEmpty else { return unknown }
        let systems = [
            ("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"), ("Mac OS X", "Mac"), ("Macintosh", "Mac"),
            ("Windows", "Windows"), ("CrOS", "ChromeOS"), ("Linux", "Linux"),
        ]
        let browsers = [
            ("Edg/", "Edge"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"), ("Safari/", "Safari"),
            ("CFNetwork", "App"), ("okhttp", "App"), ("supabase", "App"), ("Gatehouse", "App"),
        ]
        let system = systems.first { agent.contains($0.0) }?.1
        let browser = browsers.first { agent.contains($0.0) }?.1
        switch (browser, system) {
        case let (browser?, system?): return on(browser, system)
        case let (browser?, nil): return browser
        case let (nil, system?): return system
        default: return String(agent.prefix(40))
        }
    }

    /// `2026-11-25 14:03 UTC`.
    static func dateText(_ date: Date) -> String {
        let text = date.iso8601
        return String(text.prefix(10)) + " " + String(text.dropFirst(11).prefix(5)) + " UTC"
    }
}
