import Foundation
import GatehouseJSON

/// The event types a webhook endpoint can ask for, written as Standard Webhooks suggests (`group.event`), in the
/// payload's `type`.
enum WebhookEventType: String, CaseIterable, Sendable {
    case userCreated = "user.created"
    case userUpdated = "user.updated"
    case userDeleted = "user.deleted"
    case userBanned = "user.banned"
    case sessionCreated = "session.created"
    case sessionEnded = "session.ended"
    case companyCreated = "company.created"
    case companyUpdated = "company.updated"
    case companyDeleted = "company.deleted"
    case memberAdded = "company.member_added"
    case memberRemoved = "company.member_removed"
    case memberRoleChanged = "company.member_role_changed"
    case tierChanged = "company.tier_changed"
    case invitationSent = "invitation.sent"
    case invitationAccepted = "invitation.accepted"
    /// A push's record changes in one company, as counts (and the records themselves for endpoints that ask).
    case recordsChanged = "records.changed"

    /// What an endpoint's `events` may hold: every type, or `*` for all of them.
    static let everything = "*"
}

/// One event to send: its type and the `data` of its payload. Made from the audit event that records the change
/// (`WebhookEvent.from`), so an event exists exactly when its change is recorded, in the same transaction.
struct WebhookEvent: Sendable, Equatable {
    let type: WebhookEventType
    var data: [String: String]
    /// Numbers of the payload's `data` (records.changed's counts).
    var counts: [String: Int64] = [:]
    /// The changed records' fields, for endpoints with `include_record_fields` (records.changed only); JSON.
    var fields: String?

    /// A push's changes in one company: counts in `data`, and the records (id, type, fields, deleted) in `fields`
    /// for endpoints that take them.
    static func records(_ changes: SyncService.RecordChanges) -> WebhookEvent {
        let records: [JSONValue] = changes.records.map { record in
            .object([
                "id": .string(record.id), "type": .string(record.type), "deleted": .bool(record.deleted),
                "fields": record.deleted ? .null : .object(record.fields.mapValues { $0 }),
            ])
        }
        let fields = (try? JSONEncoder.sortedKeys.encode(JSONValue.array(records))).map {
            String(decoding: $0, as: UTF8.self)
        }
        return WebhookEvent(
            type: .recordsChanged, data: ["company_id": changes.companyID, "user_id": changes.accountID],
            counts: [
                "created": Int64(changes.created), "updated": Int64(changes.updated),
                "deleted": Int64(changes.deleted), "seq": changes.seq,
            ],
            fields: fields)
    }

    /// The webhook events an audit event stands for: none for most actions.
    static func from(_ event: AuditEvent) -> [WebhookEvent] {
        let detail = event.detail
        var data: [String: String] = [:]
        if let account = event.accountID { data["user_id"] = account }
        if let company = event.companyID { data["company_id"] = company }
        func make(_ type: WebhookEventType, _ extra: [String: String] = [:]) -> WebhookEvent {
            WebhookEvent(type: type, data: data.merging(extra) { $1 })
        }
        /// A company event about another member: the member is the user, the caller the actor.
        func member(_ type: WebhookEventType, _ key: String = "member", _ extra: [String: String] = [:])
            -> WebhookEvent
        {
            var moved = data
            moved["actor_id"] = event.accountID
            moved["user_id"] = detail[key]
            return WebhookEvent(type: type, data: moved.merging(extra) { $1 })
        }
        switch AuditAction(rawValue: event.action) {
        case .signup where detail["account"] != "unconfirmed":
            return [make(.userCreated, ["method": detail["anonymous"] == "true" ? "anonymous" : "email"])]
        case .identityLinked where detail["account"] == "new":
            return [make(.userCreated, ["method": detail["provider"] ?? "external"])]
        case .adminUserCreated, .adminUserInvited:
            return [make(.userCreated, ["method": "admin"])]
        case .userImported:
            return [make(.userCreated, ["method": "import"])]
        case .adminUserUpdated:
            let changed = (detail["changed"] ?? "").split(separator: ",").map(String.init)
            var events: [WebhookEvent] = []
            if changed.contains("banned") { events.append(make(.userBanned, ["by": detail["by"] ?? "admin"])) }
            let rest = changed.filter { !["banned", "unbanned", "still_disabled"].contains($0) }
            if !rest.isEmpty || changed.contains("unbanned") {
                events.append(make(.userUpdated, ["changed": changed.joined(separator: ",")]))
            }
            return events
        case .accountDisabled:
            return [make(.userBanned, ["by": detail["by"] ?? "operator"])]
        case .accountEnabled, .banLifted:
            return [make(.userUpdated, ["changed": "unbanned"])]
        case .profileUpdated:
            return [make(.userUpdated, ["changed": detail["changed"] ?? "user_metadata"])]
        case .emailChanged:
            return [make(.userUpdated, ["changed": "email"])]
        case .passwordChanged:
            return [make(.userUpdated, ["changed": "password"])]
        case .accountDeleted, .adminUserDeleted:
            return [make(.userDeleted)]
        case .signedIn:
            return [make(.sessionCreated, ["method": detail["method"] ?? "unknown"])]
        case .sessionRevoked:
            return [make(.sessionEnded, ["session_id": detail["session"] ?? "", "reason": "revoked"])]
        case .loggedOut:
            return [make(.sessionEnded, ["scope": detail["scope"] ?? "local", "sessions": detail["sessions"] ?? "1"])]
        case .signedOutEverywhere:
            return [make(.sessionEnded, ["scope": "global", "sessions": detail["sessions"] ?? "0"])]
        case .companyCreated:
            return [make(.companyCreated)]
        case .companyUpdated:
            return [make(.companyUpdated)]
        case .companyDeleted:
            return [make(.companyDeleted)]
        case .shareAccepted:
            return [make(.memberAdded, ["via": "share"])]
        case .invitationAccepted:
            return [
                make(.invitationAccepted, ["invitation_id": detail["invitation"] ?? ""]),
                make(.memberAdded, ["via": "invitation"]),
            ]
        case .domainJoined:
            return [make(.memberAdded, ["via": "domain"])]
        case .domainJoinApproved:
            return [member(.memberAdded, "member", ["via": "domain_request"])]
        case .memberRemoved:
            return [member(.memberRemoved, "member", ["reason": "removed"])]
        case .memberLeft:
            return [make(.memberRemoved, ["reason": "left"])]
        case .memberChanged:
            var extra: [String: String] = [:]
            for key in ["role", "dept_mask", "manager_mask"] where detail[key] != nil { extra[key] = detail[key] }
            return [member(.memberRoleChanged, "member", extra)]
        case .tierChanged:
            return [
                make(.tierChanged, ["from": detail["from"] ?? "", "to": detail["to"] ?? "", "by": detail["by"] ?? ""])
            ]
        case .invitationSent:
            return [make(.invitationSent, ["invitation_id": detail["invitation"] ?? "", "role": detail["role"] ?? ""])]
        default:
            return []
        }
    }
}
