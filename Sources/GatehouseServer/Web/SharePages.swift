/// A share link's landing (`SharePageRoutes`).
struct SharePages: Sendable {
    let kit: PageKit
    let shares: ShareService
    /// Where "Open in the app" goes (a custom scheme or a universal-link base); nil hides the button.
    let appURL: String?
    /// Where to get the app.
    let appStoreURL: String?

    // MARK: Share links

    func share(token: String) async throws -> WebAnswer {
        let client = try kit.access.client()
        guard let landing = try await shares.landing(token, client: client) else {
            return kit.message(
                page: "share-unavailable", title: "This invitation no longer works",
                [
                    "The link has expired, was revoked, or has been used as many times as it allows.",
                    "Ask the person who sent it for a new one.",
                ],
                status: .gone)
        }
        var fields: [String: Any] = [
            "company_name": landing.preview.companyName, "inviter": landing.preview.inviterName,
            "initial": landing.preview.companyName.first.map { String($0).uppercased() } ?? "?",
            "permission": landing.preview.permission == .readWrite ? "Can view and edit" : "Can view",
            "expiry": landing.expiresAt.map(PageKit.dateText) ?? "Never",
        ]
        if let logo = landing.preview.logoUrl, logo.lowercased().hasPrefix("https://") { fields["logo_url"] = logo }
        if let appURL { fields["open_url"] = appURL + "share/" + token }
        if let appStoreURL { fields["store_url"] = appStoreURL }
        return .page(
            kit.render("share", page: "share", title: "You're invited", fields))
    }
}
