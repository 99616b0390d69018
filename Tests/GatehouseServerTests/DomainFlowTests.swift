import Foundation
import Testing

@testable import GatehouseServer

/// One small helper per domain endpoint.
extension AuthClient {
    func addDomain(_ cid: String, _ domain: String, bearer: String?) async throws -> HTTPReply {
        try await post("/v1/companies/\(cid)/domains", ["domain": domain], bearer: bearer)
    }

    func listDomains(_ cid: String, bearer: String?) async throws -> HTTPReply {
        try await get("/v1/companies/\(cid)/domains", bearer: bearer)
    }

    func verifyDomain(_ cid: String, _ id: String, bearer: String?) async throws -> HTTPReply {
        try await post("/v1/companies/\(cid)/domains/\(id)/verify", [:], bearer: bearer)
    }

    func removeDomain(_ cid: String, _ id: String, bearer: String?) async throws -> HTTPReply {
        try await delete("/v1/companies/\(cid)/domains/\(id)", bearer: bearer)
    }
}

/// Company domains against a real DNS server (dnslib, `Tests/dns/server.py`) that the tests change as they go.
@Suite("Company domains: DNS TXT verification, one company per domain, scheduled re-checks")
struct DomainFlowTests {
    /// A domain no other test in the run uses: verified domains are unique across the store.
    static func newDomain(_ tag: String) -> String { "\(tag)-\(UUID().uuidString.prefix(8).lowercased()).example" }

    /// A harness whose resolver is a fresh DNS peer, and a company owned by a new person; stopped afterwards.
    static func with(
        _ body: (AccountHarness, DNSPeer, _ owner: Person, _ cid: String) async throws -> Void
    ) async throws {
        let dns = try await DNSPeer.start()
        defer { dns.stop() }
        try await AccountHarness.with({ $0.dnsResolver = dns.resolver }) { h in
            var owner = try await h.person("domain-owner")
            let cid = try await h.company("Domain Co", owner: &owner)
            try await body(h, dns, owner, cid)
        }
    }

    /// Adds `domain` and answers its id, record name and value.
    static func add(_ h: AccountHarness, _ cid: String, _ domain: String, _ owner: Person) async throws
        -> (id: String, name: String, value: String)
    {
        let added = try await h.client.addDomain(cid, domain, bearer: owner.company?.access)
        #expect(added.status == 201, "\(added.body)")
        #expect(added.json["status"] as? String == "pending")
        return (
            try #require(added.json["id"] as? String), try #require(added.json["record_name"] as? String),
            try #require(added.json["record_value"] as? String)
        )
    }

    static func status(_ h: AccountHarness, _ cid: String, _ id: String, _ owner: Person) async throws -> String? {
        let list = try await h.client.listDomains(cid, bearer: owner.company?.access)
        let domains = list.json["domains"] as? [[String: Any]] ?? []
        return domains.first { $0["id"] as? String == id }?["status"] as? String
    }

