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

    /// What the account page says at its top.
    enum Notice {
        /// A change made: a name of `AccountPageRoutes.notices`, its words `account_notice_<name>`.
        case done(String)
        /// A change refused, in the API's words (`PageKit.pageMessage`).
        case refused(APIError)
        /// Words of the string tables, by key.
        case text(String)
    }

    /// The account page, in the account's language (its `locale`, else the browser's).
    func account(
        notice: Notice? = nil, deleteError: APIError? = nil, passkeyError: APIError? = nil,
        status: HTTPResponse.Status = .ok, reviewPasskeys: Bool = false, linkedInvitation: String? = nil
    ) async throws -> WebAnswer {
        let (caller, cookies) = try await kit.signedIn()
        // An account with a verified factor gives a code before its page opens.
        let (allFactors, needsCode) = try await factorFields(caller)
        if needsCode { return .redirect("/account/second-factor", cookies: cookies) }
        let record = try await profiles.account(caller)
        let language = kit.language(account: Mailer.locale(in: record.userMetadata))
        let list = try await accountSessions.list(caller).sessions
        let rows: [[String: Any]] = list.map { info in
            [
                "device": kit.device(info.userAgent, language),
                "ip": info.ip ?? kit.text("account_ip_unknown", language),
                "last_seen": PageKit.dateText(info.refreshedAt), "current": info.current,
            ]
        }
        var fields: [String: Any] = [
            "email": record.email, "sessions": rows, "has_password": record.passwordHash != nil,
        ]
        fields.merge(factorRows(allFactors, language)) { $1 }
        fields.merge(try await passkeyFields(caller, language, review: reviewPasskeys)) { $1 }
        let identities = try await identityFields(caller, language)
        fields.merge(identities) { $1 }
        fields.merge(try await invitationFields(caller, language, linked: linkedInvitation)) { $1 }
        switch notice {
        case .done(let name)?: fields["notice"] = kit.text("account_notice_" + name, language)
        case .refused(let error)?: fields["notice"] = kit.pageMessage(error, language)
        case .text(let key)?: fields["notice"] = kit.text(key, language)
        case nil: break
        }
        if let passkeyError {
            fields["passkey_error"] = PasskeyPages.passkeyRefusal(passkeyError, kit: kit, language)
        }
        if let deleteError {
            fields["delete_error"] =
                deleteError.code == ErrorCode.reauthenticationNeeded.rawValue
                ? kit.text("account_delete_reauthenticate", language) : kit.errorText(deleteError, language)
            if case .array(let owned)? = deleteError.details["companies"] {
                let names: [[String: Any]] = owned.compactMap {
                    if case .object(let company) = $0, case .string(let name)? = company["name"] {
                        return ["name": name]
                    }
                    return nil
                }
                fields["owned"] = names
                fields["has_owned"] = !names.isEmpty
                fields["delete_error"] = kit.text("account_delete_owned", language)
            }
        }
        // A link button's post is answered with a redirect to its provider, which form-action must allow.
        let offered = (identities["link_providers"] as? [[String: Any]] ?? []).compactMap {
            $0["identifier"] as? String
        }
        return kit.page(
            "account", title: kit.text("account_title", language), fields, status: status, cookies: cookies,
            formTargets: await oauthFlow.authorizationEndpoints(offered), language: language)
    }

    /// The account's factors, and whether the session must still give a code.
    func factorFields(_ caller: Caller) async throws -> (factors: [Schemas.Factor], needsCode: Bool) {
        let all = try await factors.factors(accountID: caller.accountID)
        let verified = all.contains { $0.factorType == .totp && $0.status == .verified }
        return (all, verified && caller.identity.aal != .aal2)
    }

    /// The account's factors as the account page lists them, in `language`.
    private func factorRows(_ all: [Schemas.Factor], _ language: String) -> [String: Any] {
        let rows: [[String: Any]] = all.map { factor in
            let name = factor.friendlyName ?? kit.text("account_factor_app", language)
            return [
                "id": factor.id, "name": name, "recovery": factor.factorType == .recoveryCode,
                "verified": factor.status == .verified,
                "added_text": kit.text("account_added", language, ["added": PageKit.dateText(factor.createdAt)]),
                "remove": kit.text("account_remove", language, ["name": name]),
            ]
        }
        let verified = all.contains { $0.factorType == .totp && $0.status == .verified }
        return ["factors": rows, "has_factors": !rows.isEmpty, "has_verified": verified]
    }

    /// The passkey section's fields: the account's passkeys and the page's token; none when passkeys are off. Right
    /// after a password change (`review`), the passkeys added since the last password sign-in are marked, with a
    /// word to remove any that is not the owner's: a passkey added with a stolen session outlives the new password.
    func passkeyFields(_ caller: Caller, _ language: String, review: Bool = false) async throws -> [String: Any] {
        guard passkeys.settings.enabled else { return [:] }
        let recent = review ? try await passkeys.addedSincePasswordSignIn(by: caller) : []
        let rows: [[String: Any]] = try await passkeys.list(by: caller).map { passkey in
            let name = passkey.friendlyName
            let used = passkey.lastUsedAt.map {
                kit.text("account_passkey_last_used", language, ["last_used": PageKit.dateText($0)])
            }
            return [
                "id": passkey.id, "name": name, "synced": passkey.backedUp, "review": recent.contains(passkey.id),
                "added_text": kit.text(
                    "account_passkey_added", language, ["added": PageKit.dateText(passkey.createdAt)]),
                "used": used ?? kit.text("account_passkey_not_used", language),
                "rename": kit.text("account_passkey_rename", language, ["name": name]),
                "remove": kit.text("account_remove", language, ["name": name]),
            ]
        }
        return [
            "passkeys": rows, "has_passkeys": !rows.isEmpty, "csrf_token": pageToken(caller),
            "review_passkeys": !recent.isEmpty,
        ]
    }

    /// The sign-in methods section: the account's identities, each with its unlink button while manual linking is
    /// on and another way in stays, and a link button for each enabled custom provider not linked yet.
    func identityFields(_ caller: Caller, _ language: String) async throws -> [String: Any] {
        let identities = try await external.identities(of: caller)
        let providers = try await customProviders.signInProviders()
        let names = Dictionary(providers.map { ($0.identifier, $0.name) }) { first, _ in first }
        let linking = settings.manualLinking
        let rows: [[String: Any]] = identities.map { identity in
            let provider = providerName(identity.provider, custom: names, language)
            var row: [String: Any] = [
                "id": identity.id, "provider": provider,
                "added_text": kit.text("account_added", language, ["added": PageKit.dateText(identity.createdAt)]),
                "remove": kit.text("account_remove", language, ["name": provider]),
                "unlinkable": linking && identities.count > 1 && identity.provider != "email",
            ]
            if let email = identity.email { row["email"] = email }
            return row
        }
        let linked = Set(identities.map(\.provider))
        let offered: [[String: Any]] =
            linking
            ? providers.filter { !linked.contains($0.identifier) }.map {
                [
                    "identifier": $0.identifier, "name": $0.name,
                    "link": kit.text("account_link", language, ["name": $0.name]),
                ]
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
    func invitationFields(_ caller: Caller, _ language: String, linked token: String?) async throws -> [String: Any] {
        var linkedID: String?
        if let token { linkedID = try await invitations.identify(token, by: caller) }
        let rows: [[String: Any]] = try await invitations.received(by: caller).map { received in
            let invited = received.invitation.role == .readOnly ? "account_invited_read_only" : "account_invited_member"
            let expires = PageKit.dateText(received.invitation.expiresAt)
            return [
                "id": received.invitation.id, "company": received.companyName,
                "invited": kit.text(invited, language, ["inviter": received.inviterName]),
                "until": kit.text("account_invitation_until", language, ["expires": expires]),
                "join": kit.text("account_join", language, ["company": received.companyName]),
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
            return try await account(notice: .refused(error), status: error.status)
        }
        return .redirect(
            "/account?notice=\(accept ? "invitation_accepted" : "invitation_declined")", cookies: cookies)
    }

    /// A provider as a person calls it, in `language`.
    func providerName(_ provider: String, custom: [String: String], _ language: String) -> String {
        switch provider {
        case "email", "apple", "google": kit.text("account_provider_" + provider, language)
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
            return try await account(notice: .refused(error), status: error.status)
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
            return try await account(notice: .refused(error), status: error.status)
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
        } catch let error as APIError where error.code == ErrorCode.insufficientAal.rawValue {
            return try await account(notice: .text("account_sign_out_others_code"), status: error.status)
        } catch let error as APIError {
            return try await account(notice: .refused(error), status: error.status)
        }
        try await accountSessions.logout(.others, by: caller)
        return .redirect("/account?notice=signed_out_others", cookies: cookies)
    }

    // MARK: Password

    /// After a recovery link (a recovery sign-in in the last ten minutes) no current password is asked.
    func passwordPage(error: APIError? = nil) async throws -> WebAnswer {
        let (caller, cookies) = try await kit.signedIn()
        let record = try await profiles.account(caller)
        let language = kit.language(account: Mailer.locale(in: record.userMetadata))
        let recovery = profiles.signedInRecently(caller.identity, by: ["recovery"])
        let minimum = settings.passwordPolicy.minimumLength
        var fields: [String: Any] = [
            "email": record.email, "recovery": recovery, "ask_current": !recovery && record.passwordHash != nil,
            "min_length": minimum,
        ]
        if let error {
            if error.code == ErrorCode.weakPassword.rawValue {
                fields["error"] = kit.text("password_choose_another", language)
                fields["reasons"] = weakPasswordReasons(error, language, minimum: minimum)
                fields["has_reasons"] = true
            } else if error.code == ErrorCode.reauthenticationNeeded.rawValue {
                fields["error"] = kit.text("password_reauthenticate", language)
            } else {
                fields["error"] = kit.errorText(error, language)
            }
        }
        let title = recovery ? "password_title_new" : "password_title_change"
        return .page(
            kit.render("password", page: "password", title: kit.text(title, language), fields, language: language),
            status: error?.status ?? .ok, cookies: cookies)
    }

    /// A refused password's reasons, each in `language` when its table has `error_weak_password_<reason>`, else in
    /// the API's words.
    private func weakPasswordReasons(_ error: APIError, _ language: String, minimum: Int) -> [String] {
        let said = error.message.components(separatedBy: PasswordRules.reasonSeparator)
        guard case .object(let weak)? = error.details["weak_password"], case .array(let codes)? = weak["reasons"],
            codes.count == said.count
        else { return said }
        return zip(codes, said).map { code, words in
            guard case .string(let reason) = code else { return words }
            return kit.templates.translation("error_weak_password_" + reason, language, ["min_length": minimum])
                ?? words
        }
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
        // Once deleted the account is gone: the page's language is read before.
        let language = kit.language(of: caller)
        do {
            try await deletion.delete(caller, proof: .init(currentPassword: currentPassword))
        } catch let error as APIError where error.code == ErrorCode.reauthenticationNeeded.rawValue {
            // The page asks for a new sign-in in its own words (`account`), with the status of a missing one.
            return try await account(deleteError: error, status: .unauthorized)
        } catch let error as APIError {
            return try await account(deleteError: error, status: error.status)
        }
        return kit.message(
            page: "deleted", titleKey: "deleted_title", keys: ["deleted", "deleted_again"], language: language,
            cookies: kit.session.clearing)
    }
}
