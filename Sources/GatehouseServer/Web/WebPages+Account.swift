import GatehouseAPI
import HTTPTypes

/// The account pages: sign-in by password or code, new links, sessions, password and deletion (`AccountPageRoutes`).
extension WebPages {
    // MARK: Sign-in

    func signInPage() async throws -> WebAnswer {
        if try await caller() != nil { return .redirect("/account") }
        return page("sign-in", title: "Sign in", [:])
    }

    /// The sign-in page again, saying why the last try was refused.
    private func signInPage(refused error: APIError, email: String) -> WebAnswer {
        page("sign-in", title: "Sign in", ["error": error.message, "email": email], status: error.status)
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
            // A sign-in code (type email) is never half of an email change.
            guard
                case .session(let signedIn) = try await verification.verify(
                    .init(_type: .email, email: email, token: code), client: client)
            else { throw VerificationService.otpExpired }
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

    func account(
        notice: String? = nil, deleteError: APIError? = nil, passkeyError: String? = nil,
        status: HTTPResponse.Status = .ok, reviewPasskeys: Bool = false
    ) async throws -> WebAnswer {
        let (caller, cookies) = try await signedIn()
        // An account with a verified factor gives a code before its page opens.
        let (factorFields, needsCode) = try await factorFields(caller)
        if needsCode { return .redirect("/account/second-factor", cookies: cookies) }
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
        fields.merge(factorFields) { $1 }
        fields.merge(try await passkeyFields(caller, review: reviewPasskeys)) { $1 }
        if let notice { fields["notice"] = notice }
        if let passkeyError { fields["passkey_error"] = passkeyError }
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
        return page("account", title: "Your account", fields, status: status, cookies: cookies)
    }

    func signOut() async throws -> WebAnswer {
        _ = try await formClient()
        if let (caller, _) = try await caller() { try await accountSessions.logout(.local, by: caller) }
        return .redirect("/account/sign-in", cookies: session.clearing)
    }

    func signOutOthers() async throws -> WebAnswer {
        _ = try await formClient()
        let (caller, cookies) = try await signedIn()
        do {
            try await FactorService.requireAAL2IfEnrolled(
                caller.identity, db: store.database,
                message: "Enter a code from your authenticator app first, then sign out your other devices.")
        } catch let error as APIError {
            return try await account(notice: error.message, status: error.status)
        }
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
                fields["reasons"] = error.message.components(separatedBy: PasswordRules.reasonSeparator)
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

    /// What a page says for a refusal: the API's words, but for a change that needs a recent sign-in, which the
    /// pages ask for by signing in again (they have no field for a reauthentication code).
    static func pageMessage(_ error: APIError) -> String {
        guard error.code == ErrorCode.reauthenticationNeeded.rawValue else { return error.message }
        return "You signed in more than ten minutes ago: sign out, sign in again, then try once more."
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
}
