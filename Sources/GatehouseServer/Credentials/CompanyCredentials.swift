import SQLKit

/// A member's company credential, as other features use it: whether one is set (a company passkey stands beside it),
/// and who is the company's super user (a transfer moves the flag). The small interface Credentials exports instead
/// of `CredentialRepository`.
struct CompanyCredentials {
    private let credentials: CredentialRepository

    init(db: any SQLDatabase) { credentials = CredentialRepository(db: db) }

    func find(_ companyID: String, accountID: String) async throws -> CompanyCredential? {
        try await credentials.find(companyID, accountID: accountID)
    }

    func setSuperUser(_ companyID: String, accountID: String, _ flag: Bool) async throws {
        try await credentials.setSuperUser(companyID, accountID: accountID, flag)
    }
}
