import Foundation
import GatehouseAPI
import SQLKit

/// A company's own view of its single sign-on: its providers (registered by the operator), and whether the owner
/// requires them. Required, the accounts at the company's verified domains that its provider signs in are refused
/// email sign-in and sent to the provider (`SSOEnforcement`), and the company's login takes their single sign-on
/// session instead of the per-company password.
struct CompanySSO: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail

    func setting(_ caller: CompanyCaller) async throws -> Schemas.CompanySSO {
        let repository = SSOProviderRepository(db: store.database)
        return Self.wire(
            required: try await repository.required(companyID: caller.companyID),
            providers: try await repository.all(companyID: caller.companyID))
    }

    func update(_ body: Schemas.CompanySSOSetting, by caller: CompanyCaller) async throws -> Schemas.CompanySSO {
        guard caller.membership.isOwner else {
            throw CompanyService.forbidden("Only the owner decides whether single sign-on is required")
        }
        return try await store.transaction { [trail, clock] db in
            let repository = SSOProviderRepository(db: db)
            let providers = try await repository.all(companyID: caller.companyID)
            if body.required, !providers.contains(where: { !$0.disabled && !$0.domains.isEmpty }) {
                throw APIError.validation(
                    "Single sign-on can be required once the company has an enabled identity provider with a domain")
            }
            try await repository.setRequired(companyID: caller.companyID, body.required, now: clock.now)
            try await trail.within(db).record(
                caller.event(.ssoRequirementChanged, detail: ["required": body.required ? "yes" : "no"]))
            return Self.wire(required: body.required, providers: providers)
        }
    }

    /// Whether the company's login takes `accountID`'s session alone: the company requires single sign-on and the
    /// account is one its own (enabled) provider made, so the provider has just vouched for it.
    static func acceptsSession(companyID: String, accountID: String, db: any SQLDatabase) async throws -> Bool {
        let repository = SSOProviderRepository(db: db)
        guard try await repository.required(companyID: companyID),
            let providerID = try await AccountDirectory(db: db).find(id: accountID)?.ssoProviderID,
            let provider = try await repository.find(id: providerID)
        else { return false }
        return provider.companyID == companyID && !provider.disabled
    }

    static func wire(required: Bool, providers: [SSOProviderRecord]) -> Schemas.CompanySSO {
        .init(
            required: required,
            providers: providers.map {
                .init(id: $0.id, _type: $0.kind.rawValue, disabled: $0.disabled, domains: $0.domains)
            })
    }
}
