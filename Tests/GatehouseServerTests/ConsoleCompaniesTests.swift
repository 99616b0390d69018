import Foundation
import Testing

@testable import GatehouseServer

/// The console's companies: the list (search, tier, paging), a company's page, and the operator's tier override.
@Suite("Console: companies")
struct ConsoleCompaniesTests {
    /// The list's rows: each a link to a company's page.
    static func rows(_ body: String) -> Int {
        body.components(separatedBy: "<tr><td><a href=\"/console/companies/").count - 1
    }

    static func next(_ body: String) -> String? {
        guard let start = body.range(of: "id=\"companies-next\" href=\"") else { return nil }
        return body[start.upperBound...].prefix { $0 != "\"" }.replacingOccurrences(of: "&amp;", with: "&")
    }

    static func company(_ h: AccountHarness, _ name: String, owner: Person) async throws -> String {
        let created = try await h.client.createCompany(name, bearer: owner.account.access)
        #expect(created.status == 201)
        return try #require(created.json["id"] as? String)
    }

    static func tier(_ h: AccountHarness, _ cid: String) async throws -> CompanyRecord? {
        try await CompanyDirectory(db: h.server.services.store.database).company(cid)
    }

    @Test("lists companies with tier and source, searched by name or id, narrowed by tier")
    func list() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            var owner = try await h.person("owner")
            let acme = try await h.company("Acme Alpha", owner: &owner, tier: .business)
            let beta = try await Self.company(h, "Beta Works", owner: owner)
            let probe = try await Self.company(h, "<script>alert(1)</script>", owner: owner)

            let all = try await h.console("/console/companies", as: op)
            #expect(all.status == 200)
            #expect(Self.rows(all.body) == 3)
            #expect(all.body.contains("Acme Alpha") && all.body.contains("Beta Works"))
            #expect(!all.body.contains("<script>alert(1)</script>"))
            #expect(all.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(all.body.contains("Operator override"), "Acme's tier was set by an operator")

            let byName = try await h.console("/console/companies?q=ALPHA", as: op)
            #expect(Self.rows(byName.body) == 1)
            #expect(byName.body.contains(acme))
            let byID = try await h.console("/console/companies?q=\(beta)", as: op)
            #expect(Self.rows(byID.body) == 1)
            #expect(byID.body.contains("Beta Works"))
            let literal = try await h.console("/console/companies?q=%25", as: op)
            #expect(Self.rows(literal.body) == 0, "a % is a character, not a wildcard")
            let business = try await h.console("/console/companies?tier=business", as: op)
            #expect(Self.rows(business.body) == 1)
            #expect(business.body.contains(acme) && !business.body.contains(probe))
            let free = try await h.console("/console/companies?tier=free&q=works", as: op)
            #expect(Self.rows(free.body) == 1)

            let german = try await h.console("/console/companies", as: op, headers: [("Accept-Language", "de")])
            #expect(german.body.contains("Stufe gesetzt durch") && german.body.contains("Betreiber (Überschreibung)"))

