import Foundation

/// The audit explorer's export as CSV (RFC 4180): CRLF line ends, a field quoted when it holds a comma, a quote or a
/// line break, its quotes doubled. A cell a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a
/// tab or a carriage return) is prefixed with `'`, so opening the export never runs what an attacker wrote into
/// the trail (a user agent, a detail).
struct ConsoleCSV {
    private(set) var text = ""

    static let header = [
        "id", "occurred_at", "action", "account_id", "company_id", "ip", "session_id", "request_id", "user_agent",
        "detail",
    ]

    /// One event's fields, in `header`'s order.
    static func fields(_ entry: AuditEntry) -> [String] {
        let record = entry.record
        return [
            String(record.id), record.occurredAt.iso8601, record.action, entry.accountID ?? "", record.companyID ?? "",
            record.ip ?? "", entry.sessionID ?? "", entry.requestID ?? "", record.userAgent ?? "",
            ConsoleAudit.detailText(record.detail),
        ]
    }

    mutating func append(_ fields: [String]) {
        text += fields.map(Self.cell).joined(separator: ",") + "\r\n"
    }

    /// A last line that is no row: `# text`.
    mutating func comment(_ comment: String) {
        text += Self.cell("# " + comment) + "\r\n"
    }

    /// One field, neutralized and quoted as needed.
    static func cell(_ value: String) -> String {
        var value = value
        if let first = value.unicodeScalars.first, ["=", "+", "-", "@", "\t", "\r"].contains(first) {
            value = "'" + value
        }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else {
            return value
        }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
