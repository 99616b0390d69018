import Foundation
import GatehouseAPI
import Hummingbird
import SQLKit

/// The per-company credential (the seeds' UserPass) and company login.
struct CredentialsController {
    let env: AccountsEnvironment

    func addRoutes(to router: Router<AppRequestContext>) {
        let account = router.group("/v1/companies/{cid}").add(
            middleware: AuthMiddleware(sessions: env.sessions, accountOnly: true)
        )
        .group(context: AuthenticatedContext.self)
        account.put("credential", use: create)
        account.post("login", use: login)

        let company = router.group("/v1/companies/{cid}")
            .add(middleware: CompanyAccessMiddleware(sessions: env.sessions, store: env.store))
            .group(context: CompanyContext.self)
        company.get("credential", use: show)
        company.delete("credential", use: delete)
        company.post("credential/password", use: changePassword)
        company.get("members/{accountId}/image", use: image)
    }

    static let invalidCredentials = APIError(
        .badRequest, code: .invalidCredentials, message: "Invalid username or password")
    static let maximumImageBytes = 1 << 20

    private func client(_ request: Request, _ peer: String?) -> ClientInfo {
        env.client(request, peer)
    }

    /// The backoff key of one account's credential in one company, shared by login and password changes.
    static func throttleKey(_ companyID: String, _ accountID: String) -> String { "company:\(companyID):\(accountID)" }

    private func event(
        _ action: AuditAction, _ client: ClientInfo, accountID: String, companyID: String,
        detail: [String: String] = [:]
    ) -> AuditEvent {
        AuditEvent(
            action, accountID: accountID, companyID: companyID, ip: client.ip, userAgent: client.userAgent,
            detail: detail)
    }

    /// The company and the caller's membership, or 404 for a company the caller does not belong to.
    private func membership(_ companyID: String, _ accountID: String) async throws -> (CompanyRecord, Membership) {
        let companies = CompanyRepository(db: env.store.database)
        guard let membership = try await companies.membership(companyID, accountID: accountID),
            let company = try await companies.company(companyID)
        else { throw CompaniesController.companyNotFound }
        return (company, membership)
    }

    /// The account rules, with the company's minimum length when it asks for more.
    private func checkPassword(_ password: String, policy: CompanyPolicy, forbidden: [String]) throws {
        var rules = env.settings.passwordPolicy
        rules.minimumLength = max(rules.minimumLength, policy.passwordMinLength)
        try env.checkPassword(password, forbidden: forbidden, policy: rules)
    }

    // MARK: Creating and reading one's credential

    /// Creates the caller's credential for a company they belong to. Usernames are unique in the company and
    /// immutable; the owner's credential is the super user.
    @Sendable func create(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let cid = try context.parameters.require("cid")
        let accountID = context.identity.accountID
        let (company, membership) = try await membership(cid, accountID)
        let body = try await request.decodeJSON(as: CreateCredentialRequest.self, context: context)
        let username = body.username
        guard (1...64).contains(username.count),
            !username.contains(where: { $0.isNewline || $0.asciiValue.map { $0 < 32 } == true })
        else { throw APIError.validation("username must be 1 to 64 characters without control characters") }
        let email = try body.email.map { try env.validEmail($0) }
        try checkPassword(
            body.password, policy: company.policy,
            forbidden: [username, email, email.map(EmailAddress.localPart), context.identity.email].compactMap { $0 })
        var image: Data?
        var imageType: String?
        if let encoded = body.image {
            guard let data = Data(base64Encoded: encoded), data.count <= Self.maximumImageBytes,
                let type = CredentialRepository.imageType(data)
            else { throw APIError.validation("image must be a base64 PNG or JPEG of at most 1 MiB") }
            image = data
            imageType = type
        }
        let hash = try await env.hasher.hash(body.password)
        let now = env.clock.now
        let credential = CompanyCredential(
            companyID: cid, accountID: accountID, username: username, passwordHash: hash, email: email,
            superUser: membership.isOwner, hasImage: image != nil, createdAt: now)
        try await save(
            credential, image: image, imageType: imageType, client: client(request, context.peerAddress), now: now)
        return try AuthController.json(Self.info(credential), status: .created)
    }

