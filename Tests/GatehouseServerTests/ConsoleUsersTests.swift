import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// What the console's users pages tests stand on: accounts made in bulk as an import makes them (fast, with the
/// times, metadata and identities a test needs), and the pages read as the operator sees them.
extension AccountHarness {
    /// Imports `users` as `gatehouse users import` writes them.
    func importUsers(_ users: [ImportedUser]) async throws {
        let report = try await UserImporter(store: server.services.store, clock: clock).run(
            ImportRead(users: users), source: "test", dryRun: false)
        #expect(report.problems.isEmpty && report.written, "\(report.problems)")
    }

    /// The ids of the user list's rows, in order.
    static func listedIDs(_ page: HTTPReply) -> [String] {
        page.body.matches(of: /<tr class="user" data-user-id="([^"]+)">/).map { String($0.1) }
    }

    /// The list's next page link, unescaped.
    static func nextLink(_ page: HTTPReply) -> String? {
        page.body.firstMatch(of: /id="users-next" href="([^"]+)"/).map {
            String($0.1).replacingOccurrences(of: "&amp;", with: "&")
        }
    }

    /// The audit details recorded for `action`.
    func auditDetails(_ action: String) async throws -> [String] {
        try await server.services.store.database.raw(
            "SELECT detail FROM audit_events WHERE action = \(bind: action) ORDER BY id"
        ).all().map { try $0.decode(column: "detail", as: String?.self) ?? "" }
    }
}

extension ImportedUser {
    /// A user to import: confirmed, created `daysAgo` before the harness's clock.
    static func made(
        _ email: String, line: Int = 1, daysAgo: Double = 1, confirmed: Bool = true, signedIn: Bool = false,
        metadata: [String: JSONValue] = [:], appMetadata: [String: JSONValue] = [:], providers: [String] = [],
        bannedFor: TimeInterval? = nil, now: Date
    ) -> ImportedUser {
        let created = now.addingTimeInterval(-daysAgo * 86400)
        return ImportedUser(
            line: line, id: Secrets.identifier(), email: email, passwordHash: nil,
            emailConfirmedAt: confirmed ? created : nil, createdAt: created, updatedAt: created,
            lastSignInAt: signedIn ? created.addingTimeInterval(3600) : nil, userMetadata: metadata,
            appMetadata: appMetadata,
            identities: providers.map { ImportedIdentity(provider: $0, subject: Secrets.identifier()) },
            disabled: bannedFor != nil, bannedUntil: bannedFor.map { now.addingTimeInterval($0) })
    }
}

