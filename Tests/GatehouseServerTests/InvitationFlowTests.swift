import Foundation
import Testing

@testable import GatehouseServer

/// One small helper per invitation endpoint.
extension AuthClient {
    func invite(
        _ cid: String, email: String, role: String = "member", deptMask: Int? = nil, managerMask: Int? = nil,
        bearer: String
    ) async throws -> HTTPReply {
        var body: [String: Any] = ["email": email, "role": role]
        if let deptMask { body["dept_mask"] = deptMask }
        if let managerMask { body["manager_mask"] = managerMask }
        return try await post("/v1/companies/\(cid)/invitations", body, bearer: bearer)
    }

    func invitations(_ cid: String, bearer: String) async throws -> [[String: Any]] {
        try await get("/v1/companies/\(cid)/invitations", bearer: bearer).json["invitations"] as? [[String: Any]] ?? []
    }

    func resendInvitation(_ cid: String, _ id: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/companies/\(cid)/invitations/\(id)/resend", [:], bearer: bearer)
    }

    func revokeInvitation(_ cid: String, _ id: String, bearer: String) async throws -> HTTPReply {
        try await delete("/v1/companies/\(cid)/invitations/\(id)", bearer: bearer)
    }

    func myInvitations(bearer: String) async throws -> [[String: Any]] {
        try await get("/v1/invitations", bearer: bearer).json["invitations"] as? [[String: Any]] ?? []
    }

    func acceptInvitation(_ reference: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/invitations/\(reference)/accept", [:], bearer: bearer)
    }

    func declineInvitation(_ reference: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/invitations/\(reference)/decline", [:], bearer: bearer)
    }
}

