import Foundation
import GatehouseAPI
import SQLKit

/// The caller's own devices and trail: the session list, ending one session or many, and the account's audit.
struct AccountSessions: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let sessions: SessionService
    let trail: AuditTrail

    /// Every live session of the caller's account, the current one flagged.
    func list(_ caller: Caller) async throws -> Schemas.SessionList {
        .init(sessions: try await sessions.list(accountID: caller.accountID, current: caller.identity.sessionID))
    }

    /// Ends one of the caller's sessions; another account's session id is simply not found.
    func revoke(_ id: String, by caller: Caller) async throws {
        let event = caller.client.event(.sessionRevoked, accountID: caller.accountID, detail: ["session": id])
        let ended = try await store.transaction { [clock] db in
            let rows = try await SessionRepository(db: db).revoke(
                .session(id, accountID: caller.accountID), now: clock.now)
            if !rows.isEmpty { try await trail.within(db).record(event) }
            return !rows.isEmpty
        }
        guard ended else { throw APIError.notFound("No such session") }
    }

    /// Ends this session (`local`), every session (`global`) or every other one (`others`). A company session ends
    /// only itself: a company token (a company's own login, handed to the company's screens) must not sign the person
    /// out of every device.
    func logout(_ scope: SessionService.Scope, by caller: Caller) async throws {
        guard caller.identity.isAccountSession || scope == .local else {
            await trail.recordRefusal(
                caller.client.event(
                    .authorizationRefused, accountID: caller.accountID,
                    detail: ["reason": "company_session_scope", "scope": scope.rawValue]))
            throw Self.companySessionScope
        }
        try await store.transaction { [clock, sessions] db in
            let ended = try await sessions.revoke(
                accountID: caller.accountID, current: caller.identity.sessionID, scope: scope, db: db)
            try await trail.within(db).record(
                caller.client.event(
                    .loggedOut, accountID: caller.accountID,
                    detail: ["scope": scope.rawValue, "sessions": String(ended)]))
        }
    }

    static let companySessionScope = APIError(
        .forbidden, code: .accountSessionRequired,
        message: "A company session can only end itself (scope=local): sign out other devices with the account session")

    /// The caller's own audit events, newest first, `limit` (1…100) at a time before the event id `before`.
    func audit(_ caller: Caller, before: Int64?, limit: Int?) async throws -> Schemas.AuditPage {
        let limit = try Schemas.AuditPage.size(limit)
        let events = try await trail.page(accountID: caller.accountID, before: before, limit: limit)
        return Schemas.AuditPage(events, limit: limit)
    }
}