    /// Stores a new credential, refusing a second one for the account or a username taken in the company.
    private func save(
        _ credential: CompanyCredential, image: Data?, imageType: String?, client: ClientInfo, now: Date
    ) async throws {
        let clock = env.clock
        let audit = event(.credentialCreated, client, accountID: credential.accountID, companyID: credential.companyID)
        try await env.store.transaction { db in
            let credentials = CredentialRepository(db: db)
            if try await credentials.find(credential.companyID, accountID: credential.accountID) != nil {
                throw APIError(
                    .conflict, code: .credentialExists, message: "You already have a credential for this company")
            }
            if try await credentials.usernameTaken(credential.companyID, username: credential.username) {
                throw APIError(.conflict, code: .usernameTaken, message: "That username is taken in this company")
            }
            try await credentials.insert(credential, image: image, imageType: imageType, now: now)
            try await AuditLog(db: db, clock: clock).record(audit)
        }
    }

    static func info(_ credential: CompanyCredential) -> CredentialInfo {
        CredentialInfo(
            username: credential.username, email: credential.email, superUser: credential.superUser,
            hasImage: credential.hasImage, createdAt: credential.createdAt.iso8601)
    }

    /// The caller's own credential; nobody else's is ever readable.
    @Sendable func show(_ request: Request, context: CompanyContext) async throws -> Response {
        guard
            let credential = try await CredentialRepository(db: env.store.database).find(
                context.companyID, accountID: context.identity.accountID)
        else { throw APIError.notFound("You have no credential for this company") }
        return try AuthController.json(Self.info(credential))
    }

