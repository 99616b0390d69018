import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird

/// The OAuth provider's pages: Gatehouse's own consent page (`/account/authorize`, where `/oauth/authorize` sends the
/// browser unless the app has its own, `--oauth-authorization-path`) and the page where a person types a device's
/// code (`/account/device`, RFC 8628). Signed out, the browser signs in first and comes back (the return cookie);
/// a client that asks for aal2 (`acr_values`) sends it through the second-factor page first.
struct OAuthPages: Sendable {
    let kit: PageKit
    let oauth: OAuthAuthorizations
    let companies: CompanyService
    let credentials: CredentialService
    let accountSessions: AccountSessions
    let factors: FactorService
    let box: SecretBox

    /// The consent page's form.
    struct Decision: Decodable {
        let authorizationID: String
        let action: String
        let token: String?
        let companyID: String?
        let username: String?
        let password: String?

        enum CodingKeys: String, CodingKey {
            case action, token, username, password
            case authorizationID = "authorization_id"
            case companyID = "company_id"
        }
    }

    /// `GET /account/authorize?authorization_id=`.
    func consent(_ id: String) async throws -> WebAnswer {
        let path = "/account/authorize?authorization_id=" + id
        guard let (caller, cookies) = try await kit.caller() else {
            if let refusal = try await oauth.loginRequired(id) { return .redirect(refusal) }
            return signIn(returningTo: path)
        }
        let language = kit.language(of: caller)
        do {
            switch try await oauth.open(id, by: caller) {
            case .redirect(let url): return .redirect(url, cookies: cookies)
            case .details(let details):
                return try await consentPage(details, caller: caller, cookies: cookies, language: language)
            }
        } catch let need as OAuthAuthorizationNeed {
            return try await answer(need, path: path, caller: caller, cookies: cookies, language: language)
        } catch let error as APIError where error.code == ErrorCode.oauthAuthorizationNotFound.rawValue {
            return missing(language: language, cookies: cookies)
        }
    }

    /// A request that is unknown, expired, already decided or another user's.
    private func missing(language: String, cookies: [String]) -> WebAnswer {
        kit.message(
            page: "oauth-missing", titleKey: "oauth_missing_title", keys: ["oauth_missing"], language: language,
            status: .notFound, accountLink: true, cookies: cookies)
    }

    /// Signed out: the sign-in page, coming back to `path` once signed in.
    private func signIn(returningTo path: String) -> WebAnswer {
        .redirect("/account/sign-in", cookies: [ConsoleKit.returnCookie(path, secure: kit.session.secure)])
    }

    /// A session too old (`prompt=login`, `max_age`) signs in again; one without a second factor gives its code, or,
    /// with none set up, hears how to add one.
    private func answer(
        _ need: OAuthAuthorizationNeed, path: String, caller: Caller, cookies: [String], language: String
    ) async throws -> WebAnswer {
        let back = ConsoleKit.returnCookie(path, secure: kit.session.secure)
        switch need {
        case .signIn:
            try await accountSessions.logout(.local, by: caller)
            return .redirect("/account/sign-in", cookies: kit.session.clearing + [back])
        case .secondFactor:
            let verified = try await factors.factors(accountID: caller.accountID).contains {
                $0.factorType == .totp && $0.status == .verified
            }
            guard verified else {
                return kit.message(
                    page: "oauth-second-factor", titleKey: "oauth_second_factor_title",
                    keys: ["oauth_second_factor_none"], language: language, status: .forbidden, accountLink: true,
                    cookies: cookies)
            }
            return .redirect("/account/second-factor", cookies: cookies + [back])
        }
    }

