import Foundation
import GatehouseClientAPI
import OpenAPIRuntime

/// The account's companies (its list, new companies, credentials, share links to join) and the company signed in
/// to: its policy, members, shares, the account's credential in it, leaving and transferring it.
///
/// Calls on "the company" use the company session from `signIn(to:username:password:)`; without one they throw
/// `notSignedIn`. Signing in and out of a company uses the account's verbs (`signIn`, `signOut`), as `auth` does.
public struct Companies: Sendable {
    let client: Client
    let sessions: SessionManager
    let companySessions: SessionManager
    let hub: AuthEventHub

    // MARK: The account's companies

    /// Every company the account owns or was invited into.
    public func list() async throws(GatehouseError) -> [CompanySummary] {
        try await sessions.authorized { try await $0.listCompanies().ok.body.json }.companies.map(CompanySummary.init)
    }

    /// Makes a company the account owns, on the Free tier.
    public func create(name: String, logoURL: URL? = nil) async throws(GatehouseError) -> Company {
        let body = Components.Schemas.CreateCompanyRequest(name: name, logoUrl: logoURL?.absoluteString)
        return Company(
            try await sessions.authorized { try await $0.createCompany(body: .json(body)).created.body.json })
    }

    /// Makes the account's credential in a company: a username (fixed once made) and a password that only the
    /// account ever knows. `image` is a PNG or JPEG of at most 1 MiB that other members see.
    public func createCredential(
        in companyID: String, username: String, password: String, email: String? = nil, image: Data? = nil
    ) async throws(GatehouseError) -> Credential {
        let body = Components.Schemas.CreateCredentialRequest(
            username: username, password: password, email: email, image: image?.base64EncodedString())
        return Credential(
            try await sessions.authorized {
                try await $0.createCredential(path: .init(cid: companyID), body: .json(body)).created.body.json
            })
    }

    /// Signs in to a company (switching from the one signed in to, if any): with the credential, or with the account
    /// session alone when the company does not require one. Wrong passwords make the server back off:
    /// `lockedOut(until:)`. A company that requires a second factor refuses an aal1 account session with
    /// `insufficient_aal` (`GatehouseError.Code.insufficientAal`): verify one with `auth.mfa`, then sign in again.
    @discardableResult
    public func signIn(to companyID: String, username: String? = nil, password: String? = nil)
        async throws(GatehouseError) -> AuthSession
    {
        let body = Components.Schemas.CompanyLoginRequest(username: username, password: password)
        let wire: Components.Schemas.Session
        do {
            wire = try await sessions.authorized {
                try await $0.companyLogin(path: .init(cid: companyID), body: .json(body)).ok.body.json
            }
        } catch {
            throw error.asLockout()
        }
        return try await adopt(wire, companyID: companyID)
    }

    /// Keeps the company session a sign-in answered (by password or passkey), signing out of the company signed in
    /// to.
    func adopt(_ wire: Components.Schemas.Session, companyID: String) async throws(GatehouseError) -> AuthSession {
        try await signOut()
        let session = AuthSession(wire, companyID: companyID)
        try await companySessions.adopt(session)
        return session
    }

    /// The company signed in to, if any.
    public var currentCompanyID: String? { get async { await companySessions.current?.companyID } }

    /// Signs out of the company (the account stays signed in); the local session ends even when the server cannot
    /// be reached.
    public func signOut() async throws(GatehouseError) {
        guard let current = await companySessions.current else { return }
        let client = self.client
        _ = try? await call(bearer: current.accessToken) { try await client.logout(query: .init(scope: .local)) }
        try await companySessions.end(.requested)
    }

    /// What a share link leads to, without joining.
    public func previewShare(_ link: URL) async throws(GatehouseError) -> SharePreview {
        let token = link.lastPathComponent
        return SharePreview(
            try await sessions.authorized { try await $0.previewShare(path: .init(token: token)).ok.body.json })
    }

    /// Joins the company of a share link the app was opened with (taking it again as a member changes nothing).
    public func acceptShare(_ link: URL) async throws(GatehouseError) -> CompanySummary {
        let token =
            link.pathComponents.last == "accept"
            ? link.deletingLastPathComponent().lastPathComponent
            : link.lastPathComponent
        return CompanySummary(
            try await sessions.authorized { try await $0.acceptShare(path: .init(token: token)).ok.body.json })
    }

    /// Whether the account is still a member of `companyID`. When it is not, the company session ends and
    /// `companyAccessRevoked` is sent, which wipes the company's local store.
    @discardableResult
    public func confirmMembership(_ companyID: String) async throws(GatehouseError) -> Bool {
        guard try await list().contains(where: { $0.id == companyID }) else {
            await revoked(companyID)
            return false
        }
        return true
    }

    /// The account is out of `companyID`: its session there ends and the app (and the company's store) is told.
    func revoked(_ companyID: String) async {
        if await companySessions.current?.companyID == companyID { try? await companySessions.end(.sessionEnded) }
        hub.send(.companyAccessRevoked(companyID: companyID))
    }

    // MARK: The company signed in to

    /// Runs `body` with the company session and the company's id (`notSignedIn` without one).
    func inCompany<T: Sendable>(
        _ body: @Sendable (Client, String) async throws -> T
    ) async throws(GatehouseError) -> T {
        guard let cid = await companySessions.current?.companyID else { throw .notSignedIn }
        do {
            return try await companySessions.authorized { try await body($0, cid) }
        } catch .companyAccessRevoked {
            await revoked(cid)
            throw .companyAccessRevoked
        }
    }

