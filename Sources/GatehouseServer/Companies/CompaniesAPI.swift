import GatehouseAPI

extension API {
    // MARK: The caller's companies (account session)

    func listCompanies(_ input: Operations.ListCompanies.Input) async throws -> Operations.ListCompanies.Output {
        .ok(.init(body: .json(try await companies.list(try await access.account()))))
    }

    func createCompany(_ input: Operations.CreateCompany.Input) async throws -> Operations.CreateCompany.Output {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await companies.create(body, by: caller))))
        }
    }

    func previewShare(_ input: Operations.PreviewShare.Input) async throws -> Operations.PreviewShare.Output {
        .ok(.init(body: .json(try await shares.preview(input.path.token, by: try await access.account()))))
    }

    func acceptShare(_ input: Operations.AcceptShare.Input) async throws -> Operations.AcceptShare.Output {
        .ok(.init(body: .json(try await shares.accept(input.path.token, by: try await access.permanentAccount()))))
    }

    // MARK: One company (a session logged in to it)

    func getCompany(_ input: Operations.GetCompany.Input) async throws -> Operations.GetCompany.Output {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .json(try await companies.detail(caller.companyID))))
    }

    func updateCompany(_ input: Operations.UpdateCompany.Input) async throws -> Operations.UpdateCompany.Output {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await companies.update(body, by: caller))))
        }
    }

    func deleteCompany(_ input: Operations.DeleteCompany.Input) async throws -> Operations.DeleteCompany.Output {
        try await companies.delete(by: try await access.company(input.path.cid, ownSessionOnly: true))
        return .noContent(.init())
    }

    func transferOwnership(_ input: Operations.TransferOwnership.Input) async throws
        -> Operations.TransferOwnership.Output
    {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await companies.transfer(to: body.accountId, by: caller))))
        }
    }

    func companyAudit(_ input: Operations.CompanyAudit.Input) async throws -> Operations.CompanyAudit.Output {
        let caller = try await access.company(input.path.cid)
        let page = try await companies.audit(caller, before: input.query.before, limit: input.query.limit)
        return .ok(.init(body: .json(page)))
    }

    // MARK: Tiers bought in the app

    func reportPurchase(_ input: Operations.ReportPurchase.Input) async throws -> Operations.ReportPurchase.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await subscriptions.report(body.signedTransaction, by: caller))))
        }
    }

    func appStoreNotification(_ input: Operations.AppStoreNotification.Input) async throws
        -> Operations.AppStoreNotification.Output
    {
        let client = try access.client()
        switch input.body {
        case .json(let body):
            try await subscriptions.notify(body.signedPayload, client: client)
            return .ok(.init(body: .json(.init())))
        }
    }

    // MARK: Share links

    func listShares(_ input: Operations.ListShares.Input) async throws -> Operations.ListShares.Output {
        .ok(.init(body: .json(try await shares.list(try await access.company(input.path.cid)))))
    }

    func createShare(_ input: Operations.CreateShare.Input) async throws -> Operations.CreateShare.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await shares.create(body, by: caller))))
        }
    }

    func revokeShare(_ input: Operations.RevokeShare.Input) async throws -> Operations.RevokeShare.Output {
        try await shares.revoke(input.path.id, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }

    // MARK: Members

    func listMembers(_ input: Operations.ListMembers.Input) async throws -> Operations.ListMembers.Output {
        .ok(.init(body: .json(try await companies.members(try await access.company(input.path.cid)))))
    }

    func updateMember(_ input: Operations.UpdateMember.Input) async throws -> Operations.UpdateMember.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await companies.updateMember(input.path.accountId, body, by: caller))))
        }
    }

    func removeMember(_ input: Operations.RemoveMember.Input) async throws -> Operations.RemoveMember.Output {
        try await companies.removeMember(input.path.accountId, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }

    func leaveCompany(_ input: Operations.LeaveCompany.Input) async throws -> Operations.LeaveCompany.Output {
        try await companies.leave(try await access.company(input.path.cid, ownSessionOnly: true))
        return .noContent(.init())
    }
}
