import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import NIOCore

/// The pages' routes: router routes outside the JSON contract (openapi.yaml describes the API only). Each handler
/// reads its query or form and hands it to its page group; a failure the API would answer as JSON is answered as a
/// page by `ErrorMiddleware` (`PageKit.isPage`, `PageKit.failure`). One small controller per page group: the mailed
/// link's page, sign-in, the account page, second factors, passkeys, the share link's landing.
struct PageRoutes: Sendable {
    /// What every page shares, `failure` among it.
    let kit: PageKit
    let link: LinkPages
    let signIn: SignInPages
    let account: AccountPages
    let factors: FactorPages
    let passkeys: PasskeyPages
    let share: SharePages
    let providers: ProviderRedirectRoutes
    let oauthProvider: OAuthProviderRoutes
    let sso: SSORoutes
    let console: ConsoleRoutes
    let oauth: OAuthPages

    /// Each page group, with the services it uses from those the API holds.
    init(_ api: API, _ services: GatehouseServices) {
        let env = services.parts
        let kit = PageKit(
            templates: services.templates, publicURL: env.publicURL, trail: env.trail, access: api.access,
            tokens: api.tokens, passkeysOn: api.passkeys.settings.enabled)
        let account = AccountPages(
            kit: kit, profiles: api.profiles, accountSessions: api.accountSessions, deletion: api.accountDeletion,
            store: env.store, settings: env.settings, factors: api.factors, passkeys: api.passkeys, box: services.box,
            external: api.external, customProviders: api.customProviders, oauthFlow: api.oauthFlow,
            invitations: api.invitations)
        self.kit = kit
        link = LinkPages(
            kit: kit, mail: env.mail, store: env.store, clock: env.clock, settings: env.settings,
            verification: api.verification)
        signIn = SignInPages(kit: kit, tokens: api.tokens, signUps: api.signUps, verification: api.verification)
        self.account = account
        factors = FactorPages(kit: kit, accountPages: account, factors: api.factors)
        passkeys = PasskeyPages(kit: kit, accountPages: account, passkeys: api.passkeys, box: services.box)
        share = SharePages(
            kit: kit, shares: api.shares, invitations: api.invitations, appURL: services.configuration.appURL,
            appStoreURL: services.configuration.appStoreURL)
        providers = ProviderRedirectRoutes(flow: api.oauthFlow, access: api.access, publicURL: env.publicURL, kit: kit)
        oauthProvider = OAuthProviderRoutes(api)
        sso = SSORoutes(sso: api.sso, access: api.access, secureCookie: api.secureCookies)
        console = ConsoleRoutes(api, services, pages: kit)
        oauth = OAuthPages(
            kit: kit, oauth: api.oauth, companies: api.companies, credentials: api.credentials,
            accountSessions: api.accountSessions, factors: api.factors, box: services.box)
    }

    func register(on router: Router<AppRequestContext>) {
        LinkPageRoutes(pages: link).register(on: router)
        SignInPageRoutes(pages: signIn).register(on: router)
        AccountPageRoutes(pages: account).register(on: router)
        FactorPageRoutes(pages: factors).register(on: router)
        PasskeyPageRoutes(pages: passkeys).register(on: router)
        SharePageRoutes(pages: share).register(on: router)
        providers.register(on: router)
        oauthProvider.register(on: router)
        sso.register(on: router)
        console.register(on: router)
        OAuthPageRoutes(pages: oauth).register(on: router)
    }
}

/// A mailed link's page, and its one button.
struct LinkPageRoutes {
    let pages: LinkPages

    /// The Continue button's form.
    struct Continue: Decodable {
        let token: String
        let type: String
        let redirectTo: String?

        enum CodingKeys: String, CodingKey {
            case token, type
            case redirectTo = "redirect_to"
        }
    }

    /// The link types a mail carries.
    static let types: Set<String> = ["signup", "magiclink", "recovery", "email_change", "email"]

    func register(on router: Router<AppRequestContext>) {
        router.get("/auth/v1/verify") { request, _ in
            let query = request.uri.queryParameters
            guard let token = query["token"].map(String.init), let type = query["type"].map(String.init),
                Self.types.contains(type)
            else { throw PageInput.invalidParameter }
            return try await PageInput.answer {
                try await pages.linkLanding(token: token, type: type, redirectTo: query["redirect_to"].map(String.init))
            }
        }
        router.post("/auth/v1/verify/continue") { request, context in
            let form = try await PageInput.form(Continue.self, request, context)
            return try await PageInput.answer {
                try await pages.continueLink(token: form.token, type: form.type, redirectTo: form.redirectTo)
            }
        }
    }
}

