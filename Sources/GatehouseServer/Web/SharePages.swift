/// A share link's landing (`SharePageRoutes`).
struct SharePages: Sendable {
    let kit: PageKit
    let shares: ShareService
    /// A signed-in visitor's invitations by email, listed beside the share.
    let invitations: InvitationService
    /// Where "Open in the app" goes (a custom scheme or a universal-link base); nil hides the button.
    let appURL: String?
    /// Where to get the app.
    let appStoreURL: String?

    // MARK: Share links

    func share(token: String) async throws -> WebAnswer {
        let client = try kit.access.client()
        guard let landing = try await shares.landing(token, client: client) else {
            return kit.message(
                page: "share-unavailable", titleKey: "share_gone_title", keys: ["share_gone", "share_gone_ask"],
                language: kit.language(account: nil), status: .gone)
        }
        // A visitor signed in on this browser reads the page in the account's language.
        let visitor = try await kit.caller()
        let language = visitor.map { kit.language(of: $0.caller) } ?? kit.language(account: nil)
        var fields: [String: Any] = [
            "company_name": landing.preview.companyName, "inviter": landing.preview.inviterName,
            "initial": landing.preview.companyName.first.map { String($0).uppercased() } ?? "?",
            "permission": kit.text(
                landing.preview.permission == .readWrite ? "share_can_edit" : "share_can_view", language),
            "expiry": landing.expiresAt.map(PageKit.dateText) ?? kit.text("share_never", language),
        ]
        if let logo = landing.preview.logoUrl, logo.lowercased().hasPrefix("https://") { fields["logo_url"] = logo }
        if let appURL { fields["open_url"] = appURL + "share/" + token }
        if let appStoreURL { fields["store_url"] = appStoreURL }
        // A visitor signed in on this browser sees the invitations by email waiting for them too, to answer on the
        // account page (a share link and an invitation are two ways into a company).
        if let (caller, _) = visitor {
            let received = try await invitations.received(by: caller)
            fields["invitations"] = received.map {
                [
                    "company": $0.companyName,
                    "invited_until": kit.text(
                        "share_invited_until", language, ["expires": PageKit.dateText($0.invitation.expiresAt)]),
                ]
            }
            fields["has_invitations"] = !received.isEmpty
        }
        return .page(
            kit.render("share", page: "share", title: kit.text("share_title", language), fields, language: language))
    }
}
