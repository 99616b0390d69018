import Foundation
import Testing

@testable import GatehouseServer

/// Single sign-on per company through a SAML 2.0 identity provider nobody here wrote (pysaml2, `Tests/saml/idp.py`):
/// GoTrue's `POST /auth/v1/sso`, the IdP's answer posted to `/auth/v1/sso/saml/acs`, the app's `?code=` or session;
/// signed responses, signed assertions and encrypted ones accepted, and the classic attacks refused with nothing
/// changed.
///
/// One test at a time: each starts a pysaml2 process, and a burst of them at the suite's start would starve the rest of
/// a parallel run on two cores.
@Suite("Single sign-on: SAML 2.0 with a pysaml2 identity provider", .serialized)
struct SAMLFlowTests {
    static let app = "myapp://sso-callback"
    static let verifier = String(repeating: "s", count: 50)

    /// A company on the Enterprise tier with the IdP registered for a fresh domain.
    struct Setup {
        let admin: AdminClient
        let owner: Person
        let companyID: String
        let providerID: String
        let domain: String
    }

    static func with(
        signInsPerIP: RateLimit? = nil, _ body: (AccountHarness, SAMLPeer, Setup) async throws -> Void
    ) async throws {
        let idp = try await SAMLPeer.start()
        defer { idp.stop() }
        try await AccountHarness.with({
            $0.auth.redirectAllowList = [app]
            if let signInsPerIP { $0.auth.limits.signInsPerIP = signInsPerIP }
        }) { h in
            var owner = try await h.person("sso-owner")
            let cid = try await h.company("SSO Co", owner: &owner, tier: .enterprise)
            let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
            let spMetadata = try await h.client.get("/auth/v1/sso/saml/metadata")
            #expect(spMetadata.status == 200)
            try await idp.register(serviceProvider: spMetadata.body)
            let domain = "sso-\(UInt32.random(in: 0...UInt32.max)).example"
            let created = try await admin.send(
                .post, "/auth/v1/admin/sso/providers",
                [
                    "type": "saml", "company_id": cid, "metadata_xml": try await idp.metadata(), "domains": [domain],
                    "resource_id": "acme-\(domain)",
                ])
            #expect(created.status == 201, "\(created.json)")
            let providerID = try #require(created.json["id"] as? String)
            try await body(
                h, idp, Setup(admin: admin, owner: owner, companyID: cid, providerID: providerID, domain: domain))
        }
    }

    /// `POST /auth/v1/sso` for the domain: the IdP's URL (the AuthnRequest in its query).
    static func start(_ h: AccountHarness, _ setup: Setup, pkce: Bool = true) async throws -> String {
        var body: [String: Any] = ["domain": setup.domain, "redirect_to": app]
        if pkce {
            body["code_challenge"] = PKCE.s256(verifier)
            body["code_challenge_method"] = "s256"
        }
        let started = try await h.client.post("/auth/v1/sso", body)
        #expect(started.status == 200, "\(started.json)")
        return try #require(started.json["url"] as? String)
    }

