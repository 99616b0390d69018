import Foundation
import GatehouseAPI
import HTTPTypes

/// The pages people see outside the app: the account pages (web sign-in by password or code, sessions, password,
/// deletion), the results of mailed links, and the share-link landing. Each page is a mustache template; each form
/// posts to this server only (the content security policy says so, and a cross-site post is refused), and every
/// action goes through the same services, limits and audit as the API.
struct WebPages: Sendable {
    let templates: Templates
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let publicURL: String
    let mail: AccountMail
    let access: Access
    let tokens: TokenService
    let signUps: SignUpService
    let verification: VerificationService
    let profiles: ProfileService
    let accountSessions: AccountSessions
    let deletion: AccountDeletion
    let shares: ShareService
    /// Where "Open in the app" goes (a custom scheme or a universal-link base); nil hides the button.
    let appURL: String?
    /// Where to get the app.
    let appStoreURL: String?

    var session: WebSession { WebSession(secure: publicURL.lowercased().hasPrefix("https://")) }

    /// The current request's headers (cookies, Origin).
    private var requestHeaders: HTTPFields { RequestScope.current?.head.headerFields ?? [:] }

    // MARK: Rendering

    /// Page `name` with the layout's fields.
    func render(_ name: String, page: String, title: String, _ fields: [String: Any] = [:]) -> String {
        var context: [String: Any] = ["lang": "en", "product": Mailer.productName, "page": page, "title": title]
        context.merge(fields) { $1 }
        return templates.page(name, context)
    }

    /// A page of a heading and paragraphs, optionally with the form that asks for a new link.
    func message(
        page: String, title: String, _ paragraphs: [String], status: HTTPResponse.Status = .ok,
        newLink purpose: String? = nil, accountLink: Bool = false, signInLink: Bool = false, cookies: [String] = []
    ) -> WebAnswer {
        var fields: [String: Any] = ["paragraphs": paragraphs, "account_link": accountLink, "sign_in_link": signInLink]
        if let purpose { fields["new_link"] = true; fields["purpose"] = purpose }
        return .page(render("message", page: page, title: title, fields), status: status, cookies: cookies)
    }

    /// Whether `path` is one of the pages rather than the API: the account pages, a share link's landing, and the
    /// link page (`GET /auth/v1/verify`, whose button posts to `/auth/v1/verify/continue`; a POST to the link page's
    /// own path is Supabase's verify).
    static func isPage(method: HTTPRequest.Method, path: String) -> Bool {
        path == "/account" || path.hasPrefix("/account/") || path.hasPrefix("/share/")
            || path == "/auth/v1/verify/continue" || (path == "/auth/v1/verify" && (method == .get || method == .head))
    }

    /// The page for a failure the API would answer as JSON: a limit (with its `Retry-After`), the store out of
    /// reach, input the server could not read, or a fault of its own. The status and headers stay the API's.
    func failure(_ error: APIError) -> WebAnswer {
        let (title, paragraphs): (String, [String]) =
            switch error.status.code {
            case 429: ("Too many attempts", [error.message, "Wait a little, then try again."])
            case 503: ("Try again in a moment", ["\(Mailer.productName) cannot reach its data right now."])
            case 500...: ("Something went wrong", ["The server could not finish this. Try again in a moment."])
            default: ("This did not work", [error.message])
            }
        var answer = message(page: "error", title: title, paragraphs, status: error.status, signInLink: true)
        for field in error.headers where field.name != .contentType { answer.headers.append(field) }
        return answer
    }

    /// The result of a link that no longer works.
    func spentLink(_ state: LinkState, type: String) -> WebAnswer {
        let purpose = type == "recovery" ? "recovery" : "magiclink"
        switch state {
        case .used:
            return message(
                page: "used", title: "This link was already used",
                [
                    "Each link works once, and a newer link replaces the ones before it.",
                    "Ask for a new one below, or sign in another way.",
                ],
                newLink: purpose, signInLink: true)
        case .expired:
            return message(
                page: "expired", title: "This link has expired",
                ["Links work for \(settings.codeLifetimeMinutes) minutes after they were sent."],
                newLink: purpose, signInLink: true)
        }
    }

