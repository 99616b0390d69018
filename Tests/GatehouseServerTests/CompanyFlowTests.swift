import Foundation
import GatehouseServer
import Testing

@Suite("Companies: the seeds' path, credentials, login, sharing, members, tiers")
struct CompanyFlowTests {
    @Test("create → credential → login → share → preview → accept → credential → login → members → removal")
    func seedsPath() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            _ = try await h.client.put(
                "/auth/v1/user", ["data": ["first_name": "Olive", "last_name": "Owner"]], bearer: owner.account.access)
            let created = try await h.client.createCompany("Acme Ltd", bearer: owner.account.access)
            #expect(created.status == 201)
            #expect(created.json["tier"] as? String == "free")
            let cid = try #require(created.json["id"] as? String)
            #expect(try await Operator(store: h.server.services.store).setTier(cid, .business))

            let list = try await h.client.get("/v1/companies", bearer: owner.account.access)
            let entry = try #require((list.json["companies"] as? [[String: Any]])?.first)
            #expect(entry["role"] as? String == "owner")
            #expect(entry["has_credential"] as? Bool == false)
            #expect(entry["member_count"] as? Int == 1)

            let credential = try await h.client.createCredential(
                cid, username: "olive", password: "olive's company pw", bearer: owner.account.access)
            #expect(credential.status == 201)
            #expect(credential.json["super_user"] as? Bool == true)
            #expect(credential.json["password_hash"] == nil && !credential.body.contains("$y$"))

