import Foundation
import GatehouseServer
import SQLKit
import Testing

@Suite("Account deletion: re-authentication, owned companies, what goes and what stays")
struct AccountDeletionTests {
    @Test(
        "a member deletes their account: gone from sign-in and from the company's members, mailed, and the address signs up afresh"
    )
    func memberDeletesAccount() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Deletion Co", owner: &owner)
            var member = try await h.person("member")
            try await h.join(cid, &member, owner: owner)

            // A failed sign-in puts the address's digest in the trail.
            #expect(try await h.client.password(member.email, "not the password").status == 400)

            // Eleven minutes after signing in, the session alone no longer proves it is the person.
            h.clock.advance(by: 11 * 60)
            let bare = try await h.client.deleteAccount([:], bearer: member.account.access)
            #expect(bare.status == 401)
            #expect(bare.json["code"] as? String == "reauthentication_needed")
            let wrong = try await h.client.deleteAccount(["current_password": "not it"], bearer: member.account.access)
            #expect(wrong.status == 400)
            #expect(wrong.json["code"] as? String == "current_password_invalid")

            // A mail still waiting for the address: a retry the mail server's outage put off until tomorrow.
            let db = h.server.services.store.database
            let waiting = "m_waiting_\(UUID().uuidString)"
            try await db.insert(into: "mail_queue")
                .columns("id", "recipient_digest", "message", "created_at", "attempts", "next_attempt_at")
                .values(
                    SQLBind(waiting), SQLBind(Secrets.emailDigest(member.email)), SQLBind("sealed"),
                    SQLBind(Int64(h.clock.now.timeIntervalSince1970 * 1000)), SQLBind(Int64(3)),
                    SQLBind(Int64(h.clock.now.addingTimeInterval(24 * 3600).timeIntervalSince1970 * 1000))
                )
                .run()

            let deleted = try await h.client.deleteAccount(
                ["current_password": "correct horse battery"], bearer: member.account.access)
            #expect(deleted.status == 204)
            _ = try await h.mail(to: member.email, subject: "Your account was deleted")
            // The waiting mail will not follow the confirmation.
            #expect(try await db.select().column("id").from("mail_queue").where("id", .equal, waiting).all().isEmpty)
            // No event names the address any more (the sign-ins tried below add their own).
            let naming = try await db.select().column("id").from("audit_events")
                .where("detail", .like, "%\(Secrets.emailDigest(member.email))%").all()
            #expect(naming.isEmpty)

            // Every session ended, the company session too; the password no longer signs in.
            #expect(try await h.client.user(member.account.access).status == 403)
            #expect(try await h.client.get("/v1/sessions", bearer: member.company?.access).status == 403)
            let signIn = try await h.client.password(member.email, "correct horse battery")
            #expect(signIn.status == 400)
            #expect(signIn.json["error_code"] as? String == "invalid_credentials")

            // The company no longer lists them.
            let members = try await h.client.get("/v1/companies/\(cid)/members", bearer: owner.company?.access)
            let ids = (members.json["members"] as? [[String: Any]])?.compactMap { $0["account_id"] as? String } ?? []
            #expect(ids == [owner.id])

            // The trail keeps a tombstone and no IP address or user agent of the account.
            let rows = try await db.select().columns("action", "ip", "user_agent").from("audit_events")
                .where("account_id", .equal, member.id).all()
            #expect(try rows.contains { try $0.decode(column: "action", as: String.self) == "account_deleted" })
            #expect(try rows.allSatisfy { try $0.decode(column: "ip", as: String?.self) == nil })
            #expect(try rows.allSatisfy { try $0.decode(column: "user_agent", as: String?.self) == nil })
            let accounts = try await db.select().column("id").from("accounts").where("email", .equal, member.email)
                .all()
            #expect(accounts.isEmpty)

            // The address is free again.
            let again = try await h.confirmedAccount(member.email)
            #expect(again.userID != member.id)
        }
    }

    @Test("an owner is refused with owns_companies, naming them, until the company is deleted")
    func ownerMustGiveUpCompanies() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Still Owned Ltd", owner: &owner)
            let refused = try await h.client.deleteAccount([:], bearer: owner.account.access)
            #expect(refused.status == 409)
            #expect(refused.json["code"] as? String == "owns_companies")
            let companies = refused.json["companies"] as? [[String: Any]]
            #expect(companies?.map { $0["id"] as? String } == [cid])
            #expect(companies?.map { $0["name"] as? String } == ["Still Owned Ltd"])
            #expect(try await h.client.user(owner.account.access).status == 200)

            #expect(try await h.client.delete("/v1/companies/\(cid)", bearer: owner.company?.access).status == 204)
            // Within ten minutes of signing in, the session is proof enough.
            #expect(try await h.client.deleteAccount([:], bearer: owner.account.access).status == 204)
            #expect(try await h.client.user(owner.account.access).status == 403)
        }
    }
}

extension AuthClient {
    func deleteAccount(_ body: [String: Any]?, bearer: String?) async throws -> HTTPReply {
        var headers = self.headers
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        guard let body else { return try await http.send(.DELETE, base + "/v1/account", headers: headers) }
        let data = try JSONSerialization.data(withJSONObject: body)
        return try await http.send(
            .DELETE, base + "/v1/account", body: String(decoding: data, as: UTF8.self), headers: headers)
    }
}
