import Foundation
import GatehouseClient
import GatehouseClientTesting
import Testing

@testable import GatehouseServer

/// What the browser sends from the pages: the web session's cookie, `Sec-Fetch-Site`, and the account page's token.
extension AccountHarness {
    /// A GET of a page with the web session's cookie (`gh_session`, or `cookie` as given).
    func page(_ path: String, session: String? = nil, cookie: String? = nil) async throws -> HTTPReply {
        let sent = cookie ?? session.map { "\(WebSession.accessCookie)=\($0)" }
        return try await http.send(
            .GET, server.baseURL + path, headers: client.headers + (sent.map { [("Cookie", $0)] } ?? []))
    }

    /// A request of the passkey script: JSON from this site's page (or `site`), with the cookie and the token given.
    func script(
        _ path: String, _ body: [String: Any] = [:], session: String? = nil, token: String? = nil,
        site: String = "same-origin", contentType: String = "application/json"
    ) async throws -> HTTPReply {
        var headers = client.headers + [("Content-Type", contentType), ("Sec-Fetch-Site", site)]
        if let session { headers.append(("Cookie", "\(WebSession.accessCookie)=\(session)")) }
        if let token { headers.append(("X-CSRF-Token", token)) }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        return try await http.send(.POST, server.baseURL + path, rawBody: json, headers: headers)
    }

    /// A form of the account page, posted from this site's page (or `site`).
    func form(_ path: String, _ fields: [String: String], session: String, site: String = "same-origin")
        async throws -> HTTPReply
    {
        var components = URLComponents()
        components.queryItems = fields.map { URLQueryItem(name: $0.key, value: $0.value) }
        let body = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        return try await http.send(
            .POST, server.baseURL + path, rawBody: body,
            headers: client.headers + [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", site),
                ("Cookie", "\(WebSession.accessCookie)=\(session)"),
            ])
    }

    /// Adds a passkey from the account page as its script does: options, the authenticator, the add route.
    func addPasskeyOnPage(_ device: SoftwareAuthenticator, session: String, token: String) async throws -> HTTPReply {
        let options = try await script("/account/passkeys/options", session: session, token: token)
        try #require(options.status == 200, "\(options.body)")
        let (challengeID, credential) = try Self.create(options, with: device)
        return try await script(
            "/account/passkeys/add", ["challenge_id": challengeID, "credential": credential], session: session,
            token: token)
    }

    /// Signs in from the sign-in page's button: options, the authenticator's assertion, the sign-in route.
    func passkeySignInOnPage(_ device: SoftwareAuthenticator) async throws -> HTTPReply {
        let options = try await script("/account/sign-in/passkey/options")
        try #require(options.status == 200, "\(options.body)")
        let challengeID = try #require(options.json["challenge_id"] as? String)
        let credential = try Self.assert(options, with: device)
        return try await script("/account/sign-in/passkey", ["challenge_id": challengeID, "credential": credential])
    }
}

@Suite("Passkeys on the web pages")
struct PasskeyPagesTests {
    /// The account page's token (`data-csrf-token`), as its script reads it.
    static func token(_ page: HTTPReply) throws -> String {
        try #require(page.body.firstMatch(of: /data-csrf-token="([^"]+)"/).map { String($0.1) })
    }

