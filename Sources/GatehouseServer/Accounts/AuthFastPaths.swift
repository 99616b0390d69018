import Foundation
import GatehouseAPI
import Hummingbird

/// The fast paths of `/auth/v1` (`FastPath`), beside their handlers in `AuthAPI.swift`:
/// - `GET /auth/v1/user` (`API.getUser`): the user as the session cache keeps it, encoded once per read from the
///   store (`AuthCache.CachedUser`), where the generated path encoded it again for every request (26% of its time);
/// - `POST /auth/v1/token?grant_type=refresh_token` (`API.token`): the new session around that same user JSON
///   (`TokenService.refreshJSON`, `SessionService.responseJSON`), where encoding the answer took 7% of a refresh's
///   time.
extension FastPath {
    static func user(access: Access, users: UserReader) -> FastPath {
        FastPath(
            method: .get,
            matches: { $0.uri.path == "/auth/v1/user" && acceptsJSON($0.headers[.accept]) },
            answer: { _, _ in
                let caller = try await access.account()
                guard let user = try await users.cached(id: caller.accountID) else { throw ProfileService.userNotFound }
                return user.json
            })
    }

    static func refresh(access: Access, tokens: TokenService) -> FastPath {
        FastPath(
            method: .post,
            matches: { $0.uri.path == "/auth/v1/token" && $0.uri.query == "grant_type=refresh_token" },
            answer: { request, context in
                guard exchangesJSON(request) else { return nil }
                let buffer = try await body(&request, context: context)
                // The body as the generated handler reads it: the first grant of the `oneOf` that decodes. A body
                // with both of the password grant's fields goes to it; any other that holds a refresh token string is
                // the refresh grant (read without trying the password grant first, whose failure threw per request).
                guard let probe = try? JSONDecoder().decode(RefreshProbe.self, from: buffer), !probe.passwordFields
                else { return nil }
                let body = Schemas.RefreshGrant(refreshToken: probe.refreshToken)
                return try await tokens.refreshJSON(body, client: try access.client())
            })
    }

    /// A token request's body, read for what tells its grant: the refresh token, and whether the password grant's
    /// required fields are both there.
    private struct RefreshProbe: Decodable {
        let refreshToken: String
        let passwordFields: Bool

        enum CodingKeys: String, CodingKey {
            case refreshToken = "refresh_token"
            case email, password
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            refreshToken = try container.decode(String.self, forKey: .refreshToken)
            passwordFields = container.contains(.email) && container.contains(.password)
        }
    }
}
