import Foundation
import SQLKit

/// What another feature asks of companies: is this account a member, with which role and masks; a company's row;
/// which companies an account owns or belongs to; and ending a member's sessions in one company. The small interface
/// Companies exports, so that no feature reaches into `CompanyRepository` (docs/architecture.md, "Who may use whom").
struct CompanyDirectory {
    private let companies: CompanyRepository

    init(db: any SQLDatabase) { companies = CompanyRepository(db: db) }

    /// The account's membership of the company, or nil when it is not a member.
    func membership(_ companyID: String, accountID: String) async throws -> Membership? {
        try await companies.membership(companyID, accountID: accountID)
    }

    func company(_ companyID: String) async throws -> CompanyRecord? {
        try await companies.company(companyID)
    }

    /// The company whose purchase token (an App Store `appAccountToken`) is `token`.
    func company(appAccountToken token: String) async throws -> CompanyRecord? {
        try await companies.company(appAccountToken: token)
    }

    /// Sets a company's tier and where it came from; `reason` is an operator's.
    func setTier(_ companyID: String, _ tier: CompanyTier, source: TierSource?, reason: String?, now: Date)
        async throws
    {
        try await companies.setTier(companyID, tier, source: source, reason: reason, now: now)
    }

    /// The companies `accountID` owns, by name.
    func owned(by accountID: String) async throws -> [(id: String, name: String)] {
        try await companies.owned(by: accountID)
    }

    /// The companies an account owns or participates in, as its list shows them.
    func summaries(accountID: String) async throws -> [CompanySummaryRecord] {
        try await companies.summaries(accountID: accountID)
    }

    /// Ends an account's sessions in one company, but for `except`.
    func endSessions(_ companyID: String, accountID: String, except: String?, now: Date) async throws {
        try await companies.endSessions(companyID, accountID: accountID, except: except, now: now)
    }
}
