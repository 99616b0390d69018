import Foundation
import GatehouseAPI
import GatehouseServer
import Hummingbird
import Testing

/// The document is the contract: every route the router serves is an operation of openapi.yaml, and the other way
/// round.
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

    @Test("every route the router serves is a documented operation, and every documented operation is served")
    func routesMatchDocument() async throws {
        let services = try GatehouseServices(try await TestStore.configuration(), logger: TestStore.quietLogger)
        let router = try buildRouter(services)
        try router.validate()
        let served = Set(router.routes.map { "\($0.method) \(Self.normalized("\($0.path)"))" })
        let documented = try Self.documentedOperations()
        #expect(documented.count >= 40)
        #expect(served.subtracting(documented).sorted() == [], "served but not documented")
        #expect(documented.subtracting(served).sorted() == [], "documented but not served")
        await services.store.close()
    }
}
