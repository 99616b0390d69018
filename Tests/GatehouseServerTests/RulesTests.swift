import Crypto
import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// The state machines and decisions that need no server: refresh successors, token buckets, company rules (the
/// refresh rotation rule has its own suite, `RefreshRotationTests`).
@Suite("Rules without I/O")
struct RulesTests {
    static let start = Date(timeIntervalSince1970: 1_700_000_000)

    // MARK: Refresh rotation

    @Test("a token's successor is fixed by the token and the key, and differs for another key")
    func successor() {
        let key = SymmetricKey(size: .bits256)
        let next = RefreshRotation.successor(of: "token", key: key)
        #expect(next == RefreshRotation.successor(of: "token", key: key))
        #expect(next != RefreshRotation.successor(of: "token", key: SymmetricKey(size: .bits256)))
        #expect(next != RefreshRotation.successor(of: "token2", key: key))
        #expect(next.count == 43 && !next.contains("="))
    }

    // MARK: Token buckets

    @Test("a bucket gives its burst at once, then refills at its rate, and says how long to wait")
    func tokenBucket() {
        let rule = RateLimit(limit: 150, per: 300, burst: 30)
        var bucket = TokenBucket(tokens: 30, updatedAt: Self.start)
        for _ in 0..<30 { #expect(bucket.take(rule, now: Self.start) == nil) }
        #expect(bucket.take(rule, now: Self.start) == 2)
        // Half a token a second: two seconds later one more request goes through.
        #expect(bucket.take(rule, now: Self.start.addingTimeInterval(2)) == nil)
        #expect(bucket.take(rule, now: Self.start.addingTimeInterval(2)) != nil)
        // It never holds more than its burst, however long it rests.
        _ = bucket.take(rule, now: Self.start.addingTimeInterval(100_000))
        #expect(bucket.tokens <= 29)
    }

    @Test("a limiter forgets full buckets once past its threshold and keeps the others; below it, it sweeps nothing")
    func limiterMemory() {
        let clock = TestClock()
        let limiter = RateLimiter(clock: clock)
        let quick = RateLimit(limit: 1, per: 1)
        let slow = RateLimit(limit: 1, per: 3600)
        // One key whose bucket refills over an hour, and the threshold's worth of keys refilled within a second.
        #expect(limiter.check("slow", slow) == nil)
        for index in 0..<RateLimiter.pruneThreshold { #expect(limiter.check("ip-\(index)", quick) == nil) }
        #expect(limiter.count == RateLimiter.pruneThreshold + 1)
        // Past the threshold, the next check sweeps: the full buckets go, the slow one stays and still counts.
        clock.advance(by: 2)
        _ = limiter.check("one more", quick)
        #expect(limiter.count == 2)
        #expect(limiter.check("slow", slow) != nil)
        // Below the threshold again, nothing is swept.
        for index in 0..<1000 { _ = limiter.check("next-\(index)", quick) }
        clock.advance(by: 2)
        _ = limiter.check("later", quick)
        #expect(limiter.count == 1003)
    }

    // MARK: Company rules

    static func member(_ role: MemberRole, dept: Int64 = 0, manager: Int64 = 0, id: String = "m") -> Membership {
        Membership(companyID: "c", accountID: id, role: role, deptMask: dept, managerMask: manager)
    }

    @Test("tiers: Free admits nobody, Business ten participants, Enterprise any number")
    func tiers() {
        #expect(!CompanyRules.admits(participants: 0, tier: .free))
        #expect(CompanyRules.admits(participants: 9, tier: .business))
        #expect(!CompanyRules.admits(participants: 10, tier: .business))
        #expect(CompanyRules.admits(participants: 10_000, tier: .enterprise))
        #expect(!CompanyTier.free.allowsSharing && CompanyTier.business.allowsSharing)
    }

    @Test("share links: the owner always; a manager only when the policy says so; a plain member never")
    func shareManagement() {
        var policy = CompanyPolicy()
        let manager = Self.member(.member, manager: 0b10)
        #expect(CompanyRules.canManageShares(Self.member(.owner), policy: policy))
        #expect(!CompanyRules.canManageShares(manager, policy: policy))
        policy.managersCanShare = true
        #expect(CompanyRules.canManageShares(manager, policy: policy))
        #expect(!CompanyRules.canManageShares(Self.member(.member), policy: policy))
        #expect(!CompanyRules.canManageShares(Self.member(.readOnly, manager: 0b1), policy: policy))
    }

    @Test("member changes: owners change others but never into an owner; managers move only the bits they manage")
    func memberChanges() {
        let owner = Self.member(.owner, id: "owner")
        let manager = Self.member(.member, dept: 0b01, manager: 0b0110, id: "manager")
        let target = Self.member(.member, dept: 0b0001, id: "target")
        typealias Change = CompanyRules.MemberChange
        #expect(CompanyRules.judge(Change(role: .readOnly), by: owner, on: target) == .allowed)
        #expect(CompanyRules.judge(Change(role: .owner), by: owner, on: target) != .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0), by: owner, on: owner) != .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0b0111), by: manager, on: target) == .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0b1001), by: manager, on: target) != .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0b0000), by: manager, on: target) != .allowed)
        #expect(CompanyRules.judge(Change(managerMask: 0b10), by: manager, on: target) != .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0b10), by: manager, on: owner) != .allowed)
        #expect(CompanyRules.judge(Change(deptMask: 0b10), by: Self.member(.member), on: target) != .allowed)
    }

    @Test("a company logo's URL is what the contract's pattern allows, and nothing a page would have to escape")
    func logoURLs() throws {
        for good in ["https://cdn.example.com/logo.png", "http://img.example:8080/a/b?size=64&v=2", "https://x.io"] {
            #expect(try CompanyService.validLogo(good) == good)
        }
        for bad in [
            "http://Wp4t:048/0vE*", "https://example.com/a b", "javascript:alert(1)", "ftp://example.com/logo",
            "https://exa_mple.com/", "https://example.com/\"<", "https://user@example.com/",
        ] {
            #expect(throws: APIError.self, "\(bad)") { try CompanyService.validLogo(bad) }
        }
    }
}

/// The lists that clients and operators rely on.
@Suite("One list each: error codes and audit actions")
struct ListsTests {
    @Test("the error codes in openapi.yaml are exactly the server's ErrorCode list")
    func errorCodesDocumented() throws {
        let document = String(decoding: try GatehouseAPIDocument.yaml(), as: UTF8.self)
        let line = try #require(document.firstMatch(of: #/\n    ErrorCode:[\s\S]*?enum: \[([a-z_, ]+)\]/#))
        let documented = Set(line.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        #expect(documented == Set(ErrorCode.allCases.map(\.rawValue)))
    }

    @Test("audit actions are unique snake_case names")
    func auditActions() {
        let names = AuditAction.allCases.map(\.rawValue)
        #expect(Set(names).count == names.count)
        #expect(names.allSatisfy { $0.allSatisfy { $0.isLowercase || $0 == "_" } })
    }
}