/// Web sign-in: by password, by a mailed code, and a new link by mail.
struct SignInPageRoutes {
    let pages: SignInPages

    struct PasswordSignIn: Decodable {
        let email: String
        let password: String
    }

    struct Email: Decodable {
        let email: String
    }

    struct CodeSignIn: Decodable {
        let email: String
        let code: String
    }

    struct NewLink: Decodable {
        let email: String
        let purpose: String?
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/account/sign-in") { request, _ in
            // `?next=/console…` brings the browser back to the console once signed in (`ConsoleKit.returnCookie`).
            let next = request.uri.queryParameters["next"].map { ConsoleKit.returnPath(String($0)) }
            let ended = request.uri.queryParameters["notice"] == "console_ended"
            return try await PageInput.answer {
                var answer = try await pages.signInPage(consoleEnded: ended)
                if let next { answer.setCookies([ConsoleKit.returnCookie(next, secure: pages.kit.session.secure)]) }
                return answer
            }
        }
        router.post("/account/sign-in") { request, context in
            let form = try await PageInput.form(PasswordSignIn.self, request, context)
            return try await PageInput.answer { try await pages.signIn(email: form.email, password: form.password) }
        }
        router.post("/account/code") { request, context in
            let form = try await PageInput.form(Email.self, request, context)
            return try await PageInput.answer { try await pages.sendCode(email: form.email) }
        }
        router.post("/account/code/verify") { request, context in
            let form = try await PageInput.form(CodeSignIn.self, request, context)
            return try await PageInput.answer { try await pages.verifyCode(email: form.email, code: form.code) }
        }
        router.post("/account/link") { request, context in
            let form = try await PageInput.form(NewLink.self, request, context)
            return try await PageInput.answer { try await pages.newLink(email: form.email, purpose: form.purpose) }
        }
    }
}

/// The account: its page, signing out, the password, deletion.
struct AccountPageRoutes {
    let pages: AccountPages

    struct NewPassword: Decodable {
        let password: String
        let currentPassword: String?

        enum CodingKeys: String, CodingKey {
            case password
            case currentPassword = "current_password"
        }
    }

    struct Deletion: Decodable {
        let currentPassword: String?
        let confirm: String

        enum CodingKeys: String, CodingKey {
            case confirm
            case currentPassword = "current_password"
        }
    }

    /// What the account page may say after a change, by its `notice` parameter: the words are the string tables'
    /// `account_notice_<name>`.
    static let notices: Set<String> = [
        "password_changed", "signed_out_others", "factor_added", "factor_removed", "passkey_added", "passkey_renamed",
        "passkey_removed", "identity_linked", "identity_unlinked", "identity_taken", "identity_not_linked",
        "invitation_accepted", "invitation_declined",
    ]

    /// The account page's invitation forms.
    struct InvitationForm: Decodable {
        let invitationID: String
        let csrfToken: String?

        enum CodingKeys: String, CodingKey {
            case invitationID = "invitation_id"
            case csrfToken = "csrf_token"
        }
    }

    /// The account page's identity forms.
    struct IdentityForm: Decodable {
        let provider: String?
        let identityID: String?
        let csrfToken: String?

