import SQLKit

/// What another feature asks of single sign-on: a company's providers and whether it requires them, as an operator
/// reads them in the console. The small interface SSO exports, so that no feature reaches into
/// `SSOProviderRepository`.
struct SSODirectory {
    private let providers: SSOProviderRepository

    init(db: any SQLDatabase) { providers = SSOProviderRepository(db: db) }

    /// The company's identity providers, and whether its owner requires single sign-on.
    func setting(companyID: String) async throws -> (required: Bool, providers: [SSOProviderRecord]) {
        (
            try await providers.required(companyID: companyID),
            try await providers.all(companyID: companyID)
        )
    }
}
