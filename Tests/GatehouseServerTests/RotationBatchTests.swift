import Foundation
import SQLKit
import Testing

@testable import GatehouseServer

/// Refresh rotations are written in batches (`RotationQueue`); whatever shares a batch, each request gets the verdict
/// it would get alone, and the audit trail records each rotation once.
@Suite("Refresh rotations written together")
struct RotationBatchTests {
    @Test("concurrent refreshes of many sessions, a race on one token and a revoked session each get their own answer")
    func ownVerdicts() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let first = try await h.confirmedAccount(email)
            var live = [first]
            for _ in 0..<7 { live.append(try SignedIn(try await h.client.password(email, "correct horse battery"))) }
            let revoked = try SignedIn(try await h.client.password(email, "correct horse battery"))
            #expect(try await h.client.logout(revoked.access, scope: "local").status == 204)

            // Every live token once, the first one a second time (a client race inside the grace window), and the
            // revoked session's token, all at once.
            let presented = live.map(\.refresh) + [live[0].refresh, revoked.refresh]
            let replies = try await withThrowingTaskGroup(of: (Int, HTTPReply).self) { group in
                for (index, token) in presented.enumerated() {
                    group.addTask { (index, try await h.client.refresh(token)) }
                }
                var replies: [Int: HTTPReply] = [:]
                for try await (index, reply) in group { replies[index] = reply }
                return replies
            }

            let refreshed = try (0..<live.count).map { try SignedIn(try #require(replies[$0])) }
            #expect(Set(refreshed.map(\.refresh)).count == live.count)
            // The race: both answers carry the same successor, so the device keeps one session.
            let raced = try SignedIn(try #require(replies[live.count]))
            #expect(raced.refresh == refreshed[0].refresh)
            let refused = try #require(replies[live.count + 1])
            #expect(refused.status == 400 && refused.json["error_code"] as? String == "refresh_token_not_found")

            // Each chain goes on from its successor, and the old tokens are spent.
            for session in refreshed {
                #expect(try await h.client.user(session.access).status == 200)
                #expect(try await h.client.refresh(session.refresh).status == 200)
            }

            // One audit event per rotation: a batch refused as a whole wrote nothing of its own.
            let rotations = try await h.server.services.store.database.raw(
                "SELECT COUNT(*) AS n FROM audit_events WHERE action = 'token_refreshed' AND account_id = \(bind: first.userID)"
            ).first(decodingColumn: "n", as: Int.self)
            // live.count first rotations, the race's replay (audited as a refresh too), then live.count more.
            #expect(rotations == 2 * live.count + 1)
        }
    }

    @Test("tokens rotated lately are known for two seconds, and the memory stays bounded")
    func recentRotations() {
        let recent = RecentRotations()
        let start = ContinuousClock.now
        recent.add(["a", "b"], now: start)
        #expect(recent.rotated(["a", "c", "b"], now: start + .milliseconds(1999)) == ["a", "b"])
        #expect(recent.rotated(["a", "b"], now: start + .seconds(2)).isEmpty)
        // Past its capacity, what is old goes first; the new tokens are always kept.
        let later = start + .seconds(3)
        recent.add((0..<RecentRotations.capacity).map { "t\($0)" }, now: later)
        #expect(recent.rotated(["a", "t0", "t\(RecentRotations.capacity - 1)"], now: later).count == 2)
        recent.add(["z"], now: later)
        #expect(recent.rotated(["z"], now: later) == ["z"])
    }
}
