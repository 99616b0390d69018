import Foundation
import GatehouseAPI

/// What `gatehouse providers …` does (`Operator`): GoTrue's custom OAuth and OIDC providers through the admin API's own
/// service (`CustomProviders`), so the command line keeps the API's rules and messages; each change is audited
/// `by: operator`. A provider is named by its identifier (`custom:<slug>`) and described by the admin API's body as
/// JSON; its client secret is sealed with `box` and never shown.
extension Operator {
    /// One line per custom provider, oldest first: identifier, type, enabled or disabled, name.
    public func customProviders(box: SecretBox) async throws -> [String] {
        try await providers(box).list(type: nil).map(Self.line)
    }

    /// A custom provider as the admin API answers it, as indented JSON (never its secret); nil when there is none.
    public func customProvider(_ identifier: String, box: SecretBox) async throws -> String? {
        try await Self.unlessMissing { try Self.json(try await providers(box).get(identifier)) }
    }

    /// Registers a provider from `body`, the admin API's create body (`CustomProviderRequest`) as JSON; its line.
    public func addCustomProvider(_ body: Data, box: SecretBox) async throws -> String {
        Self.line(try await providers(box).create(try Self.request(body), by: .commandLine))
    }

    /// Changes what `body` (the admin API's update body as JSON) names, and nothing else; the provider's line, or nil
    /// when there is no such provider.
    public func updateCustomProvider(_ identifier: String, _ body: Data, box: SecretBox) async throws -> String? {
        let request = try Self.request(body)
        return try await Self.unlessMissing {
            Self.line(try await providers(box).update(identifier, request, by: .commandLine))
        }
    }

    /// Removes a provider; false when there is no such provider.
    public func removeCustomProvider(_ identifier: String, box: SecretBox) async throws -> Bool {
        try await Self.unlessMissing { try await providers(box).delete(identifier, by: .commandLine) } != nil
    }

    private func providers(_ box: SecretBox) -> CustomProviders {
        CustomProviders(store: store, clock: SystemClock(), trail: trail, box: box)
    }

    /// `body`'s answer, or nil for the service's `provider_not_found`; its other refusals are thrown as they are.
    private static func unlessMissing<T>(_ body: () async throws -> T) async throws -> T? {
        do {
            return try await body()
        } catch let error as APIError where error.code == ErrorCode.providerNotFound.rawValue {
            return nil
        }
    }

    private static func request(_ body: Data) throws -> Schemas.CustomProviderRequest {
        do {
            return try JSONDecoder().decode(Schemas.CustomProviderRequest.self, from: body)
        } catch {
            throw APIError.badJSON("The body is not a custom provider's fields")
        }
    }

    private static func line(_ provider: Schemas.CustomProvider) -> String {
        "\(provider.identifier)  \(provider.providerType)  \(provider.enabled ? "enabled" : "disabled")  \(provider.name)"
    }

    /// The admin API's JSON (its sorted keys and millisecond dates), indented for a person.
    private static func json(_ provider: Schemas.CustomProvider) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(MillisecondDateTranscoder.format(date))
        }
        return String(decoding: try encoder.encode(provider), as: UTF8.self)
    }
}
