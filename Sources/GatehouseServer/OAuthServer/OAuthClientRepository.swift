import Foundation
import SQLKit

/// An application registered to sign in with Gatehouse's accounts (`oauth_clients`).
struct OAuthClient: Sendable, Equatable {
    enum Kind: String, Sendable, CaseIterable {
        /// Runs where it cannot keep a secret (a browser, a phone, a command-line tool): PKCE alone.
        case `public`
        /// A server that keeps a secret, shown once and stored as a digest.
        case confidential
    }

    /// A lowercase UUID (supabase-swift decodes it as one).
    let id: String
    var name: String
    let type: Kind
    /// `Secrets.digest` of the secret; nil for a public client.
    var secretHash: String?
    /// `none`, `client_secret_basic` or `client_secret_post`.
    var authMethod: String
    /// `manual` (the operator) or `dynamic` (RFC 7591).
    let registrationType: String
    var clientURI: String?
    var logoURI: String?
    /// Matched exactly, character for character.
    var redirectURIs: [String]
    /// `OAuthGrantType` raw values.
    var grantTypes: [String]
    var responseTypes: [String]
    /// The scopes it may ask for, space-separated.
    var scope: String
    let createdAt: Int64
    var updatedAt: Int64
}

/// The grants a client may be registered for.
enum OAuthGrantType: String, Sendable, CaseIterable {
    case authorizationCode = "authorization_code"
    case refreshToken = "refresh_token"
    case clientCredentials = "client_credentials"
    case deviceCode = "urn:ietf:params:oauth:grant-type:device_code"
}

/// The SQL of OAuth clients.
struct OAuthClientRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "name", "client_type", "secret_hash", "token_endpoint_auth_method", "registration_type", "client_uri",
        "logo_uri", "redirect_uris", "grant_types", "response_types", "scope", "created_at", "updated_at",
    ]

    func insert(_ client: OAuthClient) async throws {
        try await db.insert(into: "oauth_clients").columns(Self.columns)
            .values(
                SQLBind(client.id), SQLBind(client.name), SQLBind(client.type.rawValue), SQLBind(client.secretHash),
                SQLBind(client.authMethod), SQLBind(client.registrationType), SQLBind(client.clientURI),
                SQLBind(client.logoURI), SQLBind(Self.json(client.redirectURIs)), SQLBind(Self.json(client.grantTypes)),
                SQLBind(Self.json(client.responseTypes)), SQLBind(client.scope), SQLBind(client.createdAt),
                SQLBind(client.updatedAt)
            )
            .run()
    }

    /// Writes every field but the id, type, registration and creation time.
    func update(_ client: OAuthClient) async throws {
        try await db.update("oauth_clients")
            .set("name", to: SQLBind(client.name))
            .set("secret_hash", to: SQLBind(client.secretHash))
            .set("token_endpoint_auth_method", to: SQLBind(client.authMethod))
            .set("client_uri", to: SQLBind(client.clientURI))
            .set("logo_uri", to: SQLBind(client.logoURI))
            .set("redirect_uris", to: SQLBind(Self.json(client.redirectURIs)))
            .set("grant_types", to: SQLBind(Self.json(client.grantTypes)))
            .set("response_types", to: SQLBind(Self.json(client.responseTypes)))
            .set("scope", to: SQLBind(client.scope))
            .set("updated_at", to: SQLBind(client.updatedAt))
            .where("id", .equal, client.id)
            .run()
    }

    func find(_ id: String) async throws -> OAuthClient? {
        try await db.select().columns(Self.columns).from("oauth_clients").where("id", .equal, id)
            .first().map(Self.decode)
    }

    /// Several clients by id (a user's grants).
    func find(ids: [String]) async throws -> [String: OAuthClient] {
        guard !ids.isEmpty else { return [:] }
        let rows = try await db.select().columns(Self.columns).from("oauth_clients")
            .where("id", .in, ids).all()
        return Dictionary(try rows.map(Self.decode).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Newest first.
    func list() async throws -> [OAuthClient] {
        try await db.select().columns(Self.columns).from("oauth_clients")
            .orderBy("created_at", .descending).orderBy("id").all().map(Self.decode)
    }

    /// Removes the client; its authorizations and consents go with it (cascade). Answers whether it existed.
    func delete(_ id: String) async throws -> Bool {
        !(try await db.delete(from: "oauth_clients").where("id", .equal, id).returning("id").all().isEmpty)
    }

    /// How many clients there are (the admin list's `X-Total-Count`).
    func count() async throws -> Int {
        try await db.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("oauth_clients")
            .first(decodingColumn: "n", as: Int.self) ?? 0
    }

    /// One page of the clients, newest first.
    func page(offset: Int, limit: Int) async throws -> [OAuthClient] {
        try await db.select().columns(Self.columns).from("oauth_clients")
            .orderBy("created_at", .descending).orderBy("id").limit(limit).offset(offset).all().map(Self.decode)
    }

    private static func json(_ items: [String]) -> String {
        (try? String(decoding: JSONEncoder().encode(items), as: UTF8.self)) ?? "[]"
    }

    private static func list(_ text: String) -> [String] {
        (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? []
    }

    private static func decode(_ row: any SQLRow) throws -> OAuthClient {
        OAuthClient(
            id: try row.decode(column: "id", as: String.self),
            name: try row.decode(column: "name", as: String.self),
            type: OAuthClient.Kind(rawValue: try row.decode(column: "client_type", as: String.self)) ?? .confidential,
            secretHash: try row.decode(column: "secret_hash", as: String?.self),
            authMethod: try row.decode(column: "token_endpoint_auth_method", as: String.self),
            registrationType: try row.decode(column: "registration_type", as: String.self),
            clientURI: try row.decode(column: "client_uri", as: String?.self),
            logoURI: try row.decode(column: "logo_uri", as: String?.self),
            redirectURIs: list(try row.decode(column: "redirect_uris", as: String.self)),
            grantTypes: list(try row.decode(column: "grant_types", as: String.self)),
            responseTypes: list(try row.decode(column: "response_types", as: String.self)),
            scope: try row.decode(column: "scope", as: String.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            updatedAt: try row.decode(column: "updated_at", as: Int64.self))
    }
}
