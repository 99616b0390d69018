import GatehouseAPI
import HTTPTypes

/// The account page (`AccountPageRoutes`): its sessions, factors and passkeys, signing out, the password and
/// deletion. The factor and passkey pages show it again, with a notice, when they refuse a change.
struct AccountPages: Sendable {
    let kit: PageKit
    let profiles: ProfileService
    let accountSessions: AccountSessions
    let deletion: AccountDeletion
    /// Asks whether signing out other devices needs a code first (`FactorService.requireAAL2IfEnrolled`).
    let store: Store
    /// The password policy the password page states.
    let settings: AuthSettings
    /// The account page's factors.
    let factors: FactorService
    /// The account page's passkeys.
    let passkeys: PasskeyService
    /// Keys the account page's token (`PasskeyPages.pageTokens`).
    let box: SecretBox
    /// The account's identities: listed, unlinked, and linked through a provider (`OAuthFlow`).
    let external: ExternalSignIn
    let customProviders: CustomProviders
    let oauthFlow: OAuthFlow
    /// The open invitations to the account's address, to accept or decline.
    let invitations: InvitationService

    // MARK: The account page

    func account(
        notice: String? = nil, deleteError: APIError? = nil, passkeyError: String? = nil,
        status: HTTPResponse.Status = .ok, reviewPasskeys: Bool = false, linkedInvitation: String? = nil
    ) async throws -> WebAnswer {
        let (caller, cookies) = try await kit.signedIn()
        // An account with a verified factor gives a code before its page opens.
        let (factorFields, needsCode) = try await factorFields(caller)
        if needsCode { return .redirect("/account/second-factor", cookies: cookies) }
        let record = try await profiles.account(caller)
        let list = try await accountSessions.list(caller).sessions
        let rows: [[String: Any]] = list.map { info in
            [
                "device": PageKit.device(info.userAgent), "ip": info.ip ?? "unknown",
                "last_seen": PageKit.dateText(info.refreshedAt), "current": info.current,
            ]
        }
        var fields: [String: Any] = [
            "email": record.email, "sessions": rows, "has_password": record.passwordHash != nil,
        ]
        fields.merge(factorFields) { $1 }
        fields.merge(try await passkeyFields(caller, review: reviewPasskeys)) { $1 }
        let identities = try await identityFields(caller)
        fields.merge(identities) { $1 }
        fields.merge(try await invitationFields(caller, linked: linkedInvitation)) { $1 }
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
        // A link button's post is answered with a redirect to its provider, which form-action must allow.
        let offered = (identities["link_providers"] as? [[String: Any]] ?? []).compactMap {
            $0["identifier"] as? String
        }
        return kit.page(
            "account", title: "Your account", fields, status: status, cookies: cookies,
            formTargets: await oauthFlow.authorizationEndpoints(offered))
    }

    /// The account's factors as the account page lists them, and whether the session must still give a code.
    func factorFields(_ caller: Caller) async throws -> (fields: [String: Any], needsCode: Bool) {
        let all = try await factors.factors(accountID: caller.accountID)
        let rows: [[String: Any]] = all.map { factor in
            [
                "id": factor.id, "name": factor.friendlyName ?? "Authenticator app",
                "recovery": factor.factorType == .recoveryCode, "verified": factor.status == .verified,
                "added": PageKit.dateText(factor.createdAt),
            ]
        }
        let verified = all.contains { $0.factorType == .totp && $0.status == .verified }
        return (
            ["factors": rows, "has_factors": !rows.isEmpty, "has_verified": verified],
            verified && caller.identity.aal != .aal2
        )
    }

    /// The passkey section's fields: the account's passkeys and the page's token; none when passkeys are off. Right
    /// after a password change (`review`), the passkeys added since the last password sign-in are marked, with a
    /// word to remove any that is not the owner's: a passkey added with a stolen session outlives the new password.
    func passkeyFields(_ caller: Caller, review: Bool = false) async throws -> [String: Any] {
        guard passkeys.settings.enabled else { return [:] }
        let recent = review ? try await passkeys.addedSincePasswordSignIn(by: caller) : []
        let rows: [[String: Any]] = try await passkeys.list(by: caller).map { passkey in
            var row: [String: Any] = [
                "id": passkey.id, "name": passkey.friendlyName, "added": PageKit.dateText(passkey.createdAt),
                "synced": passkey.backedUp, "review": recent.contains(passkey.id),
            ]
            if let used = passkey.lastUsedAt { row["last_used"] = PageKit.dateText(used) }
            return row
        }
        return [
            "passkeys": rows, "has_passkeys": !rows.isEmpty, "csrf_token": pageToken(caller),
            "review_passkeys": !recent.isEmpty,
        ]
    }

    /// The sign-in methods section: the account's identities, each with its unlink button while manual linking is
    /// on and another way in stays, and a link button for each enabled custom provider not linked yet.
    func identityFields(_ caller: Caller) async throws -> [String: Any] {
        let identities = try await external.identities(of: caller)
        let providers = try await customProviders.signInProviders()
        let names = Dictionary(providers.map { ($0.identifier, $0.name) }) { first, _ in first }
        let linking = settings.manualLinking
        let rows: [[String: Any]] = identities.map { identity in
            var row: [String: Any] = [
                "id": identity.id, "provider": Self.providerName(identity.provider, custom: names),
                "added": PageKit.dateText(identity.createdAt),
                "unlinkable": linking && identities.count > 1 && identity.provider != "email",
            ]
            if let email = identity.email { row["email"] = email }
            return row
        }
        let linked = Set(identities.map(\.provider))
        let offered: [[String: Any]] =
            linking
            ? providers.filter { !linked.contains($0.identifier) }.map {
                ["identifier": $0.identifier, "name": $0.name]
            }
            : []
        return [
            "identities": rows, "link_providers": offered, "has_link_providers": !offered.isEmpty,
            "csrf_token": pageToken(caller),
        ]
    }

