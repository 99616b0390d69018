import Crypto
import Foundation
import GatehouseAPI
import HTTPTypes
import OpenAPIRuntime
import SQLKit

/// Passkeys: account passkeys in Supabase's wire format (register while signed in, sign in with no session), and
/// company passkeys, which log a member in to one company instead of the credential's password. Every ceremony's
/// challenge is single use, five minutes, and bound to its ceremony, account and company; the WebAuthn checks are
/// `WebAuthn`'s.
struct PasskeyService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: PasskeySettings
    let relyingParty: RelyingParty
    let limits: AuthLimits
    let sessions: SessionService
    let trail: AuditTrail
    let throttling: AccountThrottling
    let users: UserReader
    let credentials: CredentialService
    let profiles: ProfileService

    init(
        store: Store, clock: any GatehouseClock, configuration: GatehouseConfiguration, sessions: SessionService,
        trail: AuditTrail, throttling: AccountThrottling, users: UserReader, credentials: CredentialService,
        profiles: ProfileService
    ) {
        self.profiles = profiles
        self.store = store
        self.clock = clock
        settings = configuration.passkeys
        relyingParty = Self.relyingParty(configuration)
        limits = configuration.auth.limits
        self.sessions = sessions
        self.trail = trail
        self.throttling = throttling
        self.users = users
        self.credentials = credentials
    }

    /// The relying party the settings describe: the id and origins given, or the public URL's host and origin.
    static func relyingParty(_ configuration: GatehouseConfiguration) -> RelyingParty {
        let publicURL = URLComponents(string: configuration.effectivePublicURL)
        let host = publicURL?.host ?? "localhost"
        let origin = publicURL.map { url in
            "\(url.scheme ?? "https")://\(host)" + (url.port.map { ":\($0)" } ?? "")
        }
        let origins =
            configuration.passkeys.origins.isEmpty ? [origin ?? "https://\(host)"] : configuration.passkeys.origins
        return RelyingParty(
            id: configuration.passkeys.relyingPartyID ?? host, origins: origins,
            name: configuration.passkeys.relyingPartyName)
    }

    /// Supabase's limits: ten passkeys a user (here also ten a member in each company), five-minute challenges.
    static let maximumPasskeys = 10
    static let challengeLifetime: TimeInterval = 300
    /// Ceremonies finished, and registrations started, from one client address (a sign-in's pace: 30 in five
    /// minutes).
    var perIP: RateLimit { limits.signInsPerIP }
    /// Sign-in options from one client address: a page with passkey autofill asks for them on every view, and they
    /// cost one short-lived row, so an office behind one address gets a refresh's pace rather than a sign-in's.
    static let optionsPerIP = RateLimit(limit: 150, per: 300, burst: 30)

    // MARK: Errors

    static let disabled = APIError(.notFound, code: .passkeyDisabled, message: "Passkeys are disabled")
    static let notFound = APIError(.notFound, code: .validationFailed, message: "Passkey not found")
    static let challengeNotFound = APIError(
        .badRequest, code: .webauthnChallengeNotFound, message: "Challenge not found or already used")
    static let challengeExpired = APIError(
        .badRequest, code: .webauthnChallengeExpired, message: "Challenge has expired")
    static let unknownCredential = APIError(
        .badRequest, code: .webauthnCredentialNotFound, message: "This passkey is not registered here")
    static let credentialExists = APIError(
        .unprocessableContent, code: .webauthnCredentialExists, message: "This credential is already registered")
    static let tooMany = APIError(
        .unprocessableContent, code: .tooManyPasskeys, message: "Maximum number of passkeys reached")
    static func verificationFailed(_ error: WebAuthnError) -> APIError {
        APIError(
            .badRequest, code: .webauthnVerificationFailed,
            message: "Credential verification failed (\(error.reason))")
    }

    func requireEnabled() throws {
        guard settings.enabled else { throw Self.disabled }
    }

    // MARK: Account passkeys

    /// Creation options for a new account passkey: a discoverable credential whose user handle is the account id
    /// (as GoTrue's), user verification required, the account's passkeys excluded.
    /// A new passkey needs recent proof (`ProfileService.requireRecentProof`), asked here: its challenge lives five
    /// minutes, so the verification that follows is as recent.
    func registrationOptions(by caller: Caller, proof: Schemas.RecentProof? = nil) async throws
        -> Schemas.PasskeyCreationChallenge
    {
        try requireEnabled()
        try await throttling.limit("passkey", perIP, client: caller.client)
        try await requireManagementAssurance(caller)
        let existing = try await PasskeyRepository(db: store.database).passkeys(
            accountID: caller.accountID, companyID: nil)
        guard existing.count < Self.maximumPasskeys else { throw Self.tooMany }
        try await requireRecentProof(caller.identity, client: caller.client, proof: proof)
        let email = try await caller.currentEmail(db: store.database)
        return try await creationOptions(
            ceremony: .registration, accountID: caller.accountID, companyID: nil,
            user: .init(id: Secrets.base64URL(Data(caller.accountID.utf8)), name: email, displayName: email),
            excluding: existing)
    }

    /// Verifies the new passkey and stores it.
    func registrationVerify(_ body: Schemas.PasskeyVerifyRequest, by caller: Caller) async throws -> Schemas.Passkey {
        try requireEnabled()
        try await throttling.limit("passkey", perIP, client: caller.client)
        try await requireManagementAssurance(caller)
        return try await register(
            body, ceremony: .registration, accountID: caller.accountID, companyID: nil,
            client: caller.client)
    }

    /// Request options for a passkey sign-in: no allowed list, the passkey names its user.
    func authenticationOptions(client: ClientInfo) async throws -> Schemas.PasskeyRequestChallenge {
        try requireEnabled()
        try await throttling.limit("passkey-options", Self.optionsPerIP, client: client)
        return try await requestOptions(ceremony: .authentication, accountID: nil, companyID: nil, allowing: [])
    }

    /// Signs in with an account passkey's assertion: a session at aal1 whose amr is `passkey`.
    func authenticationVerify(_ body: Schemas.PasskeyVerifyRequest, client: ClientInfo) async throws
        -> Schemas.Session
    {
        try requireEnabled()
        try await throttling.limit("passkey", perIP, client: client)
        let (challenge, assertion) = try await challengeAndAssertion(
            body, ceremony: .authentication, accountID: nil, companyID: nil, client: client)
        let refuse = { (reason: String, accountID: String?, error: APIError) async -> APIError in
            await trail.record(
                client.event(.passkeySignInFailed, accountID: accountID, detail: ["reason": reason]))
            return error
        }
        // No user was named before this ceremony, so the passkey must name one (WebAuthn L3 §7.2 step 6), and
        // it must be the passkey's own.
        guard let userHandle = assertion.userHandle else {
            throw await refuse("no_user_handle", nil, Self.verificationFailed(.malformedCredential))
        }
        guard
            let passkey = try await PasskeyRepository(db: store.database).passkey(
                credentialID: Secrets.base64URL(Data(assertion.credentialID))),
            passkey.companyID == nil, Data(userHandle) == Data(passkey.accountID.utf8)
        else { throw await refuse("unknown_credential", nil, Self.unknownCredential) }
        guard let account = try await AccountDirectory(db: store.database).find(id: passkey.accountID) else {
            throw await refuse("unknown_credential", nil, Self.unknownCredential)
        }
        let verified = try await verify(assertion, challenge: challenge, passkey: passkey, client: client)
        // As GoTrue: both 403, the address first; only a valid assertion learns either.
        guard account.emailConfirmedAt != nil else {
            throw await refuse(
                "email_not_confirmed", account.id,
                APIError(.forbidden, code: .emailNotConfirmed, message: "Email not confirmed"))
        }
        guard account.disabledAt == nil else {
            throw await refuse("banned", account.id, APIError(.forbidden, code: .userBanned, message: "User is banned"))
        }
        let now = clock.now
        let issued = try await store.transaction { [clock, sessions] db in
            guard
                try await PasskeyRepository(db: db).recordUse(
                    passkey.id, checkedCount: passkey.signCount, newCount: Int64(verified.newSignCount),
                    backedUp: verified.backedUp, now: now)
            else { throw Self.verificationFailed(.signCountRegressed) }
            try await AccountDirectory(db: db).recordSignIn(account.id, at: now)
            try await trail.within(db).record(
                client.event(
                    .signedIn, accountID: account.id, detail: ["method": "passkey", "passkey_id": passkey.id]))
            return try await sessions.start(
                accountID: account.id, method: "passkey", ip: client.ip, userAgent: client.userAgent, db: db)
        }
        return try await sessions.response(for: issued, user: try await users.user(account, db: store.database))
    }

    /// The caller's account passkeys, oldest first.
    func list(by caller: Caller) async throws -> [Schemas.Passkey] {
        try requireEnabled()
        return try await list(accountID: caller.accountID, companyID: nil)
    }

    /// Renames one of the caller's account passkeys.
    func rename(_ rawID: String, _ body: Schemas.RenamePasskeyRequest, by caller: Caller) async throws
        -> Schemas.Passkey
    {
        try requireEnabled()
        try await requireManagementAssurance(caller)
        let name = try Self.friendlyName(body.friendlyName)
        return try await store.transaction { [clock] db in
            let repository = PasskeyRepository(db: db)
            guard let id = Secrets.identifier(rawID),
                let passkey = try await repository.passkey(id, accountID: caller.accountID, companyID: nil)
            else { throw Self.notFound }
            try await repository.rename(id, to: name, now: clock.now)
            try await trail.within(db).record(
                caller.client.event(.passkeyUpdated, accountID: caller.accountID, detail: ["passkey_id": id]))
            guard let renamed = try await repository.passkey(passkey.id, accountID: caller.accountID, companyID: nil)
            else { throw Self.notFound }
            return renamed.wire
        }
    }

    /// Removes one of the caller's account passkeys.
    func delete(_ rawID: String, by caller: Caller) async throws {
        try requireEnabled()
        try await requireManagementAssurance(caller)
        try await remove(
            rawID, accountID: caller.accountID, companyID: nil,
            event: caller.client.event(
                .passkeyDeleted, accountID: caller.accountID))
    }

    /// Registering, renaming and removing passkeys need aal2 once the account has a verified second factor, as
    /// enrolling a further factor does: a stolen aal1 session must not add a way in.
    private func requireRecentProof(_ identity: Identity, client: ClientInfo, proof: Schemas.RecentProof?)
        async throws
    {
        try await profiles.requireRecentProof(
            identity, client: client, currentPassword: proof?.currentPassword, nonce: proof?.nonce,
            refusal: .passkeyRegistrationFailed, what: "Adding a passkey")
    }

    private func requireManagementAssurance(_ caller: Caller) async throws {
        try await FactorService.requireAAL2IfEnrolled(
            caller.identity, db: store.database, message: "AAL2 required to manage passkeys", status: .forbidden)
    }

    // MARK: Company passkeys

    /// Creation options for a company passkey. The caller's company session proves the company's own login, so an
    /// account session alone cannot add a way past it. Its user handle is derived from the company and account, so
    /// an authenticator keeps one passkey per member and company, apart from the account's.
    func companyRegistrationOptions(by caller: CompanyCaller, proof: Schemas.RecentProof? = nil) async throws
        -> Schemas.PasskeyCreationChallenge
    {
        try requireEnabled()
        try await throttling.limit("passkey", perIP, client: caller.client)
        let cid = caller.membership.companyID
        let existing = try await PasskeyRepository(db: store.database).passkeys(
            accountID: caller.identity.accountID, companyID: cid)
        guard existing.count < Self.maximumPasskeys else { throw Self.tooMany }
        try await requireRecentProof(caller.identity, client: caller.client, proof: proof)
        let company = try await CompanyDirectory(db: store.database).company(cid)
        let companyName = company?.name ?? "Company"
        return try await creationOptions(
            ceremony: .companyRegistration, accountID: caller.identity.accountID, companyID: cid,
            user: .init(
                id: Secrets.base64URL(Self.companyUserHandle(cid, accountID: caller.identity.accountID)),
                name: "\(caller.identity.email) · \(companyName)", displayName: companyName),
            excluding: existing)
    }

    func companyRegistrationVerify(_ body: Schemas.PasskeyVerifyRequest, by caller: CompanyCaller) async throws
        -> Schemas.Passkey
    {
        try requireEnabled()
        try await throttling.limit("passkey", perIP, client: caller.client)
        return try await register(
            body, ceremony: .companyRegistration, accountID: caller.identity.accountID,
            companyID: caller.membership.companyID, client: caller.client)
    }

    func companyPasskeys(by caller: CompanyCaller) async throws -> [Schemas.Passkey] {
        try requireEnabled()
        return try await list(accountID: caller.identity.accountID, companyID: caller.membership.companyID)
    }

    func deleteCompanyPasskey(_ rawID: String, by caller: CompanyCaller) async throws {
        try requireEnabled()
        try await remove(
            rawID, accountID: caller.identity.accountID, companyID: caller.membership.companyID,
            event: caller.event(.passkeyDeleted))
    }

    /// Request options for a company login by passkey: the member's passkeys for this company are the allowed list.
    /// What every company login asks first is asked here too (membership, the company's second-factor rule).
    func companyLoginOptions(_ cid: String, by caller: Caller) async throws -> Schemas.PasskeyRequestChallenge {
        try requireEnabled()
        _ = try await credentials.admitLogin(cid, by: caller)
        let passkeys = try await PasskeyRepository(db: store.database).passkeys(
            accountID: caller.accountID, companyID: cid)
        guard !passkeys.isEmpty else {
            throw APIError(
                .badRequest, code: .webauthnCredentialNotFound,
                message: "You have no passkey for this company: log in with your password and add one")
        }
        return try await requestOptions(
            ceremony: .companyLogin, accountID: caller.accountID, companyID: cid, allowing: passkeys)
    }

    /// Logs in to the company with a company passkey: a company session whose amr says `company_passkey`.
    func companyLogin(_ cid: String, _ body: Schemas.PasskeyVerifyRequest, by caller: Caller) async throws
        -> Schemas.Session
    {
        try requireEnabled()
        let (company, membership) = try await credentials.admitLogin(cid, by: caller)
        // A company passkey stands beside the member's credential, never in place of one: a passkey added while the
        // company required none does not log in once it requires one, until the member sets a credential.
        let username: String?
        if company.policy.requiresCredential {
            guard
                let credential = try await CompanyCredentials(db: store.database).find(
                    cid, accountID: caller.accountID)
            else {
                await trail.record(
                    AuditEvent(
                        .companyLoginFailed, accountID: caller.accountID, companyID: cid, ip: caller.client.ip,
                        userAgent: caller.client.userAgent, detail: ["reason": "no_credential", "method": "passkey"]))
                throw Self.credentialRequired
            }
            username = credential.username
        } else {
            username = nil
        }
        let (challenge, assertion) = try await challengeAndAssertion(
            body, ceremony: .companyLogin, accountID: caller.accountID, companyID: cid, client: caller.client)
        let refuse = { (reason: String, error: APIError) async -> APIError in
            await trail.record(
                AuditEvent(
                    .companyLoginFailed, accountID: caller.accountID, companyID: cid, ip: caller.client.ip,
                    userAgent: caller.client.userAgent, detail: ["reason": reason, "method": "passkey"]))
            return error
        }
        guard
            let passkey = try await PasskeyRepository(db: store.database).passkey(
                credentialID: Secrets.base64URL(Data(assertion.credentialID))),
            passkey.companyID == cid, passkey.accountID == caller.accountID
        else { throw await refuse("unknown_credential", Self.unknownCredential) }
        let verified = try await verify(
            assertion, challenge: challenge, passkey: passkey, client: caller.client)
        let now = clock.now
        guard
            try await store.transaction({ db in
                try await PasskeyRepository(db: db).recordUse(
                    passkey.id, checkedCount: passkey.signCount, newCount: Int64(verified.newSignCount),
                    backedUp: verified.backedUp, now: now)
            })
        else { throw await refuse("sign_count_race", Self.verificationFailed(.signCountRegressed)) }
        return try await credentials.openSession(
            company, membership, username: username, method: "company_passkey", by: caller,
            throttleKey: CredentialService.throttleKey(cid, caller.accountID), detail: ["passkey_id": passkey.id])
    }

    static let credentialRequired = APIError(
        .forbidden, code: .companyCredentialRequired,
        message: "This company requires a username and password: set yours, then log in with it or a passkey")

    /// The user handle of a member's company passkeys: 32 bytes that name the pair, and nothing else.
    static func companyUserHandle(_ companyID: String, accountID: String) -> Data {
        Data(SHA256.hash(data: Data("gatehouse company passkey\n\(companyID)\n\(accountID)".utf8)))
    }

    // MARK: Admin

    /// A user's passkeys, account and company ones, for the admin API.
    func adminList(accountID: String) async throws -> [Schemas.Passkey] {
        try await PasskeyRepository(db: store.database).all(accountID: accountID).map(\.wire)
    }

    /// Removes any passkey of the user (admin API), audited with the key that asked.
    func adminDelete(accountID: String, rawID: String, event: AuditEvent) async throws {
        let passkey = try await PasskeyRepository(db: store.database).all(accountID: accountID)
            .first { $0.id == Secrets.identifier(rawID) }
        guard let passkey else { throw Self.notFound }
        try await remove(passkey.id, accountID: accountID, companyID: passkey.companyID, event: event)
    }

    // MARK: Ceremonies

    /// Stores a challenge and answers the creation options around it.
    private func creationOptions(
        ceremony: PasskeyCeremony, accountID: String, companyID: String?,
        user: Schemas.PublicKeyCredentialCreationOptions.UserPayload, excluding existing: [PasskeyRecord]
    ) async throws -> Schemas.PasskeyCreationChallenge {
        let (id, challenge, expiresAt) = try await newChallenge(ceremony, accountID: accountID, companyID: companyID)
        let options = Schemas.PublicKeyCredentialCreationOptions(
            rp: .init(id: relyingParty.id, name: relyingParty.name), user: user, challenge: challenge,
            pubKeyCredParams: [COSEKey.es256Algorithm, COSEKey.rs256Algorithm].map {
                .init(_type: "public-key", alg: $0)
            },
            timeout: Int(Self.challengeLifetime * 1000), excludeCredentials: existing.map(\.descriptor),
            authenticatorSelection: .init(
                residentKey: "required", requireResidentKey: true, userVerification: "required"),
            attestation: "none")
        return .init(challengeId: id, options: options, expiresAt: expiresAt)
    }

    /// Stores a challenge and answers the request options around it.
    private func requestOptions(
        ceremony: PasskeyCeremony, accountID: String?, companyID: String?, allowing passkeys: [PasskeyRecord]
    ) async throws -> Schemas.PasskeyRequestChallenge {
        let (id, challenge, expiresAt) = try await newChallenge(ceremony, accountID: accountID, companyID: companyID)
        let options = Schemas.PublicKeyCredentialRequestOptions(
            challenge: challenge, timeout: Int(Self.challengeLifetime * 1000), rpId: relyingParty.id,
            allowCredentials: passkeys.map(\.descriptor), userVerification: "required")
        return .init(challengeId: id, options: options, expiresAt: expiresAt)
    }

    private func newChallenge(
        _ ceremony: PasskeyCeremony, accountID: String?, companyID: String?
    ) async throws -> (id: String, challenge: String, expiresAt: Int64) {
        let now = clock.now
        let record = PasskeyChallengeRecord(
            id: Secrets.identifier(), ceremony: ceremony, accountID: accountID, companyID: companyID,
            challenge: Secrets.token(), createdAt: now.epochMilliseconds)
        try await store.transaction { db in try await PasskeyRepository(db: db).insertChallenge(record) }
        return (
            record.id, record.challenge, Int64(now.addingTimeInterval(Self.challengeLifetime).timeIntervalSince1970)
        )
    }

    /// Takes the body's challenge (it is spent whatever follows) and parses its assertion.
    private func challengeAndAssertion(
        _ body: Schemas.PasskeyVerifyRequest, ceremony: PasskeyCeremony, accountID: String?, companyID: String?,
        client: ClientInfo
    ) async throws -> (PasskeyChallengeRecord, AuthenticationResponse) {
        let challenge = try await consume(
            body.challengeId, ceremony: ceremony, accountID: accountID, companyID: companyID)
        do {
            return (challenge, try AuthenticationResponse(json: try Self.json(body.credential.additionalProperties)))
        } catch let error as WebAuthnError {
            await trail.record(
                AuditEvent(
                    ceremony == .companyLogin ? .companyLoginFailed : .passkeySignInFailed, accountID: accountID,
                    companyID: companyID, ip: client.ip, userAgent: client.userAgent,
                    detail: ["reason": error.reason, "method": "passkey"]))
            throw Self.verificationFailed(error)
        }
    }

    /// The challenge `rawID` names, spent, when it is for this ceremony, account and company and still live.
    private func consume(
        _ rawID: String, ceremony: PasskeyCeremony, accountID: String?, companyID: String?
    ) async throws -> PasskeyChallengeRecord {
        guard let id = Secrets.identifier(rawID) else {
            throw APIError.validation("challenge_id must be a valid UUID")
        }
        let challenge = try await store.transaction { db in
            try await PasskeyRepository(db: db).consumeChallenge(
                id, ceremony: ceremony, accountID: accountID, companyID: companyID)
        }
        guard let challenge else { throw Self.challengeNotFound }
        guard Date(epochMilliseconds: challenge.createdAt).addingTimeInterval(Self.challengeLifetime) >= clock.now
        else { throw Self.challengeExpired }
        return challenge
    }

    /// Verifies a registration against its challenge and stores the passkey; each refusal is audited with its
    /// reason and nothing is stored.
    private func register(
        _ body: Schemas.PasskeyVerifyRequest, ceremony: PasskeyCeremony, accountID: String, companyID: String?,
        client: ClientInfo
    ) async throws -> Schemas.Passkey {
        let challenge = try await consume(
            body.challengeId, ceremony: ceremony, accountID: accountID, companyID: companyID)
        let audit: @Sendable (AuditAction, [String: String]) -> AuditEvent = { action, detail in
            AuditEvent(
                action, accountID: accountID, companyID: companyID, ip: client.ip, userAgent: client.userAgent,
                detail: detail)
        }
        let verified: VerifiedRegistration
        do {
            let response = try RegistrationResponse(json: try Self.json(body.credential.additionalProperties))
            verified = try WebAuthn.verifyRegistration(
                response: response, expectedChallenge: Self.bytes(challenge.challenge), relyingParty: relyingParty)
        } catch let error as WebAuthnError {
            await trail.record(audit(.passkeyRegistrationFailed, ["reason": error.reason]))
            throw Self.verificationFailed(error)
        }
        let now = clock.now.epochMilliseconds
        let passkey = PasskeyRecord(
            id: Secrets.identifier(), accountID: accountID, companyID: companyID,
            credentialID: Secrets.base64URL(Data(verified.credentialID)),
            publicKey: Secrets.base64URL(Data(verified.publicKey)), algorithm: verified.algorithm,
            signCount: Int64(verified.signCount), aaguid: verified.aaguid.map { String(format: "%02x", $0) }.joined(),
            backupEligible: verified.backupEligible, backedUp: verified.backedUp,
            transports: verified.transports.joined(separator: ","),
            friendlyName: PasskeyNames.name(aaguid: verified.aaguid), createdAt: now, updatedAt: now, lastUsedAt: nil)
        do {
            try await profiles.mail.transactionQueuingMail { [clock, profiles] db in
                let repository = PasskeyRepository(db: db)
                // The account row is locked first, so two registrations of one account are counted one after the other.
                _ = try await AccountDirectory(db: db).findLocked(id: accountID)
                guard
                    try await repository.passkeys(accountID: accountID, companyID: companyID).count
                        < Self.maximumPasskeys
                else { throw Self.tooMany }
                guard try await repository.insert(passkey) else { throw Self.credentialExists }
                try await trail.within(db).record(
                    audit(.passkeyCreated, ["passkey_id": passkey.id, "backup_eligible": "\(passkey.backupEligible)"]))
                try await profiles.mail.mailSignInMethodChange(
                    .signInMethodAdded(try await Self.method(companyID, db: db), name: passkey.friendlyName),
                    accountID: accountID, db: db)
            }
        } catch let error as APIError {
            await trail.record(audit(.passkeyRegistrationFailed, ["reason": error.code]))
            throw error
        }
        return passkey.wire
    }

    /// Checks an assertion with the stored key and counter. A counter that went back means a cloned authenticator:
    /// refused, and audited as such.
    private func verify(
        _ assertion: AuthenticationResponse, challenge: PasskeyChallengeRecord, passkey: PasskeyRecord,
        client: ClientInfo
    ) async throws -> VerifiedAssertion {
        do {
            guard let publicKey = Data(base64URL: passkey.publicKey) else { throw APIError.internalError }
            return try WebAuthn.verifyAssertion(
                response: assertion, expectedChallenge: Self.bytes(challenge.challenge), relyingParty: relyingParty,
                credential: .init(
                    publicKey: Array(publicKey), algorithm: passkey.algorithm,
                    signCount: UInt32(clamping: passkey.signCount), backupEligible: passkey.backupEligible))
        } catch let error as WebAuthnError {
            let action: AuditAction =
                error == .signCountRegressed
                ? .passkeyCloneSuspected : passkey.companyID == nil ? .passkeySignInFailed : .companyLoginFailed
            await trail.record(
                AuditEvent(
                    action, accountID: passkey.accountID, companyID: passkey.companyID, ip: client.ip,
                    userAgent: client.userAgent,
                    detail: ["reason": error.reason, "passkey_id": passkey.id, "method": "passkey"]))
            throw Self.verificationFailed(error)
        }
    }

    private func list(accountID: String, companyID: String?) async throws -> [Schemas.Passkey] {
        try await PasskeyRepository(db: store.database).passkeys(accountID: accountID, companyID: companyID)
            .map(\.wire)
    }

    private func remove(_ rawID: String, accountID: String, companyID: String?, event: AuditEvent) async throws {
        try await profiles.mail.transactionQueuingMail { [clock, profiles] db in
            let repository = PasskeyRepository(db: db)
            guard let id = Secrets.identifier(rawID),
                let passkey = try await repository.passkey(id, accountID: accountID, companyID: companyID),
                try await repository.delete(id, accountID: accountID)
            else { throw Self.notFound }
            var event = event
            event.detail["passkey_id"] = id
            if let companyID { event.detail["company_id"] = companyID }
            try await trail.within(db).record(event)
            try await profiles.mail.mailSignInMethodChange(
                .signInMethodRemoved(try await Self.method(companyID, db: db), name: passkey.friendlyName),
                accountID: accountID, db: db)
        }
    }

    /// The caller's account passkeys added since the last password sign-in before this session began (all of them
    /// when the trail holds none in its last 500 events): what a password change offers to remove. The trail is the
    /// record of sign-ins, so this reads it rather than keeping a second one.
    func addedSincePasswordSignIn(by caller: Caller) async throws -> Set<String> {
        let sessionStart = caller.identity.claims.amr.map(\.timestamp).min() ?? .max
        let events = try await trail.page(accountID: caller.accountID, before: nil, limit: 500)
        let lastPasswordSignIn = events.first {
            $0.action == AuditAction.signedIn.rawValue && $0.detail["method"] == "password"
                && Int64($0.occurredAt.timeIntervalSince1970) < sessionStart
        }
        let since = lastPasswordSignIn?.occurredAt.epochMilliseconds ?? 0
        return Set(
            try await PasskeyRepository(db: store.database).passkeys(accountID: caller.accountID, companyID: nil)
                .filter { $0.createdAt > since }.map(\.id))
    }

    /// How the owner's mail names a passkey: an account one, or one for the company it logs in to.
    private static func method(_ companyID: String?, db: any SQLDatabase) async throws -> Mailer.SignInMethod {
        guard let companyID else { return .passkey }
        return .companyPasskey(company: try await CompanyDirectory(db: db).company(companyID)?.name ?? "")
    }

    /// A name as given: 1 to 120 characters and at most 512 bytes (`FriendlyName`), no control characters.
    static func friendlyName(_ raw: String) throws -> String {
        let name = raw.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, FriendlyName.isAcceptable(name, maximumCharacters: 120) else {
            throw APIError.validation(
                "friendly_name must be 1 to 120 characters and at most \(FriendlyName.maximumBytes) bytes of UTF-8, without control characters"
            )
        }
        return name
    }

    /// The credential object exactly as sent, as JSON bytes for the WebAuthn parser.
    private static func json(_ credential: OpenAPIObjectContainer) throws -> Data {
        do { return try JSONEncoder().encode(credential) } catch { throw WebAuthnError.malformedCredential }
    }

    /// A stored challenge's bytes.
    private static func bytes(_ challenge: String) -> [UInt8] { Array(Data(base64URL: challenge) ?? Data()) }
}

