import Foundation
import HTTPTypes
import Hummingbird

/// What a generated handler knows of its request beyond its typed input: the head (headers, path) and the peer on
/// the socket. `RequestScopeMiddleware`, last in the router's chain, sets it for the handler's task: the pattern of
/// Hummingbird's OpenAPI template.
struct RequestScope: Sendable {
    let head: HTTPRequest
    let peerAddress: String?

    @TaskLocal static var current: RequestScope?
    /// The request's id (`RequestIDMiddleware`): in its answer's `X-Request-Id`, and in each audit event it records.
    @TaskLocal static var requestID: String?

    /// The request's path without its query, for the audit trail.
    var path: String { String((head.path ?? "").prefix { $0 != "?" }) }
}

/// Gives every request an id: the `X-Request-Id` a trusted proxy (`--trusted-proxies`) or load balancer sent, when it
/// is a plain token of up to 64 characters, else a new one; answered in `X-Request-Id`, recorded with each audit event
/// the request causes, so the audit explorer follows one request. A client that is not a trusted proxy cannot choose
/// the id, so it cannot file its events under an operator's request.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    static var header: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    let trustedProxies: [IPNetwork]

    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let fromProxy = context.peerAddress.map { ClientAddress.isTrusted($0, trustedProxies) } ?? false
        let id = (fromProxy ? Self.accepted(request.headers[Self.header]) : nil) ?? Self.newID()
        var response = try await RequestScope.$requestID.withValue(id) { try await next(request, context) }
        response.headers[Self.header] = id
        return response
    }

    static func accepted(_ given: String?) -> String? {
        guard let given, (1...64).contains(given.utf8.count),
            given.utf8.allSatisfy({
                $0 < 128
                    && (Character(UnicodeScalar($0)).isLetter || Character(UnicodeScalar($0)).isNumber
                        || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "."))
            })
        else { return nil }
        return given
    }

    static func newID() -> String {
        let value = UInt64.random(in: .min ... .max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// Makes the request's head and peer available to the generated handlers (see `RequestScope`).
struct RequestScopeMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    static let link = HTTPField.Name("Link")!

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        var response = try await RequestScope.$current.withValue(
            RequestScope(head: request.head, peerAddress: context.peerAddress)
        ) {
            try await next(request, context)
        }
        // The generated code percent-encodes every header value it sets (OpenAPI's `simple` style); GoTrue's `Link`
        // (admin listings) is read by clients as written, `<url>; rel="next"`.
        if let link = response.headers[Self.link], link.hasPrefix("%3C") {
            response.headers[Self.link] = link.removingPercentEncoding ?? link
        }
        return response
    }
}

/// A caller whose bearer token verified and whose session is live. Only `Access` makes one, so a service that takes
/// a `Caller` cannot be reached without the check.
struct Caller: Sendable {
    let identity: Identity
    let client: ClientInfo

    fileprivate init(identity: Identity, client: ClientInfo) {
        self.identity = identity
        self.client = client
    }

    var accountID: String { identity.accountID }
}

/// A caller inside one company: a session logged in to exactly that company, and the caller's membership, read
/// fresh (a removal or role change counts at once). Only `Access.company` makes one.
struct CompanyCaller: Sendable {
    let identity: Identity
    let membership: Membership
    let client: ClientInfo

    fileprivate init(identity: Identity, membership: Membership, client: ClientInfo) {
        self.identity = identity
        self.membership = membership
        self.client = client
    }

    var companyID: String { membership.companyID }
    var accountID: String { identity.accountID }

    /// The audit event of something this caller did in their company.
    func event(_ action: AuditAction, detail: [String: String] = [:]) -> AuditEvent {
        var event = AuditEvent(
            action, accountID: accountID, companyID: companyID, ip: client.ip, userAgent: client.userAgent,
            detail: detail)
        event.sessionID = event.sessionID ?? identity.sessionID
        return event
    }
}

/// A backend holding a live service key: only `Access.admin` makes one. Its key's id goes into every audit event of
/// what it does. The operator at the command line, who holds the store rather than a key, is `commandLine`.
struct AdminCaller: Sendable {
    /// The service key's id; `operator` for the command line, `console` for an operator in the console.
    let keyID: String
    let client: ClientInfo
    /// The operator's account, in the console.
    let operatorID: String?
    private let isOperator: Bool

    fileprivate init(keyID: String, client: ClientInfo) {
        self.keyID = keyID
        self.client = client
        operatorID = nil
        isOperator = false
    }

