import Foundation
import GatehouseClientAPI

// The apps the account let in through the server's OAuth provider (`--oauth-server on`; else every call throws
// `oauth_server_disabled`): another team's dashboard, a partner's app, a command-line tool that signed in "with our
// accounts". An app's settings list them beside the account's devices and take access back: revoking a grant ends
// every session that app holds for the account, so its refresh tokens stop working at once.

extension Auth {
    /// The apps the account let in, newest first, with the scopes each was granted. An account session only: a
    /// company session or an app's own token is refused.
    public func oauthGrants() async throws(GatehouseError) -> [OAuthGrant] {
        try await sessions.authorized { try await $0.listOAuthGrants().ok.body.json }.map(OAuthGrant.init)
    }

    /// Takes access back from one app: its consent goes, so it must ask again, and every session it holds for the
    /// account ends. An app the account never let in (or revoked already) throws `oauth_consent_not_found`.
    public func revokeOAuthGrant(clientID: String) async throws(GatehouseError) {
        _ = try await sessions.authorized { try await $0.revokeOAuthGrant(query: .init(clientId: clientID)).noContent }
    }
}

/// An app the account let in through the server's OAuth provider, and what it may read.
public struct OAuthGrant: Sendable, Equatable, Identifiable {
    /// The app's client id (for `revokeOAuthGrant(clientID:)`): one grant per app.
    public var id: String { clientID }
    /// The app's OAuth client id.
    public let clientID: String
    /// The name the app registered, to show the user.
    public let name: String
    /// The app's home page, if it gave one.
    public let url: URL?
    /// The app's logo, if it gave one.
    public let logoURL: URL?
    /// The scopes granted (`openid`, `email`, `profile`, …), as the server names them.
    public let scopes: [String]
    /// When the account last consented.
    public let grantedAt: Date

    /// A grant as the server would list it (for previews and tests).
    public init(
        clientID: String, name: String, url: URL? = nil, logoURL: URL? = nil, scopes: [String],
        grantedAt: Date = Date()
    ) {
        self.clientID = clientID
        self.name = name
        self.url = url
        self.logoURL = logoURL
        self.scopes = scopes
        self.grantedAt = grantedAt
    }

    init(_ wire: Components.Schemas.OAuthGrant) {
        self.init(
            clientID: wire.client.id, name: wire.client.name, url: wire.client.uri.flatMap(URL.init(string:)),
            logoURL: wire.client.logoUri.flatMap(URL.init(string:)), scopes: wire.scopes, grantedAt: wire.grantedAt)
    }
}

extension GatehouseError.Code {
    /// The account has no grant for that app (never given, or revoked already).
    public static let oauthConsentNotFound = Self(rawValue: "oauth_consent_not_found")
    /// The server's OAuth provider is off (`--oauth-server off`): no app signs in with its accounts.
    public static let oauthServerDisabled = Self(rawValue: "oauth_server_disabled")
}
