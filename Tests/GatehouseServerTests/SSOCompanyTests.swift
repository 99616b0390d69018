import Foundation
import Testing

@testable import GatehouseServer

/// What single sign-on does for its company: an SSO account joins with the company's default role and mask; a
/// company that requires SSO sends the people of its verified domain to its provider (email sign-in refused 403
/// `sso_required`, its owner excepted) and takes their SSO session for its own login; OIDC providers per company
/// through the same endpoints.
@Suite("Single sign-on: the company's side", .serialized)
struct SSOCompanyTests {
    typealias Setup = SAMLFlowTests.Setup

    /// An Enterprise company whose owner's address is at a domain the company holds verified (through a DNS peer),
    /// and the pysaml2 IdP registered for that domain.
    static func with(_ body: (AccountHarness, SAMLPeer, Setup) async throws -> Void) async throws {
        let dns = try await DNSPeer.start()
        defer { dns.stop() }
        let idp = try await SAMLPeer.start()
        defer { idp.stop() }
        try await AccountHarness.with({
            $0.dnsResolver = dns.resolver
            $0.auth.redirectAllowList = [SAMLFlowTests.app]
        }) { h in
            let domain = DomainFlowTests.newDomain("sso")
            let email = "owner@\(domain)"
            var owner = Person(email: email, account: try await h.confirmedAccount(email))
            let cid = try await h.company("Required Co", owner: &owner, tier: .enterprise)
            let record = try await DomainFlowTests.add(h, cid, domain, owner)
            try dns.serve([record.name: [record.value]])
            #expect(try await h.client.verifyDomain(cid, record.id, bearer: owner.company?.access).status == 200)
            try await idp.register(serviceProvider: try await h.client.get("/auth/v1/sso/saml/metadata").body)
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let created = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                ["type": "saml", "company_id": cid, "metadata_xml": try await idp.metadata(), "domains": [domain]])
            #expect(created.status == 201, "\(created.json)")
            try await body(
                h, idp,
                Setup(
                    admin: admin, owner: owner, companyID: cid,
                    providerID: try #require(created.json["id"] as? String), domain: domain))
        }
    }

    /// Signs `email` in through the IdP: the SSO account's session.
    static func ssoSession(_ h: AccountHarness, _ idp: SAMLPeer, _ setup: Setup, _ email: String) async throws
        -> SignedIn
    {
        try await SAMLFlowTests.exchange(
            h, try await SAMLFlowTests.signIn(h, idp, setup, nameID: email))
    }

    @Test("an SSO account joins the company once, with the company's default role and department mask")
    func membership() async throws {
        try await Self.with { h, idp, setup in
            let set = try await h.client.setDomainJoin(
                setup.companyID, mode: "off", role: "read_only", deptMask: 5, bearer: setup.owner.company?.access)
            #expect(set.status == 200)
            let ada = try await Self.ssoSession(h, idp, setup, "ada@\(setup.domain)")
            let members = try await h.client.get(
                "/v1/companies/\(setup.companyID)/members", bearer: setup.owner.company?.access)
            let member = (members.json["members"] as? [[String: Any]] ?? []).first {
                $0["account_id"] as? String == ada.userID
            }
            #expect(member?["role"] as? String == "read_only" && member?["dept_mask"] as? Int == 5, "\(members.body)")
            _ = try await Self.ssoSession(h, idp, setup, "ada@\(setup.domain)")
            let again = try await h.client.get(
                "/v1/companies/\(setup.companyID)/members", bearer: setup.owner.company?.access)
            let before = (members.json["members"] as? [[String: Any]])?.count
            #expect((again.json["members"] as? [[String: Any]])?.count == before, "a second sign-in joins nobody new")
        }
    }

    @Test(
        "required: email sign-in at the domain is refused sso_required (the owner excepted), the SSO session opens the company"
    )
    func required() async throws {
        try await Self.with { h, idp, setup in
            let bob = try await h.confirmedAccount("bob@\(setup.domain)")
            let sso = try await Self.ssoSession(h, idp, setup, "carol@\(setup.domain)")

            let notOwner = try await h.client.put(
                "/v1/companies/\(setup.companyID)/sso", ["required": true], bearer: sso.access)
            #expect(notOwner.status == 403)
            let required = try await h.client.put(
                "/v1/companies/\(setup.companyID)/sso", ["required": true], bearer: setup.owner.company?.access)
            #expect(required.status == 200 && required.json["required"] as? Bool == true, "\(required.body)")
            let listed = required.json["providers"] as? [[String: Any]]
            #expect(listed?.first?["id"] as? String == setup.providerID)

            let password = try await h.client.password("bob@\(setup.domain)", "correct horse battery")
            #expect(password.status == 403 && password.json["error_code"] as? String == "sso_required")
            #expect(password.json["provider_id"] as? String == setup.providerID)
            let otp = try await h.client.otp("bob@\(setup.domain)")
            #expect(otp.status == 403 && otp.json["error_code"] as? String == "sso_required")
            let recovery = try await h.client.post("/auth/v1/recover", ["email": "bob@\(setup.domain)"])
            #expect(recovery.status == 403 && recovery.json["error_code"] as? String == "sso_required")
            let signUp = try await h.client.signUp("new@\(setup.domain)", password: "correct horse battery")
            #expect(signUp.status == 403 && signUp.json["error_code"] as? String == "sso_required")
            let owner = try await h.client.password(setup.owner.email, "correct horse battery")
            #expect(owner.status == 200, "the owner keeps the way in they had")
            _ = bob

            // The company's login takes the SSO session instead of the per-company password.
            let login = try await h.client.companyLogin(
                setup.companyID, username: nil, password: nil, bearer: sso.access)
            #expect(login.status == 200, "\(login.body)")

            let relaxed = try await h.client.put(
                "/v1/companies/\(setup.companyID)/sso", ["required": false], bearer: setup.owner.company?.access)
            #expect(relaxed.status == 200)
            #expect(try await h.client.password("bob@\(setup.domain)", "correct horse battery").status == 200)
            let noSSOLogin = try await h.client.companyLogin(
                setup.companyID, username: nil, password: nil, bearer: sso.access)
            #expect(noSSOLogin.status == 400, "without the requirement, the company's own login is asked for again")
        }
    }

    @Test("requiring single sign-on needs an enabled provider with a domain")
    func requiresProvider() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("no-provider")
            let cid = try await h.company("Plain Co", owner: &owner, tier: .enterprise)
            let refused = try await h.client.put(
                "/v1/companies/\(cid)/sso", ["required": true], bearer: owner.company?.access)
            #expect(refused.status == 400 && refused.json["code"] as? String == "validation_failed")
            let read = try await h.client.get("/v1/companies/\(cid)/sso", bearer: owner.company?.access)
            #expect(read.json["required"] as? Bool == false && (read.json["providers"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("OIDC per company (our extension): POST /auth/v1/sso sends the browser on; the SSO account joins")
    func oidc() async throws {
        let fake = try await FakeProviders.start()
        defer { Task { try? await fake.server.stop() } }
        try await AccountHarness.with({
            fake.configure(&$0)
            $0.auth.redirectAllowList = [SAMLFlowTests.app]
        }) { h in
            var owner = try await h.person("oidc-owner")
            let cid = try await h.company("OIDC Co", owner: &owner, tier: .enterprise)
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let domain = DomainFlowTests.newDomain("oidc")
            let created = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                [
                    "type": "oidc", "company_id": cid, "domains": [domain],
                    "oidc": [
                        "issuer": fake.baseURL, "client_id": "acme-client", "client_secret": FakeProviders.acmeSecret,
                    ],
                ])
            #expect(created.status == 201, "\(created.json)")
            #expect(created.json["saml"] == nil && (created.json["oidc"] as? [String: Any])?["client_secret"] == nil)
            let providerID = try #require(created.json["id"] as? String)

            let started = try await h.client.post(
                "/auth/v1/sso",
                [
                    "domain": domain, "redirect_to": SAMLFlowTests.app, "skip_http_redirect": false,
                    "code_challenge": PKCE.s256(SAMLFlowTests.verifier), "code_challenge_method": "S256",
                ])
            #expect(started.status == 303, "\(started.body)")
            let location = try #require(started.headers["location"])
            #expect(location.hasPrefix(fake.baseURL + "/authorize?"))
            let cookie = try #require(started.headers["set-cookie"]?.split(separator: ";").first).description
            let email = "grace@\(domain)"
            let code = fake.approve(location, .init(sub: "grace-1", email: email))
            let landed = try await RedirectFlowTests.callback(
                h, "code=\(code)&state=\(try RedirectFlowTests.state(location))",
                browser: RedirectFlowTests.Browser(cookie: cookie))
            let session = try await SAMLFlowTests.exchange(h, landed)
            let user = try await h.client.user(session.access).json
            #expect(user["email"] as? String == email && user["is_sso_user"] as? Bool == true)
            let providers = (user["identities"] as? [[String: Any]] ?? []).compactMap { $0["provider"] as? String }
            #expect(providers == ["sso:\(providerID)"])
            let companies = try await h.client.get("/v1/companies", bearer: session.access).json
            #expect(
                (companies["companies"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == cid },
                "the account joined the provider's company")

            // Never linked to another account, by address or by the user.
            let linking = try await h.client.get(
                "/auth/v1/user/identities/authorize?provider=sso%3A\(providerID)", bearer: owner.account.access)
            #expect(linking.status == 400 || linking.status == 404, "\(linking.body)")
        }
    }
}
