import Foundation
import GatehouseAPI
import Hummingbird
import SQLKit

/// `/v1/sessions` (the caller's devices) and `/v1/account/audit` (the caller's own audit trail).
struct SessionsController {
    let env: AccountsEnvironment

    func addRoutes(to router: Router<AppRequestContext>) {
        let group = router.group("/v1").add(middleware: AuthMiddleware(sessions: env.sessions, accountOnly: true))
            .group(context: AuthenticatedContext.self)
        group.get("sessions", use: list)
        group.delete("sessions/{id}", use: revoke)
        group.get("account/audit", use: audit)
    }

    /// Every live session of the caller's account, the current one flagged.
    @Sendable func list(_ request: Request, context: AuthenticatedContext) async throws -> SessionList {
        SessionList(
            sessions: try await env.sessions.list(
                accountID: context.identity.accountID, current: context.identity.sessionID))
    }

    /// Ends one of the caller's sessions; another account's session id is simply not found.
    @Sendable func revoke(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let identity = context.identity
        let client = ClientInfo(request, peerAddress: context.peerAddress, settings: env.settings)
        let env = self.env
        let ended = try await env.store.transaction { db in
            let rows = try await SessionRepository(db: db).revoke(
                .session(id, accountID: identity.accountID), now: env.clock.now)
            if !rows.isEmpty {
                try await AuditLog(db: db, clock: env.clock).record(
                    client.event(.sessionRevoked, accountID: identity.accountID, detail: ["session": id]))
            }
            return !rows.isEmpty
        }
        guard ended else { throw APIError.notFound("No such session") }
        return Response(status: .noContent)
    }

    /// The caller's own audit events, newest first; `?before=<id>&limit=<1…100>` pages.
    @Sendable func audit(_ request: Request, context: AuthenticatedContext) async throws -> AuditPage {
        let (before, limit) = try AuditLog.paging(request)
        let events = try await AuditLog(db: env.store.database, clock: env.clock)
            .page(accountID: context.identity.accountID, before: before, limit: limit)
        return AuditPage(events: events, nextBefore: events.count == limit ? events.last?.id : nil)
    }
}
