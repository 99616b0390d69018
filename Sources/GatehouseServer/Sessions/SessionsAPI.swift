import GatehouseAPI

extension API {
    func listSessions(_ input: Operations.ListSessions.Input) async throws -> Operations.ListSessions.Output {
        .ok(.init(body: .json(try await accountSessions.list(try await access.account()))))
    }

    func revokeSession(_ input: Operations.RevokeSession.Input) async throws -> Operations.RevokeSession.Output {
        try await accountSessions.revoke(input.path.id, by: try await access.account())
        return .noContent(.init())
    }

    func accountAudit(_ input: Operations.AccountAudit.Input) async throws -> Operations.AccountAudit.Output {
        let caller = try await access.account()
        let page = try await accountSessions.audit(caller, before: input.query.before, limit: input.query.limit)
        return .ok(.init(body: .json(page)))
    }
}

extension API {
    func deleteAccount(_ input: Operations.DeleteAccount.Input) async throws -> Operations.DeleteAccount.Output {
        let caller = try await access.account()
        switch input.body {
        case .json(let body):
            try await accountDeletion.delete(
                caller, proof: .init(currentPassword: body.currentPassword, nonce: body.nonce))
        }
        return .noContent(.init())
    }
}
