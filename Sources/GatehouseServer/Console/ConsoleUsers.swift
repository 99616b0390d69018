import Foundation
import HTTPTypes
import Hummingbird

/// The console's users (`/console/users`): the list, searched, filtered, sorted and paged by a cursor
/// (`UserSearch`); a user's page (`ConsoleUserPage`); and the actions on a user (`ConsoleUserActions`), each a form
/// behind a confirmation step.
struct ConsoleUsers: Sendable {
    let kit: ConsoleKit
    let page: ConsoleUserPage
    let actions: ConsoleUserActions

    /// The longest search text and provider name the list takes.
    static let textLength = 320

    /// What the list may say after an action, by its `notice` parameter.
    static let notices = ["deleted": "users_notice_deleted"]

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        page = ConsoleUserPage(kit: kit, api: api)
        actions = ConsoleUserActions(kit: kit, api: api, page: page)
    }

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/users") { request, _ in
            try await PageInput.answer {
                let console = try await kit.enter()
                return try await list(request.uri.query, console)
            }
        }
        router.get("/console/users/{id}") { request, context in
            let id = try context.parameters.require("id")
            let notice = request.uri.queryParameters["notice"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                return try await page.answer(id, console, notice: notice.flatMap { ConsoleUserPage.notices[$0] })
            }
        }
        router.post("/console/users/{id}/{action}") { request, context in
            let id = try context.parameters.require("id")
            guard let action = ConsoleUserActions.Action(rawValue: try context.parameters.require("action")) else {
                throw APIError.noRoute
            }
            let form = try await PageInput.form(ConsoleUserActions.Form.self, request, context)
            return try await PageInput.answer { try await actions.perform(action, on: id, form) }
        }
    }

    // MARK: The list

    /// The list's parameters as the operator wrote them, for the form and the next page's link.
    struct Parameters: Sendable {
        var q: String?
        var confirmed: String?
        var banned: String?
        var anonymous: String?
        var hasFactor: String?
        var provider: String?
        var createdFrom: String?
        var createdTo: String?
        var sort: String?

        init(_ parameters: ConsoleFilterParameters) {
            q = parameters["q"]
            confirmed = parameters["confirmed"]
            banned = parameters["banned"]
            anonymous = parameters["anonymous"]
            hasFactor = parameters["has_factor"]
            provider = parameters["provider"]
            createdFrom = parameters["created_from"]
            createdTo = parameters["created_to"]
            sort = parameters["sort"]
        }

        init() {}

        var pairs: [(String, String?)] {
            [
                ("q", q), ("confirmed", confirmed), ("banned", banned), ("anonymous", anonymous),
                ("has_factor", hasFactor), ("provider", provider), ("created_from", createdFrom),
                ("created_to", createdTo), ("sort", sort),
            ]
        }

        /// The search these parameters ask for; a value the list cannot use is a `ConsoleBadRequest`.
        func query() throws -> UserQuery {
            var query = UserQuery()
            if let q {
                guard q.count <= ConsoleUsers.textLength else { throw ConsoleBadRequest("users_error_text") }
                query.text = UserQuery.text(q)
            }
            query.confirmed = try Self.yesOrNo(confirmed)
            query.banned = try Self.yesOrNo(banned)
            query.anonymous = try Self.yesOrNo(anonymous)
            query.hasFactor = try Self.yesOrNo(hasFactor)
            if let provider {
                guard provider.count <= 100 else { throw ConsoleBadRequest("users_error_text") }
                query.provider = provider
            }
            query.createdFrom = try Self.day(createdFrom)?.start
            query.createdBefore = try Self.day(createdTo)?.until
            if let from = query.createdFrom, let before = query.createdBefore, from >= before {
                throw ConsoleBadRequest("users_error_range")
            }
            if let sort {
                guard let known = UserSort(rawValue: sort) else { throw ConsoleBadRequest("users_error_sort") }
                query.sort = known
            }
            return query
        }

        private static func yesOrNo(_ value: String?) throws -> Bool? {
            switch value {
            case nil: nil
            case "yes": true
            case "no": false
            default: throw ConsoleBadRequest("users_error_filter")
            }
        }

        /// A day, `YYYY-MM-DD` in UTC.
        private static func day(_ value: String?) throws -> ConsoleTime? {
            guard let value else { return nil }
            guard value.count == 10, let day = ConsoleTime(value) else { throw ConsoleBadRequest("users_error_date") }
            return day
        }
    }

    func list(_ query: String?, _ console: ConsoleCaller) async throws -> WebAnswer {
        var parameters = Parameters()
        do {
            let read = try ConsoleFilterParameters(query)
            parameters = Parameters(read)
            var search = try parameters.query()
            if let after = read["after"] {
                guard let cursor = UserCursor(token: after, sort: search.sort) else {
                    throw ConsoleBadRequest("users_error_cursor")
                }
                search.after = cursor
            }
            let found = try await UserSearch(db: kit.store.database).page(search, now: kit.clock.now)
            var fields: [String: Any] = [
                "users": found.users.map { row($0, console) }, "has_users": !found.users.isEmpty,
            ]
            if let next = found.next {
                fields["next"] = ConsoleFilterParameters.link(
                    "/console/users", parameters.pairs + [("after", next.token)])
            }
            if search.after != nil {
                fields["first"] = ConsoleFilterParameters.link("/console/users", parameters.pairs)
            }
            if let key = read["notice"].flatMap({ Self.notices[$0] }) { fields["notice"] = kit.text(key, console) }
            return listPage(console, parameters, fields)
        } catch let bad as ConsoleBadRequest {
            return listPage(
                console, parameters, ["error": kit.text(bad.key, console, bad.values)], status: .badRequest)
        }
    }

    private func listPage(
        _ console: ConsoleCaller, _ parameters: Parameters, _ fields: [String: Any],
        status: HTTPResponse.Status = .ok
    ) -> WebAnswer {
        var fields = fields
        fields["q"] = parameters.q ?? ""
        fields["provider"] = parameters.provider ?? ""
        fields["created_from"] = parameters.createdFrom ?? ""
        fields["created_to"] = parameters.createdTo ?? ""
        func choice(_ name: String, _ label: String, _ value: String?, _ options: [(String, String)]) -> [String: Any] {
            [
                "name": name, "label": kit.text(label, console),
                "options": options.map { option in
                    ["value": option.0, "label": kit.text(option.1, console), "selected": option.0 == (value ?? "")]
                },
            ]
        }
        let yesNo = [("", "users_any"), ("yes", "console_yes"), ("no", "console_no")]
        fields["choices"] = [
            choice("confirmed", "users_filter_confirmed", parameters.confirmed, yesNo),
            choice("banned", "users_filter_banned", parameters.banned, yesNo),
            choice("anonymous", "users_filter_anonymous", parameters.anonymous, yesNo),
            choice("has_factor", "users_filter_factor", parameters.hasFactor, yesNo),
            choice(
                "sort", "users_sort", parameters.sort,
                [
                    ("", "users_sort_newest"), ("oldest", "users_sort_oldest"),
                    ("last_sign_in", "users_sort_last_sign_in"), ("email", "users_sort_email"),
                ]),
        ]
        return kit.page(
            "users", title: kit.text("console_nav_users", console), fields, for: console, status: status,
            section: "users")
    }

    /// One account as a row of the list.
    private func row(_ user: ListedUser, _ console: ConsoleCaller) -> [String: Any] {
        let account = user.account
        let now = kit.clock.now
        return [
            "user_id": account.id, "href": "/console/users/" + account.id,
            "email": Self.shownEmail(account, console, kit),
            "providers": user.providers.joined(separator: ", "),
            "confirmed": account.emailConfirmedAt.map(PageKit.dateText) ?? kit.text("console_no", console),
            "last_sign_in": account.lastSignInAt.map(PageKit.dateText) ?? kit.text("console_never", console),
            "created": PageKit.dateText(account.createdAt),
            "banned": Self.isBanned(account, now: now), "anonymous": account.isAnonymous, "sso": account.isSSOUser,
            "has_factor": user.hasFactor,
        ]
    }

    /// The address the user sees (a single sign-on account's provider address, not its placeholder), or a word for
    /// an anonymous user's none.
    static func shownEmail(_ account: AccountRecord, _ console: ConsoleCaller, _ kit: ConsoleKit) -> String {
        let visible = account.visibleEmail
        return visible.isEmpty ? kit.text("users_no_email", console) : visible
    }

    /// Disabled, and not by a ban that has ended.
    static func isBanned(_ account: AccountRecord, now: Date) -> Bool {
        account.disabledAt != nil && (account.bannedUntil.map { $0 > now } ?? true)
    }
}
