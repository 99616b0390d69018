import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1/admin/webhooks…`: the operator's webhook endpoints, service key only.

extension API {
    func adminListWebhooks(_ input: Operations.AdminListWebhooks.Input) async throws
        -> Operations.AdminListWebhooks.Output
    {
        _ = try await access.admin()
        return .ok(.init(body: .json(.init(webhooks: try await webhooks.list().map(Schemas.Webhook.init)))))
    }

    func adminCreateWebhook(_ input: Operations.AdminCreateWebhook.Input) async throws
        -> Operations.AdminCreateWebhook.Output
    {
        let admin = try await access.admin()
        switch input.body {
        case .json(let body):
            let (endpoint, secret) = try await webhooks.register(
                url: body.url, events: body.events, includeRecordFields: body.includeRecordFields ?? false,
                description: body.description, by: admin)
            return .created(
                .init(body: .json(.init(value1: .init(endpoint), value2: .init(secret: secret)))))
        }
    }

    func adminGetWebhook(_ input: Operations.AdminGetWebhook.Input) async throws -> Operations.AdminGetWebhook.Output {
        _ = try await access.admin()
        return .ok(.init(body: .json(.init(try await webhooks.endpoint(input.path.webhookId)))))
    }

    func adminDeleteWebhook(_ input: Operations.AdminDeleteWebhook.Input) async throws
        -> Operations.AdminDeleteWebhook.Output
    {
        let admin = try await access.admin()
        try await webhooks.remove(input.path.webhookId, by: admin)
        return .noContent(.init())
    }

    func adminEnableWebhook(_ input: Operations.AdminEnableWebhook.Input) async throws
        -> Operations.AdminEnableWebhook.Output
    {
        let admin = try await access.admin()
        return .ok(.init(body: .json(.init(try await webhooks.enable(input.path.webhookId, by: admin)))))
    }

    func adminRotateWebhookSecret(_ input: Operations.AdminRotateWebhookSecret.Input) async throws
        -> Operations.AdminRotateWebhookSecret.Output
    {
        let admin = try await access.admin()
        let secret = try await webhooks.rotateSecret(input.path.webhookId, by: admin)
        return .ok(.init(body: .json(.init(secret: secret))))
    }

    func adminListWebhookDeliveries(_ input: Operations.AdminListWebhookDeliveries.Input) async throws
        -> Operations.AdminListWebhookDeliveries.Output
    {
        _ = try await access.admin()
        let limit = try Schemas.AuditPage.size(input.query.limit)
        let deliveries = try await webhooks.deliveries(
            input.path.webhookId, before: input.query.before, limit: limit)
        return .ok(.init(body: .json(.init(deliveries: deliveries.map(Schemas.WebhookDelivery.init)))))
    }

    func adminReplayWebhookDelivery(_ input: Operations.AdminReplayWebhookDelivery.Input) async throws
        -> Operations.AdminReplayWebhookDelivery.Output
    {
        let admin = try await access.admin()
        let delivery = try await webhooks.replay(input.path.webhookId, delivery: input.path.deliveryId, by: admin)
        return .accepted(.init(body: .json(.init(delivery))))
    }
}

extension Schemas.Webhook {
    init(_ endpoint: WebhookEndpoint) {
        self.init(
            id: endpoint.id, url: endpoint.url, events: endpoint.events,
            includeRecordFields: endpoint.includeRecordFields, description: endpoint.description,
            enabled: endpoint.enabled, disabledReason: endpoint.disabledReason, createdAt: endpoint.createdAt)
    }
}

extension Schemas.WebhookDelivery {
    init(_ delivery: WebhookDelivery) {
        self.init(
            id: delivery.id, eventId: delivery.eventID, eventType: delivery.eventType,
            status: .init(rawValue: delivery.status.rawValue) ?? .pending, attempts: delivery.attempts,
            lastStatusCode: delivery.lastStatusCode, lastLatencyMs: delivery.lastLatencyMS,
            lastError: delivery.lastError, nextAttemptAt: delivery.nextAttemptAt, createdAt: delivery.createdAt,
            deliveredAt: delivery.status == .delivered ? delivery.finishedAt : nil)
    }
}
