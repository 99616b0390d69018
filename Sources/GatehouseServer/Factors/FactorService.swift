import Foundation
import GatehouseAPI
import HTTPTypes
import SQLKit

/// Second factors in GoTrue's wire format: TOTP factors (enroll, challenge, verify, unenroll), recovery codes, and
/// what the admin API and the operator do with them. Verifying raises the caller's session to aal2.
final class FactorService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let sessions: SessionService
    let trail: AuditTrail
    let box: SecretBox
    let mail: AccountMail
    let throttling: AccountThrottling
    let users: UserReader
    let profiles: ProfileService
    /// The issuer authenticator apps show when the app names none: the public URL's host, as GoTrue's site URL's.
    let defaultIssuer: String

    init(
        store: Store, clock: any GatehouseClock, sessions: SessionService, trail: AuditTrail, box: SecretBox,
        mail: AccountMail, throttling: AccountThrottling, users: UserReader, profiles: ProfileService, publicURL: String
    ) {
        self.profiles = profiles
        self.store = store
        self.clock = clock
        self.sessions = sessions
        self.trail = trail
        self.box = box
        self.mail = mail
        self.throttling = throttling
        self.users = users
        defaultIssuer =
            URLComponents(string: publicURL).flatMap { url in
                url.host.map { host in url.port.map { "\(host):\($0)" } ?? host }
            } ?? "Gatehouse"
    }

    /// GoTrue's limits: ten factors a user; a challenge lives five minutes; an unfinished enrolment five minutes.
    static let maximumFactors = 10
    static let challengeLifetime: TimeInterval = 300
    static let unfinishedLifetime: TimeInterval = 300
    /// Challenges and verifications per client address (GoTrue: 15 a minute, bursts of 30).
    static let attemptsPerIP = RateLimit(limit: 15, per: 60, burst: 30)
    /// Wrong recovery codes: five in fifteen minutes from one client, then a wait (GoTrue's defaults); twenty in
    /// fifteen minutes for the set from everywhere. Counted per client first, so someone who has the password but
    /// not the codes locks out only their own address, never the owner's recovery from another.
    static let recoveryRule = FailureBackoff.Rule(freeFailures: .max, maximumDelay: 0, window: 15 * 60, ceiling: 5)
    static let recoverySetRule = FailureBackoff.Rule(
        freeFailures: .max, maximumDelay: 0, window: 15 * 60, ceiling: 20)
    static let recoveryName = "Recovery codes"

    // MARK: Errors

    static let notFound = APIError(.notFound, code: .mfaFactorNotFound, message: "Factor not found")
    static let wrongCode = APIError(
        .unprocessableContent, code: .mfaVerificationFailed, message: "Invalid TOTP code entered")
    static let wrongRecoveryCode = APIError(
        .unprocessableContent, code: .mfaVerificationFailed, message: "Invalid recovery code entered")
    static func insufficient(_ message: String, status: HTTPResponse.Status = .forbidden) -> APIError {
        APIError(status, code: .insufficientAal, message: message)
    }

    // MARK: TOTP

    /// Enrolls an unverified TOTP factor and answers its secret, URI and QR code; nothing is kept half-made: the
    /// row is written last, in one transaction with the checks.
    func enroll(_ body: Schemas.EnrollFactorRequest, by caller: Caller) async throws -> Schemas.EnrolledFactor {
        guard body.factorType == "totp" else {
            throw APIError.validation("factor_type needs to be totp (phone and webauthn factors are not offered)")
        }
        let name = try Self.friendlyName(body.friendlyName, default: "")
        let issuer = body.issuer.flatMap { $0.isEmpty ? nil : $0 } ?? defaultIssuer
        guard issuer.utf8.count <= 64,
            !issuer.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw APIError.validation("issuer must be at most 64 bytes of UTF-8, without control characters") }
        // A first factor needs recent proof: a session stolen later than its sign-in must not set the factor that would
        // then lock the owner out (a further factor needs aal2 instead, checked below).
        let existing = try await FactorRepository(db: store.database).factors(accountID: caller.accountID)
        if !existing.contains(where: { $0.status == .verified }) {
            try await profiles.requireRecentProof(
                caller.identity, client: caller.client, currentPassword: body.currentPassword, nonce: body.nonce,
                refusal: .factorEnrollRefused, what: "Adding a second factor")
        }
        let secret = TOTP.newSecret()
        let uri = TOTP.uri(secret: secret, issuer: issuer, account: try await caller.currentEmail(db: store.database))
        let qrCode = try Self.qrCode(uri)
        let now = clock.now
        let factorID = Secrets.identifier()
        let factor = FactorRecord(
            id: factorID, accountID: caller.accountID, type: .totp, friendlyName: name, status: .unverified,
            secret: try box.seal(Base32.encode(secret), context: Self.secretContext(factorID)), lastUsedStep: nil,
            createdAt: now.epochMilliseconds, updatedAt: now.epochMilliseconds, lastChallengedAt: nil)
        try await store.transaction { [clock, trail] db in
            let factors = try await self.admissible(name: name, caller: caller, db: db)
            guard Self.mayEnroll(caller, factors: factors) else {
                throw Self.insufficient("AAL2 required to enroll a new factor")
            }
            try await FactorRepository(db: db).insert(factor)
            try await trail.within(db).record(
                caller.client.event(.factorEnrolled, accountID: caller.accountID, detail: ["factor_id": factorID]))
        }
        return Schemas.EnrolledFactor(
            id: factorID, _type: .totp, friendlyName: name,
            totp: .init(qrCode: qrCode, secret: Base32.encode(secret), uri: uri))
    }

    /// Whether `caller` may add or finish a factor beside `factors`: a first factor at any level, another only at
    /// aal2. An unfinished factor is the owner's to finish: a session below aal2 neither sees its secret nor
    /// verifies it while a verified factor exists, or it would raise itself to aal2 with a secret it never had.
    static func mayEnroll(_ caller: Caller, factors: [FactorRecord]) -> Bool {
        caller.identity.aal == .aal2 || !factors.contains { $0.status == .verified }
    }

    static let enrollmentNeedsAAL2 = insufficient(
        "AAL2 required to verify a new factor while a verified factor exists", status: .unprocessableContent)

    /// The URI as a QR code: error correction M (15% of the symbol may be damaged), or L (7%) when the URI only fits
    /// so (a long address); a URI no symbol holds is refused with a reason, never a failure.
    static func qrCode(_ uri: String) throws -> String {
        for correction in [QRCode.Correction.medium, .low] {
            if let code = try? QRCode(uri, correction: correction) { return code.svg() }
        }
        throw APIError.validation("The issuer and email address are too long for an authenticator's QR code")
    }

    /// The account's factors once unfinished enrolments are gone, when one more named `name` may join them (the
    /// account row is locked first, so two enrolments of one account are decided one after the other).
    private func admissible(name: String, caller: Caller, db: any SQLDatabase) async throws -> [FactorRecord] {
        _ = try await AccountDirectory(db: db).findLocked(id: caller.accountID)
        let repository = FactorRepository(db: db)
        let stale = clock.now.addingTimeInterval(-Self.unfinishedLifetime).epochMilliseconds
        try await repository.delete(
            try await repository.unfinished(accountID: caller.accountID, before: stale), accountID: caller.accountID)
        let factors = try await repository.factors(accountID: caller.accountID)
        if factors.contains(where: { $0.friendlyName == name }) {
            throw APIError(
                .unprocessableContent, code: .mfaFactorNameConflict,
                message: "A factor with the friendly name \"\(name)\" for this user already exists")
        }
        if factors.count >= Self.maximumFactors {
            throw APIError(
                .unprocessableContent, code: .tooManyEnrolledMfaFactors,
                message: "Maximum number of factors reached, unenroll to continue")
        }
        return factors
    }

    /// A challenge for one of the caller's TOTP factors, bound to the caller's address, for five minutes.
    func challenge(_ rawFactorID: String, by caller: Caller) async throws -> Schemas.FactorChallenge {
        try await throttling.limit("mfa-challenge", Self.attemptsPerIP, client: caller.client)
        let factor = try await ownFactor(rawFactorID, caller: caller)
        guard factor.type == .totp else {
            throw APIError.validation("Recovery codes are verified at /factors/recovery-codes/verify")
        }
        let now = clock.now
        let challenge = ChallengeRecord(
            id: Secrets.identifier(), factorID: factor.id, createdAt: now.epochMilliseconds, ip: caller.client.ip,
            verifiedAt: nil)
        try await store.transaction { db in
            try await FactorRepository(db: db).insertChallenge(challenge, accountID: caller.accountID)
        }
        return Schemas.FactorChallenge(
            id: challenge.id, _type: .totp,
            expiresAt: Int64(now.addingTimeInterval(Self.challengeLifetime).timeIntervalSince1970))
    }

    /// What a verification came to, decided inside its transaction (a refusal that must still write, such as an
    /// expired challenge's deletion, commits).
    private enum Verdict: Sendable {
        case verified(IssuedSession, Schemas.User)
        case refused(APIError, reason: String)
    }

    /// Verifies a TOTP code against a challenge: each try counts against the factor's backoff before the code is
    /// compared; a code is accepted once (its time step is recorded, and a later code must be of a later step). On
    /// success the session becomes aal2 with a new refresh token, the account's other aal1 sessions end, and other
    /// unfinished enrolments go, as GoTrue does.
    func verify(_ rawFactorID: String, _ body: Schemas.VerifyFactorRequest, by caller: Caller) async throws
        -> Schemas.Session
    {
        try await throttling.limit("mfa-verify", Self.attemptsPerIP, client: caller.client)
        let code = body.code.trimmingCharacters(in: .whitespaces)
        guard !code.isEmpty else { throw APIError.validation("Code needs to be non-empty") }
        let factor = try await ownFactor(rawFactorID, caller: caller)
        guard factor.type == .totp, let sealed = factor.secret else {
            throw APIError.validation("Recovery codes are verified at /factors/recovery-codes/verify")
        }
        let throttleKey = "factor:" + factor.id
        try await throttling.admit(
            throttleKey, rule: throttling.passwordRule, client: caller.client, accountID: caller.accountID)
        guard let secret = Base32.decode(try box.open(sealed, context: Self.secretContext(factor.id))) else {
            throw APIError.internalError
        }
        let now = clock.now
        try await mfaAttemptHook(
            factor,
            valid: TOTP.acceptedStep(code: code, secret: secret, now: now, lastUsedStep: factor.lastUsedStep) != nil,
            caller: caller)
        let verdict: Verdict
        do {
            verdict = try await verifying(factor, code: code, secret: secret, body: body, caller: caller, now: now)
        } catch let lost as LostRace {
            verdict = .refused(Self.wrongCode, reason: lost.reason)
        }
        return try await answer(verdict, caller: caller, factorID: factor.id)
    }

    /// The MFA verification attempt hook, when it is on, told whether the code is right before anything is written
    /// (GoTrue asks it once the code is checked): a `reject` ends every session of the account and answers 403
    /// `mfa_verification_rejected` with the hook's message.
    private func mfaAttemptHook(_ factor: FactorRecord, valid: Bool, caller: Caller) async throws {
        guard
            let decision = try await sessions.hooks?.mfaAttempt(
                userID: caller.accountID, factorID: factor.id, factorType: "totp", valid: valid),
            decision.reject
        else { return }
        let accountID = caller.accountID
        try await store.transaction { [sessions] db in
            try await sessions.revoke(accountID: accountID, current: "", scope: .global, db: db)
        }
        await trail.record(
            caller.client.event(
                .mfaVerifyFailed, accountID: accountID, detail: ["factor_id": factor.id, "reason": "hook_rejected"]))
        throw APIError(
            .forbidden, code: .mfaVerificationRejected, message: decision.message ?? AuthHooks.mfaRejected)
    }

    /// A verification that lost to another at its last step: thrown so that its transaction rolls back whatever it
    /// wrote before it lost (on PostgreSQL the factor's step, which would burn the owner's next code).
    private struct LostRace: Error {
        let reason: String
    }

    /// `verify`'s transaction: its verdict, or `LostRace`.
    private func verifying(
        _ factor: FactorRecord, code: String, secret: [UInt8], body: Schemas.VerifyFactorRequest, caller: Caller,
        now: Date
    ) async throws -> Verdict {
        let throttleKey = "factor:" + factor.id
        return try await mail.transactionQueuingMail { [self] db in
            let repository = FactorRepository(db: db)
            if factor.status == .unverified,
                !Self.mayEnroll(caller, factors: try await repository.factors(accountID: caller.accountID))
            {
                return .refused(Self.enrollmentNeedsAAL2, reason: "insufficient_aal")
            }
            guard let challengeID = Secrets.identifier(body.challengeId),
                let challenge = try await repository.challenge(challengeID, factorID: factor.id)
            else {
                return .refused(
                    APIError(
                        .unprocessableContent, code: .mfaFactorNotFound,
                        message: "MFA factor with the provided challenge ID not found"), reason: "unknown_challenge")
            }
            guard challenge.verifiedAt == nil, challenge.ip == caller.client.ip else {
                return .refused(
                    APIError(
                        .unprocessableContent, code: .mfaIpAddressMismatch,
                        message: "Challenge and verify IP addresses mismatch, or the challenge was used"),
                    reason: "challenge_used_or_moved")
            }
            guard Date(epochMilliseconds: challenge.createdAt).addingTimeInterval(Self.challengeLifetime) >= now else {
                try await repository.deleteChallenge(challenge.id)
                return .refused(
                    APIError(
                        .unprocessableContent, code: .mfaChallengeExpired,
                        message: "MFA challenge has expired, verify against another challenge or create a new one"),
                    reason: "challenge_expired")
            }
            guard
                let step = TOTP.acceptedStep(code: code, secret: secret, now: now, lastUsedStep: factor.lastUsedStep)
            else { return .refused(Self.wrongCode, reason: "wrong_code") }
            // Either statement finds nothing to change only when a concurrent verification of this factor or
            // challenge committed first: roll back, so the loser leaves no step behind.
            guard try await repository.acceptStep(step, factorID: factor.id, accountID: caller.accountID, now: now)
            else { throw LostRace(reason: "wrong_code") }
            guard try await repository.answer(challenge.id, now: now) else {
                throw LostRace(reason: "challenge_used_or_moved")
            }
            let others = try await repository.unfinished(accountID: caller.accountID, before: nil)
                .filter { $0 != factor.id }
            try await repository.delete(others, accountID: caller.accountID)
            let first = factor.status == .unverified
            try await trail.within(db).record(
                caller.client.event(
                    first ? .factorVerified : .mfaVerified, accountID: caller.accountID,
                    detail: ["factor_id": factor.id, "method": "totp"]))
            if first {
                try await mail.mailSignInMethodChange(
                    .signInMethodAdded(.authenticator, name: factor.mailName), accountID: caller.accountID, db: db)
            }
            let (issued, user) = try await raise(caller, factorID: factor.id, method: "totp", db: db)
            try await Throttles(db: db).clear(throttleKey)
            return .verified(issued, user)
        }
    }

    /// The session a verification raised, or its refusal, audited as `mfa_verify_failed` with its reason.
    private func answer(_ verdict: Verdict, caller: Caller, factorID: String) async throws -> Schemas.Session {
        switch verdict {
        case .verified(let issued, let user):
            return try await sessions.response(for: issued, user: user)
        case .refused(let error, let reason):
            await trail.record(
                caller.client.event(
                    .mfaVerifyFailed, accountID: caller.accountID, detail: ["factor_id": factorID, "reason": reason]))
            throw error
        }
    }

    /// Raises the caller's session to aal2 by `factorID`: a new refresh token in the same session (the one the
    /// client holds is retired), and the account's other sessions below aal2 end.
    private func raise(_ caller: Caller, factorID: String, method: String, db: any SQLDatabase) async throws
        -> (IssuedSession, Schemas.User)
    {
        let now = clock.now
        let sessionID = caller.identity.sessionID
        let refreshToken = try await SessionChanges(db: db).raise(
            sessionID, accountID: caller.accountID, factorID: factorID, method: method, now: now)
        guard let live = try await sessions.liveSession(sessionID, now: now, db: db),
            let account = try await AccountDirectory(db: db).find(id: caller.accountID)
        else { throw APIError.sessionNotFound }
        let issued = IssuedSession(
            accountID: caller.accountID, sessionID: sessionID, refreshToken: refreshToken, amr: live.amr,
            aal: live.aal, endsAt: live.endsAt)
        return (issued, try await users.user(account, db: db))
    }

    /// Removes one of the caller's factors. A verified one needs aal2 (422, as GoTrue answers here), and may not
    /// leave recovery codes standing alone; the sessions it raised fall back to aal1.
    func unenroll(_ rawFactorID: String, by caller: Caller) async throws -> Schemas.FactorID {
        let factor = try await ownFactor(rawFactorID, caller: caller)
        guard factor.type == .totp else {
            throw APIError(
                .unprocessableContent, code: .validationFailed,
                message: "Recovery codes cannot be unenrolled with this endpoint, use DELETE /factors/recovery-codes")
        }
        if factor.status == .verified && caller.identity.aal != .aal2 {
            throw Self.insufficient("AAL2 required to unenroll verified factor", status: .unprocessableContent)
        }
        try await mail.transactionQueuingMail { [clock, mail, trail] db in
            let factors = try await FactorRepository(db: db).factors(accountID: caller.accountID)
            let otherVerified = factors.contains { $0.type == .totp && $0.status == .verified && $0.id != factor.id }
            if factor.status == .verified, !otherVerified, factors.contains(where: { $0.type == .recoveryCode }) {
                throw Self.soleRecoveryCodes
            }
            try await self.remove([factor.id], accountID: caller.accountID, db: db)
            try await trail.within(db).record(
                caller.client.event(.factorDeleted, accountID: caller.accountID, detail: ["factor_id": factor.id]))
            if factor.status == .verified {
                try await mail.mailSignInMethodChange(
                    .signInMethodRemoved(.authenticator, name: factor.mailName), accountID: caller.accountID,
                    db: db)
            }
        }
        return Schemas.FactorID(id: factor.id)
    }

    static let soleRecoveryCodes = APIError(
        .unprocessableContent, code: .mfaRecoveryCodesSoleFactor,
        message: "Recovery codes cannot be the only factor: remove them first, or keep another verified factor")

    /// Deletes factors and lowers the sessions they raised.
    private func remove(_ ids: [String], accountID: String, db: any SQLDatabase) async throws {
        try await Self.remove(ids, accountID: accountID, now: clock.now, db: db)
    }

    /// Deletes factors and lowers the sessions they raised; answers those that existed.
    @discardableResult
    static func remove(_ ids: [String], accountID: String, now: Date, db: any SQLDatabase) async throws -> [String] {
        let removed = try await FactorRepository(db: db).delete(ids, accountID: accountID)
        try await SessionChanges(db: db).lower(factorIDs: removed, now: now)
        return removed
    }

    /// The secret and QR code of one of the caller's factors still waiting for its first code (the setup page shown
    /// again after a wrong code); nil for a verified factor, whose secret is never shown again.
    /// Only a caller who may enroll sees it (`mayEnroll`).
    func pendingEnrollment(_ rawFactorID: String, caller: Caller) async throws -> (secret: String, qrCode: String)? {
        guard let factor = try? await ownFactor(rawFactorID, caller: caller), factor.status == .unverified,
            let sealed = factor.secret,
            Self.mayEnroll(
                caller, factors: try await FactorRepository(db: store.database).factors(accountID: caller.accountID))
        else { return nil }
        let secret = try box.open(sealed, context: Self.secretContext(factor.id))
        guard let bytes = Base32.decode(secret) else { return nil }
        let uri = TOTP.uri(
            secret: bytes, issuer: defaultIssuer, account: try await caller.currentEmail(db: store.database))
        return (secret, try Self.qrCode(uri))
    }

    /// One of the caller's factors, or 404 (another user's factor is answered exactly as one that does not exist).
    private func ownFactor(_ rawID: String, caller: Caller) async throws -> FactorRecord {
        guard let id = Secrets.identifier(rawID),
            let factor = try await FactorRepository(db: store.database).factor(id, accountID: caller.accountID)
        else { throw Self.notFound }
        return factor
    }

    /// A TOTP secret is sealed bound to its factor: a sealed secret copied to another row does not open.
    static func secretContext(_ factorID: String) -> String { "mfa_factor:" + factorID }

    /// A friendly name as given: at most 128 characters and 512 bytes (`FriendlyName`), no control characters;
    /// `default` when missing or blank.
    static func friendlyName(_ raw: String?, default fallback: String) throws -> String {
        guard let raw, !raw.trimmingCharacters(in: .whitespaces).isEmpty else { return fallback }
        guard FriendlyName.isAcceptable(raw, maximumCharacters: 128) else {
            throw APIError.validation(
                "friendly_name must be at most 128 characters and \(FriendlyName.maximumBytes) bytes of UTF-8, without control characters"
            )
        }
        return raw
    }

    // MARK: Recovery codes

    /// The caller's recovery codes: how many there are and are left.
    func recoveryStatus(by caller: Caller) async throws -> Schemas.RecoveryCodes {
        guard let set = try await recoverySet(caller.accountID, db: store.database) else { throw Self.notFound }
        let counts = try await FactorRepository(db: store.database).codeCounts(factorID: set.id)
        return Schemas.RecoveryCodes(
            id: set.id, _type: .recoveryCode, friendlyName: set.friendlyName, total: counts.total,
            remaining: counts.remaining)
    }

    /// Makes the caller's set of recovery codes and answers them, this once. aal2 only, and only beside a verified
    /// TOTP factor.
    func generateRecoveryCodes(by caller: Caller) async throws -> Schemas.RecoveryCodes {
        try requireAAL2(caller, "AAL2 required to generate recovery codes")
        let name = Self.recoveryName
        let codes = RecoveryCodes.generate()
        let now = clock.now.epochMilliseconds
        let set = FactorRecord(
            id: Secrets.identifier(), accountID: caller.accountID, type: .recoveryCode, friendlyName: name,
            status: .verified, secret: nil, lastUsedStep: nil, createdAt: now, updatedAt: now, lastChallengedAt: nil)
        try await store.transaction { [clock, trail] db in
            let factors = try await FactorRepository(db: db).factors(accountID: caller.accountID)
            if factors.contains(where: { $0.type == .recoveryCode }) {
                throw APIError(
                    .unprocessableContent, code: .mfaVerifiedFactorExists,
                    message: "Recovery codes exist already: regenerate them instead")
            }
            guard factors.contains(where: { $0.type == .totp && $0.status == .verified }) else {
                throw Self.soleRecoveryCodes
            }
            _ = try await self.admissible(name: name, caller: caller, db: db)
            let repository = FactorRepository(db: db)
            try await repository.insert(set)
            try await repository.replaceCodes(factorID: set.id, digests: self.storedDigests(codes, setID: set.id))
            try await trail.within(db).record(
                caller.client.event(.recoveryCodesGenerated, accountID: caller.accountID, detail: ["factor_id": set.id])
            )
        }
        return Schemas.RecoveryCodes(
            id: set.id, _type: .recoveryCode, friendlyName: name, total: codes.count, codes: codes)
    }

    /// Replaces every code of the caller's set (aal2 only) and lifts a lock on it.
    func regenerateRecoveryCodes(by caller: Caller) async throws -> Schemas.RecoveryCodes {
        try requireAAL2(caller, "AAL2 required to regenerate recovery codes")
        let codes = RecoveryCodes.generate()
        let set: FactorRecord = try await store.transaction { [clock, trail] db in
            guard let set = try await self.recoverySet(caller.accountID, db: db) else { throw Self.notFound }
            try await FactorRepository(db: db).replaceCodes(
                factorID: set.id, digests: self.storedDigests(codes, setID: set.id))
            try await Throttles(db: db).clear(keyAndBelow: Self.recoveryThrottleKey(set.id))
            try await trail.within(db).record(
                caller.client.event(
                    .recoveryCodesGenerated, accountID: caller.accountID,
                    detail: ["factor_id": set.id, "regenerated": "true"]))
            return set
        }
        return Schemas.RecoveryCodes(
            id: set.id, _type: .recoveryCode, friendlyName: set.friendlyName, total: codes.count, codes: codes)
    }

    /// Removes the caller's recovery codes (aal2 only).
    func deleteRecoveryCodes(by caller: Caller) async throws -> Schemas.FactorID {
        try requireAAL2(caller, "AAL2 required to remove recovery codes")
        let id: String = try await store.transaction { [clock, trail] db in
            guard let set = try await self.recoverySet(caller.accountID, db: db) else { throw Self.notFound }
            try await self.remove([set.id], accountID: caller.accountID, db: db)
            try await trail.within(db).record(
                caller.client.event(.recoveryCodesDeleted, accountID: caller.accountID, detail: ["factor_id": set.id]))
            return set.id
        }
        return Schemas.FactorID(id: id)
    }

    /// Spends one recovery code in place of a TOTP code: the session becomes aal2 (`mfa/recovery_code`), and the
    /// account is told by mail, with how many codes are left. Five wrong codes in fifteen minutes lock the set.
    func verifyRecoveryCode(_ body: Schemas.RecoveryCodeRequest, by caller: Caller) async throws -> Schemas.Session {
        try await throttling.limit("mfa-verify", Self.attemptsPerIP, client: caller.client)
        guard !body.code.allSatisfy({ $0 == "-" || $0.isWhitespace }) else {
            throw APIError.validation("Code needs to be non-empty")
        }
        guard let set = try await recoverySet(caller.accountID, db: store.database) else {
            throw Self.wrongRecoveryCode
        }
        let setKey = Self.recoveryThrottleKey(set.id)
        let clientKey = Self.recoveryThrottleKey(set.id, client: caller.client)
        try await throttling.admit(
            clientKey, rule: Self.recoveryRule, client: caller.client, accountID: caller.accountID,
            code: .mfaRecoveryCodesLocked)
        try await throttling.admit(
            setKey, rule: Self.recoverySetRule, client: caller.client, accountID: caller.accountID,
            code: .mfaRecoveryCodesLocked)
        let digests = RecoveryCodes.normalized(body.code).map { code in
            box.digestKeys(purpose: Self.recoveryPurpose).map { RecoveryCodes.digest(code, factorID: set.id, key: $0) }
        }
        let now = clock.now
        let verdict: Verdict = try await mail.transactionQueuingMail { [self] db in
            let repository = FactorRepository(db: db)
            guard let digests, try await repository.spendCode(factorID: set.id, digests: digests, now: now) else {
                return .refused(Self.wrongRecoveryCode, reason: "wrong_recovery_code")
            }
            let remaining = try await repository.codeCounts(factorID: set.id).remaining
            try await trail.within(db).record(
                caller.client.event(
                    .recoveryCodeUsed, accountID: caller.accountID,
                    detail: ["factor_id": set.id, "remaining": String(remaining)]))
            try await Throttles(db: db).clear(keyAndBelow: setKey)
            let (issued, user) = try await raise(caller, factorID: set.id, method: "mfa/recovery_code", db: db)
            try await mail.mailer.enqueue(
                .recoveryCodeUsed(remaining: remaining), to: try await caller.currentEmail(db: db), db: db)
            return .verified(issued, user)
        }
        return try await answer(verdict, caller: caller, factorID: set.id)
    }

    static let recoveryPurpose = "recovery code"

    /// The digests a set's codes are stored as, under the newest digest key.
    private func storedDigests(_ codes: [String], setID: String) -> [String] {
        let key = box.digestKeys(purpose: Self.recoveryPurpose)[0]
        return codes.map { RecoveryCodes.digest($0, factorID: setID, key: key) }
    }
    static func recoveryThrottleKey(_ factorID: String) -> String { "recovery:" + factorID }
    /// The set's key for one client (its address as the per-IP limits key it).
    static func recoveryThrottleKey(_ factorID: String, client: ClientInfo) -> String {
        recoveryThrottleKey(factorID) + ":" + client.limitKey
    }

    private func recoverySet(_ accountID: String, db: any SQLDatabase) async throws -> FactorRecord? {
        try await FactorRepository(db: db).factors(accountID: accountID).first { $0.type == .recoveryCode }
    }

    /// Refuses `insufficient_aal` (GoTrue's 401 for `PUT /user`) when the account has a verified factor and the
    /// request acts below aal2: what keeps or hands over the account (its password, email, deletion, other devices,
    /// a new way in) is not for a session that has only the password.
    static func requireAAL2IfEnrolled(
        _ identity: Identity, db: any SQLDatabase, message: String, status: HTTPResponse.Status = .unauthorized
    ) async throws {
        guard identity.aal != .aal2 else { return }
        // Any verified factor counts, recovery codes too: a set left alone (by an older release) still guards.
        let factors = try await FactorRepository(db: db).factors(accountID: identity.accountID)
        if factors.contains(where: { $0.status == .verified }) {
            throw insufficient(message, status: status)
        }
    }

    private func requireAAL2(_ caller: Caller, _ message: String) throws {
        guard caller.identity.aal == .aal2 else { throw Self.insufficient(message) }
    }

    // MARK: Admin and operator

    /// A user's factors, for the admin API and `gatehouse users factors list`.
    func factors(accountID: String) async throws -> [Schemas.Factor] {
        try await FactorRepository(db: store.database).factors(accountID: accountID).map(\.wire)
    }

    /// Removes one factor of a user (admin API), audited with the key that asked; sessions it raised fall to aal1.
    /// Removing the last verified TOTP factor removes the recovery codes with it: they never stand alone.
    func adminDelete(accountID: String, rawFactorID: String, event: AuditEvent) async throws -> Schemas.Factor {
        guard let id = Secrets.identifier(rawFactorID) else { throw Self.notFound }
        return try await mail.transactionQueuingMail { [clock, mail, trail] db in
            let factors = try await FactorRepository(db: db).factors(accountID: accountID)
            guard let factor = factors.first(where: { $0.id == id }) else { throw Self.notFound }
            var removing = [factor.id]
            let otherApps = factors.contains { $0.type == .totp && $0.status == .verified && $0.id != factor.id }
            if factor.type == .totp, !otherApps {
                removing += factors.filter { $0.type == .recoveryCode }.map(\.id)
            }
            try await self.remove(removing, accountID: accountID, db: db)
            var event = event
            event.detail["factor_id"] = factor.id
            try await trail.within(db).record(event)
            if factor.type == .totp, factor.status == .verified {
                try await mail.mailSignInMethodChange(
                    .signInMethodRemoved(.authenticator, name: factor.mailName), accountID: accountID, db: db)
            }
            return factor.wire
        }
    }
}

extension FactorRecord {
    /// The factor's name as the owner's mail gives it (one enrolled without a name is "Authenticator app").
    var mailName: String { friendlyName.isEmpty ? "Authenticator app" : friendlyName }
}
