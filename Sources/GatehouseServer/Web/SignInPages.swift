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

    /// The sign-in page; `consoleEnded` says an idle or old console session ended (`ConsoleKit`).
    func signInPage(consoleEnded: Bool = false) async throws -> WebAnswer {
        if try await kit.caller() != nil { return .redirect("/account") }
        return kit.page(
            "sign-in", title: "Sign in",
            consoleEnded ? ["notice": "Your console session ended: sign in again to go on."] : [:])
    }

    /// The sign-in page again, saying why the last try was refused.
    private func signInPage(refused error: APIError, email: String) -> WebAnswer {
        kit.page("sign-in", title: "Sign in", ["error": error.message, "email": email], status: error.status)
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
        return .page(kit.render("enter-code", page: "enter-code", title: "Check your email", ["email": email]))
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
            let text =
                error.code == ErrorCode.otpExpired.rawValue ? "That code is wrong or has expired." : error.message
            return .page(
                kit.render(
                    "enter-code", page: "enter-code", title: "Check your email", ["error": text, "email": email]),
                status: error.status)
        }
    }

    /// Mails a new sign-in link (or a password reset link), answering the same whether or not the address has an
    /// account.
    func newLink(email: String, purpose: String?) async throws -> WebAnswer {
        let client = try await kit.formClient()
        do {
            if purpose == "recovery" {
                try await signUps.recover(.init(email: email), redirectTo: nil, client: client)
            } else {
                try await signUps.sendOTP(.init(email: email, createUser: false), redirectTo: nil, client: client)
            }
        } catch let error as APIError {
            return kit.message(page: "link-sent", title: "No link was sent", [error.message], status: error.status)
        }
        return kit.message(
            page: "link-sent", title: "Check your email",
            ["If \(email) has an account, a new link is on its way. It works once, on any device."])
    }
}