    /// The cookie that keeps a mailed invitation's token while its browser signs in (ten minutes, the account pages
    /// only).
    static let invitationCookie = "gh_invitation"

    /// Sets (or, with nil, clears) the invitation cookie.
    static func invitationCookie(_ token: String?, secure: Bool) -> String {
        "\(invitationCookie)=\(token ?? ""); Path=/account; Max-Age=\(token == nil ? 0 : 600); HttpOnly; SameSite=Lax"
            + (secure ? "; Secure" : "")
    }

    /// The invitations section: the open invitations to the account's confirmed address, the one a mailed link
    /// (`?invitation=<token>`) named marked, each with its Join and Decline forms.
    func invitationFields(_ caller: Caller, linked token: String?) async throws -> [String: Any] {
        var linkedID: String?
        if let token { linkedID = try await invitations.identify(token, by: caller) }
        let rows: [[String: Any]] = try await invitations.received(by: caller).map { received in
            [
                "id": received.invitation.id, "company": received.companyName, "inviter": received.inviterName,
                "read_only": received.invitation.role == .readOnly,
                "expires": PageKit.dateText(received.invitation.expiresAt),
                "linked": received.invitation.id == linkedID,
            ]
        }
        return ["invitations": rows, "has_invitations": !rows.isEmpty, "csrf_token": pageToken(caller)]
    }

    /// Accepts or declines an invitation from the account page, refusals said on the page.
    func answerInvitation(id: String, accept: Bool, token: String?) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            try PasskeyPages.checkPageToken(token, caller: caller, box: box)
            if accept {
                _ = try await invitations.accept(id, by: caller)
            } else {
                try await invitations.decline(id, by: caller)
            }
        } catch let error as APIError {
            return try await account(notice: error.message, status: error.status)
        }
        return .redirect(
            "/account?notice=\(accept ? "invitation_accepted" : "invitation_declined")", cookies: cookies)
    }

    /// A provider as a person calls it.
    static func providerName(_ provider: String, custom: [String: String]) -> String {
        switch provider {
        case "email": "Email and password"
        case "apple": "Sign in with Apple"
        case "google": "Google"
        default: custom[provider] ?? provider
        }
    }

    /// Starts linking a provider's identity from the account page: the browser goes to the provider and comes back
    /// to this page (`OAuthFlow`, returning to `account`).
    func linkIdentity(provider: String, token: String?) async throws -> WebAnswer {
        let client = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            try PasskeyPages.checkPageToken(token, caller: caller, box: box)
            let departure = try await oauthFlow.start(
                OAuthFlow.Request(provider: provider), linking: caller.accountID, returnsTo: .account,
                browser: WebSession.read(OAuthFlow.browserCookie, from: kit.requestHeaders), client: client,
                secureCookie: kit.session.secure)
            guard case .redirect(let location, let cookie) = departure else { throw APIError.internalError }
            return .redirect(location, cookies: cookies + [cookie])
        } catch let error as APIError {
            return try await account(notice: error.message, status: error.status)
        }
    }

    /// Unlinks one of the account's identities (`ExternalSignIn.unlink`), refusals said on the page.
    func unlinkIdentity(id: String, token: String?) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            try PasskeyPages.checkPageToken(token, caller: caller, box: box)
            try await external.unlink(identityID: id, by: caller)
        } catch let error as APIError {
            return try await account(notice: error.message, status: error.status)
        }
        return .redirect("/account?notice=identity_unlinked", cookies: cookies)
    }

    /// The account page's token for the caller's session (`PasskeyPages.checkPageToken` checks it).
    func pageToken(_ caller: Caller) -> String {
        PasskeyPages.pageTokens(sessionID: caller.identity.sessionID, box: box)[0]
    }

    // MARK: Signing out

    func signOut() async throws -> WebAnswer {
        _ = try await kit.formClient()
        if let (caller, _) = try await kit.caller() { try await accountSessions.logout(.local, by: caller) }
        return .redirect("/account/sign-in", cookies: kit.session.clearing)
    }

    func signOutOthers() async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
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
        let (caller, cookies) = try await kit.signedIn()
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
            kit.render(
                "password", page: "password", title: recovery ? "Choose a new password" : "Change your password", fields
            ),
            status: error?.status ?? .ok, cookies: cookies)
    }

    func changePassword(password: String, currentPassword: String?) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            _ = try await profiles.update(.init(password: password, currentPassword: currentPassword), by: caller)
        } catch let error as APIError {
            return try await passwordPage(error: error)
        }
        return .redirect("/account?notice=password_changed", cookies: cookies)
    }

    // MARK: Deletion

    func delete(currentPassword: String?) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let (caller, _) = try await kit.signedIn()
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
        return kit.message(
            page: "deleted", title: "Your account is deleted",
            [
                "Every session has ended and your sign-in methods are gone. A confirmation is on its way to your email.",
                "You can sign up again with the same address at any time.",
            ],
            cookies: kit.session.clearing)
    }
}
