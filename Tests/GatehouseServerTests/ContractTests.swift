import Foundation
import GatehouseAPI
import GatehouseServer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The document is the contract: every route the router serves is an operation of openapi.yaml, and the other way
/// round, but for the HTML pages, which are router routes outside it (the link page alone is listed, as it shares
/// its path with the API).
@Suite("Contract: the router against openapi.yaml")
struct ContractTests {
    /// `METHOD /path` for every operation in the document, with path parameters written `{}`.
    static func documentedOperations() throws -> Set<String> {
        let document = String(decoding: try GatehouseAPIDocument.yaml(), as: UTF8.self)
        var operations = Set<String>()
        var path: String?
        var inPaths = false
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if !line.hasPrefix(" "), !line.isEmpty { break }
            if let match = line.firstMatch(of: #/^  (/[^:]*):\s*$/#) {
                path = String(match.1)
            } else if let match = line.firstMatch(of: #/^    (get|put|post|patch|delete|head|options):/#), let path {
                operations.insert("\(match.1.uppercased()) \(Self.normalized(path))")
            }
        }
        return operations
    }

    static func normalized(_ path: String) -> String {
        path.replacing(#/\{[^}]+\}/#, with: "{}").replacing(#/:[A-Za-z]+/#, with: "{}")
    }

    /// The pages' routes (`PageRoutes`), which answer HTML and are no part of the JSON contract.
    static let pageRoutes: Set<String> = [
        "GET /auth/v1/verify", "POST /auth/v1/verify/continue", "GET /account", "GET /account/sign-in",
        "POST /account/sign-in", "POST /account/code", "POST /account/code/verify", "POST /account/link",
        "GET /account/password", "POST /account/password", "POST /account/sign-out", "POST /account/sign-out-others",
        "POST /account/delete", "GET /share/{}", "POST /account/factors", "POST /account/factors/verify",
        "POST /account/factors/remove", "GET /account/second-factor", "POST /account/second-factor",
        "GET /account/passkeys.js", "POST /account/passkeys/options", "POST /account/passkeys/add",
        "POST /account/passkeys/rename", "POST /account/passkeys/remove", "POST /account/sign-in/passkey/options",
        "POST /account/sign-in/passkey", "POST /account/identities/link", "POST /account/identities/unlink",
        "POST /account/invitations/accept", "POST /account/invitations/decline", "GET /account/authorize",
        "POST /account/authorize", "GET /account/device", "POST /account/device",
    ]

    @Test("every route the router serves is a documented operation or a page, and every documented operation is served")
    func routesMatchDocument() async throws {
        let services = try GatehouseServices(try await TestStore.configuration(), logger: TestStore.quietLogger)
        let router = try buildRouter(services)
        try router.validate()
        // The console's pages (`/console…`) are pages too, each area's listed by its own tests.
        let served = Set(router.routes.map { "\($0.method) \(Self.normalized("\($0.path)"))" })
            .filter { !$0.hasPrefix("GET /console") && !$0.hasPrefix("POST /console") }
        let documented = try Self.documentedOperations()
        #expect(documented.count >= 40)
        // The link page alone is listed, for its path is the API's too (POST /auth/v1/verify).
        #expect(documented.intersection(Self.pageRoutes) == ["GET /auth/v1/verify"], "a page in the JSON contract")
        #expect(served.subtracting(documented).subtracting(Self.pageRoutes).sorted() == [], "served but not documented")
        #expect(Self.pageRoutes.subtracting(served).sorted() == [], "a page that is not served")
        #expect(documented.subtracting(served).sorted() == [], "documented but not served")
        await services.store.close()
    }

    /// The protected operations without a request body, as `(method, path)` with every path parameter `x`.
    static func protectedOperationsWithoutBody() throws -> [(method: String, path: String)] {
        let document = String(decoding: try GatehouseAPIDocument.yaml(), as: UTF8.self)
        var found: [(method: String, path: String, secured: Bool, body: Bool)] = []
        var path: String?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "components:" { break }
            if let match = line.firstMatch(of: #/^  (/[^:]*):\s*$/#) {
                path = String(match.1)
            } else if let match = line.firstMatch(of: #/^    (get|put|post|patch|delete):/#), let path {
                found.append((match.1.uppercased(), path.replacing(#/\{[^}]+\}/#, with: "x"), false, false))
            } else if line.hasPrefix("      security: [{ bearer: [] }]"), !found.isEmpty {
                found[found.count - 1].secured = true
            } else if line.hasPrefix("      requestBody:"), !found.isEmpty {
                found[found.count - 1].body = true
            }
        }
        return found.filter { $0.secured && !$0.body && $0.path != "/metrics" }.map { ($0.method, $0.path) }
    }

    @Test("every protected operation refuses no token with 401 no_authorization and a forged one with 403 bad_jwt")
    func protectedOperationsRefuseStrangers() async throws {
        let operations = try Self.protectedOperationsWithoutBody()
        #expect(operations.count >= 20)
        let forged =
            "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4Iiwic2Vzc2lvbl9pZCI6IngiLCJleHAiOjk5OTk5OTk5OTl9.c2lnbmF0dXJl"
        // The OAuth provider on: off, its operations answer oauth_server_disabled before they look at a token.
        try await withRouterApp({ $0.auth.oauthServer.enabled = true }) { client in
            for operation in operations {
                let method = HTTPRequest.Method(rawValue: operation.method)!
                try await client.execute(uri: operation.path, method: method) { response in
                    #expect(response.status == .unauthorized, "\(operation.method) \(operation.path)")
                    #expect(String(buffer: response.body).contains("no_authorization"), "\(operation.path)")
                }
                try await client.execute(
                    uri: operation.path, method: method, headers: [.authorization: "Bearer \(forged)"]
                ) { response in
                    #expect(response.status == .forbidden, "\(operation.method) \(operation.path)")
                    #expect(String(buffer: response.body).contains("bad_jwt"), "\(operation.path)")
                }
            }
        }
    }
}