    /// The client of a form post; a post from another site is refused before anything else happens.
    private func formClient() async throws -> ClientInfo {
        let client = try access.client()
        guard LinkPage.isSameOrigin(requestHeaders, publicURL: publicURL) else {
            await sessions.audit(
                client.event(.authorizationRefused, accountID: nil, detail: ["reason": "cross_site_form_post"]))
            throw message(
                page: "refused", title: "This form can only be sent from its own page",
                ["Open the page on this server and send the form from there."], status: .forbidden)
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
    private func signedIn() async throws -> (caller: Caller, cookies: [String]) {
        if let found = try await caller() { return found }
        throw WebAnswer.redirect("/account/sign-in", cookies: session.clearing)
    }

    // MARK: Mailed links

    /// The page a mailed link opens. Opening it spends nothing (mail scanners fetch links, with GET and HEAD); the
    /// person's one tap on Continue does. It also shows the link's six digits, for typing into the app on another
    /// device. A link that no longer works gets a page saying whether it was used or expired.
    func linkLanding(token: String, type: String, redirectTo: String?) async throws -> WebAnswer {
        let target = mail.redirectTarget(redirectTo)
        let codes = OneTimeCodes(db: store.database, clock: clock, settings: settings)
        guard let purposes = CodePurpose.accepted(byVerifyType: type), !token.isEmpty,
            try await codes.isLive(linkToken: token, purposes: purposes)
        else { return spentLink(try await codes.spentState(linkToken: token), type: type) }
        let code = Secrets.sixDigitCode(linkedTo: token)
        let title =
            switch type {
            case "recovery": "Reset your password"
            case "signup": "Confirm your email"
            case "email_change": "Confirm your new email address"
            default: "Sign in"
            }
        let html = render(
            "link", page: "link", title: title,
            [
                "token": token, "type": type, "redirect_to": target, "code": code,
                "code_spoken": code.map(String.init).joined(separator: " "),
                "expires_minutes": settings.codeLifetimeMinutes,
            ])
        var answer = WebAnswer.page(html)
        // The button's post is answered with a redirect to the app, which the policy's form-action must allow.
        answer.headers[SecurityHeaders.contentSecurityPolicy] = SecurityHeaders.pagePolicy(
            formTargets: landsHere(target) ? [] : [target])
        return answer
    }

    /// The landing page's button: to the app, or, for a link without an app redirect, signs this browser in and
    /// shows the result (a recovery link goes on to the new-password form).
    func continueLink(token: String, type: String, redirectTo: String?) async throws -> WebAnswer {
        let client = try access.client()
        let target = mail.redirectTarget(redirectTo)
        let outcome = try await verification.continueLink(
            token: token, type: type, target: target, landsHere: landsHere(target),
            sameOrigin: LinkPage.isSameOrigin(requestHeaders, publicURL: publicURL), client: client)
        switch outcome {
        case .app(let redirect):
            return .redirect(redirect)
        case .spent(let state):
            return spentLink(state, type: type)
        case .here(let signedIn, let purpose):
            let cookies = session.cookies(for: signedIn)
            switch purpose {
            case .recovery:
                return WebAnswer.redirect("/account/password", cookies: cookies)
            case .signup, .emailChange:
                return message(
                    page: "confirmed", title: "Your email is confirmed",
                    ["You can go back to the app and carry on. This browser is signed in too."],
                    accountLink: true, cookies: cookies)
            default:
                return message(
                    page: "confirmed", title: "You're signed in",
                    ["This browser is signed in. To sign in to the app on another device, use the code from the mail."],
                    accountLink: true, cookies: cookies)
            }
        }
    }

    /// Whether a link's target is this server itself (no app redirect was set), so the result is shown here.
    func landsHere(_ target: String) -> Bool {
        guard let own = URLComponents(string: publicURL), let given = URLComponents(string: target) else {
            return false
        }
        return own.scheme?.lowercased() == given.scheme?.lowercased()
            && own.host?.lowercased() == given.host?.lowercased()
            && own.port == given.port && ["", "/"].contains(given.path)
    }

    // MARK: Sign-in

    func signInPage() async throws -> WebAnswer {
        if try await caller() != nil { return .redirect("/account") }
        return .page(render("sign-in", page: "sign-in", title: "Sign in"))
    }

    /// The sign-in page again, saying why the last try was refused.
    private func signInPage(refused error: APIError, email: String) -> WebAnswer {
        .page(
            render("sign-in", page: "sign-in", title: "Sign in", ["error": error.message, "email": email]),
            status: error.status)
    }

    func signIn(email: String, password: String) async throws -> WebAnswer {
        let client = try await formClient()
        do {
            let signedIn = try await tokens.password(.init(email: email, password: password), client: client)
            return .redirect("/account", cookies: session.cookies(for: signedIn))
        } catch let error as APIError {
            return signInPage(refused: error, email: email)
        }
    }

    func sendCode(email: String) async throws -> WebAnswer {
        let client = try await formClient()
        do {
            try await signUps.sendOTP(.init(email: email, createUser: false), redirectTo: nil, client: client)
        } catch let error as APIError {
            return signInPage(refused: error, email: email)
        }
        return .page(render("enter-code", page: "enter-code", title: "Check your email", ["email": email]))
    }

    func verifyCode(email: String, code: String) async throws -> WebAnswer {
        let client = try await formClient()
        do {
            let signedIn = try await verification.verify(
                .init(_type: .email, email: email, token: code), client: client)
            return .redirect("/account", cookies: session.cookies(for: signedIn))
        } catch let error as APIError {
            let text =
                error.code == ErrorCode.otpExpired.rawValue ? "That code is wrong or has expired." : error.message
            return .page(
                render("enter-code", page: "enter-code", title: "Check your email", ["error": text, "email": email]),
                status: error.status)
        }
    }

    /// Mails a new sign-in link (or a password reset link), answering the same whether or not the address has an
    /// account.
    func newLink(email: String, purpose: String?) async throws -> WebAnswer {
        let client = try await formClient()
        do {
            if purpose == "recovery" {
                try await signUps.recover(.init(email: email), redirectTo: nil, client: client)
            } else {
                try await signUps.sendOTP(.init(email: email, createUser: false), redirectTo: nil, client: client)
            }
        } catch let error as APIError {
            return message(page: "link-sent", title: "No link was sent", [error.message], status: error.status)
        }
        return message(
            page: "link-sent", title: "Check your email",
            ["If \(email) has an account, a new link is on its way. It works once, on any device."])
    }

    // MARK: The account page

    func account(notice: String? = nil, deleteError: APIError? = nil, status: HTTPResponse.Status = .ok)
        async throws -> WebAnswer
    {
        let (caller, cookies) = try await signedIn()
        let record = try await profiles.account(caller)
        let list = try await accountSessions.list(caller).sessions
        let rows: [[String: Any]] = list.map { info in
            [
                "device": Self.device(info.userAgent), "ip": info.ip ?? "unknown",
                "last_seen": Self.dateText(info.refreshedAt), "current": info.current,
            ]
        }
        var fields: [String: Any] = [
            "email": record.email, "sessions": rows, "has_password": record.passwordHash != nil,
        ]
        if let notice { fields["notice"] = notice }
        if let deleteError {
            fields["delete_error"] = deleteError.message
            if case .array(let owned)? = deleteError.details["companies"] {
                let names: [[String: Any]] = owned.compactMap {
                    if case .object(let company) = $0, case .string(let name)? = company["name"] {
                        return ["name": name]
                    }
                    return nil
                }
                fields["owned"] = names
                fields["has_owned"] = !names.isEmpty
                fields["delete_error"] = "Transfer or delete the companies you own first:"
            }
        }
        return .page(
            render("account", page: "account", title: "Your account", fields), status: status, cookies: cookies)
    }

    func signOut() async throws -> WebAnswer {
        _ = try await formClient()
        if let (caller, _) = try await caller() { try await accountSessions.logout(.local, by: caller) }
        return .redirect("/account/sign-in", cookies: session.clearing)
    }

    func signOutOthers() async throws -> WebAnswer {
        _ = try await formClient()
        let (caller, cookies) = try await signedIn()
        try await accountSessions.logout(.others, by: caller)
        return .redirect("/account?notice=signed_out_others", cookies: cookies)
    }

    // MARK: Password

    /// After a recovery link (a recovery sign-in in the last ten minutes) no current password is asked.
    func passwordPage(error: APIError? = nil) async throws -> WebAnswer {
        let (caller, cookies) = try await signedIn()
        let record = try await profiles.account(caller)
        let recovery = profiles.signedInRecently(caller.identity, by: ["recovery"])
        var fields: [String: Any] = [
            "email": record.email, "recovery": recovery, "ask_current": !recovery && record.passwordHash != nil,
            "min_length": settings.passwordPolicy.minimumLength,
        ]
        if let error {
            if error.code == ErrorCode.weakPassword.rawValue {
                fields["error"] = "Choose another password:"
                fields["reasons"] = error.message.components(separatedBy: CredentialRules.reasonSeparator)
                fields["has_reasons"] = true
            } else if error.code == ErrorCode.reauthenticationNeeded.rawValue {
                fields["error"] =
                    "To set a password, sign out, ask for a password reset link on the sign-in page and open it."
            } else {
                fields["error"] = error.message
            }
        }
        return .page(
            render(
                "password", page: "password", title: recovery ? "Choose a new password" : "Change your password", fields
            ),
            status: error?.status ?? .ok, cookies: cookies)
    }

    func changePassword(password: String, currentPassword: String?) async throws -> WebAnswer {
        _ = try await formClient()
        let (caller, cookies) = try await signedIn()
        do {
            _ = try await profiles.update(.init(password: password, currentPassword: currentPassword), by: caller)
        } catch let error as APIError {
            return try await passwordPage(error: error)
        }
        return .redirect("/account?notice=password_changed", cookies: cookies)
    }

    // MARK: Deletion

    func delete(currentPassword: String?) async throws -> WebAnswer {
        _ = try await formClient()
        let (caller, _) = try await signedIn()
        do {
            try await deletion.delete(caller, proof: .init(currentPassword: currentPassword))
        } catch let error as APIError where error.code == ErrorCode.reauthenticationNeeded.rawValue {
            let again = APIError(
                .unauthorized, code: .reauthenticationNeeded,
                message: "You signed in more than ten minutes ago: sign out, sign in again, then delete the account.")
            return try await account(deleteError: again, status: again.status)
        } catch let error as APIError {
            return try await account(deleteError: error, status: error.status)
        }
        return message(
            page: "deleted", title: "Your account is deleted",
            [
                "Every session has ended and your sign-in methods are gone. A confirmation is on its way to your email.",
                "You can sign up again with the same address at any time.",
            ],
            cookies: session.clearing)
    }

    // MARK: Share links

    func share(token: String) async throws -> WebAnswer {
        let client = try access.client()
        guard let landing = try await shares.landing(token, client: client) else {
            return message(
                page: "share-unavailable", title: "This invitation no longer works",
                [
                    "The link has expired, was revoked, or has been used as many times as it allows.",
                    "Ask the person who sent it for a new one.",
                ],
                status: .gone)
        }
        var fields: [String: Any] = [
            "company_name": landing.preview.companyName, "inviter": landing.preview.inviterName,
            "initial": landing.preview.companyName.first.map { String($0).uppercased() } ?? "?",
            "permission": landing.preview.permission == .readWrite ? "Can view and edit" : "Can view",
            "expiry": landing.expiresAt.map(Self.dateText) ?? "Never",
        ]
        if let logo = landing.preview.logoUrl, logo.lowercased().hasPrefix("https://") { fields["logo_url"] = logo }
        if let appURL { fields["open_url"] = appURL + "share/" + token }
        if let appStoreURL { fields["store_url"] = appStoreURL }
        return .page(
            render("share", page: "share", title: "You're invited", fields))
    }

    // MARK: Formatting

    /// A short name for the device behind a user agent.
    static func device(_ userAgent: String?) -> String {
        guard let agent = userAgent, !agent.isEmpty else { return "Unknown device" }
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
        case let (browser?, system?): return "\(browser) on \(system)"
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