@Suite("Console: users")
struct ConsoleUsersTests {
    @Test("the list shows the users; search by email prefix, id or metadata; each filter; each order")
    func searchAndFilters() async throws {
        try await AccountHarness.with({ $0.auth.anonymousUsers = true }) { h in
            let op = try await h.consoleOperator()
            let now = h.clock.now
            try await h.importUsers([
                ImportedUser.made(
                    "alice@example.com", line: 1, daysAgo: 10, signedIn: true, metadata: ["plan": .string("gold")],
                    providers: ["google"], now: now),
                ImportedUser.made("bob@example.com", line: 2, daysAgo: 5, confirmed: false, bannedFor: 3600, now: now),
                ImportedUser.made(
                    "carol@example.org", line: 3, daysAgo: 2, appMetadata: ["team": .string("Blue Whales")], now: now),
            ])
            let guest = try await h.client.post("/auth/v1/signup", ["data": ["nickname": "guest"]])
            #expect(guest.status == 200)
            let guestID = try SignedIn(guest).userID
            func emails(_ query: String) async throws -> [String] {
                let page = try await h.console("/console/users" + query, as: op)
                #expect(page.status == 200, "\(query): \(page.body)")
                return ["alice@example.com", "bob@example.com", "carol@example.org", op.email].filter {
                    page.body.contains(">\($0)</a>")
                }
            }
            func ids(_ query: String) async throws -> [String] {
                AccountHarness.listedIDs(try await h.console("/console/users" + query, as: op))
            }

            let all = try await h.console("/console/users", as: op)
            #expect(all.body.contains("data-page=\"console-users\""))
            #expect(AccountHarness.listedIDs(all).count == 5)
            #expect(try await emails("").count == 4)
            let alice = try #require(
                try await AccountDirectory(db: h.server.services.store.database).find(email: "alice@example.com"))

            #expect(try await emails("?q=ALICE%40ex") == ["alice@example.com"])
            #expect(try await emails("?q=%40example.org") == [])
            #expect(try await emails("?q=\(alice.id.uppercased())") == ["alice@example.com"])
            #expect(try await emails("?q=gold") == [])
            #expect(try await emails("?q=metadata%3Agold") == ["alice@example.com"])
            #expect(try await emails("?q=metadata%3A+blue+whales") == ["carol@example.org"])
            #expect(try await emails("?q=car") == ["carol@example.org"])

            #expect(try await emails("?confirmed=no") == ["bob@example.com"])
            #expect(try await ids("?confirmed=no").count == 2, "bob and the anonymous guest")
            #expect(try await emails("?banned=yes") == ["bob@example.com"])
            #expect(try await ids("?banned=no").count == 4)
            #expect(try await ids("?anonymous=yes") == [guestID])
            #expect(try await ids("?anonymous=no").count == 4)
            #expect(try await emails("?has_factor=yes") == [op.email])
            #expect(try await ids("?has_factor=no").count == 4)
            #expect(try await emails("?provider=google") == ["alice@example.com"])
            #expect(try await ids("?provider=email").count == 4)
            let day = { (days: Double) in String(now.addingTimeInterval(-days * 86400).iso8601.prefix(10)) }
            #expect(
                try await emails("?created_from=\(day(6))&created_to=\(day(2))") == [
                    "bob@example.com", "carol@example.org",
                ])
            #expect(try await emails("?created_to=\(day(10))") == ["alice@example.com"])
            #expect(try await emails("?confirmed=yes&created_from=\(day(3))&q=carol%40") == ["carol@example.org"])

            let newest = try await ids("")
            let oldest = try await ids("?sort=oldest")
            #expect(oldest == newest.reversed())
            #expect(oldest.first == alice.id)
            let byEmail = try await h.console("/console/users?sort=email&anonymous=no", as: op)
            let positions = ["alice@example.com", "bob@example.com", "carol@example.org"].compactMap {
                byEmail.body.range(of: ">\($0)</a>")?.lowerBound
            }
            #expect(positions.count == 3 && positions == positions.sorted())
            // Those who signed in first, latest first; then the others.
            let bySignIn = try await ids("?sort=last_sign_in")
            let position = { (email: String) in
                try await AccountDirectory(db: h.server.services.store.database).find(email: email)
                    .flatMap { bySignIn.firstIndex(of: $0.id) }
            }
            #expect(bySignIn.count == 5 && bySignIn.firstIndex(of: op.accountID)! < bySignIn.firstIndex(of: alice.id)!)
            let never = [try await position("bob@example.com"), try await position("carol@example.org")]
            #expect(never.allSatisfy { ($0 ?? -1) > bySignIn.firstIndex(of: alice.id)! })

