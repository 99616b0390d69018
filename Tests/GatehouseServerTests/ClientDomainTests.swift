import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's company domains against the server's router, its resolver a dnslib server the test changes.
@Suite("GatehouseClient company domains")
struct ClientDomainTests {
    @Test("add, list, verify (missing, then published), a rival's claim refused with its code, remove")
    func domains() async throws {
        let dns = try await DNSPeer.start()
        defer { dns.stop() }
        try await AccountHarness.with({ $0.dnsResolver = dns.resolver }) { h in
            let owner = try AppDevice(h)
            try await owner.signUp(h, "domains")
            let company = try await owner.client.companies.create(name: "Domains Ltd")
            _ = try await owner.client.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
            let name = "sdk-\(UUID().uuidString.prefix(8).lowercased()).example"
            let added = try await owner.client.companies.addDomain(name.uppercased())
            #expect(added.domain == name && added.status == .pending && added.verifiedAt == nil)
            #expect(added.recordName == "_gatehouse-challenge.\(name)")
            #expect(try await owner.client.companies.domains() == [added])
            do throws(GatehouseError) {
                _ = try await owner.client.companies.verifyDomain(id: added.id)
                Issue.record("a domain without its record was verified")
            } catch {
                #expect(error.code == .domainRecordNotFound)
            }
            try dns.serve([added.recordName: [added.recordValue]])
            let verified = try await owner.client.companies.verifyDomain(id: added.id)
            #expect(verified.status == .verified && verified.verifiedAt != nil && verified.lastCheckedAt != nil)

            let rival = try AppDevice(h)
            try await rival.signUp(h, "rival")
            let other = try await rival.client.companies.create(name: "Rival Ltd")
            _ = try await rival.client.companies.createCredential(
                in: other.id, username: "rex", password: "red tractor 99")
            try await rival.client.companies.signIn(to: other.id, username: "rex", password: "red tractor 99")
            let claim = try await rival.client.companies.addDomain(name)
            try dns.serve([added.recordName: [added.recordValue, claim.recordValue]])
            do throws(GatehouseError) {
                _ = try await rival.client.companies.verifyDomain(id: claim.id)
                Issue.record("a second company verified a domain another holds")
            } catch {
                #expect(error.code == .domainAlreadyVerified)
            }
            #expect(try await rival.client.companies.domains().map(\.status) == [.pending])

            try await owner.client.companies.removeDomain(id: added.id)
            #expect(try await owner.client.companies.domains().isEmpty)
        }
    }

    @Test("joining by domain: the owner's setting, a request seen and approved, the joiner's list")
    func joinByDomain() async throws {
        let dns = try await DNSPeer.start()
        defer { dns.stop() }
        try await AccountHarness.with({ $0.dnsResolver = dns.resolver }) { h in
            let owner = try AppDevice(h)
            try await owner.signUp(h, "joinowner")
            let company = try await owner.client.companies.create(name: "Joinable Ltd")
            #expect(try await Operator(store: h.server.services.store).setTier(company.id, .business))
            _ = try await owner.client.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
            let name = "sdkjoin-\(UUID().uuidString.prefix(8).lowercased()).example"
            let domain = try await owner.client.companies.addDomain(name)
            try dns.serve([domain.recordName: [domain.recordValue]])
            _ = try await owner.client.companies.verifyDomain(id: domain.id)
            #expect(try await owner.client.companies.domainJoin() == DomainJoin(mode: .off))
            let setting = DomainJoin(mode: .approval, role: .readOnly, deptMask: 3)
            #expect(try await owner.client.companies.setDomainJoin(setting) == setting)

            let joiner = try AppDevice(h)
            let email = "joiner@\(name)"
            try await joiner.client.auth.signUp(email: email, password: "correct horse battery", profile: [:])
            let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
            try await joiner.client.auth.verify(email: email, code: code, type: .signup)
            let seen = try #require(try await joiner.client.companies.domainCompanies().first)
            #expect(seen.id == company.id && seen.domain == name && seen.mode == .approval && !seen.isMember)
            #expect(try await joiner.client.companies.joinByDomain(company.id) == false)
            #expect(try await joiner.client.companies.domainCompanies().first?.isRequested == true)
            let request = try #require(try await owner.client.companies.joinRequests().first)
            #expect(request.email == email)
            try await owner.client.companies.approveJoinRequest(id: request.id)
            #expect(try await owner.client.companies.joinRequests().isEmpty)
            let joined = try await joiner.client.companies.list().first { $0.id == company.id }
            #expect(joined?.role == .readOnly)
            #expect(try await joiner.client.companies.joinByDomain(company.id) == true)
        }
    }
}
