import Foundation
import GatehouseAPI
import SQLKit

/// A company that requires single sign-on sends the people of its verified domains to its identity provider: email
/// sign-in (password, code or link) and sign-up at such a domain are refused 403 `sso_required`, naming the provider
/// to sign in with (`POST /auth/v1/sso`). The company's owners are never refused: whoever turned the rule on keeps
/// the way in they had.
enum SSOEnforcement {
    /// Refuses `email` when its domain must sign in through a company's provider and `accountID` (if any) owns none
    /// of that company.
    static func check(email: String, accountID: String?, db: any SQLDatabase) async throws {
        guard let at = email.lastIndex(of: "@"),
            let domain = DomainRules.normalized(String(email[email.index(after: at)...])),
            let provider = try await SSOProviderRepository(db: db).enforced(domain: domain)
        else { return }
        if let accountID,
            try await CompanyDirectory(db: db).membership(provider.companyID, accountID: accountID)?.isOwner == true
        {
            return
        }
        throw APIError(
            .forbidden, code: .ssoRequired,
            message: "Your company signs you in through its identity provider: sign in with single sign-on",
            details: ["provider_id": .string(provider.id)])
    }
}
