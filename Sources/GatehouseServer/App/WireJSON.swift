import Foundation
import OpenAPIRuntime

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace). Foundation's
    /// `trimmingCharacters(in:)` took a tenth of a protected request's time on Linux.
    var trimmingHTTPWhitespace: Substring {
        let text = self[...]
        guard let first = text.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = text.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return Substring() }
        return Substring(text[first...last])
    }
}

/// RFC 3339 dates with milliseconds (`2026-11-24T09:31:23.123Z`), written by arithmetic rather than by
/// `ISO8601DateFormatter`, which on Linux is slow and shared behind one lock (a fifth of a protected request's
/// time). Reading takes the same form fast and anything else through Foundation, so it accepts what it did.
struct MillisecondDateTranscoder: DateTranscoder {
    private static let fallback = ISO8601DateTranscoder.iso8601WithFractionalSeconds
    private static let fallbackWhole = ISO8601DateTranscoder.iso8601

    func encode(_ date: Date) throws -> String { Self.format(date) }

    /// `date` to the millisecond, as `format(_:)` writes it.
    static func format(_ date: Date) -> String { format(Int64((date.timeIntervalSince1970 * 1000).rounded())) }

    func decode(_ text: String) throws -> Date {
        if let milliseconds = Self.parse(text) { return Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        if let date = try? Self.fallback.decode(text) { return date }
        return try Self.fallbackWhole.decode(text)
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ` for milliseconds since 1970, in UTC (years 0000–9999).
    static func format(_ milliseconds: Int64) -> String {
        let (days, dayMilliseconds) = milliseconds.floorDivided(by: 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let seconds = dayMilliseconds / 1000
        var bytes = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int64, at offset: Int, digits: Int) {
            var value = value
            for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                bytes[index] = UInt8(48 + value % 10)
                value /= 10
            }
        }
        put(year, at: 0, digits: 4)
        put(month, at: 5, digits: 2)
        put(day, at: 8, digits: 2)
        put(seconds / 3600, at: 11, digits: 2)
        put(seconds / 60 % 60, at: 14, digits: 2)
        put(seconds % 60, at: 17, digits: 2)
        put(dayMilliseconds % 1000, at: 20, digits: 3)
        for (offset, character) in [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, "."), (23, "Z")] {
            bytes[offset] = character.utf8.first!
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Milliseconds since 1970 for exactly `yyyy-MM-ddTHH:mm:ss.SSSZ`; nil for any other form.
    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24 else { return nil }
        for (offset, character) in [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, "."), (23, "Z")]
        where bytes[offset] != character.utf8.first! {
            return nil
        }
        func number(_ offset: Int, _ digits: Int) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[offset..<offset + digits] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), let millisecond = number(20, 3),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        guard civil(fromDays: days) == (year, month, day) else { return nil }
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millisecond
    }

    /// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count since 1970-01-01.
    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The inverse: days since 1970-01-01 of a proleptic Gregorian date.
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Int64 {
    /// Quotient and non-negative remainder (floor division), for dates before 1970.
    fileprivate func floorDivided(by divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }
}

/// JSON as the generated serializer writes the API's answers (keys sorted, slashes as they are, dates through
/// `MillisecondDateTranscoder`), for the answers written outside it (`FastPath`): the same bytes.
enum WireJSON {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(try MillisecondDateTranscoder().encode(date))
        }
        return encoder
    }()

    static func encode(_ value: some Encodable) throws -> [UInt8] { Array(try encoder.encode(value)) }
}

/// JSON written byte by byte: strings escaped as RFC 8259 requires (a quote, a backslash and the control characters;
/// nothing else, as `JSONEncoder` with `.withoutEscapingSlashes`).
struct JSONWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Text that is JSON already (punctuation, a stored object).
    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    mutating func bytes(_ data: [UInt8]) { bytes.append(contentsOf: data) }

    mutating func integer(_ value: Int64) { raw(String(value)) }

    /// A date as the API writes it: RFC 3339 in UTC with milliseconds.
    mutating func date(_ date: Date) {
        bytes.append(UInt8(ascii: "\""))
        raw(MillisecondDateTranscoder.format(date))
        bytes.append(UInt8(ascii: "\""))
    }

    /// A record as a pull's `RecordChange` (with `deleted`) or a list's `RecordInfo` (without) has it, keys sorted;
    /// fields left as stored text are written as they are.
    mutating func record(_ record: StoredRecord, deleted withDeleted: Bool) throws {
        raw("{\"created_at\":")
        date(record.createdAt)
        if let createdBy = record.createdBy {
            raw(",\"created_by\":")
            string(createdBy)
        }
        if withDeleted {
            raw(",\"deleted\":")
            raw(record.deleted ? "true" : "false")
        }
        raw(",\"dept_mask\":")
        integer(record.deptMask)
        raw(",\"fields\":")
        if let stored = record.storedFields {
            raw(stored)
        } else {
            bytes(try WireJSON.encode(record.fields))
        }
        raw(",\"id\":")
        string(record.id)
        raw(",\"seq\":")
        integer(record.seq)
        raw(",\"type\":")
        string(record.type)
        raw(",\"updated_at\":")
        date(record.updatedAt)
        raw("}")
    }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)],
                    hex[Int(byte & 0x0F)],
                ])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
