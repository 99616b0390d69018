import Foundation
import HTTPTypes
import Hummingbird

/// The console's webhooks: the endpoints listed with a form to add one (its signing secret shown once, on the answer
/// page), and each endpoint's page with its delivery log, newest first and paged, a replay per delivery, and the
/// endpoint's actions (turn it on again, rotate its secret, remove it after a confirmation). Every change goes
/// through `Webhooks`, the rules the admin API and the command line share, audited `by: console` with the operator's
/// id.
struct ConsoleWebhooks: Sendable {
    let kit: ConsoleKit
    let webhooks: Webhooks

    /// Deliveries on one page of an endpoint's log.
    static let pageSize = 50
    /// What the list may say after an action, by its `notice` parameter.
    static let listNotices: Set<String> = ["removed"]
    /// What an endpoint's page may say after an action, by its `notice` parameter.
    static let endpointNotices: Set<String> = ["enabled", "replayed"]

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        webhooks = api.webhooks
    }

    /// Every webhook form; the add form reads the endpoint's fields, the others the token and `confirm=yes`.
    struct Form: Decodable, Sendable {
        let csrfToken: String?
        let confirm: String?
        let url: String?
        /// The checked event types (`events[]`), `*` for all of them.
        let events: [String]?
        /// `yes` when checked.
        let includeRecordFields: String?
        let description: String?

        enum CodingKeys: String, CodingKey {
            case confirm, url, events, description
            case csrfToken = "csrf_token"
            case includeRecordFields = "include_record_fields"
        }

        /// Whether the form comes back from its confirmation step.
        var confirmed: Bool { confirm == "yes" }
    }

    /// The list and its add form, an endpoint's page, and its actions: each form checked (same site, the session's
    /// token, an operator still) before anything is read or changed.
    func register(on router: Router<AppRequestContext>) {
        router.get("/console/webhooks") { request, _ in
            let notice = request.uri.queryParameters["notice"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                guard notice.map(Self.listNotices.contains) ?? true else { throw PageInput.invalidParameter }
                return try await listPage(console, notice: notice.map { kit.text("webhooks_notice_\($0)", console) })
            }
        }
        router.post("/console/webhooks") { request, context in
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                return try await add(form, console)
            }
        }
        router.get("/console/webhooks/{id}") { request, context in
            let id = try context.parameters.require("id")
            let notice = request.uri.queryParameters["notice"].map(String.init)
            let before = request.uri.queryParameters["before"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                guard notice.map(Self.endpointNotices.contains) ?? true else { throw PageInput.invalidParameter }
                return try await endpointPage(id, console, before: before, notice: notice)
            }
        }
        router.post("/console/webhooks/{id}/enable") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                _ = try await webhooks.enable(id, by: console.admin)
                return back(id, "enabled", console)
            }
        }
        router.post("/console/webhooks/{id}/rotate") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                let endpoint = try await webhooks.endpoint(id)
                guard form.confirmed else {
                    return kit.confirmation(
                        console, title: kit.text("webhooks_rotate_title", console),
                        explanation: kit.text("webhooks_rotate_explanation", console, ["url": endpoint.url]),
                        action: Self.path(id) + "/rotate", fields: [:],
                        button: kit.text("webhooks_rotate_button", console), danger: false, back: Self.path(id))
                }
                let secret = try await webhooks.rotateSecret(id, by: console.admin)
                return secretPage(endpoint, secret: secret, rotated: true, console)
            }
        }
        router.post("/console/webhooks/{id}/remove") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                let endpoint = try await webhooks.endpoint(id)
                guard form.confirmed else {
                    return kit.confirmation(
                        console, title: kit.text("webhooks_remove_title", console),
                        explanation: kit.text("webhooks_remove_explanation", console, ["url": endpoint.url]),
                        action: Self.path(id) + "/remove", fields: [:],
                        button: kit.text("webhooks_remove_button", console), back: Self.path(id))
                }
                try await webhooks.remove(id, by: console.admin)
                return .redirect("/console/webhooks?notice=removed", cookies: console.cookies)
            }
        }
        router.post("/console/webhooks/{id}/deliveries/{delivery}/replay") { request, context in
            let id = try context.parameters.require("id")
            let delivery = try context.parameters.require("delivery")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                _ = try await webhooks.replay(id, delivery: delivery, by: console.admin)
                return back(id, "replayed", console)
            }
        }
    }

    // MARK: The list

    /// Registers the endpoint the form describes and shows its secret, once. A refusal (an address that is not
    /// allowed, no event checked) is the list again with the form as it was sent and the refusal's words.
    func add(_ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        let url = (form.url ?? "").trimmingCharacters(in: .whitespaces)
        let checked = form.events ?? []
        // "All events" stands for every type, present and future: the types checked beside it add nothing.
        let events = checked.contains(WebhookEventType.everything) ? [WebhookEventType.everything] : checked
        let description = form.description?.trimmingCharacters(in: .whitespaces)
        do {
            guard !url.isEmpty else { throw ConsoleBadRequest("webhooks_error_url") }
            guard !events.isEmpty else { throw ConsoleBadRequest("webhooks_error_events") }
            let (endpoint, secret) = try await webhooks.register(
                url: url, events: events, includeRecordFields: form.includeRecordFields == "yes",
                description: description?.isEmpty == false ? description : nil, by: console.admin)
            return secretPage(endpoint, secret: secret, rotated: false, console)
        } catch let bad as ConsoleBadRequest {
            return try await listPage(
                console, form: form, error: kit.text(bad.key, console, bad.values), status: .badRequest)
        } catch let refusal as APIError {
            let error =
                refusal.code == ErrorCode.webhookTargetRefused.rawValue
                ? kit.text("webhooks_error_refused", console, ["reason": refusal.message])
                : kit.pages.pageMessage(refusal, console.language)
            return try await listPage(console, form: form, error: error, status: refusal.status)
        }
    }

    /// The endpoints, oldest first, and the form to add one (filled with `form` when it comes back refused).
    func listPage(
        _ console: ConsoleCaller, form: Form? = nil, notice: String? = nil, error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> WebAnswer {
        let rows = try await webhooks.list().map { endpoint -> [String: Any] in
            [
                "id": endpoint.id, "href": Self.path(endpoint.id), "url": endpoint.url,
                "events": eventsText(endpoint, console), "description": endpoint.description ?? "",
                "state": stateText(endpoint, console),
                "created": ConsoleSettings.time(endpoint.createdAt),
            ]
        }
        let checked = Set(form?.events ?? [])
        var fields: [String: Any] = [
            "rows": rows, "has_rows": !rows.isEmpty,
            "event_types": WebhookEventType.allCases.map { type -> [String: Any] in
                ["value": type.rawValue, "checked": checked.contains(type.rawValue)]
            },
            "all_checked": checked.contains(WebhookEventType.everything),
            "form_url": form?.url ?? "", "form_description": form?.description ?? "",
            "form_include": form?.includeRecordFields == "yes",
        ]
        if let notice { fields["notice"] = notice }
        if let error { fields["error"] = error }
        return kit.page(
            "webhooks", title: kit.text("console_nav_webhooks", console), fields, for: console, status: status,
            section: "webhooks")
    }

    // MARK: One endpoint

    /// The endpoint, its actions, and `pageSize` deliveries of its log older than the delivery `before`.
    func endpointPage(
        _ id: String, _ console: ConsoleCaller, before: String?, notice: String?
    ) async throws -> WebAnswer {
        let endpoint = try await webhooks.endpoint(id)
        let deliveries = try await webhooks.deliveries(id, before: before, limit: Self.pageSize + 1)
        let shown = deliveries.prefix(Self.pageSize)
        let none = kit.text("console_none", console)
        var fields: [String: Any] = [
            "id": endpoint.id, "url": endpoint.url, "events": eventsText(endpoint, console),
            "description": endpoint.description ?? none,
            "include_record_fields": kit.text(endpoint.includeRecordFields ? "console_yes" : "console_no", console),
            "state": stateText(endpoint, console), "enabled": endpoint.enabled,
            "created": ConsoleSettings.time(endpoint.createdAt), "path": Self.path(endpoint.id),
            "has_deliveries": !shown.isEmpty,
            "deliveries": shown.map { delivery -> [String: Any] in
                [
                    "id": delivery.id, "event_type": delivery.eventType, "status": delivery.status.rawValue,
                    "status_text": kit.text("webhooks_status_\(delivery.status.rawValue)", console),
                    "attempts": String(delivery.attempts),
                    "code": delivery.lastStatusCode.map(String.init) ?? "",
                    "latency": delivery.lastLatencyMS.map {
                        kit.text("webhooks_latency_ms", console, ["ms": String($0)])
                    } ?? "",
                    "last_error": delivery.lastError ?? "",
                    "next": delivery.status == .pending ? delivery.nextAttemptAt.map(ConsoleSettings.time) ?? "" : "",
                    "created": ConsoleSettings.time(delivery.createdAt),
                ]
            },
        ]
        if deliveries.count > Self.pageSize, let last = shown.last {
            fields["next"] = ConsoleFilterParameters.link(Self.path(endpoint.id), [("before", last.id)])
        }
        if before != nil { fields["first"] = Self.path(endpoint.id) }
        if let notice { fields["notice"] = kit.text("webhooks_notice_\(notice)", console) }
        return kit.page(
            "webhook", title: kit.text("webhooks_endpoint_title", console, ["url": endpoint.url]), fields,
            for: console, section: "webhooks")
    }

    /// A new secret, shown once: after adding the endpoint, or after rotating its secret.
    func secretPage(
        _ endpoint: WebhookEndpoint, secret: String, rotated: Bool, _ console: ConsoleCaller
    ) -> WebAnswer {
        kit.page(
            "webhook-secret", title: kit.text(rotated ? "webhooks_rotated_title" : "webhooks_added_title", console),
            [
                "id": endpoint.id, "url": endpoint.url, "secret": secret, "rotated": rotated,
                "path": Self.path(endpoint.id),
            ], for: console, section: "webhooks")
    }

    // MARK: Words

    /// The endpoint's events as the pages list them: the types, or "all events".
    func eventsText(_ endpoint: WebhookEndpoint, _ console: ConsoleCaller) -> String {
        endpoint.events.contains(WebhookEventType.everything)
            ? kit.text("webhooks_all_events", console) : endpoint.events.joined(separator: ", ")
    }

    /// On, or off and why (`WebhookEndpoint.disabledReason`).
    func stateText(_ endpoint: WebhookEndpoint, _ console: ConsoleCaller) -> String {
        if endpoint.enabled { return kit.text("webhooks_state_enabled", console) }
        let reason = endpoint.disabledReason ?? "operator"
        let known = ["gone", "failing", "operator"].contains(reason)
        return kit.text(
            "webhooks_state_disabled", console,
            ["reason": known ? kit.text("webhooks_reason_\(reason)", console) : reason])
    }

    /// The endpoint's page.
    static func path(_ id: String) -> String {
        "/console/webhooks/" + ConsoleFilterParameters.segment(id)
    }

    /// Back to the endpoint's page, saying what was done.
    private func back(_ id: String, _ notice: String, _ console: ConsoleCaller) -> WebAnswer {
        .redirect(Self.path(id) + "?notice=" + notice, cookies: console.cookies)
    }
}
