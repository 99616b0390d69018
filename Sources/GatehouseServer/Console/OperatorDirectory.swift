import SQLKit

/// Who holds the operator role, for other features: the admin API shows it on each user it answers.
struct OperatorDirectory {
    let db: any SQLDatabase

    /// Which of `accountIDs` are operators.
    func operators(among accountIDs: [String]) async throws -> Set<String> {
        try await ConsoleRepository(db: db).operators(among: accountIDs)
    }

    /// Every operator's address, for mail that is the operator's to read (a webhook endpoint turned off).
    func emails() async throws -> [String] {
        try await ConsoleRepository(db: db).operators().map(\.email)
    }
}