        enum CodingKeys: String, CodingKey {
            case provider
            case identityID = "identity_id"
            case csrfToken = "csrf_token"
        }
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/account") { request, _ in
            let notice = request.uri.queryParameters["notice"].map(String.init)
            guard notice.map({ Self.notices.contains($0) }) ?? true else { throw PageInput.invalidParameter }
            // A mailed invitation's link names its invitation, marked on the page. Opened signed out, the link's
            // token waits in a cookie while the browser signs in, and the page marks it when it comes back.
            let fromLink = request.uri.queryParameters["invitation"].map(String.init)
            let kept = WebSession.read(AccountPages.invitationCookie, from: request.headers)
            let secure = pages.kit.session.secure
            return try await PageInput.answer {
                do {
                    var answer = try await pages.account(
                        notice: notice.map { .done($0) }, reviewPasskeys: notice == "password_changed",
                        linkedInvitation: fromLink ?? kept)
                    if answer.status == .ok, fromLink == nil,
                        let back = WebSession.read(ConsoleKit.returnCookie, from: request.headers)?
                            .removingPercentEncoding
                    {
                        // Signed in for the console (`ConsoleKit.enter` sent the browser here): back to its page.
                        var onward = WebAnswer.redirect(ConsoleKit.returnPath(back))
                        onward.setCookies([ConsoleKit.returnCookieClearing(secure: secure)])
                        return onward
                    }
                    if answer.status == .seeOther, fromLink != nil {
                        // On to the second factor first: the token keeps waiting.
                        answer.setCookies([AccountPages.invitationCookie(fromLink, secure: secure)])
                    } else if kept != nil {
                        answer.setCookies([AccountPages.invitationCookie(nil, secure: secure)])
                    }
                    return answer
                } catch var signIn as WebAnswer where fromLink != nil && signIn.status == .seeOther {
                    signIn.setCookies([AccountPages.invitationCookie(fromLink, secure: secure)])
                    return signIn
                }
            }
        }
        router.post("/account/invitations/accept") { request, context in
            let form = try await PageInput.form(InvitationForm.self, request, context)
            return try await PageInput.answer {
                try await pages.answerInvitation(id: form.invitationID, accept: true, token: form.csrfToken)
            }
        }
        router.post("/account/invitations/decline") { request, context in
            let form = try await PageInput.form(InvitationForm.self, request, context)
            return try await PageInput.answer {
                try await pages.answerInvitation(id: form.invitationID, accept: false, token: form.csrfToken)
            }
        }
        router.post("/account/identities/link") { request, context in
            let form = try await PageInput.form(IdentityForm.self, request, context)
            guard let provider = form.provider else { throw PageInput.invalidParameter }
            return try await PageInput.answer {
                try await pages.linkIdentity(provider: provider, token: form.csrfToken)
            }
        }
        router.post("/account/identities/unlink") { request, context in
            let form = try await PageInput.form(IdentityForm.self, request, context)
            guard let id = form.identityID else { throw PageInput.invalidParameter }
            return try await PageInput.answer { try await pages.unlinkIdentity(id: id, token: form.csrfToken) }
        }
        router.get("/account/password") { _, _ in
            try await PageInput.answer { try await pages.passwordPage() }
        }
        router.post("/account/password") { request, context in
            let form = try await PageInput.form(NewPassword.self, request, context)
            return try await PageInput.answer {
                try await pages.changePassword(password: form.password, currentPassword: form.currentPassword)
            }
        }
        router.post("/account/sign-out") { _, _ in
            try await PageInput.answer { try await pages.signOut() }
        }
        router.post("/account/sign-out-others") { _, _ in
            try await PageInput.answer { try await pages.signOutOthers() }
        }
        router.post("/account/delete") { request, context in
            let form = try await PageInput.form(Deletion.self, request, context)
            // The form's confirm box must be ticked: a post without it deletes nothing.
            guard form.confirm == "yes" else { throw APIError.badJSON("confirm must be yes") }
            return try await PageInput.answer { try await pages.delete(currentPassword: form.currentPassword) }
        }
    }
}

/// Second factors: setting one up, removing one, and the sign-in step that asks for a code.
struct FactorPageRoutes {
    let pages: FactorPages

    struct FactorCode: Decodable {
        let factorID: String
        let code: String

        enum CodingKeys: String, CodingKey {
            case code
            case factorID = "factor_id"
        }
    }

    struct FactorID: Decodable {
        let factorID: String

        enum CodingKeys: String, CodingKey {
            case factorID = "factor_id"
        }
    }

    struct Code: Decodable {
        let code: String
    }

    func register(on router: Router<AppRequestContext>) {
        router.post("/account/factors") { _, _ in
            try await PageInput.answer { try await pages.startFactor() }
        }
        router.post("/account/factors/verify") { request, context in
            let form = try await PageInput.form(FactorCode.self, request, context)
            return try await PageInput.answer { try await pages.confirmFactor(id: form.factorID, code: form.code) }
        }
        router.post("/account/factors/remove") { request, context in
            let form = try await PageInput.form(FactorID.self, request, context)
            return try await PageInput.answer { try await pages.removeFactor(id: form.factorID) }
        }
        router.get("/account/second-factor") { _, _ in
            try await PageInput.answer { try await pages.secondFactorPage() }
        }
        router.post("/account/second-factor") { request, context in
            let form = try await PageInput.form(Code.self, request, context)
            return try await PageInput.answer { try await pages.giveSecondFactor(code: form.code) }
        }
    }
}

/// Passkeys on the pages: the script, the account page's add (script), rename and remove (forms), and the sign-in
/// page's button (script). The script's requests are answered in JSON, refusals too.
struct PasskeyPageRoutes {
    let pages: PasskeyPages

