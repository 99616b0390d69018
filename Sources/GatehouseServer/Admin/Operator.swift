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
        trail = AuditTrail(store: store, clock: SystemClock())
    }
}
