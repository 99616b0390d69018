import Foundation
import OpenAPIRuntime

/// The server's timestamps (RFC 3339, with fractional seconds) read and written through swift-foundation's
/// `Date.ISO8601FormatStyle`. OpenAPIRuntime's `.iso8601WithFractionalSeconds` goes through `ISO8601DateFormatter`,
/// which on Linux is ICU's date formatter, cloned for every date: a first sync of 10,000 records spent 45% of its
/// CPU reading the two dates each change carries.
struct WireDates: DateTranscoder {
    private static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let whole = Date.ISO8601FormatStyle()

    func encode(_ date: Date) throws -> String { Self.fractional.format(date) }

    func decode(_ text: String) throws -> Date {
        guard let date = Self.date(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Expected an RFC 3339 timestamp, got \(text.prefix(40))"))
        }
        return date
    }

    /// An RFC 3339 timestamp with or without fractional seconds (the API's dates, and records' `$ts` fields).
    static func date(_ text: String) -> Date? { (try? fractional.parse(text)) ?? (try? whole.parse(text)) }
}
