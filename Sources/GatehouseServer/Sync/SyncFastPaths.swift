import Foundation
import GatehouseAPI
import Hummingbird

/// The fast paths of company records (`FastPath`), beside their handlers in `SyncAPI.swift`:
/// - `POST /v1/companies/{cid}/sync/pull` (`API.syncPull`): `SyncPage.json()`, the stored fields spliced in rather
///   than parsed and encoded again (more than half of a first sync's server time);
/// - `GET /v1/companies/{cid}/records` (`API.listRecords`): `RecordListPage.json()`, the same for a record list.
extension FastPath {
    static func pullPage(access: Access, sync: SyncService) -> FastPath {
        FastPath(
            method: .post,
            matches: { companyID(pulling: $0.uri.path) != nil },
            answer: { request, context in
                guard let companyID = companyID(pulling: request.uri.path), exchangesJSON(request) else { return nil }
                let buffer = try await body(&request, context: context)
                guard let body = try? JSONDecoder().decode(Schemas.SyncPullRequest.self, from: buffer) else {
                    return nil
                }
                let caller = try await access.company(companyID)
                return try await sync.pullPage(body, by: caller).json()
            })
    }

    static func recordList(access: Access, sync: SyncService) -> FastPath {
        FastPath(
            method: .get,
            matches: { companyID($0.uri.path, ["records"]) != nil },
            answer: { request, _ in
                guard let companyID = companyID(request.uri.path, ["records"]),
                    acceptsJSON(request.headers[.accept]), let query = listQuery(request.uri.query)
                else { return nil }
                let caller = try await access.company(companyID)
                return try await sync.listPage(caller, type: query.type, after: query.after, limit: query.limit).json()
            })
    }

    /// The company of a pull's path, `/v1/companies/{cid}/sync/pull`; nil for any other path (or an id the generated
    /// router would have to decode).
    static func companyID(pulling path: String) -> String? { companyID(path, ["sync", "pull"]) }

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
}