    private func consentPage(
        _ details: OAuthAuthorizationDetails, caller: Caller, cookies: [String], language: String,
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> WebAnswer {
        let row = details.authorization
        let scopes = OAuthScopes.list(row.scope)
        var fields: [String: Any] = [
            "authorization_id": row.id, "client_name": details.client.name, "email": details.email,
            "token": PasskeyPages.pageTokens(sessionID: caller.identity.sessionID, box: box)[0],
            "scopes": scopes.map { kit.text("oauth_scope_\($0)", language) },
            "device": row.kind == .device,
        ]
        if let uri = details.client.clientURI { fields["client_uri"] = uri }
        if let error { fields["error"] = error }
        if scopes.contains(OAuthScopes.company) {
            let list = try await companies.list(caller).companies
            fields["company_scope"] = true
            fields["companies"] = list.map { ["id": $0.id, "name": $0.name] }
        }
        // The decision's answer is a redirect to the client: the page's policy lets its form go there (its origin, or
        // an app's own scheme: `SecurityHeaders.pagePolicy`).
        return kit.page(
            "oauth-consent", title: kit.text("oauth_consent_title", language, ["client": details.client.name]), fields,
            status: status, cookies: cookies, formTargets: row.redirectURI.map { [$0] } ?? [], language: language)
    }

    /// `POST /account/authorize`: approve or deny. Under the company scope the chosen company's login is passed first
    /// (its username and password where it requires a credential), and the approval is given from that company
    /// session, which then ends: the client gets a session of its own.
    func decide(_ form: Decision) async throws -> WebAnswer {
        _ = try await kit.formClient()
        let path = "/account/authorize?authorization_id=" + form.authorizationID
        guard let (caller, cookies) = try await kit.caller() else { return signIn(returningTo: path) }
        try PasskeyPages.checkPageToken(form.token, caller: caller, box: box)
        let language = kit.language(of: caller)
        let approve = form.action == "approve"
        do {
            var approver = caller
            var companySession: Caller?
            if approve, let companyID = form.companyID, !companyID.isEmpty {
                let login = try await credentials.login(
                    companyID, .init(username: form.username, password: form.password), by: caller)
                guard let company = await kit.access.anySession(token: login.accessToken) else {
                    throw APIError.sessionNotFound
                }
                approver = company
                companySession = company
            }
            defer {
                if let companySession { Task { try? await accountSessions.logout(.local, by: companySession) } }
            }
            let url = try await oauth.decide(form.authorizationID, approve: approve, by: approver)
            if url.isEmpty {
                return kit.message(
                    page: "oauth-device-done", titleKey: approve ? "oauth_device_done_title" : "oauth_denied_title",
                    keys: [approve ? "oauth_device_done" : "oauth_device_denied"], language: language,
                    accountLink: true, cookies: cookies)
            }
            var answer = WebAnswer.redirect(url, cookies: cookies)
            answer.status = .seeOther
            return answer
        } catch let need as OAuthAuthorizationNeed {
            return try await answer(need, path: path, caller: caller, cookies: cookies, language: language)
        } catch let error as APIError
            where error.code != ErrorCode.oauthAuthorizationNotFound.rawValue
            && error.code != ErrorCode.oauthServerDisabled.rawValue
        {
            // A wrong company login (or none chosen): the page again, saying why.
            guard case .details(let details) = try await oauth.open(form.authorizationID, by: caller) else {
                throw error
            }
            return try await consentPage(
                details, caller: caller, cookies: cookies, language: language, error: kit.errorText(error, language),
                status: error.status)
        } catch let error as APIError where error.code == ErrorCode.oauthAuthorizationNotFound.rawValue {
            return missing(language: language, cookies: cookies)
        }
    }

    // MARK: Devices

    /// `GET /account/device[?user_code=]`: the form for a device's code, filled in from the device's link.
    func devicePage(userCode: String?, error: Bool = false) async throws -> WebAnswer {
        var path = "/account/device"
        if let userCode, let code = DeviceUserCode.normalize(userCode) {
            path += "?user_code=" + DeviceUserCode.display(code)
        }
        guard let (caller, cookies) = try await kit.caller() else { return signIn(returningTo: path) }
        try oauth.checkEnabled()
        let language = kit.language(of: caller)
        var fields: [String: Any] = [
            "token": PasskeyPages.pageTokens(sessionID: caller.identity.sessionID, box: box)[0],
            // A code that was refused is shown as typed, so one wrong letter is mended rather than all retyped.
            "user_code": userCode.flatMap(DeviceUserCode.normalize).map(DeviceUserCode.display)
                ?? String((userCode ?? "").prefix(12)),
        ]
        if error { fields["error"] = kit.text("oauth_device_unknown", language) }
        return kit.page(
            "oauth-device", title: kit.text("oauth_device_title", language), fields,
            status: error ? .badRequest : .ok, cookies: cookies, language: language)
    }

    /// The device page's form.
    struct DeviceCode: Decodable {
        let userCode: String
        let token: String?

        enum CodingKeys: String, CodingKey {
            case token
            case userCode = "user_code"
        }
    }

    /// `POST /account/device`: the typed code's request, shown for consent (wrong codes count against the address).
    func enterDeviceCode(_ form: DeviceCode) async throws -> WebAnswer {
        let client = try await kit.formClient()
        guard let (caller, _) = try await kit.caller() else { return signIn(returningTo: "/account/device") }
        try PasskeyPages.checkPageToken(form.token, caller: caller, box: box)
        try await oauth.limitDeviceCodes(client)
        guard let id = try await oauth.deviceRequest(userCode: form.userCode) else {
            return try await devicePage(userCode: form.userCode, error: true)
        }
        return .redirect("/account/authorize?authorization_id=" + id)
    }
}

/// The provider's browser routes: `/auth/v1/oauth/authorize` (a 302, or a JSON refusal for an unknown client or a
/// redirect URI it did not register), the consent page and the device page.
struct OAuthPageRoutes {
    let pages: OAuthPages

    func register(on router: Router<AppRequestContext>) {
        router.get("/auth/v1/oauth/authorize") { request, _ in
            var query: [String: String] = [:]
            for (key, value) in request.uri.queryParameters where query[String(key)] == nil {
                query[String(key)] = String(value)
            }
            let location = try await pages.oauth.authorize(query, from: try pages.kit.access.client())
            return WebAnswer(status: .found, html: nil, headers: [.location: location, .cacheControl: "no-store"])
        }
        router.get("/account/authorize") { request, _ in
            guard let id = request.uri.queryParameters["authorization_id"].map(String.init), !id.isEmpty else {
                throw PageInput.invalidParameter
            }
            return try await PageInput.answer { try await pages.consent(id) }
        }
        router.post("/account/authorize") { request, context in
            let form = try await PageInput.form(OAuthPages.Decision.self, request, context)
            return try await PageInput.answer { try await pages.decide(form) }
        }
        router.get("/account/device") { request, _ in
            let code = request.uri.queryParameters["user_code"].map(String.init)
            return try await PageInput.answer { try await pages.devicePage(userCode: code) }
        }
        router.post("/account/device") { request, context in
            let form = try await PageInput.form(OAuthPages.DeviceCode.self, request, context)
            return try await PageInput.answer { try await pages.enterDeviceCode(form) }
        }
    }
}
