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
        // A visitor signed in on this browser sees the invitations by email waiting for them too, to answer on the
        // account page (a share link and an invitation are two ways into a company).
        if let (caller, _) = try await kit.caller() {
            let received = try await invitations.received(by: caller)
            fields["invitations"] = received.map {
                ["company": $0.companyName, "expires": PageKit.dateText($0.invitation.expiresAt)]
            }
            fields["has_invitations"] = !received.isEmpty
        }
        return .page(
            kit.render("share", page: "share", title: "You're invited", fields))
    }
}
