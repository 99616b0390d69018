import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1/admin/…` and `/auth/v1/invite`, in GoTrue's wire format: every handler first asks `Access.admin()` for
// the service key.

extension API {
    func adminListUsers(_ input: Operations.AdminListUsers.Input) async throws -> Operations.AdminListUsers.Output {
        let admin = try await access.admin()
        let query = input.query
        let (list, total, link) = try await self.admin.list(
            page: query.page, perPage: query.perPage, filter: query.filter, sort: query.sort, by: admin)
        return .ok(.init(headers: .init(link: link, xTotalCount: total), body: .json(list)))
    }

    func adminCreateUser(_ input: Operations.AdminCreateUser.Input) async throws -> Operations.AdminCreateUser.Output {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await self.admin.create(body, by: admin))))
        }
    }

    func adminGetUser(_ input: Operations.AdminGetUser.Input) async throws -> Operations.AdminGetUser.Output {
        _ = try await access.admin()
        return .ok(.init(body: .json(try await admin.user(input.path.userId))))
    }

    func adminUpdateUser(_ input: Operations.AdminUpdateUser.Input) async throws -> Operations.AdminUpdateUser.Output {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await self.admin.update(input.path.userId, body, by: admin))))
        }
    }

    func adminDeleteUser(_ input: Operations.AdminDeleteUser.Input) async throws -> Operations.AdminDeleteUser.Output {
        let admin = try await access.admin()
        try await self.admin.delete(input.path.userId, by: admin)
        return .ok(.init(body: .json(.init())))
    }

    func adminGenerateLink(_ input: Operations.AdminGenerateLink.Input) async throws
        -> Operations.AdminGenerateLink.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            let link = try await self.admin.generateLink(body, redirectTo: input.query.redirectTo, by: admin)
            return .ok(.init(body: .json(link)))
        }
    }

    func invite(_ input: Operations.Invite.Input) async throws -> Operations.Invite.Output {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            return .ok(
                .init(body: .json(try await self.admin.invite(body, redirectTo: input.query.redirectTo, by: admin))))
        }
    }

    func adminInvite(_ input: Operations.AdminInvite.Input) async throws -> Operations.AdminInvite.Output {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            return .ok(
                .init(body: .json(try await self.admin.invite(body, redirectTo: input.query.redirectTo, by: admin))))
        }
    }

    func adminAudit(_ input: Operations.AdminAudit.Input) async throws -> Operations.AdminAudit.Output {
        let admin = try await access.admin()
        let query = input.query
        let (entries, total, link) = try await self.admin.audit(
            page: query.page, perPage: query.perPage, query: query.query, by: admin)
        return .ok(.init(headers: .init(link: link, xTotalCount: total), body: .json(entries)))
    }
}

// MARK: Custom providers

extension API {
    func adminListCustomProviders(_ input: Operations.AdminListCustomProviders.Input) async throws
        -> Operations.AdminListCustomProviders.Output
    {
        _ = try await access.admin()
        return .ok(.init(body: .json(.init(providers: try await customProviders.list(type: input.query._type)))))
    }

    func adminCreateCustomProvider(_ input: Operations.AdminCreateCustomProvider.Input) async throws
        -> Operations.AdminCreateCustomProvider.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await customProviders.create(body, by: admin))))
        }
    }

    func adminGetCustomProvider(_ input: Operations.AdminGetCustomProvider.Input) async throws
        -> Operations.AdminGetCustomProvider.Output
    {
        _ = try await access.admin()
        return .ok(.init(body: .json(try await customProviders.get(input.path.identifier))))
    }

    func adminUpdateCustomProvider(_ input: Operations.AdminUpdateCustomProvider.Input) async throws
        -> Operations.AdminUpdateCustomProvider.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await customProviders.update(input.path.identifier, body, by: admin))))
        }
    }

    func adminDeleteCustomProvider(_ input: Operations.AdminDeleteCustomProvider.Input) async throws
        -> Operations.AdminDeleteCustomProvider.Output
    {
        let admin = try await access.admin()
        try await customProviders.delete(input.path.identifier, by: admin)
        return .noContent(.init())
    }
}
