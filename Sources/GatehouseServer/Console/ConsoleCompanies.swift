import Foundation
import HTTPTypes
import Hummingbird

/// The console's companies: every company, newest first, searched by name or id and narrowed by tier, 50 a page by
/// an opaque cursor; a company's page (members, share links, invitations, domains, single sign-on, subscription and
/// its recent audit); and the operator's tier override, with a reason, behind a confirmation step
/// (`ConsoleCompanyTier`).
struct ConsoleCompanies: Sendable {
    let kit: ConsoleKit
    let store: Store
    let trail: AuditTrail
    let clock: any GatehouseClock

    static let pageSize = 50
    /// The longest search the list takes.
    static let searchLength = 200
    /// Invitations and audit events a company's page shows.
    static let invitationsShown = 100
    static let auditShown = 20

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        store = services.parts.store
        trail = services.parts.trail
        clock = services.parts.clock
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/companies") { request, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return try await list(request.uri.query, console)
            }
        }
        router.get("/console/companies/:id") { request, context in
            let id = try context.parameters.require("id")
            let notice = request.uri.queryParameters["notice"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                return try await company(id, console, notice: notice)
            }
        }
        ConsoleCompanyTier(companies: self).register(on: router)
    }

    // MARK: The list

    func list(_ query: String?, _ console: ConsoleCaller) async throws -> WebAnswer {
        var search: String?
        var tier: String?
        do {
            let parameters = try ConsoleFilterParameters(query)
            search = parameters["q"]
            tier = parameters["tier"]
            var query = CompanyListQuery(search: search, tier: nil, after: nil, limit: Self.pageSize + 1)
            if let search, search.count > Self.searchLength {
                throw ConsoleBadRequest("companies_bad_search", ["limit": String(Self.searchLength)])
            }
            if let tier {
                guard let known = CompanyTier(rawValue: tier) else { throw ConsoleBadRequest("companies_bad_tier") }
                query.tier = known
            }
            if let after = parameters["after"] {
                guard let cursor = Self.cursor(after) else { throw ConsoleBadRequest("companies_bad_cursor") }
                query.after = cursor
            }
            let companies = try await CompanyDirectory(db: store.database).listing(query)
            return listPage(console, search: search, tier: tier, companies: companies, paged: query.after != nil)
        } catch let bad as ConsoleBadRequest {
            return listPage(
                console, search: search, tier: tier, companies: [], paged: false,
                error: kit.text(bad.key, console, bad.values), status: .badRequest)
        }
    }

    private func listPage(
        _ console: ConsoleCaller, search: String?, tier: String?, companies: [CompanyListing], paged: Bool,
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) -> WebAnswer {
        let words = kit.pages.templates.strings(console.language, [:])
        let shown = companies.prefix(Self.pageSize)
        var fields: [String: Any] = [
            "q": search ?? "", "has_rows": !shown.isEmpty,
            "tiers": CompanyTier.allCases.map { ["value": $0.rawValue, "selected": $0.rawValue == tier] },
            "rows": shown.map { company -> [String: Any] in
                [
                    "id": company.id, "name": company.name,
                    "href": "/console/companies/" + ConsoleFilterParameters.segment(company.id),
                    "tier": company.tier.rawValue, "source": Self.sourceText(company.tierSource, words),
                    "members": String(company.memberCount), "records": String(company.recordCount),
                    "last_activity": PageKit.dateText(company.lastActivity),
                    "created": PageKit.dateText(company.createdAt),
                ]
            },
        ]
        let filters: [(String, String?)] = [("q", search), ("tier", tier)]
        if companies.count > Self.pageSize, let last = shown.last {
            fields["next"] = ConsoleFilterParameters.link(
                "/console/companies", filters + [("after", Self.cursor(last))])
        }
        if paged { fields["first"] = ConsoleFilterParameters.link("/console/companies", filters) }
        if let error { fields["error"] = error }
        return kit.page(
            "companies", title: kit.text("console_nav_companies", console), fields, for: console, status: status,
            section: "companies")
    }

    /// The opaque cursor after `company`: its creation time and id, base64url.
    static func cursor(_ company: CompanyListing) -> String {
        Secrets.base64URL(Data("\(company.createdAt.epochMilliseconds):\(company.id)".utf8))
    }

    /// The creation time and id a cursor names; nil for anything this page did not write.
    static func cursor(_ text: String) -> (createdAt: Int64, id: String)? {
        guard text.count <= 400 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8),
            let colon = decoded.firstIndex(of: ":"), let time = Int64(decoded[..<colon])
        else { return nil }
        let id = String(decoded[decoded.index(after: colon)...])
        return id.isEmpty ? nil : (time, id)
    }

    /// Who set the tier, in words: the App Store, an operator's override, or nobody (the default).
    static func sourceText(_ source: TierSource?, _ words: [String: String]) -> String {
        switch source {
        case .appStore: words["companies_source_app_store"] ?? "App Store"
        case .operator: words["companies_source_operator"] ?? "Operator override"
        case nil: words["companies_source_none"] ?? "None"
        }
    }

    // MARK: A company

    /// A company's page; `error` and `status` when a tier change was refused (`ConsoleCompanyTier`).
    func company(
        _ id: String, _ console: ConsoleCaller, notice: String? = nil, error: String? = nil,
        status: HTTPResponse.Status = .ok, form: (tier: String?, reason: String?) = (nil, nil)
    ) async throws -> WebAnswer {
        let db = store.database
        let directory = CompanyDirectory(db: db)
        guard let company = try await directory.company(id) else { return missing(console) }
        let now = clock.now
        let words = kit.pages.templates.strings(console.language, [:])
        let owner = try await AccountDirectory(db: db).find(id: company.ownerID)
        let subscription = try await SubscriptionDirectory(db: db).view(of: company)
        let sso = try await SSODirectory(db: db).setting(companyID: id)
        let audit = try await trail.explore(AuditFilter(companyID: id), before: nil, limit: Self.auditShown)
        var fields: [String: Any] = [
            "id": company.id, "name": company.name, "owner_id": company.ownerID, "owner_email": owner?.email ?? "",
            "owner_href": "/console/users/" + ConsoleFilterParameters.segment(company.ownerID),
            "tier": company.tier.rawValue, "source": Self.sourceText(company.tierSource, words),
            "created": PageKit.dateText(company.createdAt),
            "updated": PageKit.dateText(company.updatedAt),
            "requires_credential": company.policy.requiresCredential, "requires_mfa": company.policy.requiresMFA,
            "action": "/console/companies/" + ConsoleFilterParameters.segment(company.id) + "/tier",
            "tier_choices": (CompanyTier.allCases.map(\.rawValue) + [ConsoleCompanyTier.appStore]).map {
                ["value": $0, "selected": $0 == form.tier]
            },
            "form_reason": form.reason ?? "",
        ]
        // Mustache shows a section for any string, the empty one too: what is absent stays out of the fields.
        if let reason = company.tierReason, !reason.isEmpty { fields["reason"] = reason }
        fields["members"] = try await directory.memberListing(id).map { member -> [String: Any] in
            [
                "account_id": member.accountID, "email": member.email, "role": member.role.rawValue,
                "href": "/console/users/" + ConsoleFilterParameters.segment(member.accountID),
                "dept": Self.maskText(member.deptMask, words), "manager": Self.maskText(member.managerMask, words),
                "joined": PageKit.dateText(member.joinedAt),
            ]
        }
        fields["shares"] = try await directory.shares(id).map { share -> [String: Any] in
            let state =
                share.revokedAt != nil
                ? "revoked"
                : share.usable(at: now)
                    ? "usable"
                    : share.expiresAt.map { $0 <= now } == true
                        ? "expired"
                        : "used_up"
            var row: [String: Any] = [
                "id": share.id, "permission": share.permission.rawValue, "created": PageKit.dateText(share.createdAt),
                "expires": share.expiresAt.map(PageKit.dateText) ?? words["console_never"] ?? "Never",
                "uses": share.maxUses.map { "\(share.uses) / \($0)" } ?? String(share.uses),
                "state": words["companies_share_" + state] ?? state,
            ]
            if let revoked = share.revokedAt { row["revoked"] = PageKit.dateText(revoked) }
            return row
        }
        fields["invitations"] = try await InvitationDirectory(db: db).invitations(id, limit: Self.invitationsShown)
            .map { invitation -> [String: Any] in
                let state = invitation.state(at: now).rawValue
                return [
                    "email": invitation.email, "role": invitation.role.rawValue,
                    "dept": Self.maskText(invitation.deptMask, words),
                    "manager": Self.maskText(invitation.managerMask, words),
                    "sent": PageKit.dateText(invitation.sentAt), "expires": PageKit.dateText(invitation.expiresAt),
                    "state": words["companies_invitation_" + state] ?? state,
                ]
            }
        fields["domains"] = try await directory.domains(id).map { domain -> [String: Any] in
            [
                "domain": domain.domain,
                "verified": domain.verifiedAt.map(PageKit.dateText) ?? words["companies_domain_pending"] ?? "Pending",
                "checked": domain.lastCheckedAt.map(PageKit.dateText) ?? "",
            ]
        }
        fields["sso_required"] = sso.required
        fields["providers"] = sso.providers.map { provider -> [String: Any] in
            [
                "id": provider.id, "kind": provider.kind.rawValue, "disabled": provider.disabled,
                "domains": provider.domains.joined(separator: ", "),
            ]
        }
        if let product = subscription.productId {
            var shown = [
                "product": product, "environment": subscription.environment ?? "",
                "state": subscription.state?.rawValue ?? "",
                "expires": subscription.expiresAt.map(PageKit.dateText) ?? "",
            ]
            if let grace = subscription.gracePeriodExpiresAt { shown["grace"] = PageKit.dateText(grace) }
            fields["subscription"] = shown
        }
        for list in ["shares", "invitations", "domains", "providers"] {
            fields["has_" + list] = !((fields[list] as? [[String: Any]])?.isEmpty ?? true)
        }
        fields["rows"] = audit.map(ConsoleAudit.row)
        fields["has_rows"] = !audit.isEmpty
        fields["audit_href"] = ConsoleFilterParameters.link("/console/audit", [("company", company.id)])
        if let notice, let text = words["companies_notice_" + notice] { fields["notice"] = text }
        if let error { fields["error"] = error }
        return kit.page("company", title: company.name, fields, for: console, status: status, section: "companies")
    }

    /// The page for a company id that names none.
    func missing(_ console: ConsoleCaller) -> WebAnswer {
        kit.page(
            "company-missing", title: kit.text("companies_missing_title", console), [:], for: console,
            status: .notFound, section: "companies")
    }

    /// A department mask in words: the bits it holds, `all`, or none.
    static func maskText(_ mask: Int64, _ words: [String: String]) -> String {
        if mask == 0 { return words["console_none"] ?? "None" }
        if mask == -1 { return words["companies_mask_all"] ?? "All" }
        return (0..<64).filter { mask & (Int64(1) << $0) != 0 }.map(String.init).joined(separator: ", ")
    }
}
