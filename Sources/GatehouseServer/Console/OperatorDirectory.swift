import SQLKit

/// Who holds the operator role, for other features: the admin API shows it on each user it answers.
struct OperatorDirectory {
    let db: any SQLDatabase

    /// Which of `accountIDs` are operators.
    func operators(among accountIDs: [String]) async throws -> Set<String> {
        try await ConsoleRepository(db: db).operators(among: accountIDs)
    }
}
