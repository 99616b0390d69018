import Foundation
import HTTPTypes
import Hummingbird

/// The console's OAuth clients: the list with a form to register one (a confidential client's secret shown once, on
/// the answer page), and each client's page with its actions (a new secret, removal), each after a confirmation.
/// Every change goes through `OAuthClients`, the rules the admin API and the command line share, audited
/// `by: console` with the operator's id. The pages work while the provider is off, and say so.
struct ConsoleOAuthClients: Sendable {
    let kit: ConsoleKit
    let clients: OAuthClients

    /// What the list may say after an action, by its `notice` parameter.
    static let listNotices: Set<String> = ["removed"]

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        clients = api.oauthClients
    }

    /// Every OAuth client form; the add form reads the client's fields, the others the token and `confirm=yes`.
    struct Form: Decodable, Sendable {
        let csrfToken: String?
        let confirm: String?
        let name: String?
        /// One per line.
        let redirectURIs: String?
        /// `public` or `confidential`.
        let clientType: String?
        /// The checked grant types (`grant_types[]`).
        let grantTypes: [String]?
        /// The checked scopes (`scopes[]`).
        let scopes: [String]?

        enum CodingKeys: String, CodingKey {
            case confirm, name, scopes
            case csrfToken = "csrf_token"
            case redirectURIs = "redirect_uris"
            case clientType = "client_type"
            case grantTypes = "grant_types"
        }

        /// Whether the form comes back from its confirmation step.
        var confirmed: Bool { confirm == "yes" }

        /// The redirect URIs, one a line, blank lines dropped.
        var redirectURIList: [String] {
            (redirectURIs ?? "").split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
    }

    /// The list and its add form, a client's page, and its actions: each form checked (same site, the session's
    /// token, an operator still) before anything is read or changed.
    func register(on router: Router<AppRequestContext>) {
        router.get("/console/oauth-clients") { request, _ in
            let notice = request.uri.queryParameters["notice"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                guard notice.map(Self.listNotices.contains) ?? true else { throw PageInput.invalidParameter }
                return try await listPage(
                    console, notice: notice.map { kit.text("oauth_clients_notice_\($0)", console) })
            }
        }
        router.post("/console/oauth-clients") { request, context in
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                return try await add(form, console)
            }
        }
        router.get("/console/oauth-clients/{id}") { request, context in
            let id = try context.parameters.require("id")
            return try await PageInput.answer {
                let console = try await kit.enter()
                return clientPage(try await clients.client(id), console)
            }
        }
        router.post("/console/oauth-clients/{id}/regenerate") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                let client = try await clients.client(id)
                guard form.confirmed else {
                    return kit.confirmation(
                        console, title: kit.text("oauth_clients_regenerate_title", console),
                        explanation: kit.text(
                            "oauth_clients_regenerate_explanation", console, ["name": displayName(client, console)]),
                        action: Self.path(client.id) + "/regenerate", fields: [:],
                        button: kit.text("oauth_clients_regenerate_button", console), danger: false,
                        back: Self.path(client.id))
                }
                let (regenerated, secret) = try await clients.regenerateSecret(client.id, by: console.admin)
                return clientPage(regenerated, console, secret: secret, title: "oauth_clients_regenerated_title")
            }
        }
        router.post("/console/oauth-clients/{id}/remove") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(Form.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                let client = try await clients.client(id)
                guard form.confirmed else {
                    return kit.confirmation(
                        console, title: kit.text("oauth_clients_remove_title", console),
                        explanation: kit.text(
                            "oauth_clients_remove_explanation", console, ["name": displayName(client, console)]),
                        action: Self.path(client.id) + "/remove", fields: [:],
                        button: kit.text("oauth_clients_remove_button", console), back: Self.path(client.id))
                }
                try await clients.remove(client.id, by: console.admin)
                return .redirect("/console/oauth-clients?notice=removed", cookies: console.cookies)
            }
        }
    }

    // MARK: The list

    /// Registers the client the form describes and shows its page, with a confidential client's secret once. A
    /// refusal is the list again with the form as it was sent and the rule's words.
    func add(_ form: Form, _ console: ConsoleCaller) async throws -> WebAnswer {
        let metadata = OAuthClientMetadata(
            name: form.name, redirectURIs: form.redirectURIList, grantTypes: form.grantTypes ?? [],
            scope: OAuthScopes.text(form.scopes ?? []),
            clientType: form.clientType == OAuthClient.Kind.public.rawValue ? "public" : "confidential")
        do {
            guard !(form.name ?? "").trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ConsoleBadRequest("oauth_clients_error_name")
            }
            guard !(form.grantTypes ?? []).isEmpty else { throw ConsoleBadRequest("oauth_clients_error_grants") }
            let (client, secret) = try await clients.register(metadata, by: console.admin)
            return clientPage(client, console, secret: secret, title: "oauth_clients_added_title")
        } catch let bad as ConsoleBadRequest {
            return try await listPage(
                console, form: form, error: kit.text(bad.key, console, bad.values), status: .badRequest)
        } catch let refusal as APIError where refusal.code == ErrorCode.validationFailed.rawValue {
            return try await listPage(
                console, form: form,
                error: kit.text("oauth_clients_error_refused", console, ["reason": refusal.message]),
                status: .badRequest)
        }
    }

    /// The clients, newest first, and the form to register one (filled with `form` when it comes back refused).
    func listPage(
        _ console: ConsoleCaller, form: Form? = nil, notice: String? = nil, error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> WebAnswer {
        let rows = try await clients.list().map { client -> [String: Any] in
            [
                "id": client.id, "href": Self.path(client.id), "name": displayName(client, console),
                "type": kit.text("oauth_clients_type_\(client.type.rawValue)", console),
                "redirect_uris": client.redirectURIs,
                "created": ConsoleSettings.time(Date(epochMilliseconds: client.createdAt)),
            ]
        }
        let grants = Set(form?.grantTypes ?? OAuthClientMetadata.defaultGrantTypes)
        let scopes = Set(form?.scopes ?? OAuthScopes.registrationDefault)
        var fields: [String: Any] = [
            "rows": rows, "has_rows": !rows.isEmpty, "server_off": !clients.settings.enabled,
            "grant_types": OAuthGrantType.allCases.map { grant -> [String: Any] in
                [
                    "value": grant.rawValue, "id": grant.rawValue.replacingOccurrences(of: ":", with: "-"),
                    "checked": grants.contains(grant.rawValue),
                ]
            },
            "scopes": OAuthScopes.supported.map { scope -> [String: Any] in
                ["value": scope, "checked": scopes.contains(scope)]
            },
            "form_name": form?.name ?? "", "form_redirect_uris": form?.redirectURIs ?? "",
            "form_public": form?.clientType == OAuthClient.Kind.public.rawValue,
        ]
        if let notice { fields["notice"] = notice }
        if let error { fields["error"] = error }
        return kit.page(
            "oauth-clients", title: kit.text("console_nav_oauth_clients", console), fields, for: console,
            status: status, section: "oauth_clients")
    }

    // MARK: One client

    /// The client, its actions, and, right after it was registered or given a new secret, that secret, once.
    func clientPage(
        _ client: OAuthClient, _ console: ConsoleCaller, secret: String? = nil, title: String? = nil
    ) -> WebAnswer {
        let none = kit.text("console_none", console)
        var fields: [String: Any] = [
            "id": client.id, "name": displayName(client, console),
            "type": kit.text("oauth_clients_type_\(client.type.rawValue)", console),
            "confidential": client.type == .confidential, "auth_method": client.authMethod,
            "registration": kit.text("oauth_clients_registration_\(client.registrationType)", console),
            "redirect_uris": client.redirectURIs, "grant_types": client.grantTypes.joined(separator: ", "),
            "scope": client.scope.isEmpty ? none : client.scope, "client_uri": client.clientURI ?? none,
            "logo_uri": client.logoURI ?? none,
            "created": ConsoleSettings.time(Date(epochMilliseconds: client.createdAt)),
            "updated": ConsoleSettings.time(Date(epochMilliseconds: client.updatedAt)), "path": Self.path(client.id),
            "server_off": !clients.settings.enabled,
        ]
        if let secret { fields["secret"] = secret }
        return kit.page(
            "oauth-client",
            title: title.map { kit.text($0, console) }
                ?? kit.text("oauth_clients_client_title", console, ["name": displayName(client, console)]),
            fields, for: console, section: "oauth_clients")
    }

    // MARK: Words

    /// The client's name, or a word for none (GoTrue allows an empty one).
    func displayName(_ client: OAuthClient, _ console: ConsoleCaller) -> String {
        client.name.isEmpty ? kit.text("oauth_clients_no_name", console) : client.name
    }

    /// The client's page.
    static func path(_ id: String) -> String {
        "/console/oauth-clients/" + ConsoleFilterParameters.segment(id)
    }
}
