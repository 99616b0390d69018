import Foundation
import GatehouseServer
import SQLKit
import Testing

@testable import GatehouseServer

/// The attack review of wave 2 (issue 22), replayed: logs, stored digests, live streams and the audit trail.
@Suite("Hardening: logs and digests, live streams, refusal audits")
struct HardeningTests {
    @Test("F3: at the most verbose log level, no line holds an address, a password hash or a code's digest")
    func debugLogsHoldNoSecrets() async throws {
        try await AccountHarness.with { h in
            // The harness logs at trace, below --log-level debug.
            let email = AccountHarness.newEmail()
            _ = try await h.client.signUp(email, password: "correct horse battery")
            let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
            let db = h.server.services.store.database
            let row = try #require(
                try await db.select().columns("id", "code_hash").from("one_time_codes").where("email", .equal, email)
                    .first())
            let codeID = try row.decode(column: "id", as: String.self)
            let stored = try row.decode(column: "code_hash", as: String.self)
            _ = try SignedIn(try await h.client.verify(email, code: code, type: "signup"))
            _ = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let passwordHash = try #require(
                try await db.select().column("password_hash").from("accounts").where("email", .equal, email)
                    .first(decodingColumn: "password_hash", as: String.self))

            let lines = h.log.all
            #expect(!lines.isEmpty)
            for (what, secret) in [
                ("the address", email), ("the password hash", passwordHash), ("the stored code digest", stored),
                ("the code's unkeyed digest", Secrets.digest("\(codeID):\(code)")),
            ] {
                #expect(!lines.contains { $0.contains(secret) }, "a log line holds \(what)")
            }
            // A copy of the database does not give the code away either: its digest is keyed with a key that is not
            // in the database, so hashing the million six-digit codes with the row's id finds nothing.
            #expect(stored.hasPrefix("hmac:"))
            #expect(stored != Secrets.digest("\(codeID):\(code)"))
        }
    }
}