    /// The IdP's answer posted to the ACS, as its page would: where the browser is sent.
    static func post(_ h: AccountHarness, _ answer: SAMLPeer.Answer) async throws -> (status: Int, URLComponents) {
        var form = URLComponents()
        form.queryItems = [URLQueryItem(name: "SAMLResponse", value: answer.samlResponse)]
        if let relay = answer.relayState { form.queryItems?.append(URLQueryItem(name: "RelayState", value: relay)) }
        let body = (form.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        let reply = try await h.client.http.send(
            .POST, h.client.base + "/auth/v1/sso/saml/acs", rawBody: body,
            headers: h.client.headers + [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://127.0.0.1"),
                ("Sec-Fetch-Site", "cross-site"),
            ])
        let location = try #require(reply.headers["location"], "\(reply.status) \(reply.body)")
        return (reply.status, try #require(URLComponents(string: location)))
    }

    /// A whole sign-in with the IdP answering in `mode`: where the browser lands.
    static func signIn(
        _ h: AccountHarness, _ idp: SAMLPeer, _ setup: Setup, mode: String = "signed-assertion",
        nameID: String? = nil, pkce: Bool = true
    ) async throws -> URLComponents {
        let url = try await start(h, setup, pkce: pkce)
        var shape: [String: Any] = ["mode": mode]
        if let nameID { shape["name_id"] = nameID }
        try await idp.next(shape)
        return try await post(h, try await idp.answer(url)).1
    }

    static func value(_ name: String, _ target: URLComponents) -> String? {
        RedirectFlowTests.value(name, target)
    }

    /// The session a landing's `?code=` is exchanged for.
    static func exchange(_ h: AccountHarness, _ landed: URLComponents) async throws -> SignedIn {
        let code = try #require(value("code", landed), "\(landed)")
        let exchanged = try await h.client.post(
            "/auth/v1/token?grant_type=pkce", ["auth_code": code, "code_verifier": verifier])
        #expect(exchanged.status == 200, "\(exchanged.json)")
        return try SignedIn(exchanged)
    }

    @Test("a signed assertion signs in a new SSO account, which joins the company; the next sign-in finds it again")
    func signedAssertion() async throws {
        try await Self.with { h, idp, setup in
            let email = "ada@\(setup.domain)"
            let url = try await Self.start(h, setup)
            let request = try #require(URLComponents(string: url))
            #expect(url.hasPrefix(idp.baseURL + "/sso/redirect?"))
            #expect(request.queryItems?.contains { $0.name == "SAMLRequest" } == true)
            try await idp.next(["name_id": email, "attributes": ["email": [email], "name": ["Ada Lovelace"]]])
            let (status, landed) = try await Self.post(h, try await idp.answer(url))
            #expect(status == 303)
            #expect(landed.scheme == "myapp")
            let session = try await Self.exchange(h, landed)
            let user = try await h.client.user(session.access).json
            #expect(user["email"] as? String == email)
            #expect(user["is_sso_user"] as? Bool == true)
            let identities = user["identities"] as? [[String: Any]] ?? []
            #expect(identities.map { $0["provider"] as? String } == ["sso:\(setup.providerID)"])
            #expect(identities.first?["id"] as? String == email)

            let companies = try await h.client.get("/v1/companies", bearer: session.access).json
            let listed = (companies["companies"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            #expect(listed.contains(setup.companyID), "the account joined the provider's company")

            let again = try await Self.exchange(h, try await Self.signIn(h, idp, setup, nameID: email))
            #expect(try await h.client.user(again.access).json["id"] as? String == user["id"] as? String)

            // Its address and way in are the provider's: no password or address of its own, here or by the admin.
            for change in [["password": "a brand new password 1"], ["email": "elsewhere@example.com"]] {
                let refused = try await h.client.put("/auth/v1/user", change, bearer: again.access)
                #expect(refused.status == 422 && refused.json["error_code"] as? String == "user_sso_managed")
            }
            let byAdmin = try await setup.admin.send(
                .put, "/auth/v1/admin/users/\(try #require(user["id"] as? String))", ["password": "another one 12"])
            #expect(byAdmin.status == 422 && byAdmin.json["error_code"] as? String == "user_sso_managed")
        }
    }

    @Test(
        "signed responses, both signed, and encrypted assertions sign in; without PKCE the session is in the fragment")
    func otherSignedShapes() async throws {
        try await Self.with { h, idp, setup in
            for mode in ["signed-response", "signed-both", "encrypted-assertion"] {
                let landed = try await Self.signIn(h, idp, setup, mode: mode, nameID: "\(mode)@\(setup.domain)")
                #expect(Self.value("error_code", landed) == nil, "\(mode): \(landed)")
                _ = try await Self.exchange(h, landed)
            }
            let landed = try await Self.signIn(h, idp, setup, nameID: "implicit@\(setup.domain)", pkce: false)
            let access = try #require(Self.value("access_token", landed), "\(landed)")
            #expect(try await h.client.user(access).json["email"] as? String == "implicit@\(setup.domain)")
        }
    }

    static let attacks = [
        "unsigned", "wrong-audience", "expired", "comment-injection", "tampered-assertion",
        "unsigned-assertion-in-signed-envelope", "duplicate-id", "doctype", "sha1", "wrong-issuer", "xsw1", "xsw2",
        "xsw3", "xsw4", "xsw5", "xsw6", "xsw7", "xsw8",
    ]

    @Test("the classic attacks are refused with validation_failed and make no account")
    func attacks() async throws {
        // Two sign-in calls per attack, from one address: the per-address limit is raised for this test alone.
        try await Self.with(signInsPerIP: RateLimit(limit: 1000, per: 300)) { h, idp, setup in
            for mode in Self.attacks {
                let victim = "victim@\(setup.domain)"
                let url = try await Self.start(h, setup)
                try await idp.next(["mode": mode, "name_id": victim, "evil_name_id": "attacker@\(setup.domain)"])
                let (_, landed) = try await Self.post(h, try await idp.answer(url))
                #expect(landed.scheme == "myapp")
                #expect(Self.value("error_code", landed) == "validation_failed", "\(mode): \(landed)")
                #expect(Self.value("code", landed) == nil, "\(mode)")
                let description = Self.value("error_description", landed) ?? ""
                #expect(description.hasPrefix("SAML Assertion is not valid"), "\(mode): \(description)")
            }
            let users =
                try await setup.admin.get("/auth/v1/admin/users?per_page=1000").json["users"] as? [[String: Any]]
            #expect(users?.contains { ($0["email"] as? String)?.hasSuffix(setup.domain) == true } == false)
        }
    }

    @Test("an IdP's refusal (status Responder/AuthnFailed) says so")
    func identityProviderRefused() async throws {
        try await Self.with { h, idp, setup in
            let landed = try await Self.signIn(h, idp, setup, mode: "status-failure")
            #expect(Self.value("error_code", landed) == "validation_failed")
            #expect(Self.value("error_description", landed)?.contains("refused the sign-in") == true)
        }
    }

    @Test("a response posted twice is refused the second time; an unsolicited assertion signs in once")
    func replay() async throws {
        try await Self.with { h, idp, setup in
            let url = try await Self.start(h, setup)
            try await idp.next(["name_id": "replay@\(setup.domain)"])
            let answer = try await idp.answer(url)
            _ = try await Self.exchange(h, try await Self.post(h, answer).1)
            let (_, second) = try await Self.post(h, answer)
            #expect(Self.value("error_code", second) == "saml_relay_state_not_found")

            // IdP-initiated: no relay state to spend, so the assertion id is what stops the replay.
            let spEntity = h.server.baseURL + "/auth/v1/sso/saml/metadata"
            try await idp.next(["name_id": "unsolicited@\(setup.domain)"])
            let unsolicited = try await idp.initiate(serviceProvider: spEntity, relayState: Self.app)
            let (_, first) = try await Self.post(h, unsolicited)
            #expect(first.scheme == "myapp")
            #expect(Self.value("error_code", first) == nil, "\(first)")
            #expect(Self.value("code", first) != nil || Self.value("access_token", first) != nil)
            let (_, replayed) = try await Self.post(h, unsolicited)
            #expect(Self.value("error_code", replayed) == "validation_failed")
            #expect(Self.value("error_description", replayed)?.contains("used already") == true)
        }
    }

    @Test("a trip older than five minutes is refused saml_relay_state_expired")
    func expiredTrip() async throws {
        try await Self.with { h, idp, setup in
            let url = try await Self.start(h, setup)
            try await idp.next(["name_id": "slow@\(setup.domain)"])
            let answer = try await idp.answer(url)
            h.clock.advance(by: 301)
            let (_, landed) = try await Self.post(h, answer)
            #expect(Self.value("error_code", landed) == "saml_relay_state_expired")
        }
    }

    @Test("an SSO account is never the password account with the same address, which stays as it was")
    func neverLinkedByEmail() async throws {
        try await Self.with { h, idp, setup in
            let email = "shared@\(setup.domain)"
            let password = try await h.confirmedAccount(email)
            let session = try await Self.exchange(h, try await Self.signIn(h, idp, setup, nameID: email))
            let user = try await h.client.user(session.access).json
            #expect(user["id"] as? String != password.userID)
            #expect(user["email"] as? String == email)
            let original = try await h.client.user(password.access).json
            #expect((original["identities"] as? [[String: Any]])?.count == 1)
            #expect(original["is_sso_user"] as? Bool == false)
        }
    }

    @Test("POST /auth/v1/sso: provider by id, a 303 on request, and the stable errors")
    func startErrors() async throws {
        try await Self.with { h, idp, setup in
            let byID = try await h.client.post(
                "/auth/v1/sso", ["provider_id": setup.providerID, "skip_http_redirect": false, "redirect_to": Self.app])
            #expect(byID.status == 303)
            #expect(byID.headers["location"]?.hasPrefix(idp.baseURL + "/sso/redirect?") == true, "\(byID.headers)")

            let unknown = try await h.client.post("/auth/v1/sso", ["domain": "nobody-\(setup.domain)"])
            #expect(unknown.status == 404)
            #expect(unknown.json["error_code"] as? String == "sso_provider_not_found")
            let neither = try await h.client.post("/auth/v1/sso", [:])
            #expect(neither.status == 400 && neither.json["error_code"] as? String == "validation_failed")
            let both = try await h.client.post(
                "/auth/v1/sso", ["domain": setup.domain, "provider_id": setup.providerID])
            #expect(both.status == 400 && both.json["error_code"] as? String == "validation_failed")

            let disabled = try await setup.admin.send(
                .put, "/auth/v1/admin/sso/providers/\(setup.providerID)", ["disabled": true])
            #expect(disabled.status == 200 && disabled.json["disabled"] as? Bool == true)
            let refused = try await h.client.post("/auth/v1/sso", ["domain": setup.domain])
            #expect(refused.status == 404)
            #expect(refused.json["error_code"] as? String == "sso_provider_disabled")
        }
    }

    @Test("the service provider's metadata: entity id, ACS, encryption certificate, and the download")
    func metadata() async throws {
        try await Self.with { h, _, _ in
            let reply = try await h.client.get("/auth/v1/sso/saml/metadata")
            #expect(reply.headers["content-type"]?.hasPrefix("application/xml") == true)
            let base = h.server.baseURL
            #expect(reply.body.contains("entityID=\"\(base)/auth/v1/sso/saml/metadata\""))
            #expect(reply.body.contains("Location=\"\(base)/auth/v1/sso/saml/acs\""))
            #expect(reply.body.contains("use=\"encryption\""))
            #expect(reply.body.contains("WantAssertionsSigned=\"true\""))
            let again = try await h.client.get("/auth/v1/sso/saml/metadata")
            #expect(
                again.body.components(separatedBy: "X509Certificate>")[1]
                    == reply.body.components(separatedBy: "X509Certificate>")[1],
                "the key is made once")
            let download = try await h.client.get("/auth/v1/sso/saml/metadata?download=true")
            #expect(download.headers["content-disposition"]?.contains("metadata.xml") == true)
        }
    }
}