    /// The passkey ids of the account page's forms, in order.
    static func passkeyIDs(_ page: HTTPReply) -> [String] {
        page.body.matches(of: /class="remove-passkey"[^>]*>\s*<input type="hidden" name="passkey_id" value="([^"]+)">/)
            .map { String($0.1) }
    }

    static func code(_ reply: HTTPReply) -> String? { reply.json["code"] as? String }

    static func policy(_ reply: HTTPReply) -> String { reply.headers["content-security-policy"] ?? "" }

    @Test("passkeys off: no section, no script, the pages' policy without script-src, and the script is not served")
    func off() async throws {
        try await AccountHarness.with { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            for (path, session) in [("/account", Optional(account.access)), ("/account/sign-in", nil)] {
                let page = try await h.page(path, session: session)
                #expect(page.status == 200, "\(path)")
                #expect(!page.body.contains("<script") && !page.body.contains("passkey"), "\(path)")
                #expect(Self.policy(page).contains("default-src 'none'") && !Self.policy(page).contains("script-src"))
            }
            #expect(try await h.page("/account/passkeys.js").status == 404)
            let options = try await h.script("/account/sign-in/passkey/options")
            #expect(options.status == 404 && Self.code(options) == "passkey_disabled")
            #expect(options.headers["content-type"]?.hasPrefix("application/json") == true)
        }
    }

    @Test("passkeys on: the account page's section and the sign-in button, each page's one script under its nonce")
    func on() async throws {
        try await AccountHarness.withPasskeys { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let page = try await h.page("/account", session: account.access)
            #expect(page.status == 200)
            #expect(page.body.contains("id=\"passkeys\"") && page.body.contains("You have no passkey yet."))
            #expect(page.body.contains("<button type=\"button\" id=\"add-passkey\" hidden>Add a passkey</button>"))
            #expect(
                try Self.token(page)
                    == PasskeyPages.pageTokens(
                        sessionID: try Self.sessionID(account.access), box: h.server.services.box)[0]
            )

            let signIn = try await h.page("/account/sign-in")
            #expect(signIn.body.contains("id=\"passkey-button\"") && signIn.body.contains("Sign in with a passkey"))
            #expect(signIn.body.contains("autocomplete=\"username webauthn\""))

            // One script per page, the static file, allowed by this answer's nonce alone; the rest of the policy stays.
            var nonces: [String] = []
            for reply in [page, signIn] {
                let scripts = reply.body.matches(of: /<script[^>]*>/).map { String($0.0) }
                #expect(scripts.count == 1)
                let nonce = try #require(
                    reply.body.firstMatch(of: /<script src="\/account\/passkeys.js" nonce="([^"]+)" defer><\/script>/)
                        .map { String($0.1) })
                nonces.append(nonce)
                let policy = Self.policy(reply)
                #expect(policy.contains("default-src 'none'") && policy.contains("form-action 'self'"))
                #expect(policy.contains("script-src 'nonce-\(nonce)'; connect-src 'self'"))
                #expect(policy.components(separatedBy: "script-src").count == 2)
            }
            #expect(Set(nonces).count == 2)

            let script = try await h.page("/account/passkeys.js")
            #expect(script.status == 200)
            #expect(script.headers["content-type"] == "text/javascript; charset=utf-8")
            #expect(
                script.body.contains("navigator.credentials.create")
                    && script.body.contains("mediation: \"conditional\""))
            // The code-only pages keep no script.
            #expect(!(try await h.page("/account/password", session: account.access)).body.contains("<script"))
        }
    }

    @Test("the options route needs the session cookie, a request from this site's page, JSON and the page's token")
    func optionsGuards() async throws {
        try await AccountHarness.withPasskeys { h in
            let account = try await h.confirmedAccount(AccountHarness.newEmail())
            let token = try Self.token(try await h.page("/account", session: account.access))
            let other = try await h.confirmedAccount(AccountHarness.newEmail())
            let otherToken = try Self.token(try await h.page("/account", session: other.access))
            #expect(otherToken != token)

            let noCookie = try await h.script("/account/passkeys/options", token: token)
            #expect(noCookie.status == 401 && Self.code(noCookie) == "no_authorization")
            #expect(noCookie.headers["content-type"]?.hasPrefix("application/json") == true)
            let noToken = try await h.script("/account/passkeys/options", session: account.access)
            #expect(noToken.status == 403 && Self.code(noToken) == "cross_site_request")
            let othersToken = try await h.script(
                "/account/passkeys/options", session: account.access, token: otherToken)
            #expect(othersToken.status == 403 && Self.code(othersToken) == "cross_site_request")
            let crossSite = try await h.script(
                "/account/passkeys/options", session: account.access, token: token, site: "cross-site")
            #expect(crossSite.status == 403 && Self.code(crossSite) == "cross_site_request")
            let asForm = try await h.script(
                "/account/passkeys/options", session: account.access, token: token,
                contentType: "application/x-www-form-urlencoded")
            #expect(asForm.status == 415 && Self.code(asForm) == "unsupported_media_type")
            // The sign-in page's routes need no session, but refuse another site too.
            let signInCrossSite = try await h.script("/account/sign-in/passkey/options", site: "cross-site")
            #expect(signInCrossSite.status == 403 && Self.code(signInCrossSite) == "cross_site_request")
            let unreadable = try await h.script("/account/sign-in/passkey", ["challenge_id": 7])
            #expect(unreadable.status == 400 && Self.code(unreadable) == "bad_json")

            let options = try await h.script("/account/passkeys/options", session: account.access, token: token)
            #expect(options.status == 200, "\(options.body)")
            #expect(options.json["challenge_id"] is String)
            let publicKey = try #require(options.json["options"] as? [String: Any])
            #expect((publicKey["rp"] as? [String: Any])?["id"] as? String == "localhost")
        }
    }

    @Test("a passkey added on the account page is listed, signs in from the sign-in page, is renamed and removed")
    func addSignInRenameRemove() async throws {
        try await AccountHarness.withPasskeys { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let token = try Self.token(try await h.page("/account", session: account.access))
            let device = SoftwareAuthenticator(
                origin: AccountHarness.passkeyOrigin, backupEligible: true, backedUp: true)

            let added = try await h.addPasskeyOnPage(device, session: account.access, token: token)
            #expect(added.status == 200, "\(added.body)")
            #expect(added.json["location"] as? String == "/account?notice=passkey_added")
            var page = try await h.page("/account?notice=passkey_added", session: account.access)
            #expect(page.body.contains("Your passkey is added"))
            #expect(
                page.body.contains(
                    "<strong class=\"passkey-name\">Passkey</strong>\n<span class=\"badge\">Synced</span>"))
            #expect(page.body.contains("not used yet"))
            let passkeyID = try #require(Self.passkeyIDs(page).first)
            #expect(page.body.components(separatedBy: "name=\"csrf_token\" value=\"\(token)\"").count == 3)
            // The same authenticator again: its passkey is excluded, as a browser refuses (InvalidStateError).
            await #expect(throws: SoftwareAuthenticatorError.credentialExcluded) {
                _ = try await h.addPasskeyOnPage(device, session: account.access, token: token)
            }

            // Signed out, the sign-in page's button: the session cookies, then the account page.
            h.clock.advance(by: 60)
            let signedIn = try await h.passkeySignInOnPage(device)
            #expect(signedIn.status == 200, "\(signedIn.body)")
            #expect(signedIn.json["location"] as? String == "/account")
            let cookie = try #require(signedIn.headers["set-cookie"])
            #expect(cookie.contains("HttpOnly; SameSite=Strict"))
            let pair = try #require(cookie.split(separator: ";").first.map(String.init))
            page = try await h.page("/account", cookie: pair)
            #expect(page.status == 200 && page.body.contains(email) && page.body.contains("last used "))

            // Renamed with the form; without the page's token, or from another site, nothing changes.
            let fields = ["passkey_id": passkeyID, "friendly_name": "Work laptop", "csrf_token": token]
            let stale = try await h.form(
                "/account/passkeys/rename", fields.filter { $0.key != "csrf_token" }, session: account.access)
            #expect(stale.status == 403 && stale.body.contains("The page is out of date"))
            let crossSite = try await h.form(
                "/account/passkeys/rename", fields, session: account.access, site: "cross-site")
            #expect(crossSite.status == 403 && crossSite.body.contains("data-page=\"refused\""))
            let tooLong = try await h.form(
                "/account/passkeys/rename",
                fields.merging(["friendly_name": String(repeating: "x", count: 121)]) { $1 },
                session: account.access)
            #expect(tooLong.status == 400 && tooLong.body.contains("friendly_name must be 1 to 120 characters"))
            #expect(!(try await h.page("/account", session: account.access)).body.contains("Work laptop"))
            let renamed = try await h.form("/account/passkeys/rename", fields, session: account.access)
            #expect(renamed.status == 303 && renamed.headers["location"] == "/account?notice=passkey_renamed")
            page = try await h.page("/account?notice=passkey_renamed", session: account.access)
            #expect(page.body.contains("<strong class=\"passkey-name\">Work laptop</strong>"))
            #expect(page.body.contains("The passkey is renamed."))

            // Removed with the form: gone from the page, and it no longer signs in.
            let remove = ["passkey_id": passkeyID, "csrf_token": token]
            let refused = try await h.form(
                "/account/passkeys/remove", remove.merging(["csrf_token": "x"]) { $1 }, session: account.access)
            #expect(refused.status == 403 && Self.passkeyIDs(refused) == [passkeyID])
            let removed = try await h.form("/account/passkeys/remove", remove, session: account.access)
            #expect(removed.status == 303 && removed.headers["location"] == "/account?notice=passkey_removed")
            page = try await h.page("/account?notice=passkey_removed", session: account.access)
            #expect(page.body.contains("You have no passkey yet.") && Self.passkeyIDs(page).isEmpty)
            #expect(try await h.passkeyCount() == 0)
            let again = try await h.form("/account/passkeys/remove", remove, session: account.access)
            #expect(again.status == 404 && again.body.contains("That passkey is no longer on your account."))
            let gone = try await h.passkeySignInOnPage(device)
            #expect(gone.status == 400 && Self.code(gone) == "webauthn_credential_not_found")
        }
    }

    @Test("with an authenticator app on, an aal1 session gives a code first and cannot add a passkey; aal2 can")
    func secondFactorFirst() async throws {
        try await AccountHarness.withPasskeys { h in
            let email = AccountHarness.newEmail()
            let account = try await h.confirmedAccount(email)
            let factor = try await h.enrolled(account.access)
            let raised = try await h.stepUp(factor, bearer: account.access)
            let low = try SignedIn(try await h.client.password(email, "correct horse battery"))

            let page = try await h.page("/account", session: low.access)
            #expect(page.status == 303 && page.headers["location"] == "/account/second-factor")
            let token = PasskeyPages.pageTokens(sessionID: try Self.sessionID(low.access), box: h.server.services.box)[
                0]
            let refused = try await h.script("/account/passkeys/options", session: low.access, token: token)
            #expect(refused.status == 403 && Self.code(refused) == "insufficient_aal")

            let high = try await h.page("/account", session: raised.access)
            #expect(high.status == 200 && high.body.contains("id=\"passkeys\""))
            let options = try await h.script(
                "/account/passkeys/options", session: raised.access, token: try Self.token(high))
            #expect(options.status == 200, "\(options.body)")
        }
    }

    static func sessionID(_ access: String) throws -> String {
        try #require(try FactorFlowTests.claims(access)["session_id"] as? String)
    }
}
