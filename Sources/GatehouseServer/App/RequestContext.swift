import Foundation
import Hummingbird
import NIOCore

/// The context every request starts with: the body limit and who is on the other end of the socket.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set from configuration by `BodyLimitMiddleware` before any handler decodes a body.
    public var maxUploadSize: Int = 1 << 20
    /// The peer's IP address, for rate limits and the audit trail.
    public let peerAddress: String?
    /// Set by `AuthMiddleware` once a bearer token has been verified.
    public var identity: Identity?
    /// Set by `CompanyAccessMiddleware` for requests inside a company.
    public var membership: Membership?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }
}

/// The context of a request whose bearer token verified and whose session is live: handlers get a non-optional
/// identity, so no handler can forget to check it.
public struct AuthenticatedContext: ChildRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let identity: Identity
    public let peerAddress: String?
    public let maxUploadSize: Int

    public init(context: AppRequestContext) throws {
        guard let identity = context.identity else { throw APIError.noAuthorization }
        self.coreContext = context.coreContext
        self.identity = identity
        self.peerAddress = context.peerAddress
        self.maxUploadSize = context.maxUploadSize
    }
}

/// Verifies the bearer token and its session before any handler that needs an identity.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let sessions: SessionService
    /// Whether only an account session may pass: the account's own business (its companies, shares it accepts, its
    /// sessions, its audit trail, its credentials and company logins) is not a company session's to do.
    var accountOnly = false

    func handle(
        _ request: Request, context: AppRequestContext,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        let identity = try await Self.identify(request, sessions: sessions, peerAddress: context.peerAddress)
        if accountOnly, !identity.isAccountSession {
            let client = ClientInfo(request, peerAddress: context.peerAddress, settings: sessions.settings)
            await sessions.audit(
                client.event(
                    .authorizationRefused, accountID: identity.accountID,
                    detail: ["reason": "account_session_required", "path": request.uri.path]))
            throw APIError.accountSessionRequired
        }
        context.identity = identity
        return try await next(request, context)
    }

    /// The identity behind the request's bearer token, or the matching 401/403. A token that is forged, tampered,
    /// foreign or whose session has ended is audited (with no subject: nothing in it can be trusted).
    static func identify(_ request: Request, sessions: SessionService, peerAddress: String?) async throws -> Identity {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else {
            throw APIError.noAuthorization
        }
        let token = header.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
        let reason: String
        let error: APIError
        do {
            return try await sessions.identify(bearer: token)
        } catch .malformed {
            (reason, error) = ("invalid_token", .badJWT)
        } catch .sessionEnded {
            (reason, error) = ("session_ended", .sessionNotFound)
        }
        let client = ClientInfo(request, peerAddress: peerAddress, settings: sessions.settings)
        await sessions.audit(
            client.event(.tokenRejected, accountID: nil, detail: ["reason": reason, "path": request.uri.path]))
        throw error
    }
}
