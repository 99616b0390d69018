import Foundation
import Hummingbird

/// The console's keys and settings: the admin API's service keys (list, mint, revoke), and every setting of the
/// running server with its value, secrets masked (`Setting.secrecy`), read-only.
struct ConsoleSettings: Sendable {
    let kit: ConsoleKit
    let keys: ServiceKeys
    let configuration: GatehouseConfiguration

    init(kit: ConsoleKit, api: API, services: GatehouseServices) {
        self.kit = kit
        keys = api.access.serviceKeys
        configuration = services.configuration
    }

    /// The key forms: the token, and the confirmation step's `confirm=yes`.
    struct KeyForm: Decodable {
        let csrfToken: String?
        let confirm: String?

        enum CodingKeys: String, CodingKey {
            case confirm
            case csrfToken = "csrf_token"
        }
    }

    /// What the page may say after an action, by its `notice` parameter.
    static let notices: Set<String> = ["key_revoked"]

    func register(on router: Router<AppRequestContext>) {
        router.get("/console/settings") { request, _ in
            let notice = request.uri.queryParameters["notice"].map(String.init)
            return try await PageInput.answer {
                let console = try await kit.enter()
                guard notice.map(Self.notices.contains) ?? true else { throw PageInput.invalidParameter }
                return try await settings(console, notice: notice)
            }
        }
        router.post("/console/settings/keys") { request, context in
            let form = try await PageInput.form(KeyForm.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                guard form.confirm == "yes" else {
                    return kit.confirmation(
                        console, title: kit.text("settings_mint_title", console),
                        explanation: kit.text("settings_mint_explanation", console), action: "/console/settings/keys",
                        fields: [:], button: kit.text("settings_mint_button", console), danger: false,
                        back: "/console/settings")
                }
                return try await mint(console)
            }
        }
        router.post("/console/settings/keys/{id}/revoke") { request, context in
            let id = try context.parameters.require("id")
            let form = try await PageInput.form(KeyForm.self, request, context)
            return try await PageInput.answer {
                let console = try await kit.form(token: form.csrfToken)
                guard try await keys.list().contains(where: { $0.id == id && $0.revokedAt == nil }) else {
                    throw APIError.notFound("No live service key has this id")
                }
                guard form.confirm == "yes" else {
                    return kit.confirmation(
                        console, title: kit.text("settings_revoke_title", console),
                        explanation: kit.text("settings_revoke_explanation", console, ["key_id": id]),
                        action: "/console/settings/keys/\(id)/revoke", fields: [:],
                        button: kit.text("settings_revoke_button", console), back: "/console/settings")
                }
                let revoked = try await keys.revoke(id)
                await kit.trail.record(
                    console.admin.event(
                        .serviceKeyRevoked, accountID: nil, detail: ["service_key": id, "count": String(revoked)]))
                return .redirect("/console/settings?notice=key_revoked#keys", cookies: console.cookies)
            }
        }
    }

    /// The page: the keys, newest first, and every setting.
    func settings(_ console: ConsoleCaller, notice: String?) async throws -> WebAnswer {
        let listed = try await keys.list().map { key -> [String: Any] in
            [
                "id": key.id, "created": Self.time(key.createdAt),
                "revoked": key.revokedAt.map(Self.time) ?? "", "live": key.revokedAt == nil,
            ]
        }
        let mask = kit.text("settings_masked", console)
        let settings = Setting.allCases.map { setting -> [String: Any] in
            let value = setting.shownValue(in: configuration, mask: mask)
            return [
                "flag": setting.flag, "variable": setting.environmentName, "value": value ?? "",
                "unset": value == nil,
                "default": setting.defaultValue.markdown.replacingOccurrences(of: "`", with: ""),
            ]
        }
        var fields: [String: Any] = ["keys": listed, "has_keys": !listed.isEmpty, "settings": settings]
        if let notice { fields["notice"] = kit.text("settings_notice_\(notice)", console) }
        return kit.page(
            "settings", title: kit.text("console_nav_settings", console), fields, for: console, section: "settings")
    }

    /// Mints a key and shows its token, once: only its id is kept.
    func mint(_ console: ConsoleCaller) async throws -> WebAnswer {
        let minted = try await keys.mint(revokingOthers: false)
        await kit.trail.record(
            console.admin.event(.serviceKeyMinted, accountID: nil, detail: ["service_key": minted.id, "revoked": "0"]))
        return kit.page(
            "key-minted", title: kit.text("settings_minted_title", console),
            ["key_id": minted.id, "token": minted.token], for: console, section: "settings")
    }

    /// A moment as the page shows it: `2026-11-29 05:30` (UTC).
    static func time(_ date: Date) -> String {
        ConsoleOverview.time(minute: ConsoleSeriesRecorder.minute(date))
    }
}
