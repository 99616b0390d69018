import Foundation
import GatehouseAPI

/// What `gatehouse users …` and `gatehouse companies …` do, on the same store the server uses. Each part lives beside
/// the repository it uses: `Accounts/Operator+Users.swift`, `Factors/Operator+Factors.swift`,
/// `Companies/Operator+Companies.swift`.
public struct Operator: Sendable {
    let store: Store
    /// The audit trail, on the system clock.
    let trail: AuditTrail

    public init(store: Store) {
        self.store = store
        // What operators change reaches webhook endpoints as the server's own changes do.
        trail = AuditTrail(
            store: store, clock: SystemClock(), follower: WebhookOutbox(store: store, clock: SystemClock()))
    }
}