    private init(operatorAt client: ClientInfo, account: String? = nil) {
        keyID = account == nil ? "operator" : "console"
        self.client = client
        operatorID = account
        isOperator = true
    }

    /// The operator at the command line (`gatehouse providers …`): the admin API's rules without its key, audited
    /// `by: operator` as every operator command is.
    static let commandLine = AdminCaller(operatorAt: ClientInfo(ip: nil, userAgent: nil))

    /// An operator in the console (`ConsoleKit.enter` makes one, for an operator at aal2): audited `by: console`
    /// with the operator's account id.
    static func console(operatorID: String, client: ClientInfo) -> AdminCaller {
        AdminCaller(operatorAt: client, account: operatorID)
    }

    /// The audit event of an admin action on `accountID`.
    func event(_ action: AuditAction, accountID: String?, detail: [String: String] = [:]) -> AuditEvent {
        let actor: [String: String] =
            if let operatorID { ["by": "console", "operator_id": operatorID] } else if isOperator {
                ["by": "operator"]
            } else { ["service_key": keyID] }
        return client.event(action, accountID: accountID, detail: detail.merging(actor) { $1 })
    }
}

extension ClientInfo {
    /// A client that came through no socket (the command line).
    fileprivate init(ip: String?, userAgent: String?) {
        self.ip = ip
        self.userAgent = userAgent
    }
}

/// Who is asking: verifies the bearer token and its session, and the company context where one is needed. A refusal
/// is audited with the path, and answered with the stable code of its reason.
struct Access: Sendable {
    let sessions: SessionService
    let trail: AuditTrail
    let store: Store
    let serviceKeys: ServiceKeys

    static let contextRequired = APIError(
        .forbidden, code: .companyContextRequired,
        message: "This endpoint needs a session logged in to this company (POST /v1/companies/{cid}/login)")
    static let notMember = APIError(.forbidden, code: .notAMember, message: "You are not a member of this company")
    static let clientSessionRefused = APIError(
        .forbidden, code: .forbidden,
        message: "An app signed in through the OAuth provider cannot do this: the member's own company session can")
    static let accessRevoked = APIError(
        .forbidden, code: .companyAccessRevoked,
        message: "Your access to this company was revoked; drop its local data")

    private var scope: RequestScope {
        get throws {
            guard let scope = RequestScope.current else { throw APIError.internalError }
            return scope
        }
    }

    /// Where the request came from (for public endpoints' limits and audit).
    func client() throws -> ClientInfo {
        let scope = try scope
        return ClientInfo(headers: scope.head.headerFields, peerAddress: scope.peerAddress, settings: sessions.settings)
    }

    /// Any live session, account or company (signing out is the one thing a company session does under /auth/v1).
    func session() async throws -> Caller {
        let client = try client()
        return Caller(identity: try await identify(client), client: client)
    }

    /// The account session: the account's own business is not a company session's to do.
    func account() async throws -> Caller {
        let caller = try await session()
        guard caller.identity.isAccountSession else {
            await refused(caller.identity, client: caller.client, companyID: nil, reason: "account_session_required")
            throw APIError.accountSessionRequired
        }
        return caller
    }

    /// The account session of a permanent account: an anonymous user may not do this until it confirms an email.
    func permanentAccount() async throws -> Caller {
        let caller = try await account()
        guard !caller.identity.claims.isAnonymous else {
            await refused(caller.identity, client: caller.client, companyID: nil, reason: "anonymous_user")
            throw APIError(
                .forbidden, code: .anonymousNotAllowed,
                message: "Anonymous users cannot do this: add an email to the account first")
        }
        return caller
    }

    /// The account session of `token` (the web session cookie's access token), or nil: a page answers a missing or
    /// ended session with the sign-in page, not an error.
    func account(token: String) async -> Caller? {
        guard let client = try? client(), let identity = try? await sessions.identify(bearer: token),
            identity.isAccountSession
        else { return nil }
        return Caller(identity: identity, client: client)
    }

    /// Any live session of `token` (the account's, or a company login opened from it), or nil.
    func anySession(token: String) async -> Caller? {
        guard let client = try? client(), let identity = try? await sessions.identify(bearer: token) else { return nil }
        return Caller(identity: identity, client: client)
    }

