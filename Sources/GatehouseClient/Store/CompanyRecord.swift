import Foundation
import GatehouseClientAPI

/// One of the app's record types, kept in a company's records as `recordType` with a field per stored property, so
/// SwiftUI views read and observe values of the app's own types instead of `StoreRecord`'s raw fields.
///
/// ```swift
/// struct Client: CompanyRecord {
///     static let recordType = "Client"
///     let id: String
///     var name: String
///     var phone: String?
///     var since: Date?
/// }
/// ```
///
/// Properties map to fields by their coding keys; `id` is the record's id, not a field. A field holds one value
/// (nothing nested): a `Bool`, a number, a `String`, a `Date` (stored as a timestamp) or a `RecordReference`. A property
/// that is nil is left out of a save, so the stored field keeps its value; a type that must clear a field encodes
/// nil for it explicitly (`encode(_:forKey:)` in its own `encode(to:)`).
public protocol CompanyRecord: Codable, Identifiable, Sendable where ID == String {
    /// The record type its records are kept as ("Client", "Appointment", …).
    static var recordType: String { get }
}

extension CompanyRecord {
    /// A new record id: a lowercase UUID, as the store keeps ids.
    public static func newID() -> String { UUID().uuidString.lowercased() }
}

/// The id of another record of the company, kept as a reference (`{"$ref": id}` on the wire) rather than as text.
public struct RecordReference: Codable, Hashable, Sendable {
    /// The record referred to.
    public let id: String

    /// A reference to the record with `id`.
    public init(_ id: String) { self.id = id.lowercased() }

    /// Reads the id (a reference field decodes as its id).
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    /// Writes `{"$ref": id}`, which the store keeps as a reference.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(id, forKey: .ref)
    }

    private enum WireKey: String, CodingKey { case ref = "$ref" }
}

/// Between a `CompanyRecord` and a record's fields, through JSON: dates as `{"$ts": …}` going in and as their
/// timestamp text coming out, references as `{"$ref": …}` going in and as their id coming out.
enum RecordCoding {
    /// The fields `record` stores (its `id` apart).
    static func fields<R: CompanyRecord>(of record: R) throws(GatehouseError) -> [String: FieldValue] {
        let json: [String: JSONValue]
        do {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.container(keyedBy: TimestampKey.self)
                try container.encode(FieldValue.timestamp(date), forKey: .ts)
            }
            json = try JSONDecoder().decode([String: JSONValue].self, from: encoder.encode(record))
        } catch {
            throw .localStore("\(R.self) does not encode as a record's fields: \(error)")
        }
        var fields: [String: FieldValue] = [:]
        for (name, value) in json where name != "id" {
            let field = FieldValue(value)
            // FieldValue reads anything nested but a timestamp or a reference as null: refuse it rather than lose it.
            if field == .null, value != .null {
                throw .localStore("\(R.self).\(name) is nested: a record's field holds one value")
            }
            fields[name] = field
        }
        return fields
    }

    /// `record` as an `R`.
    static func decode<R: CompanyRecord>(_ type: R.Type, from record: StoreRecord) throws(GatehouseError) -> R {
        var object = record.fields.mapValues(\.plain)
        object["id"] = .string(record.id)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            guard let date = FieldValue.date(try container.decode(String.self)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a timestamp")
            }
            return date
        }
        do {
            return try decoder.decode(R.self, from: JSONEncoder().encode(JSONValue.object(object)))
        } catch {
            throw .localStore("The \(record.type) record \(record.id) does not decode as \(R.self): \(error)")
        }
    }

    private enum TimestampKey: String, CodingKey { case ts = "$ts" }
}

extension FieldValue {
    /// The value as a Codable property reads it: a date as its timestamp, a reference as its id.
    fileprivate var plain: JSONValue {
        switch self {
        case .date(let date): .string(Self.timestamp(date))
        case .reference(let id): .string(id)
        default: json
        }
    }
}
