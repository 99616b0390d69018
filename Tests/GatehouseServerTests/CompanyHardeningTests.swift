import Foundation
import GatehouseServer
import Testing

@testable import GatehouseServer

/// The attack review of wave 2 (issue 22), replayed for companies, shares and accounts: removal and demotion stick,
/// a link dies with its maker's right to share, a given password is always checked, usernames tell nothing, and
/// profile data has a total size.
@Suite("Hardening: companies, shares and accounts")
struct CompanyHardeningTests {
    /// A share token of `permission` made by `maker`'s company session (multi-use unless `extra` says otherwise).
    private static func link(_ h: AccountHarness, _ cid: String, by maker: Person, permission: String = "read_write")
        async throws -> String
    {
        let share = try await h.client.createShare(
            cid, permission: permission, bearer: try #require(maker.company?.access))
        #expect(share.status == 201)
        return try #require(share.json["token"] as? String)
    }

    /// `person` accepts `token`, makes a credential if they have none, and logs in to the company.
    private static func enter(_ h: AccountHarness, _ cid: String, _ person: inout Person, token: String) async throws {
        #expect(try await h.client.accept(token, bearer: person.account.access).status == 200)
        let username = "user-\(person.id.prefix(6))"
        _ = try await h.client.createCredential(
            cid, username: username, password: "member secret 1", bearer: person.account.access)
        person.company = try SignedIn(
            try await h.client.companyLogin(
                cid, username: username, password: "member secret 1", bearer: person.account.access))
    }

    private static func role(_ h: AccountHarness, _ cid: String, of person: Person) async throws -> String? {
        let list = try await h.client.get("/v1/companies", bearer: person.account.access)
        return (list.json["companies"] as? [[String: Any]])?.first { $0["id"] as? String == cid }?["role"] as? String
    }

    // MARK: Finding 4

    @Test("F4: a member demoted to read-only who leaves and re-accepts the same multi-use link comes back read-only")
    func demotionSticksAcrossLeaving() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Demotion Co", owner: &owner)
            let token = try await Self.link(h, cid, by: owner)
            let another = try await Self.link(h, cid, by: owner)
            var member = try await h.person("member")
            try await Self.enter(h, cid, &member, token: token)
            #expect(try await Self.role(h, cid, of: member) == "member")

            let ownerToken = try #require(owner.company?.access)
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)/members/\(member.id)", ["role": "read_only"], bearer: ownerToken
                ).status == 200)
            #expect(
                try await h.client.post("/v1/companies/\(cid)/leave", [:], bearer: try #require(member.company?.access))
                    .status == 204)

            let again = try await h.client.accept(token, bearer: member.account.access)
            #expect(again.status == 200)
            #expect(again.json["role"] as? String == "read_only")
            #expect(try await Self.role(h, cid, of: member) == "read_only")
            // Leaving again and taking another read-write link made before gives nothing more either.
            try await Self.enter(h, cid, &member, token: token)
            #expect(
                try await h.client.post("/v1/companies/\(cid)/leave", [:], bearer: try #require(member.company?.access))
                    .status == 204)
            #expect(
                try await h.client.accept(another, bearer: member.account.access).json["role"] as? String == "read_only"
            )
        }
    }

    @Test(
        "F4: after removal no older link re-admits (403 removed_from_company); a newer one does, and the old sync token and company session stay dead"
    )
    func removalSticks() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Removal Co", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let token = try await Self.link(h, cid, by: owner)
            let other = try await Self.link(h, cid, by: owner, permission: "read_only")
            var member = try await h.person("member")
            try await Self.enter(h, cid, &member, token: token)
            let before = try #require(member.company)
            let pulled = try await h.client.pull(cid, token: nil, bearer: before.access)
            #expect(pulled.status == 200)
            let oldSyncToken = try #require(pulled.json["token"] as? String)

            #expect(
                try await h.client.delete("/v1/companies/\(cid)/members/\(member.id)", bearer: ownerToken).status == 204
            )
            for older in [token, other] {
                let refused = try await h.client.accept(older, bearer: member.account.access)
                #expect(refused.status == 403)
                #expect(refused.json["code"] as? String == "removed_from_company")
            }
            #expect(try await Self.role(h, cid, of: member) == nil)
            let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: ownerToken)
            #expect(
                (audit.json["events"] as? [[String: Any]] ?? []).contains {
                    $0["action"] as? String == "share_refused"
                        && ($0["detail"] as? [String: Any])?["reason"] as? String == "removed_from_company"
                })

            // The owner invites again with a link made after the removal.
            h.clock.advance(by: 1)
            let fresh = try await Self.link(h, cid, by: owner)
            try await Self.enter(h, cid, &member, token: fresh)
            #expect(try await Self.role(h, cid, of: member) == "member")
            let now = try #require(member.company)

            // The change token from the first membership never works again, even though the masks are the same.
            let stale = try await h.client.pull(cid, token: oldSyncToken, bearer: now.access)
            #expect(stale.status == 400)
            #expect(stale.json["code"] as? String == "invalid_sync_token")
            #expect(try await h.client.pull(cid, token: nil, bearer: now.access).status == 200)
            // Nor does the first membership's company session.
            let oldSession = try await h.client.get("/v1/companies/\(cid)", bearer: before.access)
            #expect(oldSession.status == 403)
            #expect(oldSession.json["code"] as? String == "session_not_found")
            #expect(try await h.client.refresh(before.refresh).status != 200)
            #expect(try await h.client.get("/v1/companies/\(cid)", bearer: now.access).status == 200)
        }
    }

    @Test("F4: re-admission by the rules, without I/O")
    func readmissionRules() {
        let t0 = Date(timeIntervalSince1970: 1_000)
        let t1 = t0.addingTimeInterval(60)
        let t2 = t1.addingTimeInterval(60)
        typealias R = CompanyRules
        #expect(R.readmission(linkCreatedAt: t0, permission: .readWrite, former: nil) == .admit(.member))
        let removed = FormerMembership(removedAt: t1, leftAt: nil, leftRole: nil, epoch: 3)
        #expect(R.readmission(linkCreatedAt: t0, permission: .readOnly, former: removed) == .removed)
        #expect(R.readmission(linkCreatedAt: t1, permission: .readWrite, former: removed) == .removed)
        #expect(R.readmission(linkCreatedAt: t2, permission: .readWrite, former: removed) == .admit(.member))
        let left = FormerMembership(removedAt: nil, leftAt: t1, leftRole: .readOnly, epoch: 3)
        #expect(R.readmission(linkCreatedAt: t0, permission: .readWrite, former: left) == .admit(.readOnly))
        #expect(R.readmission(linkCreatedAt: t2, permission: .readWrite, former: left) == .admit(.member))
        let leftAsMember = FormerMembership(removedAt: nil, leftAt: t1, leftRole: .member, epoch: 3)
        #expect(R.readmission(linkCreatedAt: t0, permission: .readOnly, former: leftAsMember) == .admit(.readOnly))
        #expect(R.readmission(linkCreatedAt: t0, permission: .readWrite, former: leftAsMember) == .admit(.member))
        // A removal is not undone by a later departure.
        let both = FormerMembership(removedAt: t0, leftAt: t2, leftRole: .member, epoch: 5)
        #expect(R.readmission(linkCreatedAt: t0, permission: .readWrite, former: both) == .removed)
        #expect(R.readmission(linkCreatedAt: t1, permission: .readWrite, former: both) == .admit(.member))

        var membership = Membership(companyID: "c", accountID: "a", role: .member, deptMask: 0, managerMask: 0)
        membership.joinedEpoch = 4
        let token = SyncToken(company: "c", account: "a", seq: 9, epoch: 3, mask: 0)
        #expect(!token.belongs(to: membership))
        #expect(SyncToken(company: "c", account: "a", seq: 9, epoch: 4, mask: 0).belongs(to: membership))
        #expect(!SyncToken(company: "c", account: "b", seq: 9, epoch: 4, mask: 0).belongs(to: membership))
    }

    // MARK: Finding 5

    @Test("F5: a manager's link stops admitting once sharing is turned off, the manager is demoted, or removed")
    func linkDiesWithMakersRight() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Manager Links", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let members = "/v1/companies/\(cid)/members"
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["managers_can_share": true], bearer: ownerToken)
                    .status == 200)
            var manager = try await h.person("manager")
            try await h.join(cid, &manager, owner: owner)
            #expect(
                try await h.client.patch("\(members)/\(manager.id)", ["manager_mask": 1], bearer: ownerToken).status
                    == 200)
            let token = try await Self.link(h, cid, by: manager)
            var first = try await h.person("first")
            try await Self.enter(h, cid, &first, token: token)

            /// The link as a newcomer finds it: its preview and its acceptance.
            func newcomerTries() async throws -> (preview: Int, accept: Int, code: String?) {
                let newcomer = try await h.person("newcomer")
                let preview = try await h.client.get("/v1/shares/\(token)", bearer: newcomer.account.access)
                let accept = try await h.client.accept(token, bearer: newcomer.account.access)
                return (preview.status, accept.status, accept.json["code"] as? String)
            }

            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["managers_can_share": false], bearer: ownerToken)
                    .status == 200)
            let sharingOff = try await newcomerTries()
            #expect(sharingOff.preview == 410)
            #expect(sharingOff.accept == 410)
            #expect(sharingOff.code == "share_expired")

            // The link follows its maker's right: turned back on, it admits again.
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["managers_can_share": true], bearer: ownerToken)
                    .status == 200)
            let sharingOn = try await newcomerTries()
            #expect(sharingOn.preview == 200)
            #expect(sharingOn.accept == 200)

            #expect(
                try await h.client.patch("\(members)/\(manager.id)", ["manager_mask": 0], bearer: ownerToken).status
                    == 200)
            let demoted = try await newcomerTries()
            #expect(demoted.preview == 410)
            #expect(demoted.code == "share_expired")

            #expect(
                try await h.client.patch("\(members)/\(manager.id)", ["manager_mask": 1], bearer: ownerToken).status
                    == 200)
            #expect(try await h.client.delete("\(members)/\(manager.id)", bearer: ownerToken).status == 204)
            let removed = try await newcomerTries()
            #expect(removed.preview == 410)
            #expect(removed.code == "share_expired")
            // The share landing page does not offer it either.
            let page = try await h.client.get("/share/\(token)")
            #expect(!page.body.contains("Manager Links"))
        }
    }

    // MARK: Finding 8

    @Test("F8: right after sign-in, account deletion still refuses a wrong current_password, and counts it")
    func deletionChecksGivenPassword() async throws {
        try await AccountHarness.with { h in
            let person = try await h.person("deleter")
            var statuses: [Int] = []
            for attempt in 0..<6 {
                let reply = try await h.client.deleteAccount(
                    ["current_password": "guess \(attempt)"], bearer: person.account.access)
                statuses.append(reply.status)
                if attempt == 0 { #expect(reply.json["code"] as? String == "current_password_invalid") }
            }
            #expect(statuses.prefix(4).allSatisfy { $0 == 400 })
            #expect(statuses.suffix(2).allSatisfy { $0 == 429 })
            // The account is still there, and its sign-in backs off like after failed sign-ins.
            #expect(try await h.client.user(person.account.access).status == 200)
            #expect(try await h.client.password(person.email, "correct horse battery").status == 429)
            h.clock.advance(by: 3600)
            let fresh = try SignedIn(try await h.client.password(person.email, "correct horse battery"))
            #expect(
                try await h.client.deleteAccount(["current_password": "correct horse battery"], bearer: fresh.access)
                    .status == 204)
        }
    }

    // MARK: Finding 10

    @Test("F10: a member's chosen username tells nothing about the others', and logs in to their own credential only")
    func usernamesArePrivate() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Usernames", owner: &owner)
            let token = try await Self.link(h, cid, by: owner)
            let member = try await h.person("member")
            #expect(try await h.client.accept(token, bearer: member.account.access).status == 200)
            // The owner's username is "boss" (the harness's): the member may pick it too.
            let created = try await h.client.createCredential(
                cid, username: "boss", password: "member secret 1", bearer: member.account.access)
            #expect(created.status == 201)
            #expect(created.json["username"] as? String == "boss")
            let again = try await h.client.createCredential(
                cid, username: "someone", password: "member secret 1", bearer: member.account.access)
            #expect(again.status == 409)
            #expect(again.json["code"] as? String == "credential_exists")
            // The same name opens each account's own credential: the owner's password does not open the member's.
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: member.account.access
                ).status == 400)
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "member secret 1", bearer: member.account.access
                ).status == 200)
            #expect(
                try await h.client.companyLogin(
                    cid, username: "boss", password: "company secret 1", bearer: owner.account.access
                ).status == 200)
        }
    }

    // MARK: Finding 11

    @Test("F11: user_metadata has a total size (422 metadata_too_large), and the members list shows a short name")
    func metadataIsBounded() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Profiles", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            let access = member.account.access
            let name = String(repeating: "N", count: 5000)
            let chunk = String(repeating: "x", count: 12000)
            #expect(
                try await h.client.put("/auth/v1/user", ["data": ["display_name": name]], bearer: access).status == 200)
            let over = try await h.client.put("/auth/v1/user", ["data": ["notes": chunk]], bearer: access)
            #expect(over.status == 422)
            #expect(over.json["error_code"] as? String == "metadata_too_large")
            let user = try await h.client.user(access)
            let metadata = try #require(user.json["user_metadata"] as? [String: Any])
            #expect(metadata["notes"] == nil)
            #expect(metadata["display_name"] as? String == name)
            // Replacing a key counts what is left: the display name makes room.
            #expect(
                try await h.client.put(
                    "/auth/v1/user", ["data": ["display_name": "Mia", "notes": chunk]], bearer: access
                ).status == 200)
            #expect(
                try await h.client.put("/auth/v1/user", ["data": ["display_name": name]], bearer: access).status == 422)

            // Other members see at most 100 characters of a display name.
            #expect(
                try await h.client.put(
                    "/auth/v1/user", ["data": ["display_name": name, "notes": NSNull()]], bearer: access
                ).status == 200)
            let list = try await h.client.get(
                "/v1/companies/\(cid)/members", bearer: try #require(owner.company?.access))
            let shown = (list.json["members"] as? [[String: Any]])?.first { $0["account_id"] as? String == member.id }
            #expect((shown?["display_name"] as? String)?.count == 100)
        }
    }
}
