import Foundation
import GatehouseAPI
import OpenAPIRuntime

// GoTrue's user side of the OAuth provider: `/auth/v1/oauth/authorizations/{id}` (the app's consent page reads and
// decides a request with the user's token) and `/auth/v1/user/oauth/grants`.

extension API {
    func getOAuthAuthorization(_ input: Operations.GetOAuthAuthorization.Input) async throws
        -> Operations.GetOAuthAuthorization.Output
    {
        try oauth.checkEnabled()
        let caller = try await access.session()
        switch try await Self.answeringNeeds { try await oauth.open(input.path.authorizationId, by: caller) } {
        case .redirect(let url): return .ok(.init(body: .json(.init(redirectUrl: url))))
        case .details(let details):
            let row = details.authorization
            return .ok(
                .init(
                    body: .json(
                        .init(
                            authorizationId: row.id, redirectUri: row.redirectURI,
                            client: .init(details.client), user: .init(id: details.accountID, email: details.email),
                            scope: row.scope))))
        }
    }

    func consentOAuthAuthorization(_ input: Operations.ConsentOAuthAuthorization.Input) async throws
        -> Operations.ConsentOAuthAuthorization.Output
    {
        try oauth.checkEnabled()
        let caller = try await access.session()
        guard case .json(let body) = input.body else { throw APIError.unsupportedMediaType }
        let url = try await Self.answeringNeeds {
            try await oauth.decide(input.path.authorizationId, approve: body.action == .approve, by: caller)
        }
        return .ok(.init(body: .json(.init(redirectUrl: url))))
    }

    func listOAuthGrants(_ input: Operations.ListOAuthGrants.Input) async throws -> Operations.ListOAuthGrants.Output {
        try oauth.checkEnabled()
        let caller = try await access.account()
        let grants = try await oauth.grants(of: caller.accountID)
        return .ok(
            .init(
                body: .json(
                    grants.map {
                        Schemas.OAuthGrant(client: .init($0.client), scopes: $0.scopes, grantedAt: $0.grantedAt)
                    })))
    }

    func revokeOAuthGrant(_ input: Operations.RevokeOAuthGrant.Input) async throws -> Operations.RevokeOAuthGrant.Output
    {
        try oauth.checkEnabled()
        let caller = try await access.account()
        guard let clientID = input.query.clientId, !clientID.isEmpty else {
            throw APIError.validation("client_id query parameter is required")
        }
        try await oauth.revokeGrant(clientID: clientID, by: caller)
        return .noContent(.init())
    }

    /// The API's answer when the session must first be stronger or fresher (the pages redirect instead).
    private static func answeringNeeds<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch OAuthAuthorizationNeed.secondFactor {
            throw APIError(
                .forbidden, code: .insufficientAal,
                message: "This client asks for a second factor: verify one, then open the authorization again")
        } catch OAuthAuthorizationNeed.signIn {
            throw APIError(
                .forbidden, code: .reauthenticationNeeded,
                message: "This client asks for a recent sign-in: sign in again, then open the authorization again")
        }
    }
}

extension Schemas.OAuthAuthorizationClient {
    init(_ client: OAuthClient) {
        self.init(id: client.id, name: client.name, uri: client.clientURI, logoUri: client.logoURI)
    }
}
