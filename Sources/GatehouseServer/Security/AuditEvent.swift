import Foundation
import GatehouseAPI

/// One audited decision or change. Details never hold a secret; emails appear only as digests.
public struct AuditEvent: Sendable {
    public var action: String
    public var accountID: String?
    public var companyID: String?
    public var ip: String?
    public var userAgent: String?
    public var detail: [String: String]
    /// The request that caused it (`RequestIDMiddleware`), taken when the event is made.
    public var requestID: String?
    /// The session it concerns: a company caller's, or the one its detail names (`session_id`, `session`).
    public var sessionID: String?

    /// `detail` as the trail stores it: a JSON object, keys sorted, written without an encoder (every refresh
    /// writes one).
    var detailJSON: String {
        var out = JSONWriter(capacity: 64)
        out.raw("{")
        for (index, key) in detail.keys.sorted().enumerated() {
            if index > 0 { out.raw(",") }
            out.string(key)
            out.raw(":")
            out.string(detail[key] ?? "")
        }
        out.raw("}")
        return String(decoding: out.bytes, as: UTF8.self)
    }

    public init(
        _ action: AuditAction, accountID: String? = nil, companyID: String? = nil, ip: String? = nil,
        userAgent: String? = nil, detail: [String: String] = [:]
    ) {
        self.action = action.rawValue
        self.accountID = accountID
        self.companyID = companyID
        self.ip = ip
        self.userAgent = userAgent
        self.detail = detail
        requestID = RequestScope.requestID
        sessionID = detail["session_id"] ?? detail["session"]
    }
}

/// An audit event as stored, for the trails an account or a company owner reads.
struct AuditRecord: Sendable {
    let id: Int64
    let occurredAt: Date
    let action: String
    let companyID: String?
    let ip: String?
    let userAgent: String?
    let detail: [String: String]
}

/// What the console's audit explorer narrows the trail to: each part given must match; nil matches anything.
struct AuditFilter: Sendable, Equatable {
    var action: String?
    var accountID: String?
    var companyID: String?
    var ip: String?
    var sessionID: String?
    var requestID: String?
    /// From this time on.
    var from: Date?
    /// Before this time.
    var until: Date?
}

/// An audit event as the console's explorer shows it: whose it is, and the request and session it came from.
struct AuditEntry: Sendable {
    let record: AuditRecord
    let accountID: String?
    let requestID: String?
    let sessionID: String?
}

extension Schemas.AuditPage {
    /// A page's size: 1…100, 50 when not given; anything else is refused as the contract says.
    static func size(_ limit: Int?) throws -> Int {
        guard let limit else { return 50 }
        guard (1...100).contains(limit) else { throw APIError.validation("limit must be a whole number from 1 to 100") }
        return limit
    }

    /// One page of `limit` events; a full page says where the next one starts.
    init(_ records: [AuditRecord], limit: Int) {
        self.init(
            events: records.map {
                Schemas.AuditEntry(
                    id: $0.id, occurredAt: $0.occurredAt, action: $0.action, companyId: $0.companyID, ip: $0.ip,
                    userAgent: $0.userAgent, detail: .init(additionalProperties: $0.detail))
            },
            nextBefore: records.count == limit ? records.last?.id : nil)
    }
}
