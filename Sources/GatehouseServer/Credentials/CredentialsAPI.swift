import GatehouseAPI
import OpenAPIRuntime

extension API {
    func createCredential(_ input: Operations.CreateCredential.Input) async throws
        -> Operations.CreateCredential.Output
    {
        let caller = try await access.account()
        switch input.body {
        case .json(let body):
            return .created(.init(body: .json(try await credentials.create(input.path.cid, body, by: caller))))
        }
    }

    func getCredential(_ input: Operations.GetCredential.Input) async throws -> Operations.GetCredential.Output {
        .ok(.init(body: .json(try await credentials.show(try await access.company(input.path.cid)))))
    }

    func deleteCredential(_ input: Operations.DeleteCredential.Input) async throws
        -> Operations.DeleteCredential.Output
    {
        try await credentials.delete(try await access.company(input.path.cid, ownSessionOnly: true))
        return .noContent(.init())
    }

    func changeCredentialPassword(_ input: Operations.ChangeCredentialPassword.Input) async throws
        -> Operations.ChangeCredentialPassword.Output
    {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        switch input.body {
        case .json(let body): try await credentials.changePassword(body, by: caller)
        }
        return .noContent(.init())
    }

    func companyLogin(_ input: Operations.CompanyLogin.Input) async throws -> Operations.CompanyLogin.Output {
        let caller = try await access.account()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await credentials.login(input.path.cid, body, by: caller))))
        }
    }

    func memberImage(_ input: Operations.MemberImage.Input) async throws -> Operations.MemberImage.Output {
        let caller = try await access.company(input.path.cid)
        let image = try await credentials.image(of: input.path.accountId, for: caller)
        let body = HTTPBody(image.data)
        return .ok(.init(body: image.type == "image/png" ? .png(body) : .jpeg(body)))
    }
}
