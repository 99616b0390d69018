import Foundation
import GatehouseAPI
import HTTPTypes
import Hummingbird
import NIOCore

/// Answers the hot routes with JSON written outside the generated serializer, the same bytes it would write:
/// - `GET /auth/v1/user`: the user as the session cache keeps it, encoded once per read from the store
///   (`AuthCache.CachedUser`), where the generated path encoded it again for every request (26% of its time);
/// - `POST /auth/v1/token?grant_type=refresh_token`: the new session around that same user JSON
///   (`SessionService.responseJSON`), where encoding the answer took 7% of a refresh's time;
/// - `POST /v1/companies/{cid}/sync/pull`: `SyncPage.json()`, the stored fields spliced in rather than parsed and
///   encoded again (more than half of a first sync's server time);
/// - `GET /v1/companies/{cid}/records`: `RecordListPage.json()`, the same for a record list.
///
/// The contract is the generated operations'. A request these paths do not take as it is (another content type, an
/// `Accept` without JSON, a body that does not decode) goes on to the generated handler, with its body as read, so
/// every refusal keeps its generated answer; a refusal of the caller (no session, wrong company) is thrown as the
/// generated handler throws it.
struct SplicedAnswers: RouterMiddleware {
    typealias Context = AppRequestContext

    let access: Access
    let users: UserReader
    let tokens: TokenService
    let sync: SyncService

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

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        switch request.method {
        case .get where request.uri.path == "/auth/v1/user" && Self.acceptsJSON(request.headers[.accept]):
            let caller = try await access.account()
            guard let user = try await users.cached(id: caller.accountID) else { throw ProfileService.userNotFound }
            return Self.answer(user.json)
        case .get:
            guard let companyID = Self.companyID(request.uri.path, ["records"]),
                Self.acceptsJSON(request.headers[.accept]), let query = Self.listQuery(request.uri.query)
            else { return try await next(request, context) }
            let caller = try await access.company(companyID)
            let page = try await sync.listPage(caller, type: query.type, after: query.after, limit: query.limit)
            return Self.answer(try page.json())
        case .post where request.uri.path == "/auth/v1/token" && request.uri.query == "grant_type=refresh_token":
            guard Self.isJSON(request.headers[.contentType]), Self.acceptsJSON(request.headers[.accept]) else {
                return try await next(request, context)
            }
            var request = request
            let buffer = try await request.collectBody(upTo: context.maxUploadSize)
            // The body as the generated handler reads it: the first grant of the `oneOf` that decodes. A body with
            // both of the password grant's fields goes to it; any other that holds a refresh token string is the
            // refresh grant (read without trying the password grant first, whose failure threw per request).
            guard let probe = try? JSONDecoder().decode(RefreshProbe.self, from: buffer), !probe.passwordFields else {
                return try await next(request, context)
            }
            let body = Schemas.RefreshGrant(refreshToken: probe.refreshToken)
            return Self.answer(try await tokens.refreshJSON(body, client: try access.client()))
        case .post:
            guard let companyID = Self.companyID(pulling: request.uri.path), Self.isJSON(request.headers[.contentType]),
                Self.acceptsJSON(request.headers[.accept])
            else { return try await next(request, context) }
            var request = request
            let buffer = try await request.collectBody(upTo: context.maxUploadSize)
            guard let body = try? JSONDecoder().decode(Schemas.SyncPullRequest.self, from: buffer) else {
                return try await next(request, context)
            }
            let caller = try await access.company(companyID)
            return Self.answer(try await sync.pullPage(body, by: caller).json())
        default:
            return try await next(request, context)
        }
    }

    private static func answer(_ json: [UInt8]) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }

    /// The company of a pull's path, `/v1/companies/{cid}/sync/pull`; nil for any other path (or an id the generated
    /// router would have to decode).
    static func companyID(pulling path: String) -> String? { companyID(path, ["sync", "pull"]) }

    /// The company of `/v1/companies/{cid}/` followed by `rest`; nil for any other path (or an id the generated
    /// router would have to decode).
    static func companyID(_ path: String, _ rest: [Substring]) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4 + rest.count, parts[0].isEmpty, parts[1] == "v1", parts[2] == "companies",
            Array(parts.dropFirst(4)) == rest, !parts[3].isEmpty, !parts[3].contains("%")
        else { return nil }
        return String(parts[3])
    }

    /// A record list's query (`type`, `after`, `limit`), when it is plain: no escapes or `+`, no other or repeated
    /// name, a whole-number limit. Anything else is the generated handler's to read.
    static func listQuery(_ query: String?) -> (type: String?, after: String?, limit: Int?)? {
        guard let query, !query.isEmpty else { return (nil, nil, nil) }
        guard !query.contains("%"), !query.contains("+") else { return nil }
        var values: [String: String] = [:]
        for item in query.split(separator: "&", omittingEmptySubsequences: false) {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, ["type", "after", "limit"].contains(pair[0]), values[String(pair[0])] == nil
            else { return nil }
            values[String(pair[0])] = String(pair[1])
        }
        var limit: Int?
        if let text = values["limit"] {
            guard let number = Int(text) else { return nil }
            limit = number
        }
        return (values["type"], values["after"], limit)
    }

    /// `application/json`, with parameters or none.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.prefix { $0 != ";" }.trimmingHTTPWhitespace
        return type.lowercased() == "application/json"
    }

    /// No `Accept`, or one that takes JSON.
    static func acceptsJSON(_ accept: String?) -> Bool {
        guard let accept else { return true }
        return accept.split(separator: ",").contains { range in
            let type = range.prefix { $0 != ";" }.trimmingHTTPWhitespace.lowercased()
            return type == "application/json" || type == "application/*" || type == "*/*"
        }
    }
}
