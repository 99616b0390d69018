import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1/passkeys…` in Supabase's wire format, company passkeys under `/v1/companies/{cid}/passkeys…`, the admin
// API's passkey endpoints, and Apple's app-site association.

extension Optional where Wrapped == Operations.PasskeyRegistrationOptions.Input.Body {
    /// The proof a registration's options body carries, if any.
    var proof: Schemas.RecentProof? {
        switch self {
        case .json(let proof): proof
        case nil: nil
        }
    }
}

extension Optional where Wrapped == Operations.CompanyPasskeyRegistrationOptions.Input.Body {
    /// The proof a company registration's options body carries, if any.
    var proof: Schemas.RecentProof? {
        switch self {
        case .json(let proof): proof
        case nil: nil
        }
    }
}

extension API {
    func passkeyRegistrationOptions(_ input: Operations.PasskeyRegistrationOptions.Input) async throws
        -> Operations.PasskeyRegistrationOptions.Output
    {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await passkeys.registrationOptions(by: caller, proof: input.body.proof))))
    }

    func passkeyRegistrationVerify(_ input: Operations.PasskeyRegistrationVerify.Input) async throws
        -> Operations.PasskeyRegistrationVerify.Output
    {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await passkeys.registrationVerify(body, by: caller))))
        }
    }

    func passkeyAuthenticationOptions(_ input: Operations.PasskeyAuthenticationOptions.Input) async throws
        -> Operations.PasskeyAuthenticationOptions.Output
    {
        .ok(.init(body: .json(try await passkeys.authenticationOptions(client: try access.client()))))
    }

    func passkeyAuthenticationVerify(_ input: Operations.PasskeyAuthenticationVerify.Input) async throws
        -> Operations.PasskeyAuthenticationVerify.Output
    {
        try passkeys.requireEnabled()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await passkeys.authenticationVerify(body, client: try access.client()))))
        }
    }

    func listPasskeys(_ input: Operations.ListPasskeys.Input) async throws -> Operations.ListPasskeys.Output {
        return .ok(.init(body: .json(try await passkeys.list(by: try await access.permanentAccount()))))
    }

    func renamePasskey(_ input: Operations.RenamePasskey.Input) async throws -> Operations.RenamePasskey.Output {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await passkeys.rename(input.path.passkeyId, body, by: caller))))
        }
    }

    func deletePasskey(_ input: Operations.DeletePasskey.Input) async throws -> Operations.DeletePasskey.Output {
        try await passkeys.delete(input.path.passkeyId, by: try await access.permanentAccount())
        return .noContent(.init())
    }

    func adminListPasskeys(_ input: Operations.AdminListPasskeys.Input) async throws
        -> Operations.AdminListPasskeys.Output
    {
        _ = try await access.admin()
        let account = try await admin.user(input.path.userId)
        return .ok(.init(body: .json(try await passkeys.adminList(accountID: account.id))))
    }

    func adminDeletePasskey(_ input: Operations.AdminDeletePasskey.Input) async throws
        -> Operations.AdminDeletePasskey.Output
    {
        let caller = try await access.admin()
        let account = try await admin.user(input.path.userId)
        try await passkeys.adminDelete(
            accountID: account.id, rawID: input.path.passkeyId,
            event: caller.event(.passkeyDeleted, accountID: account.id))
        return .noContent(.init())
    }

    // MARK: Company passkeys

    func listCompanyPasskeys(_ input: Operations.ListCompanyPasskeys.Input) async throws
        -> Operations.ListCompanyPasskeys.Output
    {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .json(try await passkeys.companyPasskeys(by: caller))))
    }

    func companyPasskeyRegistrationOptions(_ input: Operations.CompanyPasskeyRegistrationOptions.Input) async throws
        -> Operations.CompanyPasskeyRegistrationOptions.Output
    {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        return .ok(
            .init(body: .json(try await passkeys.companyRegistrationOptions(by: caller, proof: input.body.proof))))
    }

    func companyPasskeyRegistrationVerify(_ input: Operations.CompanyPasskeyRegistrationVerify.Input) async throws
        -> Operations.CompanyPasskeyRegistrationVerify.Output
    {
        let caller = try await access.company(input.path.cid, ownSessionOnly: true)
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await passkeys.companyRegistrationVerify(body, by: caller))))
        }
    }

    func deleteCompanyPasskey(_ input: Operations.DeleteCompanyPasskey.Input) async throws
        -> Operations.DeleteCompanyPasskey.Output
    {
        try await passkeys.deleteCompanyPasskey(
            input.path.passkeyId, by: try await access.company(input.path.cid, ownSessionOnly: true))
        return .noContent(.init())
    }

    func companyPasskeyLoginOptions(_ input: Operations.CompanyPasskeyLoginOptions.Input) async throws
        -> Operations.CompanyPasskeyLoginOptions.Output
    {
        let caller = try await access.account()
        return .ok(.init(body: .json(try await passkeys.companyLoginOptions(input.path.cid, by: caller))))
    }

    func companyPasskeyLogin(_ input: Operations.CompanyPasskeyLogin.Input) async throws
        -> Operations.CompanyPasskeyLogin.Output
    {
        let caller = try await access.account()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await passkeys.companyLogin(input.path.cid, body, by: caller))))
        }
    }

    // MARK: Apple's app-site association

    func appleAppSiteAssociation(_ input: Operations.AppleAppSiteAssociation.Input) async throws
        -> Operations.AppleAppSiteAssociation.Output
    {
        guard let association = appSiteAssociation else {
            throw APIError.notFound("No app is set (--apple-app-ids)")
        }
        return .ok(.init(body: .json(association)))
    }
}

extension Schemas.AppSiteAssociation {
    /// The association for `appIDs`: passkeys and saved passwords (`webcredentials`), and the share pages and mailed
    /// links (`applinks`), which then open the app instead of the browser. Nil when no app is set.
    init?(appIDs: [String]) {
        guard !appIDs.isEmpty else { return nil }
        self.init(
            webcredentials: .init(apps: appIDs),
            applinks: .init(details: [
                .init(
                    appIDs: appIDs,
                    components: [
                        .init(_sol_: "/share/*", comment: "A share link opens the app, which accepts it"),
                        .init(_sol_: "/auth/v1/verify", comment: "Sign-in, confirmation and recovery links"),
                    ])
            ]))
    }
}
