import Foundation

/// What `gatehouse companies …` does (`Operator`), beside the companies' repository.
extension Operator {
    /// One line per company: id, tier, members, name.
    public func companies() async throws -> [String] {
        let companies = CompanyRepository(db: store.database)
        var lines: [String] = []
        for company in try await companies.all() {
            lines.append(
                "\(company.id)  \(company.tier.rawValue)  \(try await companies.memberCount(company.id)) members  \(company.name)"
            )
        }
        return lines
    }

    /// A company's details and its members (never credentials).
    public func company(_ id: String) async throws -> String? {
        let companies = CompanyRepository(db: store.database)
        guard let company = try await companies.company(id) else { return nil }
        var text = """
            id:                  \(company.id)
            name:                \(company.name)
            tier:                \(company.tier.rawValue)
            owner:               \(company.ownerID)
            requires credential: \(company.policy.requiresCredential)
            created:             \(company.createdAt.iso8601)
            members:
            """
        for member in try await companies.members(id) {
            text +=
                "\n  \(member.accountID)  \(member.role.rawValue)  dept=\(member.deptMask) manager=\(member.managerMask)"
        }
        return text
    }

    /// Sets a company's tier as an override (source `operator`, with the operator's reason) that App Store
    /// notifications do not undo until `releaseTier` hands it back; false when there is no such company.
    public func setTier(_ id: String, _ tier: CompanyTier, reason: String? = nil) async throws -> Bool {
        try await setTier(id, tier, reason: reason, by: .commandLine)
    }

    /// The same, by `admin`: the command line (audited `by: operator`) or an operator in the console (`by: console`
    /// with the operator's id and address).
    func setTier(_ id: String, _ tier: CompanyTier, reason: String?, by admin: AdminCaller) async throws -> Bool {
        try await store.transaction { db in
            let companies = CompanyRepository(db: db)
            guard let company = try await companies.company(id) else { return false }
            try await companies.setTier(id, tier, source: .operator, reason: reason, now: Date())
            var detail = ["from": company.tier.rawValue, "to": tier.rawValue]
            if let reason { detail["reason"] = reason }
            var event = admin.event(.tierChanged, accountID: nil, detail: detail)
            event.companyID = id
            try await trail.within(db).record(event)
            return true
        }
    }
}
