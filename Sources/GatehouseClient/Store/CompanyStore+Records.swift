/// Typed records: the app's `CompanyRecord` types read, counted, observed and saved through the same store (saves go
/// through the same unsent changes and push as `save(type:id:fields:deptMask:)`).
extension CompanyStore {
    /// Saves `record` and returns its id at once, as `save(type:id:fields:deptMask:)` does: only the fields that
    /// differ from the record as this device holds it are sent, so another device's edits to the others survive.
    @discardableResult
    public func save<R: CompanyRecord>(_ record: R, deptMask: Int64? = nil) throws(GatehouseError) -> String {
        let fields = try RecordCoding.fields(of: record)
        guard let held = try self.record(record.id) else {
            return try save(type: R.recordType, id: record.id, fields: fields, deptMask: deptMask)
        }
        let changed = fields.filter { held.fields[$0.key] != $0.value }
        if changed.isEmpty, deptMask == nil || deptMask == held.deptMask { return held.id }
        return try save(type: R.recordType, id: record.id, fields: changed, deptMask: deptMask)
    }

    /// Deletes `record`; like a save, it returns at once and reaches the server in the background.
    public func delete<R: CompanyRecord>(_ record: R) throws(GatehouseError) {
        try delete(id: record.id)
    }

    /// The record of type `R` with `id`; nil when there is none (or it is deleted, or of another type).
    public func record<R: CompanyRecord>(_ type: R.Type, id: String) throws(GatehouseError) -> R? {
        guard let record = try record(id), record.type == R.recordType else { return nil }
        return try RecordCoding.decode(R.self, from: record)
    }

    /// The records of type `R`, by id.
    public func records<R: CompanyRecord>(_ type: R.Type) throws(GatehouseError) -> [R] {
        var decoded: [R] = []
        for record in try records(ofType: R.recordType) {
            decoded.append(try RecordCoding.decode(R.self, from: record))
        }
        return decoded
    }

    /// How many records of type `R` there are, counted in the database without reading them.
    public func count<R: CompanyRecord>(of type: R.Type) throws(GatehouseError) -> Int {
        try count(ofType: R.recordType)
    }

    /// The records of type `R` as they change: for a SwiftUI view,
    /// `.task { for try await clients in store.observe(Client.self) { self.clients = clients } }`.
    public nonisolated func observe<R: CompanyRecord>(_ type: R.Type) -> RecordObservation<R> {
        RecordObservation(database: opened, type: R.recordType) { record throws(GatehouseError) in
            try RecordCoding.decode(R.self, from: record)
        }
    }

    /// The records of `type` as they change, as `StoreRecord`s (with `hasPendingChanges`).
    public nonisolated func observeRecords(ofType type: String) -> RecordObservation<StoreRecord> {
        RecordObservation(database: opened, type: type) { record throws(GatehouseError) in record }
    }
}
