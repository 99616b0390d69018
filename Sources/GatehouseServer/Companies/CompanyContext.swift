import Foundation
import Hummingbird

/// A request inside one company: the token's session is logged in to exactly the company in the path, and the
/// caller's membership (read fresh, so a removal or role change counts at once) comes with it.
public struct CompanyContext: ChildRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let identity: Identity
    public let membership: Membership
    public let peerAddress: String?
    public let maxUploadSize: Int

    public init(context: AppRequestContext) throws {
        guard let identity = context.identity else { throw APIError.noAuthorization }
        guard let membership = context.membership else { throw CompanyAccessMiddleware.notMember }
        self.coreContext = context.coreContext
        self.identity = identity
        self.membership = membership
        self.peerAddress = context.peerAddress
        self.maxUploadSize = context.maxUploadSize
    }

    public var companyID: String { membership.companyID }
}

/// Admits a request to `/v1/companies/{cid}/…` only with a company session for `cid` and a live membership.
struct CompanyAccessMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let sessions: SessionService
    let store: Store

    static let contextRequired = APIError(
        .forbidden, code: .companyContextRequired,
        message: "This endpoint needs a session logged in to this company (POST /v1/companies/{cid}/login)")
    static let notMember = APIError(.forbidden, code: .notAMember, message: "You are not a member of this company")

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        let identity = try await AuthMiddleware.identify(request, sessions: sessions, peerAddress: context.peerAddress)
        let cid = context.parameters.get("cid")
        guard let cid, identity.companyID == cid else {
            await refused(request, context, identity, companyID: cid, reason: "company_context_required")
            throw Self.contextRequired
        }
        guard
            let membership = try await CompanyRepository(db: store.database).membership(
                cid, accountID: identity.accountID)
        else {
            await refused(request, context, identity, companyID: cid, reason: "not_a_member")
            throw Self.notMember
        }
        context.identity = identity
        context.membership = membership
        return try await next(request, context)
    }

    /// Audits a refused authorization: who asked, for which company, and why.
    private func refused(
        _ request: Request, _ context: AppRequestContext, _ identity: Identity, companyID: String?, reason: String
    ) async {
        let client = ClientInfo(request, peerAddress: context.peerAddress, settings: sessions.settings)
        await sessions.audit(
            AuditEvent(
                .authorizationRefused, accountID: identity.accountID, companyID: companyID, ip: client.ip,
                userAgent: client.userAgent, detail: ["reason": reason, "path": request.uri.path]))
    }
}