extension PasskeyRecord {
    var wire: Schemas.Passkey {
        Schemas.Passkey(
            id: id, friendlyName: friendlyName, createdAt: Date(epochMilliseconds: createdAt),
            lastUsedAt: lastUsedAt.map(Date.init(epochMilliseconds:)), backedUp: backedUp)
    }

    var descriptor: Schemas.PublicKeyCredentialDescriptor {
        .init(
            _type: "public-key", id: credentialID,
            transports: transports.isEmpty ? nil : transports.split(separator: ",").map(String.init))
    }
}

/// Names for a new passkey from its authenticator model (AAGUID), for the few that say who keeps them; "Passkey"
/// otherwise. The user renames it at will.
enum PasskeyNames {
    static let known: [String: String] = [
        "fbfc3007154e4ecc8c0b6e020557d7bd": "iCloud Keychain",
        "dd4ec289e01d41c9bb8970fa845d4bf2": "iCloud Keychain (Managed)",
        "ea9b8d664d011d213ce4b6b48cb575d4": "Google Password Manager",
        "adce000235bcc60a648b0b25f1f05503": "Chrome on Mac",
        "08987058cadc4b81b6e130de50dcbe96": "Windows Hello",
        "9ddd1817af5a4672a2b93e3dd95000a9": "Windows Hello",
        "bada5566a7aa401fbd9645619a55120d": "1Password",
        "d548826e79b4db40a3d811116f7e8349": "Bitwarden",
        "531126d6e717415c93203d9aa6981239": "Dashlane",
    ]

    static func name(aaguid: [UInt8]) -> String {
        known[aaguid.map { String(format: "%02x", $0) }.joined()] ?? "Passkey"
    }
}
