import Foundation
import Testing

@testable import GatehouseServer

/// One small helper per joining-by-domain endpoint.
extension AuthClient {
    func setDomainJoin(_ cid: String, mode: String, role: String = "member", deptMask: Int = 0, bearer: String?)
        async throws -> HTTPReply
    {
        try await put(
            "/v1/companies/\(cid)/domain-join", ["mode": mode, "role": role, "dept_mask": deptMask], bearer: bearer)
    }

    func domainCompanies(bearer: String) async throws -> [[String: Any]] {
        try await get("/v1/domain-companies", bearer: bearer).json["companies"] as? [[String: Any]] ?? []
    }

    func joinByDomain(_ cid: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/domain-companies/\(cid)/join", [:], bearer: bearer)
    }

    func joinRequests(_ cid: String, bearer: String?) async throws -> [[String: Any]] {
        try await get("/v1/companies/\(cid)/join-requests", bearer: bearer).json["requests"] as? [[String: Any]] ?? []
    }
}

/// Joining a company by the verified domain of one's confirmed address (issue 39, item 3): off by default, automatic
/// with the setting's role and mask, or a request the owner approves or declines.
@Suite("Joining a company by a verified domain")
struct DomainJoinTests {
    /// A company (owned by a new person) holding a fresh domain verified through a DNS peer, and that domain.
    static func with(
        _ body: (AccountHarness, _ owner: Person, _ cid: String, _ domain: String) async throws -> Void
    ) async throws {
        let dns = try await DNSPeer.start()
        defer { dns.stop() }
        try await AccountHarness.with({ $0.dnsResolver = dns.resolver }) { h in
            var owner = try await h.person("join-owner")
            let cid = try await h.company("Join Co", owner: &owner)
            let domain = DomainFlowTests.newDomain("join")
            let record = try await DomainFlowTests.add(h, cid, domain, owner)
            try dns.serve([record.name: [record.value]])
            #expect(try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access).status == 200)
            try await body(h, owner, cid, domain)
        }
    }

    /// A person whose confirmed address is at `domain`.
    static func person(_ h: AccountHarness, at domain: String) async throws -> Person {
        let email = "p-\(UUID().uuidString.prefix(8).lowercased())@\(domain)"
        return Person(email: email, account: try await h.confirmedAccount(email))
    }

    @Test("off by default; automatic: the company is seen and joined with the setting's role and mask")
    func automatic() async throws {
        try await Self.with { h, owner, cid, domain in
            let ada = try await Self.person(h, at: domain)
            #expect(try await h.client.domainCompanies(bearer: ada.account.access).isEmpty)
            #expect(try await h.client.joinByDomain(cid, bearer: ada.account.access).status == 404)
            let set = try await h.client.setDomainJoin(
                cid, mode: "automatic", role: "read_only", deptMask: 5, bearer: owner.company?.access)
            #expect(set.status == 200 && set.json["mode"] as? String == "automatic")
            let seen = try await h.client.domainCompanies(bearer: ada.account.access)
            #expect(seen.count == 1 && seen.first?["id"] as? String == cid && seen.first?["member"] as? Bool == false)
            let joined = try await h.client.joinByDomain(cid, bearer: ada.account.access)
            #expect(joined.status == 200 && joined.json["status"] as? String == "joined", "\(joined.body)")
            #expect(
                try await h.client.joinByDomain(cid, bearer: ada.account.access).json["status"] as? String == "joined")
            let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: owner.company?.access)
            let member = (members.json["members"] as? [[String: Any]] ?? []).first {
                $0["account_id"] as? String == ada.id
            }
            #expect(member?["role"] as? String == "read_only" && member?["dept_mask"] as? Int == 5)
            #expect(try await h.client.domainCompanies(bearer: ada.account.access).first?["member"] as? Bool == true)
            // An address at another domain sees nothing and cannot join.
            let bob = try await h.person("elsewhere")
            #expect(try await h.client.domainCompanies(bearer: bob.account.access).isEmpty)
            let refused = try await h.client.joinByDomain(cid, bearer: bob.account.access)
            #expect(refused.status == 404 && refused.json["code"] as? String == "not_found")
        }
    }

    @Test("approval: a request the owner sees, approves or declines; a removed member does not come back")
    func approval() async throws {
        try await Self.with { h, owner, cid, domain in
            #expect(
                try await h.client.setDomainJoin(cid, mode: "approval", bearer: owner.company?.access).status == 200)
            let ada = try await Self.person(h, at: domain)
            let bob = try await Self.person(h, at: domain)
            for person in [ada, bob] {
                let asked = try await h.client.joinByDomain(cid, bearer: person.account.access)
                #expect(asked.status == 200 && asked.json["status"] as? String == "pending")
            }
            #expect(try await h.client.domainCompanies(bearer: ada.account.access).first?["requested"] as? Bool == true)
            let requests = try await h.client.joinRequests(cid, bearer: owner.company?.access)
            #expect(Set(requests.compactMap { $0["email"] as? String }) == [ada.email, bob.email])
            let adaRequest = try #require(requests.first { $0["account_id"] as? String == ada.id }?["id"] as? String)
            let bobRequest = try #require(requests.first { $0["account_id"] as? String == bob.id }?["id"] as? String)
            let approve = "/v1/companies/\(cid)/join-requests/\(adaRequest)/approve"
            #expect(try await h.client.post(approve, [:], bearer: owner.company?.access).status == 204)
            #expect(try await h.client.post(approve, [:], bearer: owner.company?.access).status == 404)
            let decline = "/v1/companies/\(cid)/join-requests/\(bobRequest)"
            #expect(try await h.client.delete(decline, bearer: owner.company?.access).status == 204)
            #expect(try await h.client.joinRequests(cid, bearer: owner.company?.access).isEmpty)
            let companies = try await h.client.get("/v1/companies", bearer: ada.account.access)
            let listed = (companies.json["companies"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            #expect(listed.contains(cid))
            // The owner removes Ada: joining by domain does not bring her back.
            #expect(
                try await h.client.delete("/v1/companies/\(cid)/members/\(ada.id)", bearer: owner.company?.access)
                    .status == 204)
            let back = try await h.client.joinByDomain(cid, bearer: ada.account.access)
            #expect(back.status == 403 && back.json["code"] as? String == "removed_from_company")
            let audit = try await DomainFlowTests.auditActions(h, cid, owner)
            for action in [
                "domain_join_changed", "domain_join_requested", "domain_join_approved", "domain_join_declined",
            ] {
                #expect(audit.contains(action), "\(action)")
            }
        }
    }

    @Test("only the owner sets joining by domain and sees its requests")
    func ownerOnly() async throws {
        try await Self.with { h, owner, cid, _ in
            var member = try await h.person("join-member")
            try await h.join(cid, &member, owner: owner)
            let bearer = member.company?.access
            #expect(try await h.client.setDomainJoin(cid, mode: "automatic", bearer: bearer).status == 403)
            #expect(try await h.client.get("/v1/companies/\(cid)/domain-join", bearer: bearer).status == 403)
            #expect(try await h.client.get("/v1/companies/\(cid)/join-requests", bearer: bearer).status == 403)
            let setting = try await h.client.get("/v1/companies/\(cid)/domain-join", bearer: owner.company?.access)
            #expect(setting.json["mode"] as? String == "off")
        }
    }
}
