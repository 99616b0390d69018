import Foundation
import GatehouseAPI
import SQLKit

/// Deleting one's own account (App Store guideline 5.1.1(v)), from the API and from the account page.
struct AccountDeletion: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let mailer: Mailer
    let mail: AccountMail
    let profiles: ProfileService
    /// Where an Apple identity's token goes to be revoked, when Sign in with Apple's REST API is configured.
    let revocations: AppleRevocations?

    /// What the caller proves on top of the session: nothing (a sign-in in the last ten minutes), the current
    /// password, or a code from `/auth/v1/reauthenticate`.
    struct Proof: Sendable {
        var currentPassword: String?
        var nonce: String?
    }

    /// Deletes the caller's account. Refused while it owns companies (the answer lists them: transfer or delete them
    /// first). In one transaction: every session ends (and leaves every instance's cache), the account row goes with
    /// its identities, codes, credentials and memberships (the schema cascades), its sync receipts and the mail still
    /// queued for it go, the trail forgets the person (`AuditTrail.Within.forget`), and a tombstone without personal data is written. The
    /// confirmation mail is queued in the same transaction, so it goes out exactly when the deletion happened.
    func delete(_ caller: Caller, proof: Proof) async throws {
        let client = caller.client
        let account = try await profiles.account(caller)
        try await FactorService.requireAAL2IfEnrolled(
            caller.identity, db: store.database,
            message: "AAL2 session is required to delete the account when MFA is enabled.")
        // An anonymous user has nothing but its session to prove itself with.
        guard !account.isAnonymous else {
            try await erase(account, client: client, refusal: .accountDeletionRefused)
            return
        }
        try await profiles.authorizeSensitiveChange(
            account: account, currentPassword: proof.currentPassword, nonce: proof.nonce, identity: caller.identity,
            client: client, needed: .signedInWithin(600, orRecoveryWithin: nil), neededStatus: .unauthorized,
            refusal: .accountDeletionRefused, what: "Deleting the account")
        try await erase(account, client: client, refusal: .accountDeletionRefused)
    }

    /// Deletes `account` as `delete` describes, whoever asked (the account, or the admin API): refused while it owns
    /// companies, with a `refusal` event; `tombstone` extra goes into the deletion's event.
    func erase(
        _ account: AccountRecord, client: ClientInfo, refusal: AuditAction, tombstone extra: [String: String] = [:]
    ) async throws {
        let owned = try await CompanyDirectory(db: store.database).owned(by: account.id)
        guard owned.isEmpty else {
            await trail.record(
                client.event(
                    refusal, accountID: account.id, detail: extra.merging(["reason": "owns_companies"]) { $1 }))
            throw Self.ownsCompanies(owned)
        }
        let queued = try await mail.transactionQueuingMail { db in
            // Checked again inside the transaction: a company made meanwhile would otherwise lose its owner.
            let ownedNow = try await CompanyDirectory(db: db).owned(by: account.id)
            guard ownedNow.isEmpty else { throw Self.ownsCompanies(ownedNow) }
            // Mail still waiting for the address (a retry after a mail server outage, a link asked for just before)
            // would arrive after the confirmation and point at an account that is gone.
            try await MailQueue.dropWaiting(for: account.email, db: db)
            try await mailer.enqueue(.accountDeleted, to: account.email, db: db)
            let ended = try await SessionChanges(db: db).end(.account(account.id), now: clock.now)
            try await SyncAccess(db: db).forget(accountID: account.id)
            try await trail.within(db)
                .forget(accountID: account.id, emailDigest: Secrets.emailDigest(account.email))
            // Apple's refresh tokens are revoked after the commit, from the queue: Apple being down never blocks this.
            var queued = 0
            if let revocations {
                queued = try await AppleRevocations.enqueue(
                    accountID: account.id, clientID: revocations.api.clientID, now: clock.now, db: db)
            }
            try await AccountRepository(db: db).delete(id: account.id)
            try await trail.within(db).record(
                AuditEvent(
                    .accountDeleted, accountID: account.id,
                    detail: extra.merging(["sessions": String(ended.count)]) { $1 }))
            return queued
        }
        if queued > 0 { revocations?.wake() }
    }

    /// 409 `owns_companies`, naming each company the account still owns.
    static func ownsCompanies(_ companies: [(id: String, name: String)]) -> APIError {
        let names = companies.map(\.name).joined(separator: ", ")
        return APIError(
            .conflict, code: .ownsCompanies,
            message: "Transfer or delete the companies you own before deleting your account: \(names)",
            details: [
                "companies": .array(companies.map { .object(["id": .string($0.id), "name": .string($0.name)]) })
            ])
    }
}
