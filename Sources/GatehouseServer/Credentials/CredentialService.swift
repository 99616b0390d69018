import Foundation
import GatehouseAPI
import SQLKit

/// The per-company credential (the seeds' UserPass) and company login: its rules, its throttle and its transactions.
struct CredentialService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let sessions: SessionService
    let trail: AuditTrail
    let hasher: PasswordHasher
    let throttling: AccountThrottling
    let passwords: PasswordRules
    let users: UserReader

    static let invalidCredentials = APIError(
        .badRequest, code: .invalidCredentials, message: "Invalid username or password")
    static let noCredential = APIError.notFound("You have no credential for this company")
    static let credentialExists = APIError(
        .conflict, code: .credentialExists, message: "You already have a credential for this company")
    static let maximumImageBytes = 1 << 20

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
        let companies = CompanyDirectory(db: store.database)
        guard let membership = try await companies.membership(companyID, accountID: accountID),
            let company = try await companies.company(companyID)
        else { throw CompanyService.companyNotFound }
        return (company, membership)
    }

    /// The account rules, with the company's minimum length when it asks for more.
    private func checkPassword(_ password: String, policy: CompanyPolicy, forbidden: [String]) throws {
        var rules = settings.passwordPolicy
        rules.minimumLength = max(rules.minimumLength, policy.passwordMinLength)
        try passwords.checkPassword(password, forbidden: forbidden, policy: rules)
    }

    // MARK: Creating and reading one's credential

    /// Creates the caller's credential for a company they belong to; the owner's credential is the super user.
    /// A username is immutable and private to its account: company login looks up the caller's own credential, so
    /// two members may choose the same one, and choosing one tells nothing about the others' (a uniqueness check
    /// did, one password hash per guess).
    func create(_ cid: String, _ body: Schemas.CreateCredentialRequest, by caller: Caller) async throws
        -> Schemas.CredentialInfo
    {
        let (company, membership) = try await membership(cid, caller.accountID)
        let username = body.username
        guard (1...64).contains(username.unicodeScalars.count),
            !username.contains(where: { $0.isNewline || $0.asciiValue.map { $0 < 32 } == true })
        else { throw APIError.validation("username must be 1 to 64 characters without control characters") }
        let email = try body.email.map { try PasswordRules.validEmail($0) }
        try checkPassword(
            body.password, policy: company.policy,
            forbidden: [username, email, email.map(EmailAddress.localPart), caller.identity.email].compactMap { $0 })
        let image = try body.image.map(Self.decodeImage)
        // Refused before the hash runs: the answer costs nothing to ask again.
        if try await CredentialRepository(db: store.database).find(cid, accountID: caller.accountID) != nil {
            throw Self.credentialExists
        }
        let now = clock.now
        let credential = CompanyCredential(
            companyID: cid, accountID: caller.accountID, username: username,
            passwordHash: try await hasher.hash(body.password), email: email, superUser: membership.isOwner,
            hasImage: image != nil, createdAt: now)
        let audit = event(.credentialCreated, caller.client, accountID: caller.accountID, companyID: cid)
        try await store.transaction { [clock] db in
            let credentials = CredentialRepository(db: db)
            if try await credentials.find(cid, accountID: caller.accountID) != nil { throw Self.credentialExists }
            try await credentials.insert(credential, image: image?.data, imageType: image?.type, now: now)
            try await trail.within(db).record(audit)
        }
        return Self.info(credential)
    }

    /// A base64 PNG or JPEG of at most 1 MiB, with its media type.
    static func decodeImage(_ encoded: String) throws -> (data: Data, type: String) {
        guard let data = Data(base64Encoded: encoded), data.count <= maximumImageBytes,
            let type = CredentialRepository.imageType(data)
        else { throw APIError.validation("image must be a base64 PNG or JPEG of at most 1 MiB") }
        return (data, type)
    }

    static func info(_ credential: CompanyCredential) -> Schemas.CredentialInfo {
        Schemas.CredentialInfo(
            username: credential.username, email: credential.email, superUser: credential.superUser,
            hasImage: credential.hasImage, createdAt: credential.createdAt)
    }

    /// The caller's own credential; nobody else's is ever readable.
    func show(_ caller: CompanyCaller) async throws -> Schemas.CredentialInfo {
        guard
            let credential = try await CredentialRepository(db: store.database).find(
                caller.companyID, accountID: caller.accountID)
        else { throw Self.noCredential }
        return Self.info(credential)
    }

    /// Removes the caller's credential and ends their sessions in this company.
    func delete(_ caller: CompanyCaller) async throws {
        let audit = caller.event(.credentialDeleted)
        try await store.transaction { [clock] db in
            guard try await CredentialRepository(db: db).find(caller.companyID, accountID: caller.accountID) != nil
            else { throw Self.noCredential }
            try await CredentialRepository(db: db).delete(caller.companyID, accountID: caller.accountID)
            try await CompanyDirectory(db: db).endSessions(
                caller.companyID, accountID: caller.accountID, except: nil, now: clock.now)
            try await trail.within(db).record(audit)
        }
    }

    /// Changes the credential's password and ends the caller's other sessions in this company.
    func changePassword(_ body: Schemas.ChangeCredentialPasswordRequest, by caller: CompanyCaller) async throws {
        let cid = caller.companyID
        let accountID = caller.accountID
        guard let credential = try await CredentialRepository(db: store.database).find(cid, accountID: accountID),
            let company = try await CompanyDirectory(db: store.database).company(cid)
        else { throw Self.noCredential }
        // The current password is a guess like any login: counted first, backing off the same way.
        let throttleKey = Self.throttleKey(cid, accountID)
        try await throttling.limit("company-login", settings.limits.signInsPerIP, client: caller.client)
        try await throttling.admit(
            throttleKey, rule: throttling.passwordRule, client: caller.client, accountID: accountID)
        guard case .valid = await hasher.verify(body.currentPassword, against: credential.passwordHash) else {
            await trail.record(caller.event(.credentialPasswordChangeFailed))
            throw Self.invalidCredentials
        }
        try await throttling.clearThrottle(throttleKey)
        try checkPassword(
            body.newPassword, policy: company.policy,
            forbidden: [credential.username, credential.email, caller.identity.email].compactMap { $0 })
        let hash = try await hasher.hash(body.newPassword)
        let audit = caller.event(.credentialPasswordChanged)
        try await store.transaction { [clock] db in
            try await CredentialRepository(db: db).setPassword(cid, accountID: accountID, hash: hash, now: clock.now)
            try await CompanyDirectory(db: db).endSessions(
                cid, accountID: accountID, except: caller.identity.sessionID, now: clock.now)
            try await trail.within(db).record(audit)
        }
    }

    /// The picture a member chose for this company, for other members.
    func image(of target: String, for caller: CompanyCaller) async throws -> (data: Data, type: String) {
        guard
            let (data, type) = try await CredentialRepository(db: store.database).image(
                caller.companyID, accountID: target)
        else { throw APIError.notFound("No picture") }
        return (data, type)
    }

    // MARK: Company login

    /// Logs in to a company: with the credential's username and password (or with the account session alone when the
    /// company does not require a credential), answering a new session scoped to the company. It is opened from the
    /// account session, as its child: it ends with it, never outlives it, and its timeouts are capped by the server's.
    /// A company session cannot open another one (the caller is an account session).
    func login(_ cid: String, _ body: Schemas.CompanyLoginRequest, by caller: Caller) async throws -> Schemas.Session {
        let (company, membership) = try await admitLogin(cid, by: caller)
        let throttleKey = Self.throttleKey(cid, caller.accountID)
        var username: String?
        var method = "company_password"
        if company.policy.requiresCredential {
            // A company that requires single sign-on takes the session its provider started instead.
            if try await CompanySSO.acceptsSession(companyID: cid, accountID: caller.accountID, db: store.database) {
                method = "company_sso"
            } else {
                username = try await checkCredential(cid, body, caller: caller, throttleKey: throttleKey)
            }
        }
        return try await openSession(
            company, membership, username: username, method: method, by: caller, throttleKey: throttleKey)
    }

    /// What every company login asks first (the password login and the passkey's): the address's pace, a live
    /// membership, and a second factor where the company requires one, before any credential is looked at, so a
    /// session below aal2 learns nothing about it.
    func admitLogin(_ cid: String, by caller: Caller) async throws -> (CompanyRecord, Membership) {
        try await throttling.limit("company-login", settings.limits.signInsPerIP, client: caller.client)
        let (company, membership) = try await membership(cid, caller.accountID)
        if company.policy.requiresMFA && caller.identity.aal != .aal2 {
            await trail.record(
                event(
                    .companyLoginFailed, caller.client, accountID: caller.accountID, companyID: cid,
                    detail: ["reason": "mfa_required"]))
            throw Self.secondFactorRequired
        }
        return (company, membership)
    }

    /// Starts the company session once its login is proven (`method` goes into amr: `company_password`,
    /// `company_passkey`, or the account session alone where no credential is required); the backoff is cleared.
    func openSession(
        _ company: CompanyRecord, _ membership: Membership, username: String?, method: String, by caller: Caller,
        throttleKey: String, detail: [String: String] = [:]
    ) async throws -> Schemas.Session {
        let cid = company.id
        let scope = CompanyScope(
            companyID: cid, username: username, idleTimeout: company.policy.sessionIdleTimeout,
            lifetime: company.policy.sessionLifetime)
        let audit = event(.companyLogin, caller.client, accountID: caller.accountID, companyID: cid, detail: detail)
        let issued = try await store.transaction { [self] db in
            try await Throttles(db: db).clear(throttleKey)
            try await trail.within(db).record(audit)
            return try await sessions.start(
                accountID: caller.accountID, method: method, ip: caller.client.ip,
                userAgent: caller.client.userAgent, db: db, company: scope, parent: caller.identity.sessionID,
                parentAssurance: (caller.identity.aal, caller.identity.factorID))
        }
        guard let account = try await AccountDirectory(db: store.database).find(id: caller.accountID) else {
            throw APIError(.notFound, code: .userNotFound, message: "User not found")
        }
        return try await sessions.response(
            for: issued, user: try await users.user(account, db: store.database), membership: membership)
    }

    /// A company that requires a second factor, asked by a session that has not verified one.
    static let secondFactorRequired = APIError(
        .forbidden, code: .insufficientAal,
        message:
            "This company requires a second factor: verify one (POST /auth/v1/factors/{id}/verify) and log in again")

    /// Checks the username and password (counted before the hash runs, so parallel guesses cannot slip past the
    /// backoff); answers the credential's username.
    private func checkCredential(
        _ cid: String, _ body: Schemas.CompanyLoginRequest, caller: Caller, throttleKey: String
    ) async throws -> String {
        guard let given = body.username, let password = body.password else {
            throw APIError.validation("This company requires a username and password")
        }
        try await throttling.admit(
            throttleKey, rule: throttling.passwordRule, client: caller.client, accountID: caller.accountID)
        let credential = try await CredentialRepository(db: store.database).find(cid, accountID: caller.accountID)
        let verification: PasswordVerification
        if let credential, credential.username == given {
            verification = await hasher.verify(password, against: credential.passwordHash)
        } else {
            await hasher.dummyVerify(password)
            verification = .invalid
        }
        guard case .valid(let needsRehash) = verification, let credential else {
            let reason =
                credential == nil
                ? "no_credential" : credential?.username == given ? "wrong_password" : "wrong_username"
            await trail.record(
                event(
                    .companyLoginFailed, caller.client, accountID: caller.accountID, companyID: cid,
                    detail: ["reason": reason]))
            throw Self.invalidCredentials
        }
        if needsRehash, let rehashed = try? await hasher.hash(password) {
            try await store.transaction { [clock] db in
                try await CredentialRepository(db: db).setPassword(
                    cid, accountID: caller.accountID, hash: rehashed, now: clock.now)
            }
        }
        return credential.username
    }
}