            let login = try await h.client.companyLogin(
                cid, username: "olive", password: "olive's company pw", bearer: owner.account.access)
            #expect(login.status == 200)
            owner.company = try SignedIn(login)
            let claims = try Self.claims(try #require(owner.company?.access))
            #expect(claims["cid"] as? String == cid)
            #expect(claims["company_role"] as? String == "owner")
            #expect(claims["username"] as? String == "olive")
            #expect(claims["dept_mask"] as? Int == 0)

            let share = try await h.client.createShare(
                cid, permission: "read_write", extra: ["expires_in": 3600, "max_uses": 5],
                bearer: try #require(owner.company?.access))
            #expect(share.status == 201)
            let token = try #require(share.json["token"] as? String)
            #expect((share.json["url"] as? String)?.hasSuffix(token) == true)

            var guest = try await h.person("guest")
            let preview = try await h.client.get("/v1/shares/\(token)", bearer: guest.account.access)
            #expect(preview.status == 200)
            #expect(preview.json["company_name"] as? String == "Acme Ltd")
            #expect(preview.json["inviter_name"] as? String == "Olive Owner")
            #expect(preview.json["permission"] as? String == "read_write")
            let beforeJoining = try await h.client.get("/v1/companies", bearer: guest.account.access)
            #expect((beforeJoining.json["companies"] as? [Any])?.isEmpty == true)

            let accepted = try await h.client.accept(token, bearer: guest.account.access)
            #expect(accepted.status == 200)
            #expect(accepted.json["role"] as? String == "member")
            #expect(try await h.client.accept(token, bearer: guest.account.access).status == 200)  // idempotent
            #expect(
                try await h.client.createCredential(
                    cid, username: "gus", password: "gus company pw", email: "gus@work.example",
                    bearer: guest.account.access
                ).status == 201)
            guest.company = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "gus", password: "gus company pw", bearer: guest.account.access))

            let members = try await h.client.get(
                "/v1/companies/\(cid)/members", bearer: try #require(guest.company?.access))
            #expect(members.status == 200)
            let rows = try #require(members.json["members"] as? [[String: Any]])
            #expect(rows.count == 2)
            #expect(
                rows.contains { $0["display_name"] as? String == "Olive Owner" && $0["role"] as? String == "owner" })
            for secret in ["olive", "gus@work.example", owner.email, guest.email, "$y$"] {
                #expect(!members.body.contains(secret), "members list leaks \(secret)")
            }
            // The owner cannot read the guest's credential: GET only ever answers the caller's own.
            let own = try await h.client.get(
                "/v1/companies/\(cid)/credential", bearer: try #require(owner.company?.access))
            #expect(own.json["username"] as? String == "olive")

            #expect(
                try await h.client.delete(
                    "/v1/companies/\(cid)/members/\(guest.id)", bearer: try #require(owner.company?.access)
                ).status == 204)
            let after = try await h.client.get(
                "/v1/companies/\(cid)/members", bearer: try #require(guest.company?.access))
            #expect(after.status == 403)
            #expect(
                (try await h.client.get("/v1/companies", bearer: guest.account.access).json["companies"] as? [Any])?
                    .isEmpty
                    == true)
            #expect(try await h.client.refresh(try #require(guest.company?.refresh)).status == 400)
        }
    }

    static func claims(_ token: String) throws -> [String: Any] {
        let part = token.split(separator: ".")[1]
        var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let data = try #require(Data(base64Encoded: base64))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("switching companies: each login gives a token for its own company only")
    func switching() async throws {
        try await AccountHarness.with { h in
            var alice = try await h.person("alice")
            let first = try await h.company("First", owner: &alice)
            let tokenFirst = try #require(alice.company?.access)
            let second = try await h.company("Second", owner: &alice)
            let tokenSecond = try #require(alice.company?.access)
            #expect(try await h.client.get("/v1/companies/\(first)", bearer: tokenFirst).status == 200)
            #expect(try await h.client.get("/v1/companies/\(second)", bearer: tokenSecond).status == 200)
            let wrong = try await h.client.get("/v1/companies/\(second)", bearer: tokenFirst)
            #expect(wrong.status == 403)
            #expect(wrong.json["code"] as? String == "company_context_required")
            // Switching goes through the account session: a company session cannot open another one.
            let chained = try await h.client.companyLogin(
                first, username: "boss", password: "company secret 1", bearer: tokenSecond)
            #expect(chained.status == 403)
            #expect(chained.json["code"] as? String == "account_session_required")
            let back = try await h.client.companyLogin(
                first, username: "boss", password: "company secret 1", bearer: alice.account.access)
            #expect(try await h.client.get("/v1/companies/\(first)", bearer: try SignedIn(back).access).status == 200)
            // A company session refreshes into a company session.
            let refreshed = try SignedIn(try await h.client.refresh(try SignedIn(back).refresh))
            #expect(try Self.claims(refreshed.access)["cid"] as? String == first)
            #expect(try await h.client.get("/v1/companies/\(first)", bearer: refreshed.access).status == 200)
        }
    }

    @Test(
        "tiers are enforced by the server: Free shares nothing, Business stops at 10 participants, Enterprise does not")
    func tiers() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("tiers")
            let free = try await h.company("Free Co", owner: &owner, tier: .free)
            let refused = try await h.client.createShare(
                free, permission: "read_write", bearer: try #require(owner.company?.access))
            #expect(refused.status == 403)
            #expect(refused.json["code"] as? String == "tier_forbids_sharing")

            let business = try await h.company("Biz Co", owner: &owner, tier: .business)
            let share = try await h.client.createShare(
                business, permission: "read_only", bearer: try #require(owner.company?.access))
            let token = try #require(share.json["token"] as? String)
            for index in 0..<10 {
                let joiner = try await h.person("p\(index)")
                #expect(try await h.client.accept(token, bearer: joiner.account.access).status == 200)
            }
            let eleventh = try await h.person("p10")
            let limited = try await h.client.accept(token, bearer: eleventh.account.access)
            #expect(limited.status == 403)
            #expect(limited.json["code"] as? String == "participant_limit_reached")
            #expect(try await Operator(store: h.server.services.store).setTier(business, .enterprise))
            #expect(try await h.client.accept(token, bearer: eleventh.account.access).status == 200)
            #expect(
                try await h.client.get("/v1/companies/\(business)", bearer: try #require(owner.company?.access)).json[
                    "member_count"] as? Int == 12)
        }
    }

    @Test(
        "credential rules: username limits, usernames private to each member, password policy kept as typed, one per company, images by content"
    )
    func credentialRules() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("rules")
            let created = try await h.client.createCompany("Rules", bearer: owner.account.access)
            let cid = try #require(created.json["id"] as? String)
            let access = owner.account.access
            #expect(
                try await h.client.createCredential(
                    cid, username: String(repeating: "u", count: 65), password: "long enough 1", bearer: access
                ).status == 400)
            #expect(
                try await h.client.createCredential(cid, username: "", password: "long enough 1", bearer: access).status
                    == 400)
            let same = try await h.client.createCredential(
                cid, username: "samesame", password: "samesame", bearer: access)
            #expect(same.status == 422)
            #expect(same.json["code"] as? String == "weak_password")
            #expect(
                try await h.client.createCredential(cid, username: "x", password: "short", bearer: access).status == 422
            )
            let gif = Data("GIF89a-not-allowed".utf8).base64EncodedString()
            #expect(
                try await h.client.createCredential(
                    cid, username: "pic", password: "long enough 1", image: gif, bearer: access
                ).status == 400)
            let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 32))
                .base64EncodedString()
            let spaced = "  Ünïcödé pass 🔐 "
            #expect(
                try await h.client.createCredential(
                    cid, username: "Olive", password: spaced, image: png, bearer: access
                )
                .status == 201)
            let again = try await h.client.createCredential(
                cid, username: "other", password: "long enough 1", bearer: access)
            #expect(again.status == 409)
            #expect(again.json["code"] as? String == "credential_exists")
            // Usernames are case-sensitive: "olive" would be someone else's, but it must not collide with "Olive".
            #expect(
                try await h.client.companyLogin(cid, username: "olive", password: spaced, bearer: access).status == 400)
            #expect(
                try await h.client.companyLogin(
                    cid, username: "Olive", password: spaced.trimmingCharacters(in: .whitespaces), bearer: access
                ).status == 400)
            owner.company = try SignedIn(
                try await h.client.companyLogin(cid, username: "Olive", password: spaced, bearer: access))
            let image = try await h.client.get(
                "/v1/companies/\(cid)/members/\(owner.id)/image", bearer: try #require(owner.company?.access))
            #expect(image.status == 200)
            #expect(image.headers["content-type"] == "image/png")
            let long = (0..<80).map { String(UnicodeScalar(UInt8(40 + ($0 * 11) % 80))) }.joined()
            var member = try await h.person("long")
            _ = try await Operator(store: h.server.services.store).setTier(cid, .business)
            let share = try await h.client.createShare(
                cid, permission: "read_write", bearer: try #require(owner.company?.access))
            _ = try await h.client.accept(try #require(share.json["token"] as? String), bearer: member.account.access)
            // A username is private to its account: another member may choose the owner's, and logs in with it
            // to their own credential only.
            #expect(
                try await h.client.createCredential(
                    cid, username: "Olive", password: long, bearer: member.account.access
                )
                .status == 201)
            member.company = try SignedIn(
                try await h.client.companyLogin(cid, username: "Olive", password: long, bearer: member.account.access))
            #expect(
                try await h.client.companyLogin(cid, username: "Olive", password: spaced, bearer: member.account.access)
                    .status == 400)
            #expect(
                try await h.client.get("/v1/companies/\(cid)/credential", bearer: try #require(member.company?.access))
                    .json["super_user"] as? Bool == false)
        }
    }

    @Test("company login: one answer for wrong username or password, backoff with Retry-After, and its ceiling")
    func loginBackoff() async throws {
        try await AccountHarness.with({ $0.auth.limits.failuresPerHour = 8 }) { h in
            var owner = try await h.person("login")
            let cid = try await h.company("Login Co", owner: &owner)
            let wrongUser = try await h.client.companyLogin(
                cid, username: "nobody", password: "company secret 1", bearer: owner.account.access)
            let wrongPassword = try await h.client.companyLogin(
                cid, username: "boss", password: "nope nope nope", bearer: owner.account.access)
            for reply in [wrongUser, wrongPassword] {
                #expect(reply.status == 400)
                #expect(reply.json["code"] as? String == "invalid_credentials")
                #expect(reply.json["message"] as? String == "Invalid username or password")
            }
            var limited: HTTPReply?
            for attempt in 0..<6 {
                let reply = try await h.client.companyLogin(
                    cid, username: "boss", password: "wrong \(attempt)", bearer: owner.account.access)
                if reply.status == 429 { limited = reply; break }
            }
            let backoff = try #require(limited)
            #expect(backoff.json["code"] as? String == "over_request_rate_limit")
            #expect(Int(backoff.headers["retry-after"] ?? "") ?? 0 >= 1)
            // Failures up to the hourly ceiling, waiting out each backoff.
            var failures = 0
            while failures < 8 {
                let reply = try await h.client.companyLogin(
                    cid, username: "boss", password: "bad \(failures)", bearer: owner.account.access)
                if reply.status == 429 {
                    if Int(reply.headers["retry-after"] ?? "0") ?? 0 > 900 { break }
                    h.clock.advance(by: TimeInterval(Int(reply.headers["retry-after"] ?? "1") ?? 1))
                } else {
                    failures += 1
                }
            }
            h.clock.advance(by: 901)
            // The account's access token has expired meanwhile; the app refreshes it, as any client would.
            var account = try SignedIn(try await h.client.refresh(owner.account.refresh))
            let capped = try await h.client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: account.access)
            #expect(capped.status == 429)
            h.clock.advance(by: 3600)
            account = try SignedIn(try await h.client.refresh(account.refresh))
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: account.access
                )
                .status == 200)
        }
    }

    @Test("changing the credential password ends other company sessions; deleting it ends them all")
    func credentialChanges() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("change")
            let cid = try await h.company("Change Co", owner: &owner)
            let first = try #require(owner.company)
            let second = try SignedIn(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: owner.account.access))
            let wrong = try await h.client.post(
                "/v1/companies/\(cid)/credential/password",
                ["current_password": "nope", "new_password": "next company pw"], bearer: first.access)
            #expect(wrong.status == 400)
            let changed = try await h.client.post(
                "/v1/companies/\(cid)/credential/password",
                ["current_password": "company secret 1", "new_password": "next company pw"],
                bearer: first.access)
            #expect(changed.status == 204)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: first.access).status == 200)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: second.access).status == 403)
            #expect(try await h.client.user(owner.account.access).status == 200)  // the account session is untouched
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: owner.account.access
                ).status == 400)
            #expect(try await h.client.delete("/v1/companies/\(cid)/credential", bearer: first.access).status == 204)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: first.access).status == 403)
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "next company pw", bearer: owner.account.access
                ).status == 400)
        }
    }

    @Test("a company that does not require a credential is entered with the account session")
    func noCredentialRequired() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("open")
            let cid = try await h.company("Open Co", owner: &owner)
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)", ["requires_credential": false], bearer: try #require(owner.company?.access)
                ).status == 200)
            var member = try await h.person("walkin")
            let share = try await h.client.createShare(
                cid, permission: "read_only", bearer: try #require(owner.company?.access))
            _ = try await h.client.accept(try #require(share.json["token"] as? String), bearer: member.account.access)
            let entered = try await h.client.companyLogin(
                cid, username: nil, password: nil, bearer: member.account.access)
            #expect(entered.status == 200)
            member.company = try SignedIn(entered)
            #expect(try Self.claims(try #require(member.company?.access))["company_role"] as? String == "read_only")
            #expect(
                try await h.client.get("/v1/companies/\(cid)/members", bearer: try #require(member.company?.access))
                    .status
                    == 200)
        }
    }

    @Test("share links: expiry, revocation, use limits, and owners cannot accept their own")
    func shareLifecycle() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("sharer")
            let cid = try await h.company("Share Co", owner: &owner)
            let access = try #require(owner.company?.access)
            let expiring = try await h.client.createShare(
                cid, permission: "read_write", extra: ["expires_in": 60], bearer: access)
            let once = try await h.client.createShare(
                cid, permission: "read_write", extra: ["max_uses": 1], bearer: access)
            let revocable = try await h.client.createShare(cid, permission: "read_write", bearer: access)
            let a = try await h.person("a")
            let b = try await h.person("b")
            let ownToken = try #require(revocable.json["token"] as? String)
            let own = try await h.client.accept(ownToken, bearer: owner.account.access)
            #expect(own.status == 409)
            #expect(own.json["code"] as? String == "owner_cannot_accept")
            #expect(
                try await h.client.accept(try #require(once.json["token"] as? String), bearer: a.account.access).status
                    == 200)
            let usedUp = try await h.client.accept(
                try #require(once.json["token"] as? String), bearer: b.account.access)
            #expect(usedUp.status == 410)
            #expect(usedUp.json["code"] as? String == "share_expired")
            #expect(
                try await h.client.delete(
                    "/v1/companies/\(cid)/shares/\(try #require(revocable.json["id"] as? String))", bearer: access
                ).status == 204)
            #expect(try await h.client.accept(ownToken, bearer: b.account.access).status == 410)
            #expect(try await h.client.get("/v1/shares/\(ownToken)", bearer: b.account.access).status == 410)
            h.clock.advance(by: 61)
            #expect(
                try await h.client.accept(try #require(expiring.json["token"] as? String), bearer: b.account.access)
                    .status
                    == 410)
            let listed = try await h.client.get("/v1/companies/\(cid)/shares", bearer: access)
            #expect((listed.json["shares"] as? [[String: Any]])?.count == 3)
            #expect(!listed.body.contains(ownToken))
        }
    }

    @Test("members: owner and manager powers, leaving, ownership transfer, and the company audit")
    func membersAndAudit() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("boss")
            let cid = try await h.company("Members Co", owner: &owner)
            var manager = try await h.person("manager")
            var member = try await h.person("member")
            try await h.join(cid, &manager, owner: owner)
            try await h.join(cid, &member, owner: owner)
            let ownerToken = try #require(owner.company?.access)
            let path = "/v1/companies/\(cid)/members"
            #expect(
                try await h.client.patch("\(path)/\(manager.id)", ["manager_mask": 6], bearer: ownerToken).status == 200
            )
            #expect(try await h.client.patch("\(path)/\(owner.id)", ["dept_mask": 1], bearer: ownerToken).status == 403)
            let managerToken = try #require(manager.company?.access)
            let granted = try await h.client.patch("\(path)/\(member.id)", ["dept_mask": 2], bearer: managerToken)
            #expect(granted.status == 200)
            #expect(granted.json["dept_mask"] as? Int == 2)
            #expect(
                try await h.client.patch("\(path)/\(member.id)", ["dept_mask": 3], bearer: managerToken).status == 403)
            #expect(
                try await h.client.patch("\(path)/\(member.id)", ["role": "read_only"], bearer: managerToken).status
                    == 403)
            #expect(
                try await h.client.patch(
                    "\(path)/\(manager.id)", ["dept_mask": 1], bearer: try #require(member.company?.access)
                ).status == 403)

            // The owner's audit sees everything; a participant sees only their own events.
            let ownerAudit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: ownerToken)
            let actions = (ownerAudit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            for action in [
                "company_created", "credential_created", "company_login", "share_created", "share_accepted",
                "member_changed",
            ] {
                #expect(actions.contains(action), "owner audit lacks \(action)")
            }
            let memberAudit = try await h.client.get(
                "/v1/companies/\(cid)/audit?limit=100", bearer: try #require(member.company?.access))
            let memberActions = (memberAudit.json["events"] as? [[String: Any]] ?? []).compactMap {
                $0["action"] as? String
            }
            #expect(!memberActions.isEmpty)
            #expect(!memberActions.contains("company_created") && !memberActions.contains("member_changed"))

            #expect(
                try await h.client.post("/v1/companies/\(cid)/leave", [:], bearer: ownerToken).json["code"] as? String
                    == "owner_cannot_leave")
            #expect(
                try await h.client.post("/v1/companies/\(cid)/transfer", ["account_id": manager.id], bearer: ownerToken)
                    .status == 200)
            let list = try await h.client.get("/v1/companies", bearer: manager.account.access)
            #expect((list.json["companies"] as? [[String: Any]])?.first?["role"] as? String == "owner")
            #expect(
                try await h.client.get("/v1/companies/\(cid)/credential", bearer: managerToken).json["super_user"]
                    as? Bool
                    == true)
            #expect(try await h.client.post("/v1/companies/\(cid)/leave", [:], bearer: ownerToken).status == 204)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: ownerToken).status == 403)

            // Deleting the company ends everyone's sessions in it.
            #expect(
                try await h.client.delete("/v1/companies/\(cid)", bearer: try #require(member.company?.access)).status
                    == 403)
            #expect(try await h.client.delete("/v1/companies/\(cid)", bearer: managerToken).status == 204)
            #expect(
                try await h.client.get("/v1/companies/\(cid)/members", bearer: try #require(member.company?.access))
                    .status
                    == 403)
            #expect(
                (try await h.client.get("/v1/companies", bearer: member.account.access).json["companies"] as? [Any])?
                    .isEmpty == true)
        }
    }
}