            let badTier = try await h.console("/console/companies?tier=gold", as: op)
            #expect(badTier.status == 400)
            #expect(badTier.body.contains("There is no such tier"))
            let badCursor = try await h.console("/console/companies?after=not-a-cursor", as: op)
            #expect(badCursor.status == 400)
            #expect(badCursor.body.contains("The page link is not valid"))
        }
    }

    @Test("pages 50 at a time, newest first, by an opaque cursor")
    func paging() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let owner = try await h.person("owner")
            for n in 0..<53 {
                h.clock.advance(by: 1)
                _ = try await Self.company(h, String(format: "Paged %02d", n), owner: owner)
            }
            let first = try await h.console("/console/companies", as: op)
            #expect(Self.rows(first.body) == 50)
            #expect(first.body.contains("Paged 52") && !first.body.contains("Paged 02"))
            let link = try #require(Self.next(first.body))
            let second = try await h.console(link, as: op)
            #expect(second.status == 200)
            #expect(Self.rows(second.body) == 3)
            #expect(second.body.contains("Paged 00") && !second.body.contains("Paged 52"))
            #expect(Self.next(second.body) == nil)
        }
    }

    @Test("a company's page shows members, shares, invitations, domains, single sign-on, subscription and audit")
    func companyPage() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            var owner = try await h.person("owner")
            var member = try await h.person("member")
            let cid = try await h.company("Page Co", owner: &owner, tier: .business)
            try await h.join(cid, &member, owner: owner)
            let boss = try #require(owner.company?.access)
            let invited = AccountHarness.newEmail("invited")
            let invitation = try await h.client.post(
                "/v1/companies/\(cid)/invitations", ["email": invited, "role": "read_only", "dept_mask": 5],
                bearer: boss)
            #expect(invitation.status == 201)
            let domain = try await h.client.post(
                "/v1/companies/\(cid)/domains", ["domain": "pageco-test.com"], bearer: boss)
            #expect(domain.status == 201)

            let page = try await h.console("/console/companies/\(cid)", as: op)
            #expect(page.status == 200)
            #expect(page.body.contains("<h1>Page Co</h1>"))
            #expect(page.body.contains(owner.email) && page.body.contains(member.email))
            #expect(page.body.contains(">owner<") && page.body.contains(">member<"))
            #expect(page.body.contains(invited))
            #expect(page.body.contains("<td>0, 2</td>"), "the invitation's department mask, as bits")
            #expect(page.body.contains("pageco-test.com"))
            #expect(page.body.contains("read_write"), "the share link the member joined by")
            #expect(page.body.contains("Single sign-on is not required."))
            #expect(page.body.contains("No App Store subscription."))
            #expect(page.body.contains(">company_created<"))
            #expect(page.body.contains("Operator override"))

            let missing = try await h.console("/console/companies/\(UUID().uuidString.lowercased())", as: op)
            #expect(missing.status == 404)
            #expect(missing.body.contains("There is no company with this id"))
        }
    }

    @Test("the tier override asks first, needs a reason, changes the tier, and is audited with the operator")
    func tierOverride() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let owner = try await h.person("owner")
            let cid = try await Self.company(h, "Tiered", owner: owner)
            let path = "/console/companies/\(cid)/tier"

            let noReason = try await h.consoleForm(path, ["tier": "enterprise", "reason": "  "], as: op)
            #expect(noReason.status == 400)
            #expect(noReason.body.contains("Give a reason for the change"))
            let badTier = try await h.consoleForm(path, ["tier": "gold", "reason": "why not"], as: op)
            #expect(badTier.status == 400)

            let asked = try await h.consoleForm(path, ["tier": "enterprise", "reason": "pilot contract"], as: op)
            #expect(asked.status == 200)
            #expect(asked.body.contains("id=\"confirm\""))
            #expect(asked.body.contains("name=\"confirm\" value=\"yes\""))
            #expect(asked.body.contains("from free to enterprise"))
            #expect(try await Self.tier(h, cid)?.tier == .free, "nothing changes before the confirmation")

            let done = try await h.consoleForm(
                path, ["tier": "enterprise", "reason": "pilot contract", "confirm": "yes"], as: op)
            #expect(done.status == 303)
            #expect(done.headers["location"] == "/console/companies/\(cid)?notice=tier_changed")
            let changed = try #require(try await Self.tier(h, cid))
            #expect(changed.tier == .enterprise)
            #expect(changed.tierSource == .operator)
            #expect(changed.tierReason == "pilot contract")
            let page = try await h.console("/console/companies/\(cid)?notice=tier_changed", as: op)
            #expect(page.body.contains("The tier is changed."))
            #expect(page.body.contains("pilot contract"))

            let events = try await h.server.services.parts.trail.explore(
                AuditFilter(action: "tier_changed", companyID: cid), before: nil, limit: 10)
            let event = try #require(events.first)
            #expect(event.record.detail["by"] == "console")
            #expect(event.record.detail["operator_id"] == op.accountID)
            #expect(event.record.detail["reason"] == "pilot contract")
            #expect(event.record.detail["from"] == "free" && event.record.detail["to"] == "enterprise")

            // Handing the tier back to the App Store: no subscription, so free, with no source.
            let released = try await h.consoleForm(
                path, ["tier": "app-store", "reason": "pilot over", "confirm": "yes"], as: op)
            #expect(released.status == 303)
            let back = try #require(try await Self.tier(h, cid))
            #expect(back.tier == .free && back.tierSource == nil)
            let release = try await h.server.services.parts.trail.explore(
                AuditFilter(action: "tier_changed", companyID: cid), before: nil, limit: 1)
            #expect(release.first?.record.detail["released"] == "yes")
            #expect(release.first?.record.detail["operator_id"] == op.accountID)
        }
    }

    @Test("a company's name and an operator's reason are escaped on every page that shows them")
    func escaping() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let owner = try await h.person("owner")
            let cid = try await Self.company(h, "<script>alert(1)</script>", owner: owner)
            let probe = "\"><img src=x onerror=alert(1)>"
            let path = "/console/companies/\(cid)/tier"
            let asked = try await h.consoleForm(path, ["tier": "business", "reason": probe], as: op)
            #expect(asked.status == 200)
            let done = try await h.consoleForm(path, ["tier": "business", "reason": probe, "confirm": "yes"], as: op)
            #expect(done.status == 303)
            let page = try await h.console("/console/companies/\(cid)", as: op)
            let audit = try await h.console("/console/audit?company=\(cid)", as: op)
            for body in [asked.body, page.body, audit.body] {
                #expect(!body.contains("<script>alert(1)"))
                #expect(!body.contains("<img src=x"))
            }
            #expect(page.body.contains("<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>"))
            #expect(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"))
            #expect(audit.body.contains("reason=&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"))
        }
    }

    @Test("a tier change without the form's token, or with another, is refused and changes nothing")
    func csrf() async throws {
        try await AccountHarness.with { h in
            let op = try await h.consoleOperator()
            let owner = try await h.person("owner")
            let cid = try await Self.company(h, "Guarded", owner: owner)
            let fields = ["tier": "enterprise", "reason": "forged", "confirm": "yes"]
            let without = try await h.form("/console/companies/\(cid)/tier", fields, session: op.access)
            #expect(without.status == 403)
            let wrong = try await h.consoleForm(
                "/console/companies/\(cid)/tier", fields.merging(["csrf_token": "forged-token"]) { $1 }, as: op)
            #expect(wrong.status == 403)
            let crossSite = try await h.form(
                "/console/companies/\(cid)/tier", fields.merging(["csrf_token": op.formToken]) { $1 },
                session: op.access, site: "cross-site")
            #expect(crossSite.status == 403)
            #expect(try await Self.tier(h, cid)?.tier == .free)
        }
    }

    @Test("anyone but an operator gets 404, for the pages and the form")
    func operatorsOnly() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner")
            let cid = try await h.company("Hidden", owner: &owner, tier: .free)
            let plain = ConsoleOperator(
                email: owner.email, accountID: owner.id, access: owner.account.access, refresh: owner.account.refresh,
                formToken: "")
            #expect(try await h.console("/console/companies", as: plain).status == 404)
            #expect(try await h.console("/console/companies/\(cid)", as: plain).status == 404)
            let sessionID = try #require(try CompanyFlowTests.claims(owner.account.access)["session_id"] as? String)
            let token = PasskeyPages.pageTokens(sessionID: sessionID, box: h.server.services.box)[0]
            let posted = try await h.form(
                "/console/companies/\(cid)/tier",
                ["tier": "enterprise", "reason": "x", "confirm": "yes", "csrf_token": token],
                session: owner.account.access)
            #expect(posted.status == 404)
            #expect(try await Self.tier(h, cid)?.tier == .free)
        }
    }
}
