import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1/admin/oauth/clients…` (service key only) and `/auth/v1/oauth/clients/register` (RFC 7591): the OAuth
// provider's clients. While `--oauth-server` is off every one answers 404 oauth_server_disabled.

extension API {
    /// The service key, then the server being on (GoTrue checks in that order).
    private func oauthAdmin() async throws -> AdminCaller {
        let admin = try await access.admin()
        try oauthClients.requireEnabled()
        return admin
    }

    func adminListOAuthClients(_ input: Operations.AdminListOAuthClients.Input) async throws
        -> Operations.AdminListOAuthClients.Output
    {
        _ = try await oauthAdmin()
        let page = try AdminPage(page: input.query.page, perPage: input.query.perPage)
        let (clients, total) = try await oauthClients.page(page)
        var query: [(String, String)] = [("page", String(page.number))]
        if let perPage = input.query.perPage, !perPage.isEmpty { query.append(("per_page", perPage)) }
        let link = page.linkHeader(path: "/auth/v1/admin/oauth/clients", query: query, total: total)
        return .ok(
            .init(
                headers: .init(link: link, xTotalCount: total),
                body: .json(.init(clients: clients.map { Schemas.OAuthClient($0) }, aud: "authenticated"))))
    }

    func adminCreateOAuthClient(_ input: Operations.AdminCreateOAuthClient.Input) async throws
        -> Operations.AdminCreateOAuthClient.Output
    {
        let admin = try await oauthAdmin()
        switch input.body {
        case .json(let body):
            let (client, secret) = try await oauthClients.register(OAuthClientMetadata(body), by: admin)
            return .created(.init(body: .json(Schemas.OAuthClient(client, secret: secret))))
        }
    }

    func adminGetOAuthClient(_ input: Operations.AdminGetOAuthClient.Input) async throws
        -> Operations.AdminGetOAuthClient.Output
    {
        _ = try await oauthAdmin()
        return .ok(.init(body: .json(Schemas.OAuthClient(try await oauthClients.client(input.path.clientId)))))
    }

    func adminUpdateOAuthClient(_ input: Operations.AdminUpdateOAuthClient.Input) async throws
        -> Operations.AdminUpdateOAuthClient.Output
    {
        let admin = try await oauthAdmin()
        switch input.body {
        case .json(let body):
            let client = try await oauthClients.update(input.path.clientId, OAuthClientChange(body), by: admin)
            return .ok(.init(body: .json(Schemas.OAuthClient(client))))
        }
    }

    func adminDeleteOAuthClient(_ input: Operations.AdminDeleteOAuthClient.Input) async throws
        -> Operations.AdminDeleteOAuthClient.Output
    {
        let admin = try await oauthAdmin()
        try await oauthClients.remove(input.path.clientId, by: admin)
        return .noContent(.init())
    }

    func adminRegenerateOAuthClientSecret(_ input: Operations.AdminRegenerateOAuthClientSecret.Input) async throws
        -> Operations.AdminRegenerateOAuthClientSecret.Output
    {
        let admin = try await oauthAdmin()
        let (client, secret) = try await oauthClients.regenerateSecret(input.path.clientId, by: admin)
        return .ok(.init(body: .json(Schemas.OAuthClient(client, secret: secret))))
    }

    /// RFC 7591: anyone registers, when allowed; refused metadata is answered in the RFC's shape.
    func registerOAuthClient(_ input: Operations.RegisterOAuthClient.Input) async throws
        -> Operations.RegisterOAuthClient.Output
    {
        switch input.body {
        case .json(let body):
            switch try await oauthClients.registerDynamically(OAuthClientMetadata(body), client: try access.client()) {
            case .success(let (client, secret)):
                return .created(.init(body: .json(Schemas.OAuthClientRegistration(client, secret: secret))))
            case .failure(let refusal):
                return .badRequest(
                    .init(
                        body: .json(
                            .OAuthClientRegistrationError(
                                .init(
                                    error: .init(rawValue: refusal.kind.rawValue) ?? .invalidClientMetadata,
                                    errorDescription: refusal.message)))))
            }
        }
    }
}

extension OAuthClientMetadata {
    init(_ body: Schemas.OAuthClientRequest) {
        self.init(
            name: body.clientName, clientURI: body.clientUri, logoURI: body.logoUri, redirectURIs: body.redirectUris,
            grantTypes: body.grantTypes, responseTypes: body.responseTypes, scope: body.scope,
            clientType: body.clientType, authMethod: body.tokenEndpointAuthMethod)
    }
}

extension OAuthClientChange {
    init(_ body: Schemas.OAuthClientUpdate) {
        self.init(
            name: body.clientName, clientURI: body.clientUri, logoURI: body.logoUri, redirectURIs: body.redirectUris,
            grantTypes: body.grantTypes, responseTypes: body.responseTypes, scope: body.scope,
            authMethod: body.tokenEndpointAuthMethod, clientType: body.clientType)
    }
}

extension Schemas.OAuthClient {
    /// The client as GoTrue answers it; `secret` only right after it was made.
    init(_ client: GatehouseServer.OAuthClient, secret: String? = nil) {
        self.init(
            clientId: client.id, clientSecret: secret, clientName: client.name,
            clientType: .init(rawValue: client.type.rawValue) ?? .confidential,
            tokenEndpointAuthMethod: .init(rawValue: client.authMethod) ?? .clientSecretBasic,
            registrationType: .init(rawValue: client.registrationType) ?? .manual, clientUri: client.clientURI,
            logoUri: client.logoURI, redirectUris: client.redirectURIs, grantTypes: client.grantTypes,
            responseTypes: client.responseTypes, scope: client.scope,
            createdAt: Date(epochMilliseconds: client.createdAt), updatedAt: Date(epochMilliseconds: client.updatedAt))
    }
}

extension Schemas.OAuthClientRegistration {
    /// RFC 7591's client information response: the secret never expires (0).
    init(_ client: GatehouseServer.OAuthClient, secret: String?) {
        self.init(
            clientId: client.id, clientSecret: secret, clientIdIssuedAt: client.createdAt / 1000,
            clientSecretExpiresAt: 0, clientName: client.name.isEmpty ? nil : client.name,
            clientUri: client.clientURI, logoUri: client.logoURI, redirectUris: client.redirectURIs,
            grantTypes: client.grantTypes, responseTypes: client.responseTypes,
            tokenEndpointAuthMethod: client.authMethod, scope: client.scope,
            clientType: .init(rawValue: client.type.rawValue) ?? .confidential,
            registrationType: .init(rawValue: client.registrationType) ?? .dynamic)
    }
}
