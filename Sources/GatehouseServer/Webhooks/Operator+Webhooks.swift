import Foundation

extension Operator {
    /// The webhook service on the command line: the same rules and audit as the admin API, `by: operator`.
    private func webhooks(_ configuration: GatehouseConfiguration) throws -> Webhooks {
        let clock = SystemClock()
        return Webhooks(
            store: store, box: try SecretBox.load(configuration), clock: clock, trail: trail,
            outbox: WebhookOutbox(store: store, clock: clock),
            targets: WebhookTargets(allowPrivate: configuration.webhooks.allowPrivateTargets))
    }

    /// `gatehouse webhooks add`: registers an endpoint; answers its id and its secret, shown once.
    public func addWebhook(
        url: String, events: [String], includeRecordFields: Bool, description: String?,
        configuration: GatehouseConfiguration
    ) async throws -> (id: String, secret: String) {
        let (endpoint, secret) = try await webhooks(configuration).register(
            url: url, events: events, includeRecordFields: includeRecordFields, description: description,
            by: .commandLine)
        return (endpoint.id, secret)
    }

    /// `gatehouse webhooks list`: one line per endpoint.
    public func webhookLines(configuration: GatehouseConfiguration) async throws -> [String] {
        try await webhooks(configuration).list().map { endpoint in
            var line = "\(endpoint.id)  \(endpoint.url)  \(endpoint.events.joined(separator: ","))"
            line += endpoint.enabled ? "  enabled" : "  disabled (\(endpoint.disabledReason ?? "operator"))"
            if endpoint.includeRecordFields { line += "  record-fields" }
            if let description = endpoint.description { line += "  \(description)" }
            return line
        }
    }

    /// `gatehouse webhooks remove`: false when there is no such endpoint.
    public func removeWebhook(_ id: String, configuration: GatehouseConfiguration) async throws -> Bool {
        do {
            try await webhooks(configuration).remove(id, by: .commandLine)
            return true
        } catch let error as APIError where error.code == ErrorCode.webhookNotFound.rawValue {
            return false
        }
    }
}
