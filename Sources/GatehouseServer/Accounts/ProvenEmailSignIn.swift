import Foundation
import SQLKit

/// A proof of the address (a mailed code, an Apple identity token) signing someone in.
struct ProvenEmailSignIn: Sendable {
    let clock: any GatehouseClock

    /// The step every sign-in by a proof of the address shares (a mailed code, an Apple identity token): an account
    /// not yet confirmed becomes confirmed with what `pending` holds (a sign-up's choices, or nothing when another
    /// proof confirmed it) and its other sign-up codes are voided; then the sign-in through `provider` is recorded.
    func confirmAndSignIn(
        _ account: inout AccountRecord, pending: PendingSignup, provider: String, now: Date, db: any SQLDatabase
    ) async throws {
        let accounts = AccountRepository(db: db)
        if account.emailConfirmedAt == nil {
            account.passwordHash = pending.passwordHash
            account.userMetadata = pending.metadata
            account.emailConfirmedAt = now
            try await OneTimeCodeRepository(db: db).voidSignups(email: account.email, at: clock.now)
        }
        account.lastSignInAt = now
        account.updatedAt = now
        try await accounts.update(account)
        try await accounts.touchIdentity(provider: provider, accountID: account.id, at: now)
    }
}
