import Foundation

extension Operator {
    /// The OAuth client service on the command line: the same rules and audit as the admin API, `by: operator`. It
    /// works while `--oauth-server` is off, so clients can be registered before the provider opens.
    private func oauthClients(_ configuration: GatehouseConfiguration) -> OAuthClients {
        OAuthClients(store: store, clock: SystemClock(), trail: trail, settings: configuration.auth.oauthServer)
    }

    /// `gatehouse oauth-clients add`: registers a client; answers its id and, for a confidential client, its secret,
    /// shown once. A refusal throws `OAuthClientCommandError` with GoTrue's words.
    public func addOAuthClient(
        name: String, redirectURIs: [String], isPublic: Bool, grantTypes: [String]?, scope: String?,
        configuration: GatehouseConfiguration
    ) async throws -> (id: String, secret: String?) {
        let metadata = OAuthClientMetadata(
            name: name, redirectURIs: redirectURIs, grantTypes: grantTypes, scope: scope,
            clientType: isPublic ? OAuthClient.Kind.public.rawValue : OAuthClient.Kind.confidential.rawValue)
        do {
            let (client, secret) = try await oauthClients(configuration).register(metadata, by: .commandLine)
            return (client.id, secret)
        } catch let error as APIError where error.code == ErrorCode.validationFailed.rawValue {
            throw OAuthClientCommandError(description: error.message)
        }
    }

    /// `gatehouse oauth-clients list`: one line per client, newest first.
    public func oauthClientLines(configuration: GatehouseConfiguration) async throws -> [String] {
        try await oauthClients(configuration).list().map { client in
            let name = client.name.isEmpty ? "(no name)" : client.name
            let created = ISO8601DateFormatter().string(from: Date(epochMilliseconds: client.createdAt))
            return "\(client.id)  \(client.type.rawValue)  \(name)  \(client.redirectURIs.joined(separator: ","))"
                + "  \(client.grantTypes.joined(separator: ","))  \(created)"
        }
    }

    /// `gatehouse oauth-clients remove`: false when there is no such client. Its sessions end.
    public func removeOAuthClient(_ id: String, configuration: GatehouseConfiguration) async throws -> Bool {
        do {
            try await oauthClients(configuration).remove(id, by: .commandLine)
            return true
        } catch let error as APIError where error.code == ErrorCode.oauthClientNotFound.rawValue {
            return false
        }
    }

    /// `gatehouse oauth-clients regenerate-secret`: the new secret, shown once; nil when there is no such client.
    /// A public client has no secret: `OAuthClientCommandError`.
    public func regenerateOAuthClientSecret(_ id: String, configuration: GatehouseConfiguration) async throws
        -> String?
    {
        do {
            return try await oauthClients(configuration).regenerateSecret(id, by: .commandLine).secret
        } catch let error as APIError where error.code == ErrorCode.oauthClientNotFound.rawValue {
            return nil
        } catch let error as APIError where error.code == ErrorCode.validationFailed.rawValue {
            throw OAuthClientCommandError(description: error.message)
        }
    }
}

/// A client the command line could not register or change, with the rule's words.
public struct OAuthClientCommandError: Error, CustomStringConvertible {
    public let description: String
}
