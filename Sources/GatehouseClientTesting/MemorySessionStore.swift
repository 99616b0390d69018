import Foundation
import GatehouseClient

/// A session kept in memory only: for tests and previews, where nothing should outlive the process.
public final class MemorySessionStore: SessionStore, @unchecked Sendable {
    private let lock = NSLock()
    private var session: AuthSession?
    private var companions: [String: MemorySessionStore] = [:]

    /// An empty store, or one holding `session`.
    public init(_ session: AuthSession? = nil) { self.session = session }

    /// Another memory store, the same one each time for `name`.
    public func companion(named name: String) -> any SessionStore {
        lock.withLock {
            if let known = companions[name] { return known }
            let made = MemorySessionStore()
            companions[name] = made
            return made
        }
    }

    /// The session held, if any.
    public func load() throws -> AuthSession? { lock.withLock { session } }
    /// Holds `session`.
    public func save(_ session: AuthSession) throws { lock.withLock { self.session = session } }
    /// Forgets the session.
    public func remove() throws { lock.withLock { session = nil } }
}
