import Crypto
import Foundation
import GatehouseAPI
import HTTPTypes

/// Passkeys on the pages (`PasskeyPageRoutes`): the account page lists the account's passkeys
/// (`AccountPages.passkeyFields`), adds one through the pages' one script (`pages/passkeys.js`) and renames or removes
/// one with plain forms; the sign-in page's button, and the browser's autofill, sign in with one. The script's
/// requests are refused from anywhere but this site's own pages, as every form is (`formClient`); on the account page
/// they also carry the page's token, a keyed digest of the session that no other session's page can make, and so do
/// the forms.
struct PasskeyPages: Sendable {
    let kit: PageKit
    /// The account page, shown again with a word when a form's change is refused.
    let accountPages: AccountPages
    let passkeys: PasskeyService
    /// Keys the account page's token (`pageTokens`).
    let box: SecretBox

    /// The header that carries the account page's token on the script's requests.
    static let tokenHeader = HTTPField.Name("X-CSRF-Token")!

    static let signedOut = APIError(
        .unauthorized, code: .noAuthorization, message: "Your session has ended: sign in again")
    static let staleToken = APIError(
        .forbidden, code: .crossSiteRequest, message: "The page is out of date: reload it and try again")

    /// The script, only while passkeys are on.
    func passkeyScript() throws -> WebAnswer {
        try passkeys.requireEnabled()
        return WebAnswer(status: .ok, html: kit.templates.passkeyScript, contentType: "text/javascript; charset=utf-8")
    }

    // MARK: Adding one (the script)

    /// Creation options for a new passkey of the signed-in account.
    func passkeyCreationOptions() async throws -> WebAnswer {
        let (caller, cookies) = try await scriptCaller()
        do {
            return try .json(try await passkeys.registrationOptions(by: caller), cookies: cookies)
        } catch let error as APIError where error.code == ErrorCode.reauthenticationNeeded.rawValue {
            throw APIError(
                error.status, code: .reauthenticationNeeded,
                message: kit.pageMessage(error, kit.language(of: caller)))
        }
    }

    /// Verifies and stores the new passkey; the script then opens the account page with the notice.
    func addPasskey(_ body: Schemas.PasskeyVerifyRequest) async throws -> WebAnswer {
        let (caller, cookies) = try await scriptCaller()
        _ = try await passkeys.registrationVerify(body, by: caller)
        return try .json(["location": "/account?notice=passkey_added"], cookies: cookies)
    }

    // MARK: Renaming and removing (forms)

    func renamePasskey(id: String, name: String, token: String?) async throws -> WebAnswer {
        try passkeys.requireEnabled()
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            try checkPageToken(token, caller: caller)
            _ = try await passkeys.rename(id, .init(friendlyName: name), by: caller)
        } catch let error as APIError {
            return try await accountPages.account(passkeyError: error, status: error.status)
        }
        return .redirect("/account?notice=passkey_renamed", cookies: cookies)
    }

    func removePasskey(id: String, token: String?) async throws -> WebAnswer {
        try passkeys.requireEnabled()
        _ = try await kit.formClient()
        let (caller, cookies) = try await kit.signedIn()
        do {
            try checkPageToken(token, caller: caller)
            try await passkeys.delete(id, by: caller)
        } catch let error as APIError {
            return try await accountPages.account(passkeyError: error, status: error.status)
        }
        return .redirect("/account?notice=passkey_removed", cookies: cookies)
    }

    /// What the account page says when a form's change is refused, in `language`.
    static func passkeyRefusal(_ error: APIError, kit: PageKit, _ language: String) -> String {
        if error.code == ErrorCode.insufficientAal.rawValue { return kit.text("account_passkey_needs_code", language) }
        if error.message == PasskeyService.notFound.message { return kit.text("account_passkey_gone", language) }
        return kit.errorText(error, language)
    }

    // MARK: Signing in (the script)

    /// Request options for a passkey sign-in: no session, the passkey names its account.
    func passkeySignInOptions() async throws -> WebAnswer {
        let client = try await scriptClient()
        return try .json(try await passkeys.authenticationOptions(client: client))
    }

    /// Signs this browser in with the assertion: the session cookies a password sign-in sets, and the account page
    /// for the script to open (which asks for a code first when the account has an authenticator app).
    func passkeySignIn(_ body: Schemas.PasskeyVerifyRequest) async throws -> WebAnswer {
        let client = try await scriptClient()
        let signedIn = try await passkeys.authenticationVerify(body, client: client)
        return try .json(["location": "/account"], cookies: kit.session.cookies(for: signedIn))
    }

    // MARK: Who may ask

    /// The client of a script's request from this site's own page; a request from another site is refused as its
    /// form post would be, in the script's JSON.
    private func scriptClient() async throws -> ClientInfo {
        try passkeys.requireEnabled()
        do {
            return try await kit.formClient()
        } catch is WebAnswer {
            throw APIError(
                .forbidden, code: .crossSiteRequest, message: "This can only be asked from this site's pages")
        }
    }

    /// The signed-in caller of the account page's script: the session cookie, and the page's token in the header.
    private func scriptCaller() async throws -> (caller: Caller, cookies: [String]) {
        _ = try await scriptClient()
        guard let (caller, cookies) = try await kit.caller() else { throw Self.signedOut }
        try checkPageToken(kit.requestHeaders[Self.tokenHeader], caller: caller)
        guard !caller.identity.claims.isAnonymous else {
            throw APIError(
                .forbidden, code: .anonymousNotAllowed,
                message: "Anonymous users cannot do this: add an email to the account first")
        }
        return (caller, cookies)
    }

    /// Refuses a page token that is not one of the caller's session (`AccountPages.pageToken` gives it).
    func checkPageToken(_ given: String?, caller: Caller) throws {
        try Self.checkPageToken(given, caller: caller, box: box)
    }

    /// The same check, for the account page's other forms.
    static func checkPageToken(_ given: String?, caller: Caller, box: SecretBox) throws {
        guard let given,
            Self.pageTokens(sessionID: caller.identity.sessionID, box: box).contains(where: {
                Secrets.constantTimeEquals($0, given)
            })
        else { throw Self.staleToken }
    }

    /// A session's page tokens, newest first: HMAC-SHA256 of the session id under a key derived from each
    /// key-encryption key, so a page made before a key rotation still works. A token holds while the session lives
    /// (its refreshes too), and a page of another session or site cannot make it.
    static func pageTokens(sessionID: String, box: SecretBox) -> [String] {
        box.digestKeys(purpose: "web_page_token").map { key in
            Secrets.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(sessionID.utf8), using: key)))
        }
    }
}
