import Foundation
import Testing

@testable import GatehouseServer

/// An operator at aal2 in the console: the web session's access token, and the forms' token of its session.
struct ConsoleOperator {
    let email: String
    let accountID: String
    let access: String
    let refresh: String
    let formToken: String

    /// The same operator with another access token of the same session (after a refresh).
    func with(access: String, refresh: String) -> ConsoleOperator {
        ConsoleOperator(
            email: email, accountID: accountID, access: access, refresh: refresh, formToken: formToken)
    }
}

/// What the console's tests stand on: an operator made as `gatehouse operators add` makes one, signed in with an
/// authenticator app's code, and the console's pages and forms as the browser asks for them.
extension AccountHarness {
    /// An account with a verified authenticator app, made an operator, its session at aal2.
    func consoleOperator(_ email: String = AccountHarness.newEmail("operator")) async throws -> ConsoleOperator {
        let account = try await confirmedAccount(email)
        let factor = try await enrolled(account.access)
        let raised = try await stepUp(factor, bearer: account.access)
        let change = try await Operator(store: server.services.store).addOperator(email: email)
        guard case .changed(let accountID) = change else { throw ConsoleHarnessError.notGranted }
        let sessionID = try #require(try FactorFlowTests.claims(raised.access)["session_id"] as? String)
        return ConsoleOperator(
            email: email, accountID: accountID, access: raised.access, refresh: raised.refresh,
            formToken: PasskeyPages.pageTokens(sessionID: sessionID, box: server.services.box)[0])
    }

    /// A console page as the operator's browser asks for it.
    func console(_ path: String, as op: ConsoleOperator, headers: [(String, String)] = []) async throws -> HTTPReply {
        try await http.send(
            .GET, server.baseURL + path,
            headers: client.headers + headers + [("Cookie", "\(WebSession.accessCookie)=\(op.access)")])
    }

    /// A console form posted from the console's own page, with the session's form token (unless `fields` names
    /// `csrf_token`).
    func consoleForm(_ path: String, _ fields: [String: String], as op: ConsoleOperator) async throws -> HTTPReply {
        try await form(path, fields.merging(["csrf_token": op.formToken]) { given, _ in given }, session: op.access)
    }
}

enum ConsoleHarnessError: Error { case notGranted }