    /// Removes the caller's credential and ends their sessions in this company.
    @Sendable func delete(_ request: Request, context: CompanyContext) async throws -> Response {
        let cid = context.companyID
        let accountID = context.identity.accountID
        let client = client(request, context.peerAddress)
        let env = self.env
        try await env.store.transaction { db in
            guard try await CredentialRepository(db: db).find(cid, accountID: accountID) != nil else {
                throw APIError.notFound("You have no credential for this company")
            }
            try await CredentialRepository(db: db).delete(cid, accountID: accountID)
            try await CompanyRepository(db: db).endSessions(cid, accountID: accountID, except: nil, now: env.clock.now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.credentialDeleted, client, accountID: accountID, companyID: cid))
        }
        return Response(status: .noContent)
    }

    /// Changes the credential's password and ends the caller's other sessions in this company.
    @Sendable func changePassword(_ request: Request, context: CompanyContext) async throws -> Response {
        let body = try await request.decodeJSON(as: ChangeCredentialPasswordRequest.self, context: context)
        let cid = context.companyID
        let accountID = context.identity.accountID
        let client = client(request, context.peerAddress)
        let credentials = CredentialRepository(db: env.store.database)
        guard let credential = try await credentials.find(cid, accountID: accountID),
            let company = try await CompanyRepository(db: env.store.database).company(cid)
        else { throw APIError.notFound("You have no credential for this company") }
        // The current password is a guess like any login: counted first, backing off the same way.
        let throttleKey = Self.throttleKey(cid, accountID)
        try await env.limit("company-login", env.settings.limits.signInsPerIP, client: client)
        try await env.admit(throttleKey, rule: env.passwordRule, client: client, accountID: accountID)
        guard case .valid = await env.hasher.verify(body.currentPassword, against: credential.passwordHash) else {
            await env.sessions.audit(
                event(.credentialPasswordChangeFailed, client, accountID: accountID, companyID: cid))
            throw Self.invalidCredentials
        }
        try await env.clearThrottle(throttleKey)
        try checkPassword(
            body.newPassword, policy: company.policy,
            forbidden: [credential.username, credential.email, context.identity.email].compactMap { $0 })
        let hash = try await env.hasher.hash(body.newPassword)
        let env = self.env
        let current = context.identity.sessionID
        try await env.store.transaction { db in
            try await CredentialRepository(db: db).setPassword(
                cid, accountID: accountID, hash: hash, now: env.clock.now)
            try await CompanyRepository(db: db).endSessions(
                cid, accountID: accountID, except: current, now: env.clock.now)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.credentialPasswordChanged, client, accountID: accountID, companyID: cid))
        }
        return Response(status: .noContent)
    }

    /// The picture a member chose for this company, for other members.
    @Sendable func image(_ request: Request, context: CompanyContext) async throws -> Response {
        let target = try context.parameters.require("accountId")
        guard
            let (data, type) = try await CredentialRepository(db: env.store.database).image(
                context.companyID, accountID: target)
        else { throw APIError.notFound("No picture") }
        return Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "private, max-age=300"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    // MARK: Company login

    /// Logs in to a company: with the credential's username and password (or with the account session alone when the
    /// company does not require a credential), answering a new session scoped to the company. It is opened from the
    /// account session, as its child: it ends with it, never outlives it, and its timeouts are capped by the server's.
    /// A company session cannot open another one.
    @Sendable func login(_ request: Request, context: AuthenticatedContext) async throws -> AuthSession {
        let cid = try context.parameters.require("cid")
        let accountID = context.identity.accountID
        let client = client(request, context.peerAddress)
        guard context.identity.isAccountSession else {
            await env.sessions.audit(
                event(
                    .authorizationRefused, client, accountID: accountID, companyID: cid,
                    detail: ["reason": "account_session_required", "path": request.uri.path]))
            throw APIError.accountSessionRequired
        }
        try await env.limit("company-login", env.settings.limits.signInsPerIP, client: client)
        let (company, membership) = try await membership(cid, accountID)
        let body = try await request.decodeJSON(as: CompanyLoginRequest.self, context: context)
        let throttleKey = Self.throttleKey(cid, accountID)
        var username: String?
        if company.policy.requiresCredential {
            guard let given = body.username, let password = body.password else {
                throw APIError.validation("This company requires a username and password")
            }
            // Counted before the password is checked: parallel guesses cannot slip past the backoff.
            try await env.admit(throttleKey, rule: env.passwordRule, client: client, accountID: accountID)
            let credential = try await CredentialRepository(db: env.store.database).find(cid, accountID: accountID)
            let verification: PasswordVerification
            if let credential, credential.username == given {
                verification = await env.hasher.verify(password, against: credential.passwordHash)
            } else {
                await env.hasher.dummyVerify(password)
                verification = .invalid
            }
            guard case .valid(let needsRehash) = verification, let credential else {
                let reason =
                    credential == nil
                    ? "no_credential" : credential?.username == given ? "wrong_password" : "wrong_username"
                await env.sessions.audit(
                    event(.companyLoginFailed, client, accountID: accountID, companyID: cid, detail: ["reason": reason])
                )
                throw Self.invalidCredentials
            }
            if needsRehash, let rehashed = try? await env.hasher.hash(password) {
                let now = env.clock.now
                try await env.store.transaction { db in
                    try await CredentialRepository(db: db).setPassword(
                        cid, accountID: accountID, hash: rehashed, now: now)
                }
            }
            username = credential.username
        }
        let env = self.env
        let scope = CompanyScope(
            companyID: cid, username: username, idleTimeout: company.policy.sessionIdleTimeout,
            lifetime: company.policy.sessionLifetime)
        let parent = context.identity.sessionID
        let issued = try await env.store.transaction { db in
            try await ThrottleRepository(db: db).clear(throttleKey)
            try await AuditLog(db: db, clock: env.clock).record(
                self.event(.companyLogin, client, accountID: accountID, companyID: cid))
            return try await env.sessions.start(
                accountID: accountID, method: "company_password", ip: client.ip, userAgent: client.userAgent, db: db,
                company: scope, parent: parent)
        }
        guard let account = try await AccountRepository(db: env.store.database).find(id: accountID) else {
            throw APIError(.notFound, code: .userNotFound, message: "User not found")
        }
        return try await env.sessions.response(
            for: issued, user: try await env.user(account, db: env.store.database), membership: membership)
    }
}