    /// `owner` signed in again, to the account and the company: a test that moves the clock by days outlives tokens.
    static func again(_ h: AccountHarness, _ cid: String, _ owner: Person) async throws -> Person {
        var owner = owner
        let account = try SignedIn(try await h.client.password(owner.email, "correct horse battery"))
        owner.company = try SignedIn(
            try await h.client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: account.access))
        return owner
    }

    static func auditActions(_ h: AccountHarness, _ cid: String, _ owner: Person) async throws -> [String] {
        let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: owner.company?.access)
        return (audit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
    }

    @Test("the record present verifies the domain; absent or another value leaves it pending with a clear code")
    func presentAndAbsent() async throws {
        try await Self.with { h, dns, owner, cid in
            let domain = Self.newDomain("Acme").uppercased()
            let record = try await Self.add(h, cid, domain, owner)
            #expect(record.name == "_gatehouse-challenge.\(domain.lowercased())")
            #expect(record.value.hasPrefix("gatehouse-verification="))
            // Absent: NXDOMAIN.
            var verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 422 && verified.json["code"] as? String == "domain_record_not_found")
            // Another value beside others.
            try dns.serve([record.name: ["v=spf1 -all", "gatehouse-verification=someone-else"]])
            verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 422 && verified.json["code"] as? String == "domain_record_not_found")
            #expect(try await Self.status(h, cid, record.id, owner) == "pending")
            // Present.
            try dns.serve([record.name: ["v=spf1 -all", record.value]])
            verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 200, "\(verified.body)")
            #expect(verified.json["status"] as? String == "verified" && verified.json["verified_at"] is String)
            #expect(try await Self.status(h, cid, record.id, owner) == "verified")
            let actions = try await Self.auditActions(h, cid, owner)
            #expect(actions.contains("domain_added") && actions.contains("domain_verified"))
            // Added twice: refused.
            let again = try await h.client.addDomain(cid, domain.lowercased(), bearer: owner.company?.access)
            #expect(again.status == 409 && again.json["code"] as? String == "domain_exists")
            // Removed: gone from the list, audited.
            #expect(try await h.client.removeDomain(cid, record.id, bearer: owner.company?.access).status == 204)
            #expect(try await Self.status(h, cid, record.id, owner) == nil)
            #expect(try await h.client.removeDomain(cid, record.id, bearer: owner.company?.access).status == 404)
            #expect(try await Self.auditActions(h, cid, owner).contains("domain_removed"))
        }
    }

    @Test("names that are not a company's domain are refused")
    func invalidDomains() async throws {
        try await Self.with { h, _, owner, cid in
            for bad in ["com", "localhost", "127.0.0.1", "bad_name.example", "x.local", "a..example"] {
                let added = try await h.client.addDomain(cid, bad, bearer: owner.company?.access)
                #expect(added.status == 400 && added.json["code"] as? String == "validation_failed", "\(bad)")
            }
        }
    }

    @Test("a lookup the resolver never answers is a clear error, and nothing changes")
    func lookupTimesOut() async throws {
        try await Self.with { h, dns, owner, cid in
            let record = try await Self.add(h, cid, Self.newDomain("slow"), owner)
            try dns.serve([record.name: [record.value]], silent: [record.name])
            let verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 503 && verified.json["code"] as? String == "dns_lookup_failed")
            #expect(try await Self.status(h, cid, record.id, owner) == "pending")
        }
    }

    @Test("a record set too large for UDP (TC set) is asked for again over TCP and verifies the domain")
    func truncatedOverUDP() async throws {
        try await Self.with { h, dns, owner, cid in
            let record = try await Self.add(h, cid, Self.newDomain("big"), owner)
            // SPF and many vendors' verification strings: about 8 KB, far past what fits in a UDP answer.
            let others =
                ["v=spf1 include:_spf.mail.example -all"]
                + (0..<40).map { "vendor-\($0)-site-verification=" + String(repeating: "k\($0 % 10)", count: 90) }
            // Over TCP only the others: not found, so the TCP answer was read and decoded, not taken as a failure.
            try dns.serve([record.name: others], truncated: [record.name])
            var verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 422 && verified.json["code"] as? String == "domain_record_not_found")
            // The value among them, last: verified.
            try dns.serve([record.name: others + [record.value]], truncated: [record.name])
            verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 200, "\(verified.body)")
            #expect(verified.json["status"] as? String == "verified")
            #expect(try await Self.status(h, cid, record.id, owner) == "verified")
        }
    }

    @Test("truncated over UDP and no answer over TCP: 503 dns_lookup_failed, and nothing changes")
    func truncatedAndSilentOverTCP() async throws {
        try await Self.with { h, dns, owner, cid in
            let record = try await Self.add(h, cid, Self.newDomain("quiet-tcp"), owner)
            try dns.serve([record.name: [record.value]], truncated: [record.name], silentOverTCP: [record.name])
            let verified = try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access)
            #expect(verified.status == 503 && verified.json["code"] as? String == "dns_lookup_failed")
            #expect(try await Self.status(h, cid, record.id, owner) == "pending")
        }
    }

    @Test("a domain another company holds verified: 409 domain_already_verified, nothing changed")
    func secondCompany() async throws {
        try await Self.with { h, dns, owner, cid in
            let domain = Self.newDomain("claimed")
            let first = try await Self.add(h, cid, domain, owner)
            var rival = try await h.person("rival")
            let rivalCID = try await h.company("Rival Co", owner: &rival)
            let second = try await Self.add(h, rivalCID, domain, rival)
            #expect(first.value != second.value)
            try dns.serve([first.name: [first.value, second.value]])
            #expect(try await h.client.verifyDomain(cid, first.id, bearer: owner.company?.access).status == 200)
            let refused = try await h.client.verifyDomain(rivalCID, second.id, bearer: rival.company?.access)
            #expect(refused.status == 409 && refused.json["code"] as? String == "domain_already_verified")
            #expect(try await Self.status(h, rivalCID, second.id, rival) == "pending")
            #expect(try await Self.status(h, cid, first.id, owner) == "verified")
            #expect(try await !Self.auditActions(h, rivalCID, rival).contains("domain_verified"))
            // Once the first company lets go, the second may verify it.
            #expect(try await h.client.removeDomain(cid, first.id, bearer: owner.company?.access).status == 204)
            #expect(try await h.client.verifyDomain(rivalCID, second.id, bearer: rival.company?.access).status == 200)
        }
    }

    @Test("only the owner manages domains: a member gets 403; another company's domain is 404")
    func ownerOnly() async throws {
        try await Self.with { h, _, owner, cid in
            let record = try await Self.add(h, cid, Self.newDomain("owned"), owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            let bearer = member.company?.access
            for reply in [
                try await h.client.listDomains(cid, bearer: bearer),
                try await h.client.addDomain(cid, Self.newDomain("member"), bearer: bearer),
                try await h.client.verifyDomain(cid, record.id, bearer: bearer),
                try await h.client.removeDomain(cid, record.id, bearer: bearer),
            ] {
                #expect(reply.status == 403 && reply.json["code"] as? String == "forbidden", "\(reply.body)")
            }
            var other = try await h.person("other-owner")
            let otherCID = try await h.company("Other Co", owner: &other)
            let foreign = try await h.client.verifyDomain(otherCID, record.id, bearer: other.company?.access)
            #expect(foreign.status == 404)
            #expect(try await h.client.removeDomain(otherCID, record.id, bearer: other.company?.access).status == 404)
            #expect(try await Self.status(h, cid, record.id, owner) == "pending")
        }
    }

    @Test("the record changed later: daily re-checks, three failures drop it, audited and the owner mailed")
    func changedLater() async throws {
        try await Self.with { h, dns, owner, cid in
            let rechecks = h.server.services.domainRechecks
            let record = try await Self.add(h, cid, Self.newDomain("changed"), owner)
            try dns.serve([record.name: [record.value]])
            #expect(try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access).status == 200)
            /// Moves the clock, runs the re-checks due, and answers how many ran and the domain's status then.
            func later(_ seconds: TimeInterval) async throws -> (checked: Int, status: String?) {
                h.clock.advance(by: seconds)
                let checked = try await rechecks.checkDue()
                return (checked, try await Self.status(h, cid, record.id, try await Self.again(h, cid, owner)))
            }
            // Nothing is due before a day has passed; a day later the record is still there.
            #expect(try await rechecks.checkDue() == 0)
            #expect(try await later(24 * 3600 + 1) == (1, "verified"))
            // The record changes: two failed re-checks an hour apart keep it, the third drops it.
            try dns.serve([record.name: ["gatehouse-verification=changed"]])
            #expect(try await later(24 * 3600 + 1) == (1, "verified"))
            // A resolver that does not answer counts for nothing.
            try dns.serve([:], silent: [record.name])
            #expect(try await later(3600 + 1) == (1, "verified"))
            try dns.serve([:])
            #expect(try await later(15 * 60 + 1) == (1, "verified"))
            var fresh = try await Self.again(h, cid, owner)
            #expect(try await !Self.auditActions(h, cid, fresh).contains("domain_verification_lost"))
            #expect(try await later(3600 + 1) == (1, "pending"))
            fresh = try await Self.again(h, cid, owner)
            #expect(try await Self.auditActions(h, cid, fresh).contains("domain_verification_lost"))
            let domain = String(record.name.dropFirst("_gatehouse-challenge.".count))
            let mail = try await h.mail(to: owner.email, subject: "\(domain) is no longer verified for Domain Co")
            #expect(mail.text.contains("could not be found in several checks in a row"))
            // No longer verified: no more re-checks; publishing the record again verifies it again.
            #expect(try await later(48 * 3600).checked == 0)
            try dns.serve([record.name: [record.value]])
            fresh = try await Self.again(h, cid, owner)
            #expect(try await h.client.verifyDomain(cid, record.id, bearer: fresh.company?.access).status == 200)
        }
    }
}
