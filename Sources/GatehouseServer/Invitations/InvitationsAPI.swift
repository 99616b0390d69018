import GatehouseAPI

extension API {
    // MARK: The company's invitations (a session logged in to it)

    /// The company's invitations with their state.
    func listInvitations(_ input: Operations.ListInvitations.Input) async throws -> Operations.ListInvitations.Output {
        .ok(.init(body: .json(try await invitations.list(try await access.company(input.path.cid)))))
    }

    /// Invites an address and mails it a link and a code.
    func createInvitation(_ input: Operations.CreateInvitation.Input) async throws
        -> Operations.CreateInvitation.Output
    {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await invitations.invite(body, by: caller))))
        }
    }

    /// Mails an invitation again, with a new link and code.
    func resendInvitation(_ input: Operations.ResendInvitation.Input) async throws
        -> Operations.ResendInvitation.Output
    {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .json(try await invitations.resend(input.path.id, by: caller))))
    }

    /// Revokes an invitation that is not used yet.
    func revokeInvitation(_ input: Operations.RevokeInvitation.Input) async throws
        -> Operations.RevokeInvitation.Output
    {
        try await invitations.revoke(input.path.id, by: try await access.company(input.path.cid))
        return .noContent(.init())
    }

    // MARK: The invitee's (account session)

    /// The open invitations to the caller's confirmed address.
    func listMyInvitations(_ input: Operations.ListMyInvitations.Input) async throws
        -> Operations.ListMyInvitations.Output
    {
        .ok(.init(body: .json(try await invitations.mine(try await access.permanentAccount()))))
    }

    /// Joins the company the invitation is for.
    func acceptInvitation(_ input: Operations.AcceptInvitation.Input) async throws
        -> Operations.AcceptInvitation.Output
    {
        .ok(.init(body: .json(try await invitations.accept(input.path.id, by: try await access.permanentAccount()))))
    }

    /// Declines the invitation.
    func declineInvitation(_ input: Operations.DeclineInvitation.Input) async throws
        -> Operations.DeclineInvitation.Output
    {
        try await invitations.decline(input.path.id, by: try await access.permanentAccount())
        return .noContent(.init())
    }
}