    /// A session logged in to company `cid`, with a live membership. `ownSessionOnly` keeps out an OAuth client's
    /// session of the company (the `company` scope): it acts in the company with the member's role, but the member's
    /// own login (credential, passkeys), the company's settings, existence, owner and single sign-on, and leaving it
    /// stay the member's.
    func company(_ cid: String, ownSessionOnly: Bool = false) async throws -> CompanyCaller {
        let client = try client()
        let identity = try await identify(client)
        guard identity.companyID == cid else {
            await refused(identity, client: client, companyID: cid, reason: "company_context_required")
            throw Self.contextRequired
        }
        guard !ownSessionOnly || identity.oauthClientID == nil else {
            await refused(identity, client: client, companyID: cid, reason: "oauth_client_session")
            throw Self.clientSessionRefused
        }
        guard
            let membership = try await CompanyDirectory(db: store.database).membership(
                cid, accountID: identity.accountID)
        else {
            await refused(identity, client: client, companyID: cid, reason: "not_a_member")
            throw Self.notMember
        }
        return CompanyCaller(identity: identity, membership: membership, client: client)
    }

    /// A backend with a live service key, as the bearer token or (GoTrue's clients send both) `apikey`. A browser's
    /// request (it carries `Origin` or `Sec-Fetch-Site`) is refused whatever it holds: the key is never for a page.
    func admin() async throws -> AdminCaller {
        let scope = try scope
        let client = try client()
        let headers = scope.head.headerFields
        if headers[.origin] != nil || headers[Self.fetchSite] != nil {
            await trail.recordRefusal(
                client.event(.authorizationRefused, accountID: nil, detail: ["reason": "browser", "path": scope.path]))
            throw APIError(
                .forbidden, code: .crossSiteRequest, message: "The admin API is for backends: a browser may not call it"
            )
        }
        // The bearer token decides when there is one (a user's token with the service key as apikey is that user);
        // without one, the apikey.
        guard let token = Self.bearer(headers) ?? headers[Self.apiKey] else { throw APIError.noAuthorization }
        if let keyID = await serviceKeys.verify(token) { return AdminCaller(keyID: keyID, client: client) }
        // As GoTrue: a user's own valid token is not_admin; anything that verifies as nothing is bad_jwt.
        let isUserToken = (try? await sessions.keys.verify(token)) != nil
        await trail.recordRefusal(
            client.event(
                .authorizationRefused, accountID: nil,
                detail: ["reason": isUserToken ? "not_admin" : "invalid_token", "path": scope.path]))
        if isUserToken { throw APIError(.forbidden, code: .notAdmin, message: "User not allowed") }
        throw APIError.badJWT
    }

    /// The token of an `Authorization: Bearer …` header, if there is one.
    private static func bearer(_ headers: HTTPFields) -> String? {
        guard let header = headers[.authorization], header.lowercased().hasPrefix("bearer ") else { return nil }
        return String(header.dropFirst("bearer ".count).trimmingHTTPWhitespace)
    }

    static let fetchSite = HTTPField.Name("Sec-Fetch-Site")!
    static let apiKey = HTTPField.Name("apikey")!

    /// The identity behind the bearer token, or the matching 401/403. A token that is forged, tampered, foreign or
    /// whose session has ended is audited (with no subject: nothing in it can be trusted).
    private func identify(_ client: ClientInfo) async throws -> Identity {
        let scope = try scope
        guard let token = Self.bearer(scope.head.headerFields) else { throw APIError.noAuthorization }
        let reason: String
        let error: APIError
        do {
            return try await sessions.identify(bearer: token)
        } catch .malformed {
            (reason, error) = ("invalid_token", .badJWT)
        } catch .sessionEnded {
            (reason, error) = ("session_ended", .sessionNotFound)
        } catch .accessRevoked {
            (reason, error) = ("company_access_revoked", Self.accessRevoked)
        }
        await trail.recordRefusal(
            client.event(.tokenRejected, accountID: nil, detail: ["reason": reason, "path": scope.path]))
        throw error
    }

    /// Audits a refused authorization in the caller's own trail: who asked, for which company, and why. Never in the
    /// company's: whoever knows a company's id could otherwise fill its trail with their own lines.
    private func refused(_ identity: Identity, client: ClientInfo, companyID: String?, reason: String) async {
        var detail = ["reason": reason, "path": RequestScope.current?.path ?? ""]
        detail["company"] = companyID
        await trail.recordRefusal(
            AuditEvent(
                .authorizationRefused, accountID: identity.accountID, ip: client.ip, userAgent: client.userAgent,
                detail: detail))
    }
}
