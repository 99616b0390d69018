import SQLKit

/// An account's second factors, as other features read them (the user object lists them; the operator's support
/// commands list and reset them). The small interface Factors exports instead of `FactorRepository`.
struct AccountFactors {
    private let factors: FactorRepository

    init(db: any SQLDatabase) { factors = FactorRepository(db: db) }

    func all(accountID: String) async throws -> [FactorRecord] { try await factors.factors(accountID: accountID) }
}