/// What an invitation mail carries.
struct InvitationMail {
    let mail: ReceivedMail
    /// The link to the account page, with the invitation's token.
    var link: String? {
        mail.text.firstMatch(of: /(https?:\/\/[^\s"<>]+\/account\?invitation=[A-Za-z0-9_\-]+)/).map { String($0.1) }
    }
    var token: String? { link.flatMap { $0.split(separator: "=").last.map(String.init) } }
    var code: String? { mail.code }
}

extension AccountHarness {
    /// A new account session for `email` (after the clock moved past the old one's hour).
    func freshAccess(_ email: String) async throws -> String {
        try SignedIn(try await client.password(email, "correct horse battery")).access
    }

    /// A new company session of the owner `h.company` logged in.
    func freshOwnerSession(_ cid: String, owner email: String) async throws -> String {
        try SignedIn(
            try await client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: try await freshAccess(email))
        ).access
    }

    /// The next invitation mail to `email`.
    func invitationMail(to email: String) async throws -> InvitationMail {
        InvitationMail(mail: try await mail(to: email, subject: "invited you to"))
    }
}

@Suite("Invitations by email: invite, mail, accept by the invited address, refusals, resend, revoke")
struct InvitationFlowTests {
    static func code(_ reply: HTTPReply) -> String? { reply.json["code"] as? String }

    @Test("invite → mail with link and code → sign up on the way → accept with the code → member with role and masks")
    func invitedPersonJoins() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            _ = try await h.client.put(
                "/auth/v1/user", ["data": ["first_name": "Olive", "last_name": "Owner"]], bearer: owner.account.access)
            let cid = try await h.company("Acme Ltd", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let email = AccountHarness.newEmail("invitee")

            let invited = try await h.client.invite(
                cid, email: "  " + email.uppercased(), deptMask: 5, managerMask: 1, bearer: ownerToken)
            #expect(invited.status == 201)
            let id = try #require(invited.json["id"] as? String)
            #expect(invited.json["email"] as? String == email)
            #expect(invited.json["state"] as? String == "open")
            #expect(invited.json["token"] == nil)

            let mail = try await h.invitationMail(to: email)
            #expect(mail.mail.subject == "Olive Owner invited you to Acme Ltd")
            let token = try #require(mail.token)
            let code = try #require(mail.code)
            #expect(token.count >= 43)
            let listed = try await h.client.get("/v1/companies/\(cid)/invitations", bearer: ownerToken)
            #expect(listed.status == 200)
            #expect(!listed.body.contains(token) && !listed.body.contains(code))
            #expect((listed.json["invitations"] as? [[String: Any]])?.first?["id"] as? String == id)

            // The invitee has no account yet: they sign up with the invited address on the way.
            let invitee = try await h.confirmedAccount(email)
            let mine = try await h.client.myInvitations(bearer: invitee.access)
            #expect(mine.count == 1)
            #expect(mine.first?["company_name"] as? String == "Acme Ltd")
            #expect(mine.first?["inviter_name"] as? String == "Olive Owner")
            #expect(mine.first?["role"] as? String == "member")

            let accepted = try await h.client.acceptInvitation(code, bearer: invitee.access)
            #expect(accepted.status == 200)
            #expect(accepted.json["id"] as? String == cid)
            #expect(accepted.json["role"] as? String == "member")
            let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: ownerToken)
            let row = try #require(
                (members.json["members"] as? [[String: Any]])?.first { $0["account_id"] as? String == invitee.userID })
            #expect(row["role"] as? String == "member")
            #expect(row["dept_mask"] as? Int == 5)
            #expect(row["manager_mask"] as? Int == 1)

            // Used once: by its token, its id or its code again.
            for reference in [token, id, code] {
                let again = try await h.client.acceptInvitation(reference, bearer: invitee.access)
                #expect(again.status == 410)
                #expect(Self.code(again) == "invitation_used")
            }
            #expect(try await h.client.myInvitations(bearer: invitee.access).isEmpty)
            #expect(try await h.client.invitations(cid, bearer: ownerToken).first?["state"] as? String == "accepted")
            let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: ownerToken)
            let actions = (audit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            #expect(actions.contains("invitation_sent") && actions.contains("invitation_accepted"))
            #expect(!audit.body.contains(token) && !audit.body.contains(code))
        }
    }

    @Test("another address, an unconfirmed one, revoked, replaced, expired and declined: a stable code, no member")
    func refusals() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Refusals Inc", owner: &owner)
            var ownerToken = try #require(owner.company?.access)
            let invitee = try await h.person("invitee")
            let stranger = try await h.person("stranger")

            let first = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            let firstMail = try await h.invitationMail(to: invitee.email)
            for reference in [first, try #require(firstMail.token)] {
                let wrong = try await h.client.acceptInvitation(reference, bearer: stranger.account.access)
                #expect(wrong.status == 403)
                #expect(Self.code(wrong) == "invitation_email_mismatch")
            }
            // A code names an invitation only among the caller's own.
            let guessed = try await h.client.acceptInvitation(
                try #require(firstMail.code), bearer: stranger.account.access)
            #expect(guessed.status == 404)
            #expect(Self.code(guessed) == "invitation_not_found")
            #expect(try await h.client.myInvitations(bearer: stranger.account.access).isEmpty)
            let unknown = try await h.client.acceptInvitation(UUID().uuidString, bearer: invitee.account.access)
            #expect(Self.code(unknown) == "invitation_not_found")

            // A second invitation to the same address replaces the first: its link stops working.
            let second = try #require(
                try await h.client.invite(cid, email: invitee.email, role: "read_only", bearer: ownerToken).json["id"]
                    as? String)
            let replaced = try await h.client.acceptInvitation(
                try #require(firstMail.token), bearer: invitee.account.access)
            #expect(replaced.status == 410)
            #expect(Self.code(replaced) == "invitation_revoked")
            let states = try await h.client.invitations(cid, bearer: ownerToken)
            #expect(states.first { $0["id"] as? String == first }?["state"] as? String == "revoked")
            #expect(states.first { $0["id"] as? String == second }?["state"] as? String == "open")

            // Revoked.
            #expect(try await h.client.revokeInvitation(cid, second, bearer: ownerToken).status == 204)
            let revoked = try await h.client.acceptInvitation(second, bearer: invitee.account.access)
            #expect(revoked.status == 410)
            #expect(Self.code(revoked) == "invitation_revoked")
            let twice = try await h.client.revokeInvitation(cid, second, bearer: ownerToken)
            #expect(twice.status == 404)
            #expect(Self.code(twice) == "invitation_not_found")

            // Expired: 7 days after it was sent.
            let third = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            h.clock.advance(by: 7 * 86400 + 1)
            let inviteeToken = try await h.freshAccess(invitee.email)
            ownerToken = try await h.freshOwnerSession(cid, owner: owner.email)
            #expect(try await h.client.myInvitations(bearer: inviteeToken).isEmpty)
            let expired = try await h.client.acceptInvitation(third, bearer: inviteeToken)
            #expect(expired.status == 410)
            #expect(Self.code(expired) == "invitation_expired")

            // Declined: it cannot be accepted afterwards.
            let fourth = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            #expect(try await h.client.declineInvitation(fourth, bearer: inviteeToken).status == 204)
            let declined = try await h.client.acceptInvitation(fourth, bearer: inviteeToken)
            #expect(declined.status == 410)
            #expect(Self.code(declined) == "invitation_used")

            let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: ownerToken)
            #expect((members.json["members"] as? [Any])?.count == 1)
            let audit = try await h.client.get("/v1/companies/\(cid)/audit?limit=100", bearer: ownerToken)
            let actions = (audit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            #expect(actions.contains("invitation_revoked") && actions.contains("invitation_declined"))
            #expect(!actions.contains("invitation_accepted"))
        }
    }

    @Test("the rules, without a server: the address first, then the state; who invites with what; how {id} names one")
    func rules() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let open = InvitationRecord(
            id: "i", companyID: "c", email: "ada@example.com", role: .member, deptMask: 0, managerMask: 0,
            invitedBy: "o", createdAt: now, sentAt: now, expiresAt: now.addingTimeInterval(InvitationRules.lifetime))
        #expect(InvitationRules.refusal(open, callerEmail: " Ada@Example.com ", confirmed: true, now: now) == nil)
        #expect(
            InvitationRules.refusal(open, callerEmail: "ada@example.com", confirmed: false, now: now) == .emailMismatch)
        var used = open
        used.usedAt = now
        // Another address learns nothing of the state.
        #expect(
            InvitationRules.refusal(used, callerEmail: "eve@example.com", confirmed: true, now: now) == .emailMismatch)
        #expect(InvitationRules.refusal(used, callerEmail: "ada@example.com", confirmed: true, now: now) == .used)
        let later = now.addingTimeInterval(InvitationRules.lifetime)
        #expect(InvitationRules.refusal(open, callerEmail: "ada@example.com", confirmed: true, now: later) == .expired)
        var revoked = open
        revoked.revokedAt = now
        #expect(InvitationRules.refusal(revoked, callerEmail: "ada@example.com", confirmed: true, now: now) == .revoked)

        let owner = Membership(companyID: "c", accountID: "o", role: .owner, deptMask: 0, managerMask: 0)
        let manager = Membership(companyID: "c", accountID: "m", role: .member, deptMask: 0, managerMask: 6)
        var policy = CompanyPolicy()
        #expect(
            InvitationRules.judge(role: .member, deptMask: 7, managerMask: 7, by: owner, policy: policy) == .allowed)
        #expect(InvitationRules.judge(role: .owner, deptMask: 0, managerMask: 0, by: owner, policy: policy) != .allowed)
        #expect(
            InvitationRules.judge(role: .member, deptMask: 2, managerMask: 0, by: manager, policy: policy) != .allowed)
        policy.managersCanShare = true
        #expect(
            InvitationRules.judge(role: .readOnly, deptMask: 6, managerMask: 0, by: manager, policy: policy) == .allowed
        )
        #expect(
            InvitationRules.judge(role: .member, deptMask: 1, managerMask: 0, by: manager, policy: policy)
                == .masksForbidden("Managers may only grant departments they manage"))
        #expect(
            InvitationRules.judge(role: .member, deptMask: 2, managerMask: 2, by: manager, policy: policy)
                == .masksForbidden("Managers may not invite other managers"))

        #expect(InvitationRules.resendWait(lastSent: now, now: now.addingTimeInterval(59.5)) == 1)
        #expect(InvitationRules.resendWait(lastSent: now, now: now.addingTimeInterval(60)) == nil)
        let id = UUID().uuidString
        #expect(InvitationRules.reference(id) == .id(id.lowercased()))
        #expect(InvitationRules.reference("012345") == .code("012345"))
        #expect(InvitationRules.reference("0123456") == .token("0123456"))
    }

    @Test("who may invite and with what: owner and allowed managers, masks within theirs, not a member twice")
    func inviterRules() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Rules Co", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)
            let memberToken = try #require(member.company?.access)

            let notAllowed = try await h.client.invite(cid, email: AccountHarness.newEmail(), bearer: memberToken)
            #expect(notAllowed.status == 403)
            #expect(Self.code(notAllowed) == "forbidden")
            #expect(try await h.client.get("/v1/companies/\(cid)/invitations", bearer: memberToken).status == 403)

            // A manager, where the company lets managers share, invites into the departments they manage only.
            #expect(
                try await h.client.patch("/v1/companies/\(cid)", ["managers_can_share": true], bearer: ownerToken)
                    .status == 200)
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(cid)/members/\(member.id)", ["manager_mask": 6], bearer: ownerToken
                ).status == 200)
            let beyond = try await h.client.invite(
                cid, email: AccountHarness.newEmail(), deptMask: 1, bearer: memberToken)
            #expect(beyond.status == 403)
            #expect(Self.code(beyond) == "dept_mask_forbidden")
            let managers = try await h.client.invite(
                cid, email: AccountHarness.newEmail(), deptMask: 2, managerMask: 2, bearer: memberToken)
            #expect(Self.code(managers) == "dept_mask_forbidden")
            #expect(
                try await h.client.invite(cid, email: AccountHarness.newEmail(), deptMask: 6, bearer: memberToken)
                    .status == 201)

            let owners = try await h.client.invite(
                cid, email: AccountHarness.newEmail(), role: "owner", bearer: ownerToken)
            #expect(owners.status == 400)
            let badAddress = try await h.client.invite(cid, email: "not an address", bearer: ownerToken)
            #expect(badAddress.status == 400)
            #expect(Self.code(badAddress) == "validation_failed")
            let existing = try await h.client.invite(cid, email: member.email, bearer: ownerToken)
            #expect(existing.status == 409)
            #expect(Self.code(existing) == "already_member")

            let free = try await h.company("Free Co", owner: &owner, tier: .free)
            let freeRefused = try await h.client.invite(
                free, email: AccountHarness.newEmail(), bearer: try #require(owner.company?.access))
            #expect(freeRefused.status == 403)
            #expect(Self.code(freeRefused) == "tier_forbids_sharing")
        }
    }

    @Test("resend waits a minute, mails a new link and code, and gives a fresh expiry; the old ones stop working")
    func resend() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Resend Co", owner: &owner)
            var ownerToken = try #require(owner.company?.access)
            let invitee = try await h.person("invitee")
            let id = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            let first = try await h.invitationMail(to: invitee.email)

            let soon = try await h.client.resendInvitation(cid, id, bearer: ownerToken)
            #expect(soon.status == 429)
            #expect(Self.code(soon) == "over_email_send_rate_limit")
            #expect((1...60).contains(Int(soon.headers["retry-after"] ?? "") ?? 0))
            #expect(try await !h.hasMail(to: invitee.email, subject: "invited you to"))

            h.clock.advance(by: 6 * 86400)
            ownerToken = try await h.freshOwnerSession(cid, owner: owner.email)
            let resent = try await h.client.resendInvitation(cid, id, bearer: ownerToken)
            #expect(resent.status == 200)
            let second = try await h.invitationMail(to: invitee.email)
            #expect(second.token != first.token)
            // Past the first mail's 7 days, the resent invitation still works, through the new link only.
            h.clock.advance(by: 2 * 86400)
            ownerToken = try await h.freshOwnerSession(cid, owner: owner.email)
            let inviteeToken = try await h.freshAccess(invitee.email)
            let old = try await h.client.acceptInvitation(try #require(first.token), bearer: inviteeToken)
            #expect(Self.code(old) == "invitation_not_found")
            #expect(
                try await h.client.acceptInvitation(try #require(second.token), bearer: inviteeToken).status
                    == 200)
            let used = try await h.client.resendInvitation(cid, id, bearer: ownerToken)
            #expect(used.status == 404)
            #expect(Self.code(used) == "invitation_not_found")
        }
    }

    @Test("an acceptance counts against the tier's participant limit")
    func tierFull() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Full Co", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let invitee = try await h.person("invitee")
            let id = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            let share = try await h.client.createShare(cid, permission: "read_only", bearer: ownerToken)
            let token = try #require(share.json["token"] as? String)
            for index in 0..<10 {
                let joiner = try await h.person("p\(index)")
                #expect(try await h.client.accept(token, bearer: joiner.account.access).status == 200)
            }
            let full = try await h.client.acceptInvitation(id, bearer: invitee.account.access)
            #expect(full.status == 403)
            #expect(Self.code(full) == "participant_limit_reached")
            #expect(try await h.client.invitations(cid, bearer: ownerToken).first?["state"] as? String == "open")
            #expect(try await Operator(store: h.server.services.store).setTier(cid, .enterprise))
            #expect(try await h.client.acceptInvitation(id, bearer: invitee.account.access).status == 200)
        }
    }

    @Test("the account page lists the invitation the mailed link names, joins with its form, declines another")
    func accountPage() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Paged Ltd", owner: &owner)
            let other = try await h.company("Other Ltd", owner: &owner)
            let invitee = try await h.person("invitee")
            let pagedOwner = try await h.freshOwnerSession(cid, owner: owner.email)
            let otherOwner = try #require(owner.company?.access)
            let paged = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: pagedOwner).json["id"] as? String)
            let link = try #require(try await h.invitationMail(to: invitee.email).link)
            let declined = try #require(
                try await h.client.invite(other, email: invitee.email, role: "read_only", bearer: otherOwner)
                    .json["id"] as? String)

            let path = String(try #require(link.firstRange(of: "/account?").map { link[$0.lowerBound...] }))
            // Opened signed out, the link's token waits in a cookie through the sign-in, and marks the invitation
            // when the browser comes back.
            let signedOut = try await h.page(path)
            #expect(signedOut.status == 303 && signedOut.headers["location"] == "/account/sign-in")
            let kept = try #require(
                signedOut.headers["set-cookie"]?.firstMatch(of: /gh_invitation=([^;]+)/).map { String($0.1) })
            let back = try await h.page(
                "/account", cookie: "\(WebSession.accessCookie)=\(invitee.account.access); gh_invitation=\(kept)")
            #expect(back.body.contains("<li class=\"invitation linked\">"))
            #expect(back.headers["set-cookie"]?.contains("gh_invitation=; Path=/account; Max-Age=0") == true)
            let page = try await h.page(path, session: invitee.account.access)
            #expect(page.status == 200)
            #expect(page.body.contains("<strong class=\"invitation-company\">Paged Ltd</strong>"))
            #expect(page.body.contains("<li class=\"invitation linked\">"))
            #expect(page.body.contains("Other Ltd"))
            let token = try #require(
                page.body.firstMatch(of: /name="csrf_token" value="([^"]+)"/).map { String($0.1) })

            // Without the page's token, nothing changes.
            let stale = try await h.form(
                "/account/invitations/accept", ["invitation_id": paged], session: invitee.account.access)
            #expect(stale.status == 403)
            let joined = try await h.form(
                "/account/invitations/accept", ["invitation_id": paged, "csrf_token": token],
                session: invitee.account.access)
            #expect(joined.status == 303 && joined.headers["location"] == "/account?notice=invitation_accepted")
            let refused = try await h.form(
                "/account/invitations/accept", ["invitation_id": paged, "csrf_token": token],
                session: invitee.account.access)
            #expect(refused.status == 410 && refused.body.contains("already accepted or declined"))
            let declining = try await h.form(
                "/account/invitations/decline", ["invitation_id": declined, "csrf_token": token],
                session: invitee.account.access)
            #expect(declining.status == 303 && declining.headers["location"] == "/account?notice=invitation_declined")
            let after = try await h.page("/account", session: invitee.account.access)
            #expect(!after.body.contains("id=\"invitations\""))
            let companies = try await h.client.get("/v1/companies", bearer: invitee.account.access)
            #expect((companies.json["companies"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [cid])
        }
    }

    @Test("a share link's page lists the signed-in visitor's invitations by email, and nobody else's")
    func sharePageListsInvitations() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Shared & Invited <Ltd>", owner: &owner)
            let invitee = try await h.person("invitee")
            let invited = try await h.client.invite(
                cid, email: invitee.email, bearer: try #require(owner.company?.access))
            #expect(invited.status == 201)
            let share = try await h.client.createShare(
                cid, permission: "read_only", bearer: try #require(owner.company?.access))
            let path = "/share/\(try #require(share.json["token"] as? String))"

            let signedIn = try await h.page(path, session: invitee.account.access)
            #expect(signedIn.status == 200)
            #expect(signedIn.body.contains("id=\"invitations\""))
            #expect(
                signedIn.body.contains(
                    "<strong class=\"invitation-company\">Shared &amp; Invited &lt;Ltd&gt;</strong>"),
                "the company's name is escaped")
            #expect(signedIn.body.contains("href=\"/account#invitations\""))
            let anonymous = try await h.page(path)
            #expect(anonymous.status == 200 && !anonymous.body.contains("id=\"invitations\""))
            let someoneElse = try await h.person("other")
            #expect(!(try await h.page(path, session: someoneElse.account.access)).body.contains("id=\"invitations\""))
        }
    }

    @Test("the sweeper forgets an invitation 30 days after it ended, and keeps the ones that ended since")
    func swept() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Swept Co", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            let revoked = try #require(
                try await h.client.invite(cid, email: AccountHarness.newEmail(), bearer: ownerToken).json["id"]
                    as? String)
            #expect(try await h.client.revokeInvitation(cid, revoked, bearer: ownerToken).status == 204)
            let expiring = try #require(
                try await h.client.invite(cid, email: AccountHarness.newEmail(), bearer: ownerToken).json["id"]
                    as? String)
            h.clock.advance(by: 31 * 86400)
            let report = try await SweeperTests.sweeper(h).sweep()
            #expect(report.deleted[.invitations] == 1)
            let left = try await h.client.invitations(
                cid, bearer: try await h.freshOwnerSession(cid, owner: owner.email))
            #expect(left.compactMap { $0["id"] as? String } == [expiring])
            #expect(left.first?["state"] as? String == "expired")
        }
    }

    @Test("a removal sticks: an invitation sent before the owner removed the account does not bring it back")
    func removalSticks() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Removal Co", owner: &owner)
            let ownerToken = try #require(owner.company?.access)
            var invitee = try await h.person("invitee")
            let old = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            try await h.join(cid, &invitee, owner: owner)
            #expect(
                try await h.client.delete("/v1/companies/\(cid)/members/\(invitee.id)", bearer: ownerToken).status
                    == 204)
            let refused = try await h.client.acceptInvitation(old, bearer: invitee.account.access)
            #expect(refused.status == 403)
            #expect(Self.code(refused) == "removed_from_company")
            // A new invitation, sent after the removal, is the owner's new decision.
            h.clock.advance(by: 1)
            let fresh = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            #expect(try await h.client.acceptInvitation(fresh, bearer: invitee.account.access).status == 200)
        }
    }

    @Test("two acceptances at once: one joins, the other is told the invitation is used")
    func concurrentAcceptance() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Race Co", owner: &owner)
            let invitee = try await h.person("invitee")
            let ownerToken = try #require(owner.company?.access)
            let id = try #require(
                try await h.client.invite(cid, email: invitee.email, bearer: ownerToken).json["id"] as? String)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await h.client.acceptInvitation(id, bearer: invitee.account.access).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 != 200 }.allSatisfy { $0 == 410 || $0 == 409 })
        }
    }
}
