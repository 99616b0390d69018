import Foundation
import GatehouseClientAPI

extension Companies {
    // MARK: Single sign-on of the company signed in to

    /// The company's identity providers and whether it requires them (members may read it). The providers are
    /// registered by the server's operator; the owner turns the requirement on and off.
    public func companySSO() async throws(GatehouseError) -> CompanySSO {
        CompanySSO(try await inCompany { try await $0.getCompanySSO(path: .init(cid: $1)).ok.body.json })
    }

    /// Requires single sign-on, or stops (owner): while required, the accounts whose address is at a domain the
    /// company holds verified, and its provider signs in, are refused email sign-in with
    /// ``GatehouseError/ssoRequired(providerID:)``, and the company's login takes their single sign-on session
    /// instead of the company's own password. The owner's own accounts are never refused. Requiring it needs an
    /// enabled provider (`validation_failed`).
    public func setCompanySSORequired(_ required: Bool) async throws(GatehouseError) -> CompanySSO {
        let body = Components.Schemas.CompanySSOSetting(required: required)
        return CompanySSO(
            try await inCompany { try await $0.setCompanySSO(path: .init(cid: $1), body: .json(body)).ok.body.json })
    }
}

/// A company's single sign-on: its identity providers, and whether its people must sign in through them.
public struct CompanySSO: Sendable, Equatable {
    /// One of the company's identity providers.
    public struct Provider: Sendable, Equatable, Identifiable {
        /// The provider's id: what ``Auth/signInWithSSO(providerID:redirectTo:)`` takes.
        public let id: String
        /// Its protocol: `saml` or `oidc`.
        public let type: String
        /// Whether it is turned off (it signs nobody in).
        public let isDisabled: Bool
        /// The address domains it signs in.
        public let domains: [String]

        /// A provider as the server would list it (for previews and tests).
        public init(id: String, type: String, isDisabled: Bool = false, domains: [String]) {
            self.id = id
            self.type = type
            self.isDisabled = isDisabled
            self.domains = domains
        }
    }

    /// Whether the people of the company's verified domains must sign in through its provider.
    public let isRequired: Bool
    /// The company's identity providers.
    public let providers: [Provider]

    /// A setting as the server would answer it (for previews and tests).
    public init(isRequired: Bool, providers: [Provider]) {
        self.isRequired = isRequired
        self.providers = providers
    }

    init(_ wire: Components.Schemas.CompanySSO) {
        isRequired = wire.required
        providers = wire.providers.map {
            Provider(id: $0.id, type: $0._type, isDisabled: $0.disabled, domains: $0.domains)
        }
    }
}
