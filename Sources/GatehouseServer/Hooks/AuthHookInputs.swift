import Foundation
import GatehouseAPI

/// Each hook's input in GoTrue's shape, and what its answer does. The services call these; each is a no-op (or
/// gives back what it was given) when its hook is off.
extension AuthHooks {
    /// The custom access token hook: `{user_id, claims, authentication_method}` in, `{"claims": …}` out, which
    /// replaces the claims. The required claims must stay, or the sign-in (or refresh) fails.
    func customizeClaims(_ claims: AccessTokenClaims, method: String) async throws -> JSONFields {
        let answer = try await call(
            .customAccessToken,
            input: [
                "user_id": .string(claims.sub), "claims": try Self.json(claims),
                "authentication_method": .string(method),
            ])
        return try AuthHookAnswer.claims(answer)
    }

    /// The before user created hook: `{user}` in, the user as it would be created; `{}` (or 204) lets the account be
    /// made, `{"error": …}` refuses it with that status and message. Called before the account is written.
    func beforeUserCreated(_ user: Schemas.User) async throws {
        guard isOn(.beforeUserCreated) else { return }
        _ = try await call(.beforeUserCreated, input: ["user": try Self.json(user)])
    }

    /// The user a before user created hook is shown for an account about to be made: GoTrue's user shape, with the
    /// id it will be written with.
    static func prospectiveUser(
        id: String, email: String?, provider: String, metadata: JSONFields = [:], isAnonymous: Bool = false,
        confirmed: Bool = false, now: Date
    ) -> Schemas.User {
        Schemas.User(
            id: id, aud: "authenticated", role: "", email: email ?? "",
            emailConfirmedAt: confirmed ? now : nil, confirmedAt: confirmed ? now : nil, phone: "",
            appMetadata: isAnonymous
                ? [:] : ["provider": .string(provider), "providers": .array([.string(provider)])],
            userMetadata: metadata, identities: [], createdAt: now, updatedAt: now, isAnonymous: isAnonymous,
            isSsoUser: provider.hasPrefix("sso:"))
    }

    /// The send email hook: `{user, email_data}` in; the hook sends the mail instead of Gatehouse's mail server.
    func sendEmail(user: Schemas.User, data: HookEmailData) async throws {
        _ = try await call(.sendEmail, input: ["user": try Self.json(user), "email_data": .object(data.json)])
    }

    /// The password verification attempt hook: `{user_id, valid}` in, `{decision, message, should_logout_user}` out.
    /// nil when the hook is off.
    func passwordAttempt(userID: String, valid: Bool) async throws -> AuthHookAnswer.Decision? {
        guard isOn(.passwordVerificationAttempt) else { return nil }
        let answer = try await call(
            .passwordVerificationAttempt, input: ["user_id": .string(userID), "valid": .bool(valid)])
        return AuthHookAnswer.Decision(answer)
    }

    /// The MFA verification attempt hook: `{factor_id, factor_type, user_id, valid}` in, `{decision, message}` out.
    /// nil when the hook is off.
    func mfaAttempt(userID: String, factorID: String, factorType: String, valid: Bool) async throws
        -> AuthHookAnswer.Decision?
    {
        guard isOn(.mfaVerificationAttempt) else { return nil }
        let answer = try await call(
            .mfaVerificationAttempt,
            input: [
                "user_id": .string(userID), "factor_id": .string(factorID), "factor_type": .string(factorType),
                "valid": .bool(valid),
            ])
        return AuthHookAnswer.Decision(answer)
    }

    /// GoTrue's messages for a rejected attempt that names none.
    static let passwordRejected = "Further password verification attempts will be rejected."
    static let mfaRejected = "Further MFA verification attempts will be rejected."

    /// `value` as JSON, dates as the API writes them.
    static func json(_ value: some Encodable) throws -> JSONValue {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(MillisecondDateTranscoder.format(date))
        }
        return try JSONDecoder().decode(JSONValue.self, from: encoder.encode(value))
    }
}

/// GoTrue's `email_data`: what a send email hook needs to write the mail itself.
struct HookEmailData: Equatable {
    var token = ""
    var tokenHash = ""
    var redirectTo = ""
    var actionType: String
    var siteURL = ""
    var tokenNew = ""
    var tokenHashNew = ""
    var oldEmail = ""

    var json: JSONFields {
        [
            "token": .string(token), "token_hash": .string(tokenHash), "redirect_to": .string(redirectTo),
            "email_action_type": .string(actionType), "site_url": .string(siteURL), "token_new": .string(tokenNew),
            "token_hash_new": .string(tokenHashNew), "old_email": .string(oldEmail), "old_phone": .string(""),
            "provider": .string(""), "factor_type": .string(""),
        ]
    }

    /// The data of a mail Gatehouse would send, for the mails a send email hook takes over (the ones with codes and
    /// links, and the notice of a completed email change); nil for Gatehouse's own notices, which still go by mail.
    /// The link's `token` is GoTrue's `token_hash`: a receiver links to `/auth/v1/verify?token=…&type=…`.
    init?(_ template: Mailer.Template, siteURL: String) {
        func linkItems(_ link: String) -> (token: String, redirect: String) {
            let items = URLComponents(string: link)?.queryItems ?? []
            return (
                items.first { $0.name == "token" }?.value ?? "", items.first { $0.name == "redirect_to" }?.value ?? ""
            )
        }
        self.siteURL = siteURL
        switch template {
        case .signupConfirmation(let code, let link), .invite(let code, let link), .magicLink(let code, let link),
            .recovery(let code, let link):
            let names: [String: String] = [
                "signup_confirmation": "signup", "invite": "invite", "magic_link": "magiclink", "recovery": "recovery",
            ]
            actionType = names[template.name] ?? template.name
            token = code
            (tokenHash, redirectTo) = linkItems(link)
        case .emailChangeCurrent(let code, let link, _):
            actionType = "email_change"
            token = code
            (tokenHash, redirectTo) = linkItems(link)
        case .emailChange(let code, let link, _):
            // The new address's code, as GoTrue's `token_new`.
            actionType = "email_change"
            tokenNew = code
            (tokenHashNew, redirectTo) = linkItems(link)
        case .reauthentication(let code):
            actionType = "reauthentication"
            token = code
        case .emailChanged:
            actionType = "email_changed_notification"
        default:
            return nil
        }
    }
}
