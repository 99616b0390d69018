import Foundation
import GatehouseClientAPI

/// One value of a record's field, as the server keeps it: nothing nested.
public enum FieldValue: Sendable, Equatable, Hashable {
    /// No value.
    case null
    /// True or false.
    case bool(Bool)
    /// A whole number.
    case int(Int64)
    /// A number with a fraction.
    case double(Double)
    /// Text.
    case string(String)
    /// A moment in time (sent as `{"$ts": "<RFC 3339>"}`).
    case date(Date)
    /// The id of another record of the company (sent as `{"$ref": "<id>"}`).
    case reference(String)

    var json: JSONValue {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .int(let value): .int(value)
        case .double(let value): .double(value)
        case .string(let value): .string(value)
        case .date(let value): .object(["$ts": .string(Self.timestamp(value))])
        case .reference(let id): .object(["$ref": .string(id)])
        }
    }

    init(_ json: JSONValue) {
        switch json {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .int(let value): self = .int(value)
        case .double(let value): self = .double(value)
        case .string(let value): self = .string(value)
        case .object(let object):
            if let text = object["$ts"]?.stringValue, let date = Self.date(text) {
                self = .date(date)
            } else if let id = object["$ref"]?.stringValue {
                self = .reference(id)
            } else {
                self = .null
            }
        case .array: self = .null
        }
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(
            .iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    static func date(_ text: String) -> Date? { WireDates.date(text) }
}

/// A record of a company as this device holds it: the server's copy with the device's unsent edits on top.
public struct StoreRecord: Sendable, Equatable, Identifiable {
    /// The record's id: a UUID made by the device that created it.
    public let id: String
    /// The app's type for it ("Client", "Appointment", …).
    public let type: String
    /// Its fields.
    public let fields: [String: FieldValue]
    /// The departments that see it (bits); nil when the server chooses.
    public let deptMask: Int64?
    /// Whether it holds edits the server has not confirmed yet.
    public let hasPendingChanges: Bool
}

/// A field the server kept its own value of, because someone else changed it after this device last saw it.
public struct FieldConflict: Sendable, Equatable {
    /// The record.
    public let recordID: String
    /// The field.
    public let field: String
    /// The value this device saved, which was not applied.
    public let yours: FieldValue?
    /// The value the server kept, now on every device.
    public let kept: FieldValue
}

/// What happened to a company store, for the UI.
public enum StoreEvent: Sendable, Equatable {
    /// These records changed (locally or from the server): read them again.
    case changed(Set<String>)
    /// A saved field lost to another device's edit.
    case conflict(FieldConflict)
    /// The server refused a saved change (with its stable code, such as `read_only` or `record_deleted`); the change
    /// was dropped.
    case refused(recordID: String, code: String)
    /// The account lost access to the company: every local record and unsent change is gone.
    case wiped
    /// Syncing stopped on this error and will be tried again (network), or waits for a company login.
    case syncFailed(GatehouseError)
    /// A sync completed: everything saved before it has reached the server, and the server's changes up to its start
    /// are here. Once per sync, however many callers waited on it.
    case synced
}

/// Hands each value to every open stream.
final class Broadcast<Event: Sendable>: Sendable {
    private let streams = Locked<[UUID: AsyncStream<Event>.Continuation]>([:])

    /// A new stream; `first`, when given, is its first value (read under the same lock as sends, so nothing sent
    /// meanwhile comes before it).
    func stream(first: () -> Event? = { nil }) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self)
        let id = UUID()
        streams.withLock {
            if let first = first() { continuation.yield(first) }
            $0[id] = continuation
        }
        continuation.onTermination = { [weak self] _ in self?.streams.withLock { _ = $0.removeValue(forKey: id) } }
        return stream
    }

    /// Sends `event` to every stream, after `update` ran under the lock.
    func send(_ event: Event, update: () -> Void = {}) {
        let targets = streams.withLock {
            update()
            return Array($0.values)
        }
        for stream in targets { stream.yield(event) }
    }

    func finish() {
        for stream in streams.withLock({ Array($0.values) }) { stream.finish() }
    }
}
