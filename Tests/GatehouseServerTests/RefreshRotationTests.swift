import Foundation
import Testing

@testable import GatehouseServer

/// The refresh rotation rule without a store (`RefreshRotation`): every verdict a presented token can get, how a batch
/// is placed, and what the store's check answers for each row it read.
@Suite("The refresh rotation rule")
struct RefreshRotationTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let grace: TimeInterval = 10

    static func row(
        revokedAt: Int64? = nil, disabledAt: Int64? = nil, parentID: String? = nil,
        parent: (refreshedAt: Int64, expiresAt: Int64, revokedAt: Int64?)? = nil
    ) -> SessionRow {
        SessionRow(
            accountID: "account", refreshedAt: now.epochMilliseconds, expiresAt: now.epochMilliseconds + 60_000,
            revokedAt: revokedAt, amr: [], aal: .aal1, factorID: nil, companyID: nil, username: nil, idleTimeout: nil,
            parentID: parentID, accountDisabledAt: disabledAt, parent: parent)
    }

    static let live = SessionService.LiveSession(
        accountID: "account", amr: [], aal: .aal1, factorID: nil, companyID: nil, username: nil, parentID: nil,
        endsAt: now.epochMilliseconds + 60_000)

    static func verdict(rotatedAt: Date?, row: SessionRow = row(), live: SessionService.LiveSession? = live)
        -> RefreshRotation.Verdict
    {
        RefreshRotation.verdict(rotatedAt: rotatedAt, session: row, live: live, now: now, grace: grace)
    }

    @Test("a token never rotated, of a live session, is fresh")
    func fresh() {
        #expect(Self.verdict(rotatedAt: nil) == .fresh(Self.live))
    }

    @Test("a token rotated within the grace window is a late twin, up to the window's last instant")
    func lateTwin() {
        #expect(Self.verdict(rotatedAt: Self.now) == .lateTwin(Self.live))
        #expect(Self.verdict(rotatedAt: Self.now.addingTimeInterval(-Self.grace)) == .lateTwin(Self.live))
    }

    @Test("a token rotated before the grace window is reuse")
    func reuse() {
        #expect(Self.verdict(rotatedAt: Self.now.addingTimeInterval(-Self.grace - 0.001)) == .reuse(Self.live))
    }

    @Test("a session signed out, whose parent was signed out or is gone, ended as signed out, whatever the token")
    func signedOut() {
        let ended: [SessionRow] = [
            Self.row(revokedAt: 1),
            Self.row(parentID: "parent", parent: (Self.now.epochMilliseconds, Self.now.epochMilliseconds + 60_000, 1)),
            Self.row(parentID: "parent", parent: nil),
        ]
        for row in ended {
            #expect(Self.verdict(rotatedAt: nil, row: row, live: nil) == .ended(.signedOut))
            #expect(
                Self.verdict(rotatedAt: Self.now.addingTimeInterval(-3600), row: row, live: nil) == .ended(.signedOut))
        }
    }

    @Test("a disabled account's session ended as banned, even when it was also signed out")
    func banned() {
        #expect(Self.verdict(rotatedAt: nil, row: Self.row(disabledAt: 1), live: nil) == .ended(.banned))
        #expect(Self.verdict(rotatedAt: nil, row: Self.row(revokedAt: 1, disabledAt: 1), live: nil) == .ended(.banned))
    }

    @Test("a session not live for any other reason (its lifetime or idle timeout) expired")
    func expired() {
        #expect(Self.verdict(rotatedAt: nil, row: Self.row(), live: nil) == .expired)
        #expect(Self.verdict(rotatedAt: Self.now, row: Self.row(), live: nil) == .expired)
    }

    @Test(
        "a batch writes each token once, in order; a token again is the twin of its first; one rotated lately is not written"
    )
    func plan() {
        let plan = RefreshRotation.plan(["a", "b", "a", "c", "b", "a"], rotatedLately: ["c"])
        #expect(plan.written == [0, 1])
        #expect(plan.slots == [.written(0), .written(1), .twin(of: 0), .rotatedLately, .twin(of: 1), .twin(of: 0)])
        #expect(RefreshRotation.plan([], rotatedLately: []).written.isEmpty)
    }

    @Test("a twin of a rotation replays it; a twin of any other outcome shares it")
    func twin() throws {
        struct Outage: Error {}
        typealias Outcome = Result<RefreshRotation.Outcome, Outage>
        #expect(try RefreshRotation.twin(of: Outcome.success(.rotated)).get() == .rotatedByTwin)
        #expect(try RefreshRotation.twin(of: Outcome.success(.alreadyRotated)).get() == .alreadyRotated)
        #expect(try RefreshRotation.twin(of: Outcome.success(.sessionEnded)).get() == .sessionEnded)
        #expect(throws: Outage.self) { try RefreshRotation.twin(of: Outcome.failure(Outage())).get() }
    }

    @Test(
        "the store's check rotates what is unrotated and live; gone, rotated or repeated tokens were rotated already; a revoked or other session ended"
    )
    func checked() {
        let stored: [String: RefreshRotation.Stored] = [
            "fresh": .init(rotatedAt: nil, sessionID: "s1", sessionRevokedAt: nil),
            "spent": .init(rotatedAt: 5, sessionID: "s1", sessionRevokedAt: nil),
            "revoked": .init(rotatedAt: nil, sessionID: "s2", sessionRevokedAt: 7),
            "moved": .init(rotatedAt: nil, sessionID: "s3", sessionRevokedAt: nil),
        ]
        let presented: [(digest: String, sessionID: String)] = [
            ("fresh", "s1"), ("spent", "s1"), ("gone", "s1"), ("revoked", "s2"), ("moved", "s9"), ("fresh", "s1"),
        ]
        #expect(
            RefreshRotation.checked(presented, stored: stored)
                == [.rotated, .alreadyRotated, .alreadyRotated, .sessionEnded, .sessionEnded, .alreadyRotated])
    }
}
