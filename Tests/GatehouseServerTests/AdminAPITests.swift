import Foundation
import NIOHTTP1
import Testing

@testable import GatehouseServer

/// A backend's calls to the admin API, with a service key as the bearer token (as supabase-js and supabase-swift send
/// it, `apikey` too).
struct AdminClient {
    let client: AuthClient
    let key: String
    var asAPIKeyOnly = false

    private var headers: [(String, String)] {
        asAPIKeyOnly ? [("apikey", key)] : [("apikey", key), ("Authorization", "Bearer \(key)")]
    }

    func get(_ path: String, extra: [(String, String)] = []) async throws -> HTTPReply {
        try await client.http.send(.GET, client.base + path, headers: client.headers + headers + extra)
    }

    func send(_ method: HTTPMethodName, _ path: String, _ body: [String: Any]) async throws -> HTTPReply {
        let data = try JSONSerialization.data(withJSONObject: body)
        return try await client.http.send(
            method.value, client.base + path, body: String(decoding: data, as: UTF8.self),
            headers: client.headers + headers + [("Content-Type", "application/json")])
    }

    enum HTTPMethodName {
        case post, put, delete
        var value: HTTPMethod {
            switch self {
            case .post: .POST
            case .put: .PUT
            case .delete: .DELETE
            }
        }
    }

    static func mint(_ h: AccountHarness, revokingOthers: Bool = false) async throws -> (id: String, token: String) {
        let keys = ServiceKeys(
            store: h.server.services.store, box: h.server.services.box, configuration: h.server.services.configuration)
        let minted = try await keys.mint(revokingOthers: revokingOthers)
        return (minted.id, minted.token)
    }
}

