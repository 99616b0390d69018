import GRDB

/// The records of one type as they change, for SwiftUI: the current array first, then a new one after each change to
/// them (a save here, the server's confirmation, a pulled page), never the same array twice in a row; by id. Built
/// on GRDB's `ValueObservation`, started when iterated and stopped with the iteration (a view's `.task`).
///
/// It ends when the store closes, throws `companyAccessRevoked` when the store is wiped, and `localStore` when a
/// record does not decode as `Item`.
public struct RecordObservation<Item: Sendable>: AsyncSequence, Sendable {
    /// The records, by id.
    public typealias Element = [Item]

    let database: CompanyDatabase
    let type: String
    let decode: @Sendable (StoreRecord) throws(GatehouseError) -> Item

    /// Starts the observation.
    public func makeAsyncIterator() -> AsyncIterator {
        let decode = self.decode
        return AsyncIterator(base: database.observe(type: type) { try decode($0) }, database: database)
    }

    /// The arrays as they come.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// GRDB's, unless the store had closed before it started.
        var base: AsyncValueObservation<[Item]>.Iterator?
        let database: CompanyDatabase

        /// The next array; nil once the store closed.
        public mutating func next() async throws -> [Item]? {
            do {
                guard base != nil else { throw CompanyDatabase.Unavailable() }
                return try await base?.next()
            } catch {
                switch database.availability {
                case .closed: return nil
                case .wiped: throw GatehouseError.companyAccessRevoked
                case .open: throw error as? GatehouseError ?? .localStore(String(describing: error))
                }
            }
        }
    }
}
