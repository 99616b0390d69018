import Foundation
import Testing

@testable import GatehouseServer

/// GoTrue's admin API for identity providers (`/auth/v1/admin/sso/providers`), with the company each belongs to: its
/// answers' shape, `resource_<id>`, and each refusal with its stable code, nothing changed.
@Suite("Single sign-on: the admin API for identity providers")
struct SSOAdminTests {
    static func with(_ body: (AccountHarness, SAMLPeer, AdminClient, _ cid: String) async throws -> Void) async throws {
        let idp = try await SAMLPeer.start()
        defer { idp.stop() }
        try await AccountHarness.with { h in
            var owner = try await h.person("sso-admin")
            let cid = try await h.company("Admin SSO Co", owner: &owner, tier: .enterprise)
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            try await body(h, idp, admin, cid)
        }
    }

    @Test("create, list, get by id and by resource id, update, delete: GoTrue's shapes with company_id")
    func lifecycle() async throws {
        try await Self.with { h, idp, admin, cid in
            let metadata = try await idp.metadata()
            let created = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                [
                    "type": "saml", "company_id": cid, "metadata_xml": metadata, "domains": ["Lovelace.Example"],
                    "resource_id": "ada", "attribute_mapping": ["keys": ["name": ["name": "displayName"]]],
                ])
            #expect(created.status == 201, "\(created.json)")
            let id = try #require(created.json["id"] as? String)
            let saml = created.json["saml"] as? [String: Any]
            #expect(saml?["entity_id"] as? String == idp.entityID)
            #expect(saml?["metadata_xml"] as? String == metadata)
            #expect(created.json["company_id"] as? String == cid)
            #expect(created.json["resource_id"] as? String == "ada")
            #expect(created.json["disabled"] as? Bool == false)
            #expect(
                (created.json["domains"] as? [[String: Any]])?.map { $0["domain"] as? String } == ["lovelace.example"])

            let list = try await admin.get("/auth/v1/admin/sso/providers").json["items"] as? [[String: Any]]
            #expect(list?.map { $0["id"] as? String } == [id])
            #expect((list?.first?["saml"] as? [String: Any])?["metadata_xml"] == nil, "the list leaves metadata out")
            #expect(try await admin.get("/auth/v1/admin/sso/providers/resource_ada").json["id"] as? String == id)

            let updated = try await admin.send(
                .put, "/auth/v1/admin/sso/providers/\(id)", ["domains": ["a.example", "b.example"], "resource_id": ""])
            #expect(updated.status == 200)
            #expect((updated.json["domains"] as? [[String: Any]])?.count == 2)
            #expect(updated.json["resource_id"] == nil)

            let deleted = try await admin.send(.delete, "/auth/v1/admin/sso/providers/\(id)", [:])
            #expect(deleted.status == 200 && deleted.json["id"] as? String == id)
            let gone = try await admin.get("/auth/v1/admin/sso/providers/\(id)")
            #expect(gone.status == 404 && gone.json["error_code"] as? String == "sso_provider_not_found")
        }
    }

    @Test("refusals: entity id taken, domain taken, http metadata_url, unknown type, below Enterprise")
    func refusals() async throws {
        try await Self.with { h, idp, admin, cid in
            let metadata = try await idp.metadata()
            let first = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": cid, "metadata_xml": metadata, "domains": ["one.example"]])
            #expect(first.status == 201)

            let again = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": cid, "metadata_xml": metadata])
            #expect(again.status == 422 && again.json["error_code"] as? String == "saml_idp_already_exists")

            let other = try await SAMLPeer.start()
            defer { other.stop() }
            let domainTaken = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                [
                    "type": "saml", "company_id": cid, "metadata_xml": try await other.metadata(),
                    "domains": ["one.example"],
                ])
            #expect(domainTaken.status == 400)
            #expect(domainTaken.json["error_code"] as? String == "sso_domain_already_exists")

            let insecure = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": cid, "metadata_url": other.entityID])
            #expect(insecure.status == 400)
            #expect(insecure.json["msg"] as? String == "metadata_url is not a HTTPS URL")

            let unknown = try await admin.send(
                .post, "/auth/v1/admin/sso/providers", ["type": "ldap", "company_id": cid, "metadata_xml": metadata])
            #expect(unknown.status == 400 && unknown.json["error_code"] as? String == "validation_failed")

            let broken = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": cid, "metadata_xml": "<not-metadata/>"])
            #expect(broken.status == 400 && broken.json["error_code"] as? String == "validation_failed")

            var owner = try await h.person("sso-small")
            let small = try await h.company("Small Co", owner: &owner, tier: .business)
            let belowTier = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": small, "metadata_xml": try await other.metadata()])
            #expect(belowTier.status == 403)

            let list = try await admin.get("/auth/v1/admin/sso/providers").json["items"] as? [[String: Any]]
            #expect(list?.count == 1, "no refusal left a provider behind")
        }
    }
}
