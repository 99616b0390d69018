import GatehouseAPI

/// The pages' operations. Each answers by throwing its `WebAnswer` (see there).
extension API {
    func accountPage(_ input: Operations.AccountPage.Input) async throws -> Operations.AccountPage.Output {
        let notice: String? =
            switch input.query.notice {
            case .passwordChanged: "Your password is changed."
            case .signedOutOthers: "Every other session has ended."
            case nil: nil
            }
        throw try await web.account(notice: notice)
    }

    func signInPage(_ input: Operations.SignInPage.Input) async throws -> Operations.SignInPage.Output {
        throw try await web.signInPage()
    }

    func signInWithPassword(_ input: Operations.SignInWithPassword.Input) async throws
        -> Operations.SignInWithPassword.Output
    {
        switch input.body {
        case .urlEncodedForm(let form): throw try await web.signIn(email: form.email, password: form.password)
        }
    }

    func signInWithCode(_ input: Operations.SignInWithCode.Input) async throws -> Operations.SignInWithCode.Output {
        switch input.body {
        case .urlEncodedForm(let form): throw try await web.sendCode(email: form.email)
        }
    }

    func verifySignInCode(_ input: Operations.VerifySignInCode.Input) async throws
        -> Operations.VerifySignInCode.Output
    {
        switch input.body {
        case .urlEncodedForm(let form): throw try await web.verifyCode(email: form.email, code: form.code)
        }
    }

    func requestNewLink(_ input: Operations.RequestNewLink.Input) async throws -> Operations.RequestNewLink.Output {
        switch input.body {
        case .urlEncodedForm(let form): throw try await web.newLink(email: form.email, purpose: form.purpose)
        }
    }

    func passwordPage(_ input: Operations.PasswordPage.Input) async throws -> Operations.PasswordPage.Output {
        throw try await web.passwordPage()
    }

    func changePasswordOnWeb(_ input: Operations.ChangePasswordOnWeb.Input) async throws
        -> Operations.ChangePasswordOnWeb.Output
    {
        switch input.body {
        case .urlEncodedForm(let form):
            throw try await web.changePassword(password: form.password, currentPassword: form.currentPassword)
        }
    }

    func signOutOnWeb(_ input: Operations.SignOutOnWeb.Input) async throws -> Operations.SignOutOnWeb.Output {
        throw try await web.signOut()
    }

    func signOutOthersOnWeb(_ input: Operations.SignOutOthersOnWeb.Input) async throws
        -> Operations.SignOutOthersOnWeb.Output
    {
        throw try await web.signOutOthers()
    }

    func deleteAccountOnWeb(_ input: Operations.DeleteAccountOnWeb.Input) async throws
        -> Operations.DeleteAccountOnWeb.Output
    {
        switch input.body {
        case .urlEncodedForm(let form):
            // The form's `confirm` box is required by the document: a post without it never gets here.
            throw try await web.delete(currentPassword: form.currentPassword)
        }
    }

    func sharePage(_ input: Operations.SharePage.Input) async throws -> Operations.SharePage.Output {
        throw try await web.share(token: input.path.token)
    }
}