@Suite("Admin API: service keys, users, links, invitations, the trail")
struct AdminAPITests {
    @Test("only a live service key opens the admin API, never from a browser; a user's token is not_admin")
    func serviceKeysOnly() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            #expect(try await admin.get("/auth/v1/admin/users").status == 200)
            #expect(
                try await AdminClient(client: h.client, key: key, asAPIKeyOnly: true).get("/auth/v1/admin/users").status
                    == 200)

            let bare = try await h.client.get("/auth/v1/admin/users")
            #expect(bare.status == 401 && bare.json["error_code"] as? String == "no_authorization")
            let user = try await h.confirmedAccount(AccountHarness.newEmail())
            let asUser = try await h.client.get("/auth/v1/admin/users", bearer: user.access)
            #expect(asUser.status == 403 && asUser.json["error_code"] as? String == "not_admin")
            let forged = try await AdminClient(client: h.client, key: key + "x").get("/auth/v1/admin/users")
            #expect(forged.status == 403 && forged.json["error_code"] as? String == "bad_jwt")
            // A browser's request, even with the key: refused.
            let browser = try await admin.get("/auth/v1/admin/users", extra: [("Origin", "https://evil.example")])
            #expect(browser.status == 403 && browser.json["error_code"] as? String == "cross_site_request")
            let fetched = try await admin.get("/auth/v1/admin/users", extra: [("Sec-Fetch-Site", "same-origin")])
            #expect(fetched.status == 403)

            // Revoked: refused at once. A rotation revokes every earlier key.
            let (secondID, second) = try await AdminClient.mint(h)
            let services = h.server.services
            let keys = ServiceKeys(store: services.store, box: services.box, configuration: services.configuration)
            #expect(try await keys.revoke(secondID) == 1)
            let revoked = try await AdminClient(client: h.client, key: second).get("/auth/v1/admin/users")
            #expect(revoked.status == 403 && revoked.json["error_code"] as? String == "bad_jwt")
            let (_, third) = try await AdminClient.mint(h, revokingOthers: true)
            #expect(try await admin.get("/auth/v1/admin/users").status == 403)
            #expect(try await AdminClient(client: h.client, key: third).get("/auth/v1/admin/users").status == 200)
        }
    }

    @Test(
        "users created, read, listed a page at a time with GoTrue's Link and X-Total-Count, changed and deleted; each change audited with the key's id"
    )
    func users() async throws {
        try await AccountHarness.with { h in
            let (keyID, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let email = AccountHarness.newEmail("made")
            let created = try await admin.send(
                .post, "/auth/v1/admin/users",
                [
                    "email": email, "password": "a made up passphrase", "email_confirm": true,
                    "user_metadata": ["name": "Ada"], "app_metadata": ["plan": "pro"],
                ])
            #expect(created.status == 200)
            let id = try #require(created.json["id"] as? String)
            #expect(created.json["email_confirmed_at"] is String)
            #expect((created.json["user_metadata"] as? [String: Any])?["name"] as? String == "Ada")
            let app = try #require(created.json["app_metadata"] as? [String: Any])
            #expect(app["plan"] as? String == "pro" && app["provider"] as? String == "email")
            #expect(try await h.client.password(email, "a made up passphrase").status == 200)
            let again = try await admin.send(.post, "/auth/v1/admin/users", ["email": email])
            #expect(again.status == 422 && again.json["error_code"] as? String == "email_exists")

            // Kept ids (any case), imported bcrypt hashes, and clear refusals of bad input.
            let chosen = UUID().uuidString
            let imported = AccountHarness.newEmail("imported")
            let withHash = try await admin.send(
                .post, "/auth/v1/admin/users",
                [
                    "id": chosen, "email": imported, "email_confirm": true,
                    "password_hash": "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
                ])
            #expect(withHash.status == 200 && withHash.json["id"] as? String == chosen.lowercased())
            #expect(try await h.client.password(imported, "U*U").status == 200)
            #expect(try await admin.get("/auth/v1/admin/users/\(chosen)").json["email"] as? String == imported)
            let badHash = try await admin.send(
                .post, "/auth/v1/admin/users", ["email": AccountHarness.newEmail(), "password_hash": "md5:abc"])
            #expect(badHash.status == 400 && badHash.json["error_code"] as? String == "validation_failed")
            let both = try await admin.send(
                .post, "/auth/v1/admin/users",
                ["email": AccountHarness.newEmail(), "password": "x long enough 1", "password_hash": "$2a$05$x"])
            #expect(both.status == 400)
            let noEmail = try await admin.send(.post, "/auth/v1/admin/users", ["phone": "+15550100"])
            #expect(noEmail.status == 400)
            let taken = try await admin.send(
                .post, "/auth/v1/admin/users", ["id": chosen, "email": AccountHarness.newEmail()])
            #expect(taken.status == 422 && taken.json["error_code"] as? String == "user_already_exists")
            #expect(try await admin.get("/auth/v1/admin/users/not-a-uuid").status == 404)
            let missing = try await admin.get("/auth/v1/admin/users/\(UUID().uuidString)")
            #expect(missing.status == 404 && missing.json["error_code"] as? String == "user_not_found")

            // Pages: newest first, GoTrue's headers; empty parameters are the defaults (the Python client sends them).
            h.clock.advance(by: 1)
            let third = AccountHarness.newEmail("third")
            #expect(try await admin.send(.post, "/auth/v1/admin/users", ["email": third]).status == 200)
            let first = try await admin.get("/auth/v1/admin/users?page=1&per_page=2")
            #expect(first.headers["x-total-count"] == "3")
            #expect(
                first.headers["link"]
                    == "</auth/v1/admin/users?page=2&per_page=2>; rel=\"next\", </auth/v1/admin/users?page=2&per_page=2>; rel=\"last\""
            )
            let listed = try #require(first.json["users"] as? [[String: Any]])
            #expect(
                listed.first?["email"] as? String == third && listed.count == 2
                    && first.json["aud"] as? String == "authenticated")
            let last = try await admin.get("/auth/v1/admin/users?page=2&per_page=2")
            #expect((last.json["users"] as? [[String: Any]])?.count == 1)
            #expect(last.headers["link"] == "</auth/v1/admin/users?page=2&per_page=2>; rel=\"last\"")
            #expect((try await admin.get("/auth/v1/admin/users?page=&per_page=").json["users"] as? [Any])?.count == 3)
            let filtered = try await admin.get("/auth/v1/admin/users?filter=imported")
            #expect((filtered.json["users"] as? [[String: Any]])?.map { $0["email"] as? String } == [imported])
            #expect(try await admin.get("/auth/v1/admin/users?per_page=0").status == 400)
            #expect(try await admin.get("/auth/v1/admin/users?sort=email%20asc").status == 400)

            // Changes: the email at once, metadata merged (a null removes), a new password ends every session.
            let session = try SignedIn(try await h.client.password(email, "a made up passphrase"))
            let moved = AccountHarness.newEmail("moved")
            let changed = try await admin.send(
                .put, "/auth/v1/admin/users/\(id)",
                [
                    "email": moved, "user_metadata": ["name": NSNull(), "team": "blue"],
                    "password": "another passphrase 2",
                ])
            #expect(changed.status == 200 && changed.json["email"] as? String == moved)
            #expect(changed.json["user_metadata"] as? [String: String] == ["team": "blue"])
            #expect(try await h.client.user(session.access).status == 403)
            #expect(try await h.client.password(moved, "another passphrase 2").status == 200)

            // Deleted: gone; the trail names the key behind every change.
            #expect(try await admin.send(.delete, "/auth/v1/admin/users/\(id)", [:]).status == 200)
            #expect(try await admin.get("/auth/v1/admin/users/\(id)").status == 404)
            #expect(try await h.client.password(moved, "another passphrase 2").status == 400)
            let trail = try await admin.get("/auth/v1/admin/audit?query=action:admin_user_updated")
            #expect(trail.headers["x-total-count"] == "1")
            let entries = (try? JSONSerialization.jsonObject(with: Data(trail.body.utf8))) as? [[String: Any]]
            let entry = try #require(entries?.first)
            let payload = try #require(entry["payload"] as? [String: Any])
            #expect(payload["action"] as? String == "admin_user_updated")
            #expect((payload["traits"] as? [String: Any])?["service_key"] as? String == keyID)
            #expect(payload["actor_username"] as? String == "service_role")
            let created3 = try await admin.get("/auth/v1/admin/audit?query=action:admin_user_created&per_page=1")
            #expect(created3.headers["x-total-count"] == "3")
            #expect(try await admin.get("/auth/v1/admin/audit?query=nope").status == 400)
        }
    }

    @Test(
        "a ban ends the user's sessions at once and refuses sign-in until it ends; the sweeper lifts it; none lifts it now"
    )
    func bans() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let email = AccountHarness.newEmail("banned")
            let session = try await h.confirmedAccount(email)
            let id = try #require(try await h.client.user(session.access).json["id"] as? String)
            let banned = try await admin.send(.put, "/auth/v1/admin/users/\(id)", ["ban_duration": "1h30m"])
            #expect(banned.status == 200 && banned.json["banned_until"] is String)
            #expect(try await h.client.user(session.access).status == 403)
            #expect(try await h.client.refresh(session.refresh).json["error_code"] as? String == "user_banned")
            #expect(try await h.client.password(email, "correct horse battery").status != 200)
            for refused in ["2 days", "99999999999999h", "1e400h"] {
                let bad = try await admin.send(.put, "/auth/v1/admin/users/\(id)", ["ban_duration": refused])
                #expect(bad.status == 400 && bad.json["error_code"] as? String == "validation_failed", "\(refused)")
            }

            // Past its end, the sweeper lifts it.
            h.clock.advance(by: 90 * 60 + 1)
            let report = try await SweeperTests.sweeper(h).sweep()
            #expect(report.bansLifted == 1)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)

            // An indefinite ban shows as a century; none lifts it at once.
            #expect(try await admin.send(.put, "/auth/v1/admin/users/\(id)", ["ban_duration": "876000h"]).status == 200)
            #expect(try await h.client.password(email, "correct horse battery").status != 200)
            let lifted = try await admin.send(.put, "/auth/v1/admin/users/\(id)", ["ban_duration": "none"])
            #expect(lifted.json["banned_until"] == nil || lifted.json["banned_until"] is NSNull)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
        }
    }

    @Test("generate_link answers GoTrue's flat shape, mails nothing, and each link and code works once")
    func generateLink() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            // A sign-up link for a new address: confirms and signs in, with the given password.
            let email = AccountHarness.newEmail("linked")
            let signup = try await admin.send(
                .post, "/auth/v1/admin/generate_link",
                ["type": "signup", "email": email, "password": "linked passphrase 1", "data": ["n": 1]])
            #expect(signup.status == 200)
            #expect(signup.json["email"] as? String == email && signup.json["verification_type"] as? String == "signup")
            let actionLink = try #require(signup.json["action_link"] as? String)
            #expect(actionLink.contains("/auth/v1/verify?token=") && actionLink.contains("type=signup"))
            let otp = try #require(signup.json["email_otp"] as? String)
            #expect(otp.count == 6 && signup.json["hashed_token"] is String && signup.json["redirect_to"] is String)
            #expect(try await h.hasMail(to: email, subject: "Confirm your email") == false)
            let verified = try await h.client.verify(email, code: otp, type: "signup")
            #expect(verified.status == 200)
            #expect(try await h.client.password(email, "linked passphrase 1").status == 200)
            let again = try await admin.send(.post, "/auth/v1/admin/generate_link", ["type": "signup", "email": email])
            #expect(again.status == 422 && again.json["error_code"] as? String == "email_exists")

            // A magic link by its hashed token; a recovery code; an unknown address's recovery is 404.
            let magic = try await admin.send(
                .post, "/auth/v1/admin/generate_link", ["type": "magiclink", "email": email])
            let hashed = try #require(magic.json["hashed_token"] as? String)
            #expect(
                try await h.client.post("/auth/v1/verify", ["type": "magiclink", "token_hash": hashed]).status == 200)
            #expect(
                try await h.client.post("/auth/v1/verify", ["type": "magiclink", "token_hash": hashed]).status == 403)
            let recovery = try await admin.send(
                .post, "/auth/v1/admin/generate_link", ["type": "recovery", "email": email])
            let recoveryCode = try #require(recovery.json["email_otp"] as? String)
            #expect(try await h.client.verify(email, code: recoveryCode, type: "recovery").status == 200)
            let nobody = try await admin.send(
                .post, "/auth/v1/admin/generate_link", ["type": "recovery", "email": AccountHarness.newEmail()])
            #expect(nobody.status == 404 && nobody.json["error_code"] as? String == "user_not_found")

            // An email change, both halves.
            let newEmail = AccountHarness.newEmail("changed")
            let current = try await admin.send(
                .post, "/auth/v1/admin/generate_link",
                ["type": "email_change_current", "email": email, "new_email": newEmail])
            let new = try await admin.send(
                .post, "/auth/v1/admin/generate_link",
                ["type": "email_change_new", "email": email, "new_email": newEmail])
            #expect(current.json["new_email"] as? String == newEmail)
            let first = try await h.client.verify(
                email, code: try #require(current.json["email_otp"] as? String), type: "email_change")
            #expect(first.json["code"] as? String == "200")
            // Another code for the side that confirmed already confirms that side again, never both.
            let currentAgain = try await admin.send(
                .post, "/auth/v1/admin/generate_link",
                ["type": "email_change_current", "email": email, "new_email": newEmail])
            let repeated = try await h.client.verify(
                email, code: try #require(currentAgain.json["email_otp"] as? String), type: "email_change")
            #expect(repeated.json["code"] as? String == "200" && repeated.json["access_token"] == nil)
            let second = try await h.client.verify(
                newEmail, code: try #require(new.json["email_otp"] as? String), type: "email_change")
            #expect((second.json["user"] as? [String: Any])?["email"] as? String == newEmail)
            let unknownType = try await admin.send(
                .post, "/auth/v1/admin/generate_link", ["type": "nope", "email": email])
            #expect(unknownType.status == 400)
        }
    }

    @Test(
        "an invitation mails a link that confirms the address and signs in, with the profile given; a confirmed address is 422"
    )
    func invite() async throws {
        try await AccountHarness.with { h in
            let (_, key) = try await AdminClient.mint(h)
            let admin = AdminClient(client: h.client, key: key)
            let email = AccountHarness.newEmail("invited")
            for path in ["/auth/v1/invite", "/auth/v1/admin/invite"] {
                let invited = try await admin.send(.post, path, ["email": email, "data": ["team": "red"]])
                #expect(invited.status == 200 && invited.json["email"] as? String == email)
                #expect(invited.json["email_confirmed_at"] == nil || invited.json["email_confirmed_at"] is NSNull)
            }
            let mail = try await h.mail(to: email, subject: "You have been invited")
            let link = try #require(mail.link)
            #expect(link.contains("type=invite"))
            let token = try #require(URLComponents(string: link)?.queryItems?.first { $0.name == "token" }?.value)
            let session = try await h.client.post("/auth/v1/verify", ["type": "invite", "token_hash": token])
            #expect(session.status == 200)
            let user = try #require(session.json["user"] as? [String: Any])
            #expect(user["email_confirmed_at"] is String)
            #expect((user["user_metadata"] as? [String: Any])?["team"] as? String == "red")
            let confirmed = try await admin.send(.post, "/auth/v1/invite", ["email": email])
            #expect(confirmed.status == 422 && confirmed.json["error_code"] as? String == "email_exists")
        }
    }
}
