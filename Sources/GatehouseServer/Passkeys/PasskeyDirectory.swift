import SQLKit

/// What other features may ask of passkeys.
struct PasskeyDirectory {
    let db: any SQLDatabase

    /// Whether the account has a passkey of its own (not a company's) to sign in with.
    func hasAccountPasskey(accountID: String) async throws -> Bool {
        try await !PasskeyRepository(db: db).passkeys(accountID: accountID, companyID: nil).isEmpty
    }
}
