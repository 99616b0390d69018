import GatehouseAPI

extension API {
    // MARK: Company domains (a session logged in to the company; the owner only)

    func listDomains(_ input: Operations.ListDomains.Input) async throws -> Operations.ListDomains.Output {
        .ok(.init(body: .json(try await domains.list(try await access.company(input.path.cid)))))
    }

    func addDomain(_ input: Operations.AddDomain.Input) async throws -> Operations.AddDomain.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await domains.add(body, by: caller))))
        }
    }

    func verifyDomain(_ input: Operations.VerifyDomain.Input) async throws -> Operations.VerifyDomain.Output {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .json(try await domains.verify(input.path.id, by: caller))))
    }

    func removeDomain(_ input: Operations.RemoveDomain.Input) async throws -> Operations.RemoveDomain.Output {
        try await domains.remove(input.path.id, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }
}

extension API {
    // MARK: Joining by domain: the owner's setting and requests (company session)

    func getDomainJoin(_ input: Operations.GetDomainJoin.Input) async throws -> Operations.GetDomainJoin.Output {
        .ok(.init(body: .json(try await domainJoins.setting(try await access.company(input.path.cid)))))
    }

    func setDomainJoin(_ input: Operations.SetDomainJoin.Input) async throws -> Operations.SetDomainJoin.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await domainJoins.update(body, by: caller))))
        }
    }

    func listJoinRequests(_ input: Operations.ListJoinRequests.Input) async throws
        -> Operations.ListJoinRequests.Output
    {
        .ok(.init(body: .json(try await domainJoins.requests(try await access.company(input.path.cid)))))
    }

    func approveJoinRequest(_ input: Operations.ApproveJoinRequest.Input) async throws
        -> Operations.ApproveJoinRequest.Output
    {
        try await domainJoins.approve(input.path.id, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }

    func declineJoinRequest(_ input: Operations.DeclineJoinRequest.Input) async throws
        -> Operations.DeclineJoinRequest.Output
    {
        try await domainJoins.decline(input.path.id, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }

    // MARK: Joining by domain: the account (account session)

    func listDomainCompanies(_ input: Operations.ListDomainCompanies.Input) async throws
        -> Operations.ListDomainCompanies.Output
    {
        .ok(.init(body: .json(try await domainJoins.companies(for: try await access.account()))))
    }

    func joinByDomain(_ input: Operations.JoinByDomain.Input) async throws -> Operations.JoinByDomain.Output {
        .ok(.init(body: .json(try await domainJoins.join(input.path.cid, by: try await access.permanentAccount()))))
    }
}
