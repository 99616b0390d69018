import Foundation

/// A console page's query string, read as a browser's GET form sends it: `+` is a space, the first value of a name
/// counts, an empty value is no value. A query that does not decode is refused.
struct ConsoleFilterParameters: Sendable {
    private(set) var values: [String: String] = [:]

    init(_ query: String?) throws {
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "") else {
                throw ConsoleBadRequest("audit_bad_encoding")
            }
            let trimmed = value.trimmingCharacters(in: CharacterSet.whitespaces)
            if values[name] == nil, !trimmed.isEmpty { values[name] = trimmed }
        }
    }

    subscript(_ name: String) -> String? { values[name] }

    private static func decode(_ part: Substring) -> String? {
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// `path` with `parameters` (those with a value) as its query, in the order given.
    static func link(_ path: String, _ parameters: [(String, String?)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let query = parameters.compactMap { name, value in
            value.map { "\(name)=\($0.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
        }
        return query.isEmpty ? path : path + "?" + query.joined(separator: "&")
    }

    /// `text` as one segment of a path.
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// A console page's parameter the page cannot use: answered 400 with the page and the strings-table text `key`
/// says (its values named in it).
struct ConsoleBadRequest: Error {
    let key: String
    var values: [String: String] = [:]

    init(_ key: String, _ values: [String: String] = [:]) {
        self.key = key
        self.values = values
    }
}

/// A time a console filter names, in UTC: a day (`2026-11-29`) or a time of day (`2026-11-29T14:05`, seconds and a
/// trailing `Z` allowed, a space for the `T`). A day or a minute is a span: `until` is its end.
struct ConsoleTime: Equatable {
    let start: Date
    let until: Date

    init?(_ text: String) {
        let pattern = /(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?Z?/
        guard let match = try? pattern.wholeMatch(in: text) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var parts = DateComponents(
            year: Int(match.1), month: Int(match.2), day: Int(match.3), hour: match.4.flatMap { Int($0) } ?? 0,
            minute: match.5.flatMap { Int($0) } ?? 0, second: match.6.flatMap { Int($0) } ?? 0)
        parts.calendar = calendar
        guard parts.isValidDate, let start = calendar.date(from: parts) else { return nil }
        self.start = start
        let span: TimeInterval = match.4 == nil ? 86400 : match.6 == nil ? 60 : 1
        until = start.addingTimeInterval(span)
    }
}
