import Foundation
import GatehouseAPI
import SQLKit

/// What another feature asks of companies: is this account a member, with which role and masks; a company's row;
/// which companies an account owns or belongs to; and ending a member's sessions in one company. The small interface
/// Companies exports, so that no feature reaches into `CompanyRepository` (docs/architecture.md, "Who may use whom").
struct CompanyDirectory {
    private let companies: CompanyRepository
    private let db: any SQLDatabase

    init(db: any SQLDatabase) {
        companies = CompanyRepository(db: db)
        self.db = db
    }

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

    /// Takes the company row's write lock for the rest of the transaction, so that admissions count one at a time.
    func lock(_ companyID: String) async throws {
        try await companies.lock(companyID)
    }

    /// Participants besides the owner, as the tier's limit counts them.
    func participantCount(_ companyID: String) async throws -> Int {
        try await companies.participantCount(companyID)
    }

    /// How the account's last membership of the company ended; nil if it never ended.
    func former(_ companyID: String, accountID: String) async throws -> FormerMembership? {
        try await companies.former(companyID, accountID: accountID)
    }

    /// Makes the account a member with `role` and masks (an invitation's acceptance), in the caller's transaction.
    func admit(
        _ companyID: String, accountID: String, role: MemberRole, deptMask: Int64, managerMask: Int64, now: Date
    ) async throws {
        try await companies.addMember(companyID, accountID: accountID, role: role, now: now)
        if deptMask != 0 || managerMask != 0 {
            try await companies.updateMember(
                companyID, accountID: accountID, role: role, deptMask: deptMask, managerMask: managerMask)
        }
    }

    /// The name other members see of a profile (never the email).
    static func displayName(_ metadataJSON: String) -> String { CompanyRepository.displayName(metadataJSON) }

    /// The same, from the profile as the account holds it.
    static func displayName(_ metadata: [String: JSONValue]) -> String { CompanyRepository.displayName(metadata) }

    // MARK: What operators see (the console)

    /// One page of every company, newest first (`CompanyListingRepository`).
    func listing(_ query: CompanyListQuery) async throws -> [CompanyListing] {
        try await CompanyListingRepository(db: db).companies(query)
    }

    /// The company's members with their addresses.
    func memberListing(_ companyID: String) async throws -> [MemberListing] {
        try await CompanyListingRepository(db: db).members(companyID)
    }

    /// The company's share links, newest first.
    func shares(_ companyID: String) async throws -> [ShareLinkRecord] {
        try await companies.shares(companyID)
    }

    /// The company's domains, oldest first.
    func domains(_ companyID: String) async throws -> [DomainRecord] {
        try await DomainRepository(db: db).domains(companyID)
    }

    /// Ends an account's sessions in one company, but for `except`.
    func endSessions(_ companyID: String, accountID: String, except: String?, now: Date) async throws {
        try await companies.endSessions(companyID, accountID: accountID, except: except, now: now)
    }
}
