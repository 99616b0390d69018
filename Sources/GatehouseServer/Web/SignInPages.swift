import GatehouseAPI
import HTTPTypes

/// Web sign-in (`SignInPageRoutes`): the sign-in page, by password or by a mailed code, and the form that mails a new
/// link (from the sign-in page and from a link that no longer works).
struct SignInPages: Sendable {
    let kit: PageKit
    /// The password grant.
    let tokens: TokenService
    /// Mails sign-in codes and password reset links.
    let signUps: SignUpService
    /// Spends a mailed code.
    let verification: VerificationService

    // MARK: Sign-in

    /// The sign-in page; `consoleEnded` says an idle or old console session ended (`ConsoleKit`). Signed out, it
    /// speaks the browser's language.
    func signInPage(consoleEnded: Bool = false) async throws -> WebAnswer {
        if try await kit.caller() != nil { return .redirect("/account") }
        let language = kit.language(account: nil)
        return kit.page(
            "sign-in", title: kit.text("sign_in_title", language),
            consoleEnded ? ["notice": kit.text("sign_in_console_ended", language)] : [:], language: language)
    }

    /// The sign-in page again, saying why the last try was refused.
    private func signInPage(refused error: APIError, email: String) -> WebAnswer {
        let language = kit.language(account: nil)
        return kit.page(
            "sign-in", title: kit.text("sign_in_title", language),
            ["error": kit.errorText(error, language), "email": email], status: error.status, language: language)
    }

    /// The page that asks for the mailed code, saying why the last one was refused when it was.
    private func codePage(email: String, refused error: APIError? = nil) -> WebAnswer {
        let language = kit.language(account: nil)
        var fields: [String: Any] = ["email": email]
        if let error {
            fields["error"] =
                error.code == ErrorCode.otpExpired.rawValue
                ? kit.text("code_wrong", language) : kit.errorText(error, language)
        }
        return .page(
            kit.render(
                "enter-code", page: "enter-code", title: kit.text("code_title", language), fields, language: language),
            status: error?.status ?? .ok)
    }

    func signIn(email: String, password: String) async throws -> WebAnswer {
        let client = try await kit.formClient()
        do {
            let signedIn = try await tokens.password(.init(email: email, password: password), client: client)
            return .redirect("/account", cookies: kit.session.cookies(for: signedIn))
        } catch let error as APIError {
            return signInPage(refused: error, email: email)
        }
    }

    func sendCode(email: String) async throws -> WebAnswer {
        let client = try await kit.formClient()
        do {
            try await signUps.sendOTP(.init(email: email, createUser: false), redirectTo: nil, client: client)
        } catch let error as APIError {
            return signInPage(refused: error, email: email)
        }
        return codePage(email: email)
    }

    func verifyCode(email: String, code: String) async throws -> WebAnswer {
        let client = try await kit.formClient()
        do {
            // A sign-in code (type email) is never half of an email change.
            guard
                case .session(let signedIn) = try await verification.verify(
                    .init(_type: .email, email: email, token: code), client: client)
            else { throw VerificationService.otpExpired }
            return .redirect("/account", cookies: kit.session.cookies(for: signedIn))
        } catch let error as APIError {
            return codePage(email: email, refused: error)
        }
    }

    /// Mails a new sign-in link (or a password reset link), answering the same whether or not the address has an
    /// account.
    func newLink(email: String, purpose: String?) async throws -> WebAnswer {
        let client = try await kit.formClient()
        let language = kit.language(account: nil)
        do {
            if purpose == "recovery" {
                try await signUps.recover(.init(email: email), redirectTo: nil, client: client)
            } else {
                try await signUps.sendOTP(.init(email: email, createUser: false), redirectTo: nil, client: client)
            }
        } catch let error as APIError {
            return kit.message(
                page: "link-sent", title: kit.text("new_link_refused_title", language),
                [kit.errorText(error, language)], status: error.status, language: language)
        }
        return kit.message(
            page: "link-sent", titleKey: "new_link_title", keys: ["new_link_sent"], ["email": email],
            language: language)
    }
}