    struct Rename: Decodable {
        let passkeyID: String
        let friendlyName: String
        let csrfToken: String?

        enum CodingKeys: String, CodingKey {
            case passkeyID = "passkey_id"
            case friendlyName = "friendly_name"
            case csrfToken = "csrf_token"
        }
    }

    struct Remove: Decodable {
        let passkeyID: String
        let csrfToken: String?

        enum CodingKeys: String, CodingKey {
            case passkeyID = "passkey_id"
            case csrfToken = "csrf_token"
        }
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/account/passkeys.js") { _, _ in
            try pages.passkeyScript()
        }
        router.post("/account/passkeys/options") { request, context in
            try await PageInput.script(request, context) { _ in try await pages.passkeyCreationOptions() }
        }
        router.post("/account/passkeys/add") { request, context in
            try await PageInput.script(request, context) { body in
                try await pages.addPasskey(try PageInput.decode(Schemas.PasskeyVerifyRequest.self, body))
            }
        }
        router.post("/account/passkeys/rename") { request, context in
            let form = try await PageInput.form(Rename.self, request, context)
            return try await PageInput.answer {
                try await pages.renamePasskey(id: form.passkeyID, name: form.friendlyName, token: form.csrfToken)
            }
        }
        router.post("/account/passkeys/remove") { request, context in
            let form = try await PageInput.form(Remove.self, request, context)
            return try await PageInput.answer {
                try await pages.removePasskey(id: form.passkeyID, token: form.csrfToken)
            }
        }
        router.post("/account/sign-in/passkey/options") { request, context in
            try await PageInput.script(request, context) { _ in try await pages.passkeySignInOptions() }
        }
        router.post("/account/sign-in/passkey") { request, context in
            try await PageInput.script(request, context) { body in
                try await pages.passkeySignIn(try PageInput.decode(Schemas.PasskeyVerifyRequest.self, body))
            }
        }
    }
}

/// The page a share link opens.
struct SharePageRoutes {
    let pages: SharePages

    func register(on router: Router<AppRequestContext>) {
        router.get("/share/{token}") { _, context in
            let token = try context.parameters.require("token")
            return try await PageInput.answer { try await pages.share(token: token) }
        }
    }
}

/// Reading a page's input, and answering a page that ended early.
enum PageInput {
    /// A query parameter missing or outside the values the page knows.
    static let invalidParameter = APIError.validation("A parameter has a value outside the contract")

    /// The page `body` answers, or the one a guard threw to end it early (sign-in needed, a cross-site post refused).
    static func answer(_ body: () async throws -> WebAnswer) async throws -> WebAnswer {
        do {
            return try await body()
        } catch let early as WebAnswer {
            return early
        }
    }

    /// The answer to a request of the passkey script: its body (`application/json`, which a form of another site
    /// cannot send) handed to `body`, and a refusal answered in JSON (`{code, message}`) for the script to put in
    /// words, never as a page.
    static func script(
        _ request: Request, _ context: AppRequestContext, _ body: (String) async throws -> WebAnswer
    ) async throws -> WebAnswer {
        do {
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                throw APIError.unsupportedMediaType
            }
            let bytes = try await request.body.collect(upTo: context.maxUploadSize)
            return try await answer { try await body(String(buffer: bytes)) }
        } catch let error as APIError {
            return .json(error)
        }
    }

    /// A script's JSON body, decoded; what cannot be read is refused with the API's `bad_json`.
    static func decode<Body: Decodable>(_ type: Body.Type, _ json: String) throws -> Body {
        do {
            return try JSONDecoder().decode(Body.self, from: Data(json.utf8))
        } catch let error as DecodingError {
            throw APIError.badJSON(DecodingErrors.describe(error))
        }
    }

    /// The request's form (`application/x-www-form-urlencoded`), decoded; a form that is missing, of another type or
    /// without a required field is refused with the API's status and code, answered as a page.
    static func form<Form: Decodable>(_ type: Form.Type, _ request: Request, _ context: AppRequestContext)
        async throws -> Form
    {
        guard let contentType = request.headers[.contentType] else {
            throw APIError.badJSON("The request body is required")
        }
        guard contentType.lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            throw APIError.unsupportedMediaType
        }
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        do {
            return try URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))
        } catch let error as DecodingError {
            throw APIError.badJSON(DecodingErrors.describe(error))
        }
    }
}