    /// The company and its policy.
    public func details() async throws(GatehouseError) -> Company {
        Company(try await inCompany { try await $0.getCompany(path: .init(cid: $1)).ok.body.json })
    }

    /// Reports a StoreKit 2 purchase made for this company (owner): `signedTransaction` is the verified
    /// transaction's `jwsRepresentation`, bought with this company's ``Company/appAccountToken``. The server verifies
    /// it as Apple's App Store Server Library does and answers the tier it now gives; reporting it twice changes
    /// nothing.
    @discardableResult
    public func reportPurchase(signedTransaction: String) async throws(GatehouseError) -> CompanySubscription {
        let body = Components.Schemas.ReportPurchaseRequest(signedTransaction: signedTransaction)
        return CompanySubscription(
            try await inCompany {
                try await $0.reportPurchase(path: .init(cid: $1), body: .json(body)).ok.body.json
            })
    }

    /// Renames the company or changes its policy (owner).
    @discardableResult
    public func update(_ change: CompanyUpdate) async throws(GatehouseError) -> Company {
        let body = Components.Schemas.UpdateCompanyRequest(
            name: change.name, logoUrl: change.logoURL, requiresCredential: change.requiresCredential,
            requiresMfa: change.requiresMFA, passwordMinLength: change.passwordMinLength,
            sessionIdleTimeout: change.sessionIdleTimeout, sessionLifetime: change.sessionLifetime,
            managersCanShare: change.managersCanShare)
        return Company(
            try await inCompany { try await $0.updateCompany(path: .init(cid: $1), body: .json(body)).ok.body.json })
    }

    /// Deletes the company with its records and sessions (owner).
    public func delete() async throws(GatehouseError) {
        let cid = try await inCompany {
            try await $0.deleteCompany(path: .init(cid: $1)).noContent; return $1
        }
        await revoked(cid)
    }

    /// The account's credential in this company (its username; never its password).
    public func credential() async throws(GatehouseError) -> Credential {
        Credential(try await inCompany { try await $0.getCredential(path: .init(cid: $1)).ok.body.json })
    }

    /// Changes the credential's password; the account's other sessions in this company end.
    public func changeCredentialPassword(current: String, new: String) async throws(GatehouseError) {
        let body = Components.Schemas.ChangeCredentialPasswordRequest(currentPassword: current, newPassword: new)
        do {
            _ = try await inCompany {
                try await $0.changeCredentialPassword(path: .init(cid: $1), body: .json(body)).noContent
            }
        } catch {
            throw error.asLockout()
        }
    }

    /// Deletes the credential; the account's sessions in this company end, this one too.
    public func deleteCredential() async throws(GatehouseError) {
        _ = try await inCompany { try await $0.deleteCredential(path: .init(cid: $1)).noContent }
        try await companySessions.end(.requested)
    }

    /// The company's share links, without their tokens.
    public func shares() async throws(GatehouseError) -> [ShareLink] {
        try await inCompany { try await $0.listShares(path: .init(cid: $1)).ok.body.json }.shares.map(ShareLink.init)
    }

    /// Makes a share link (not on the Free tier: `tier_forbids_sharing`). Its `url` is known only in this answer.
    public func createShare(
        permission: Permission, expiresIn: TimeInterval? = nil, maxUses: Int? = nil
    ) async throws(GatehouseError) -> ShareLink {
        let body = Components.Schemas.CreateShareRequest(
            permission: .init(rawValue: permission.rawValue) ?? .readOnly, expiresIn: expiresIn.map { Int($0) },
            maxUses: maxUses)
        return ShareLink(
            try await inCompany { try await $0.createShare(path: .init(cid: $1), body: .json(body)).created.body.json })
    }

    /// Revokes a share link.
    public func revokeShare(id: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.revokeShare(path: .init(cid: $1, id: id)).noContent }
    }

    /// The company's members.
    public func members() async throws(GatehouseError) -> [Member] {
        try await inCompany { try await $0.listMembers(path: .init(cid: $1)).ok.body.json }.members.map(Member.init)
    }

    /// Changes a member's role or department masks (the owner: anyone else; a manager: department bits inside
    /// their own manager mask).
    @discardableResult
    public func updateMember(
        _ accountID: String, role: CompanyRole? = nil, deptMask: Int64? = nil, managerMask: Int64? = nil
    ) async throws(GatehouseError) -> Member {
        let body = Components.Schemas.UpdateMemberRequest(
            role: role.flatMap { .init(rawValue: $0.rawValue) }, deptMask: deptMask, managerMask: managerMask)
        return Member(
            try await inCompany {
                try await $0.updateMember(path: .init(cid: $1, accountId: accountID), body: .json(body)).ok.body.json
            })
    }

    /// Removes a member (owner); their sessions in the company end at once.
    public func removeMember(_ accountID: String) async throws(GatehouseError) {
        _ = try await inCompany { try await $0.removeMember(path: .init(cid: $1, accountId: accountID)).noContent }
    }

    /// Leaves the company (the owner transfers it first); its local data is wiped.
    public func leave() async throws(GatehouseError) {
        let cid = try await inCompany {
            try await $0.leaveCompany(path: .init(cid: $1)).noContent; return $1
        }
        await revoked(cid)
    }

    /// Hands the company to another member (owner).
    @discardableResult
    public func transfer(to accountID: String) async throws(GatehouseError) -> Company {
        Company(
            try await inCompany {
                try await $0.transferOwnership(path: .init(cid: $1), body: .json(.init(accountId: accountID))).ok.body
                    .json
            })
    }
}
