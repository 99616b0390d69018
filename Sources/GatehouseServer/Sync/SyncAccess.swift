import SQLKit

/// What other features change of a member's sync state, inside their own transaction: a changed access bumps the
/// member's epoch (their tokens re-filter on the next pull), and a deleted account's mutation results go. The small
/// interface Sync exports instead of `SyncRepository`.
struct SyncAccess {
    private let sync: SyncRepository

    init(db: any SQLDatabase) { sync = SyncRepository(db: db) }

    /// The member's access changed: their tokens re-filter on the next pull.
    func accessChanged(_ companyID: String, accountID: String) async throws {
        try await sync.bumpEpoch(companyID, accountID: accountID)
    }

    /// Forgets the mutation results of an account that is deleted, in every company.
    func forget(accountID: String) async throws { try await sync.forgetMutations(accountID: accountID) }
}