            let row = try #require(
                all.body.components(separatedBy: "data-user-id=\"\(alice.id)\"").dropFirst().first?
                    .components(separatedBy: "</tr>").first)
            #expect(row.contains("<td>email, google</td>"))
            #expect(all.body.contains("Second factor</span>") && all.body.contains("Banned</span>"))
            #expect(all.body.contains("Anonymous</span>"))
        }
    }

    @Test("a single sign-on account shows and is found by its provider's address, not its placeholder")
    func singleSignOn() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            try await h.importUsers([ImportedUser.made("dana@example.com", now: h.clock.now)])
            let dana = try #require(
                try await AccountDirectory(db: h.server.services.store.database).find(email: "dana@example.com"))
            let placeholder = AccountRecord.ssoEmail(id: dana.id)
            try await h.server.services.store.database.raw(
                """
                UPDATE accounts SET email = \(bind: placeholder), sso_provider_id = \(bind: Secrets.identifier()),
                sso_email = \(bind: "dana@corp.example") WHERE id = \(bind: dana.id)
                """
            ).run()
            let found = try await h.console("/console/users?q=dana%40corp", as: op)
            #expect(AccountHarness.listedIDs(found) == [dana.id])
            #expect(found.body.contains(">dana@corp.example</a> <span class=\"badge\">SSO</span>"))
            #expect(!found.body.contains(">\(placeholder)</a>"))
            let page = try await h.console("/console/users/\(dana.id)", as: op)
            #expect(page.body.contains("<title>User dana@corp.example") && page.body.contains(placeholder))
            #expect(!page.body.contains("id=\"recovery\"") && !page.body.contains("id=\"link\""))
        }
    }

    @Test("paging: 50 a page, a cursor to the next, every user once in every order")
    func paging() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let now = h.clock.now
            var users: [ImportedUser] = []
            for n in 0..<60 {
                users.append(
                    ImportedUser.made(
                        "user\(n)@example.com", line: n + 1, daysAgo: Double(n) / 24, signedIn: n % 2 == 0, now: now))
            }
            try await h.importUsers(users)
            for sort in ["", "oldest", "last_sign_in", "email"] {
                var seen: [String] = []
                var next: String? = "/console/users?sort=\(sort)"
                var pages = 0
                while let path = next {
                    let page = try await h.console(path, as: op)
                    #expect(page.status == 200)
                    let ids = AccountHarness.listedIDs(page)
                    #expect(ids.count == (pages == 0 ? 50 : 11), "sort \(sort)")
                    seen += ids
                    next = AccountHarness.nextLink(page)
                    if let next { #expect(next.contains("after=") && (sort.isEmpty || next.contains("sort=\(sort)"))) }
                    pages += 1
                }
                #expect(pages == 2 && seen.count == 61 && Set(seen).count == 61, "sort \(sort)")
            }
        }
    }

    @Test("a bad cursor, date, order or filter is a 400 page that says so")
    func badInput() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = Secrets.base64URL(Data("someone@example.com|\(op.accountID)".utf8))
            for (query, words) in [
                ("?after=not-a-cursor", "The page link is not valid"),
                ("?after=\(email)", "The page link is not valid"),
                ("?created_from=2026-13-01", "A date is not valid"),
                ("?created_to=yesterday", "A date is not valid"),
                ("?created_from=2026-02-01&created_to=2026-01-01", "must not be after"),
                ("?sort=random", "There is no such order"),
                ("?banned=maybe", "A filter has a value"),
            ] {
                let page = try await h.console("/console/users" + query, as: op)
                #expect(page.status == 400 && page.body.contains(words), "\(query)")
                #expect(page.body.contains("id=\"console-error\""))
            }
            let german = try await h.console(
                "/console/users?sort=random", as: op, headers: [("Accept-Language", "de")])
            #expect(german.status == 400 && german.body.contains("Diese Reihenfolge gibt es nicht"))
        }
    }

    @Test("a user's page: account, identities, factors, sessions, companies, recent audit; an unknown id is 404")
    func userPage() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail("member")
            let user = try await h.confirmedAccount(email)
            let factor = try await h.enrolled(user.access, name: "Work phone")
            _ = try await h.stepUp(factor, bearer: user.access)
            let company = try await h.client.createCompany("Acme Widgets", bearer: user.access)
            #expect(company.status == 201 || company.status == 200)

            let page = try await h.console("/console/users/\(user.userID)", as: op)
            #expect(page.status == 200)
            #expect(page.body.contains("<title>User \(email)") && page.body.contains("id=\"user-id\">\(user.userID)<"))
            #expect(page.body.contains("<tr class=\"identity\"><td>email</td><td>\(email)</td>"))
            #expect(page.body.contains("<td>Work phone</td><td>totp</td><td>verified</td>"))
            #expect(page.body.matches(of: /<tr class="session" data-session-id=/).count >= 1)
            #expect(page.body.contains(">Acme Widgets</a></td><td>owner</td>"))
            #expect(page.body.contains("<td class=\"mono\">factor_verified</td>"))
            #expect(page.body.contains("<td class=\"mono\">signup</td>") || page.body.contains(">signed_in<"))

            #expect(try await h.console("/console/users/\(Secrets.identifier())", as: op).status == 404)
            #expect(try await h.console("/console/users/not-an-id", as: op).status == 404)
            #expect(
                try await h.consoleForm("/console/users/\(Secrets.identifier())/ban", ["duration": "1h"], as: op)
                    .status == 404)
        }
    }

    /// Posts `action` on the user: first the confirmation step, then with `confirm=yes`; answers the second reply.
    static func confirmed(
        _ h: AccountHarness, _ op: ConsoleOperator, _ userID: String, _ action: String,
        _ fields: [String: String] = [:]
    ) async throws -> HTTPReply {
        let path = "/console/users/\(userID)/\(action)"
        let asked = try await h.consoleForm(path, fields, as: op)
        #expect(asked.status == 200 && asked.body.contains("<form id=\"confirm\" method=\"post\" action=\"\(path)\">"))
        #expect(asked.body.contains("<input type=\"hidden\" name=\"confirm\" value=\"yes\">"))
        return try await h.consoleForm(path, fields.merging(["confirm": "yes"]) { $1 }, as: op)
    }

    @Test("ban and unban: asked first, then the password sign-in is refused, then allowed again; audited")
    func banAndUnban() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail()
            let user = try await h.confirmedAccount(email)
            let asked = try await h.consoleForm("/console/users/\(user.userID)/ban", ["duration": "1d"], as: op)
            #expect(asked.body.contains("cannot sign in for 1 day"))
            #expect(try await h.client.password(email, "correct horse battery").status == 200, "asking changes nothing")

            let banned = try await Self.confirmed(h, op, user.userID, "ban", ["duration": "1d"])
            #expect(banned.status == 303 && banned.headers["location"] == "/console/users/\(user.userID)?notice=banned")
            #expect(try await h.client.password(email, "correct horse battery").status != 200)
            #expect(try await h.client.refresh(user.refresh).status != 200)
            let page = try await h.console("/console/users/\(user.userID)?notice=banned", as: op)
            #expect(page.body.contains("The user is banned.") && page.body.contains("Banned until"))

            let unbanned = try await Self.confirmed(h, op, user.userID, "unban")
            #expect(unbanned.status == 303)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
            let updates = try await h.auditDetails("admin_user_updated")
            #expect(updates.count == 2 && updates.allSatisfy { $0.contains("\"operator_id\":\"\(op.accountID)\"") })
            #expect(updates[0].contains("banned") && updates[1].contains("unbanned"))

            let forever = try await Self.confirmed(h, op, user.userID, "ban", ["duration": "lifted"])
            #expect(forever.status == 303)
            #expect(try await h.console("/console/users/\(user.userID)", as: op).body.contains("Banned until lifted"))
            let unknown = try await h.consoleForm("/console/users/\(user.userID)/ban", ["duration": "1y"], as: op)
            #expect(unknown.status == 400 && unknown.body.contains("Choose how long the ban lasts"))
        }
    }

    @Test("end one session, then every session: their refresh tokens stop working; audited")
    func endSessions() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail()
            let first = try await h.confirmedAccount(email)
            let second = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let third = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let sessionID = try #require(try FactorFlowTests.claims(first.access)["session_id"] as? String)

            let asked = try await h.consoleForm(
                "/console/users/\(first.userID)/end-session", ["session_id": sessionID], as: op)
            #expect(asked.status == 200 && asked.body.contains("name=\"session_id\" value=\"\(sessionID)\""))
            let one = try await Self.confirmed(h, op, first.userID, "end-session", ["session_id": sessionID])
            #expect(one.headers["location"] == "/console/users/\(first.userID)?notice=session_ended")
            #expect(try await h.client.refresh(first.refresh).status != 200)
            let stillLive = try SignedIn(try await h.client.refresh(second.refresh))

            let all = try await Self.confirmed(h, op, first.userID, "end-session")
            #expect(all.headers["location"] == "/console/users/\(first.userID)?notice=sessions_ended")
            #expect(try await h.client.refresh(stillLive.refresh).status != 200)
            #expect(try await h.client.refresh(third.refresh).status != 200)
            #expect(
                try await h.console("/console/users/\(first.userID)", as: op).body.contains("data-session-id") == false)
            let revoked = try await h.auditDetails("session_revoked")
            #expect(revoked.contains { $0.contains(sessionID) && $0.contains("\"operator_id\":\"\(op.accountID)\"") })
            let everywhere = try await h.auditDetails("signed_out_everywhere")
            #expect(everywhere.contains { $0.contains("\"operator_id\":\"\(op.accountID)\"") })
            let unknown = try await Self.confirmed(h, op, first.userID, "end-session", ["session_id": "nope"])
            #expect(unknown.status == 404 && unknown.body.contains("No such session"))
        }
    }

    @Test("remove one factor, then every factor: gone from the user; audited")
    func removeFactors() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let user = try await h.confirmedAccount(AccountHarness.newEmail())
            let phone = try await h.enrolled(user.access, name: "Phone")
            let raised = try await h.stepUp(phone, bearer: user.access)
            let tablet = try await h.enrolled(raised.access, name: "Tablet")
            _ = try await h.stepUp(tablet, bearer: raised.access)
            let factors = { try await AccountFactors(db: h.server.services.store.database).all(accountID: user.userID) }
            #expect(try await factors().count == 2)

            let one = try await Self.confirmed(h, op, user.userID, "remove-factor", ["factor_id": phone.id])
            #expect(one.headers["location"] == "/console/users/\(user.userID)?notice=factor_removed")
            #expect(try await factors().map(\.id) == [tablet.id])
            let all = try await Self.confirmed(h, op, user.userID, "remove-factor")
            #expect(all.headers["location"] == "/console/users/\(user.userID)?notice=factors_removed")
            #expect(try await factors().isEmpty)
            let deleted = try await h.auditDetails("factor_deleted")
            #expect(deleted.count == 2 && deleted.allSatisfy { $0.contains("\"operator_id\":\"\(op.accountID)\"") })
        }
    }

    @Test("a recovery mail reaches the user; a generated link is shown once; both audited with the operator")
    func recoveryAndLink() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail()
            let user = try await h.confirmedAccount(email)
            let sent = try await Self.confirmed(h, op, user.userID, "recovery")
            #expect(sent.headers["location"] == "/console/users/\(user.userID)?notice=recovery_sent")
            #expect(try await h.mail(to: email, subject: "Reset your password").code != nil)
            let recorded = try await h.auditDetails("console_action")
            #expect(
                recorded.contains {
                    $0.contains("recovery_mail_sent") && $0.contains("\"operator_id\":\"\(op.accountID)\"")
                })

            let link = try await Self.confirmed(h, op, user.userID, "link", ["type": "magiclink"])
            #expect(link.status == 200 && link.body.contains("signs in as the user"))
            let action = try #require(link.body.firstMatch(of: /<code id="action-link">([^<]+)<\/code>/)).1
            #expect(action.contains("/auth/v1/verify?token=") && action.contains("type=magiclink"))
            let generated = try await h.auditDetails("admin_link_generated")
            #expect(generated.count == 1 && generated[0].contains("\"operator_id\":\"\(op.accountID)\""))
            let wrongType = try await h.consoleForm("/console/users/\(user.userID)/link", ["type": "signup"], as: op)
            #expect(wrongType.status == 400)
        }
    }

    @Test("delete: asked first, then the user is gone and the list says so; audited")
    func delete() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let user = try await h.confirmedAccount(AccountHarness.newEmail())
            let gone = try await Self.confirmed(h, op, user.userID, "delete")
            #expect(gone.status == 303 && gone.headers["location"] == "/console/users?notice=deleted")
            #expect(try await AccountDirectory(db: h.server.services.store.database).find(id: user.userID) == nil)
            #expect(try await h.console("/console/users/\(user.userID)", as: op).status == 404)
            #expect(try await h.console("/console/users?notice=deleted", as: op).body.contains("The user is deleted."))
            let recorded = try await h.auditDetails("console_action")
            #expect(
                recorded.contains { $0.contains("user_deleted") && $0.contains("\"operator_id\":\"\(op.accountID)\"") })

            let owner = try await h.confirmedAccount(AccountHarness.newEmail())
            _ = try await h.client.createCompany("Kept Ltd", bearer: owner.access)
            let refused = try await Self.confirmed(h, op, owner.userID, "delete")
            #expect(refused.status == 409 && refused.body.contains("Kept Ltd"))
        }
    }

    @Test("a form without the page's token, or with another, is refused and changes nothing")
    func forgedForms() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let email = AccountHarness.newEmail()
            let user = try await h.confirmedAccount(email)
            for action in ["ban", "delete", "end-session", "remove-factor", "recovery", "link"] {
                let path = "/console/users/\(user.userID)/\(action)"
                let fields = ["confirm": "yes", "duration": "1d", "type": "magiclink"]
                let missing = try await h.form(path, fields, session: op.access)
                #expect(missing.status == 403, "\(action)")
                let wrong = try await h.consoleForm(path, fields.merging(["csrf_token": "forged"]) { $1 }, as: op)
                #expect(wrong.status == 403, "\(action)")
                let crossSite = try await h.form(
                    path, fields.merging(["csrf_token": op.formToken]) { $1 }, session: op.access, site: "cross-site")
                #expect(crossSite.status == 403, "\(action)")
            }
            #expect(try await h.client.refresh(user.refresh).status == 200)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
            #expect(try await h.auditDetails("admin_link_generated").isEmpty)
            #expect(try await h.hasMail(to: email, subject: "Reset your password") == false)
        }
    }

    @Test("what a user wrote is escaped on the list and the user's page")
    func injection() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let script = "<script>alert(1)</script>"
            let image = "\"><img src=x onerror=alert(1)>"
            let probes: [String: JSONValue] = ["name": .string(script), "bio": .string(image)]
            try await h.importUsers([
                ImportedUser.made(
                    "\(script)@example.com", line: 1, metadata: probes, appMetadata: probes, now: h.clock.now),
                ImportedUser.made("x\(image)@example.com", line: 2, metadata: probes, now: h.clock.now),
            ])
            let list = try await h.console("/console/users", as: op)
            let searched = try await h.console(
                "/console/users?q=\(script.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)", as: op)
            #expect(searched.status == 200)
            for page in [list, searched] {
                #expect(!page.body.contains(script) && !page.body.contains("<img src=x"))
            }
            #expect(list.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;@example.com"))
            #expect(list.body.contains("x&quot;&gt;&lt;img src=x onerror=alert(1)&gt;@example.com"))
            #expect(searched.body.contains("value=\"&lt;script&gt;alert(1)&lt;/script&gt;\""))
            for id in AccountHarness.listedIDs(list) where id != op.accountID {
                let page = try await h.console("/console/users/\(id)", as: op)
                #expect(page.status == 200)
                #expect(!page.body.contains(script) && !page.body.contains("<img src=x"))
                #expect(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
                #expect(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"))
                let asked = try await h.consoleForm("/console/users/\(id)/delete", [:], as: op)
                #expect(!asked.body.contains(script) && !asked.body.contains("<img src=x"))
            }
        }
    }
}
