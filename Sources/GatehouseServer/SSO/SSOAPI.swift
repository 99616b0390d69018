import Foundation
import GatehouseAPI
import HTTPTypes

// MARK: A company's single sign-on

extension API {
    func getCompanySSO(_ input: Operations.GetCompanySSO.Input) async throws -> Operations.GetCompanySSO.Output {
        .ok(.init(body: .json(try await companySSO.setting(try await access.company(input.path.cid)))))
    }

    func setCompanySSO(_ input: Operations.SetCompanySSO.Input) async throws -> Operations.SetCompanySSO.Output {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await companySSO.update(body, by: caller))))
        }
    }
}

// MARK: Identity providers (service key)

extension API {
    func adminListSSOProviders(_ input: Operations.AdminListSSOProviders.Input) async throws
        -> Operations.AdminListSSOProviders.Output
    {
        _ = try await access.admin()
        return .ok(
            .init(
                body: .json(
                    try await ssoProviders.list(
                        resourceID: input.query.resourceId, resourceIDPrefix: input.query.resourceIdPrefix))))
    }

    func adminCreateSSOProvider(_ input: Operations.AdminCreateSSOProvider.Input) async throws
        -> Operations.AdminCreateSSOProvider.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body): return .created(.init(body: .json(try await ssoProviders.create(body, by: admin))))
        }
    }

    func adminGetSSOProvider(_ input: Operations.AdminGetSSOProvider.Input) async throws
        -> Operations.AdminGetSSOProvider.Output
    {
        _ = try await access.admin()
        return .ok(.init(body: .json(try await ssoProviders.get(input.path.idpId))))
    }

    func adminUpdateSSOProvider(_ input: Operations.AdminUpdateSSOProvider.Input) async throws
        -> Operations.AdminUpdateSSOProvider.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await ssoProviders.update(input.path.idpId, body, by: admin))))
        }
    }

    func adminDeleteSSOProvider(_ input: Operations.AdminDeleteSSOProvider.Input) async throws
        -> Operations.AdminDeleteSSOProvider.Output
    {
        let admin = try await access.admin()
        return .ok(.init(body: .json(try await ssoProviders.delete(input.path.idpId, by: admin))))
    }
}
