import Foundation
import NIOConcurrencyHelpers

/// What a committed transaction changed that an instance may hold in memory: sessions that ended, and accounts whose
/// record or identities changed. The store hands it to its observers after the commit, and on PostgreSQL announces it
/// to every other instance in the same transaction (see `Store.transaction`).
struct CacheInvalidation: Sendable, Equatable {
    var endedSessions: Set<String> = []
    var changedAccounts: Set<String> = []
    /// Anything may have changed: notices could have been missed (the bus reconnected).
    var everything = false

    static let all = CacheInvalidation(everything: true)

    var isEmpty: Bool { !everything && endedSessions.isEmpty && changedAccounts.isEmpty }

    mutating func formUnion(_ other: CacheInvalidation) {
        endedSessions.formUnion(other.endedSessions)
        changedAccounts.formUnion(other.changedAccounts)
        everything = everything || other.everything
    }

    /// `NOTIFY` payloads for the other instances, each well under PostgreSQL's 8,000-byte limit: `s id id …` for
    /// ended sessions and `u id id …` for changed accounts (ids are short and contain no spaces).
    var payloads: [String] {
        if everything { return ["x"] }
        return Self.payloads("s", endedSessions.sorted()) + Self.payloads("u", changedAccounts.sorted())
    }

    private static func payloads(_ kind: String, _ ids: [String]) -> [String] {
        stride(from: 0, to: ids.count, by: 100).map { start in
            ([kind] + ids[start..<min(start + 100, ids.count)]).joined(separator: " ")
        }
    }

    /// Reads one payload back; nil for anything else on the channel.
    init?(payload: String) {
        let parts = payload.split(separator: " ").map(String.init)
        switch parts.first {
        case "x" where parts.count == 1: everything = true
        case "s" where parts.count > 1: endedSessions = Set(parts.dropFirst())
        case "u" where parts.count > 1: changedAccounts = Set(parts.dropFirst())
        default: return nil
        }
    }

    init(endedSessions: Set<String> = [], changedAccounts: Set<String> = [], everything: Bool = false) {
        self.endedSessions = endedSessions
        self.changedAccounts = changedAccounts
        self.everything = everything
    }
}

/// Collects, while one transaction runs, what it changed for the caches; repositories note through `current`, which
/// `Store.transaction` sets. A write outside a transaction notes nothing, so every write that ends a session or
/// changes an account runs inside one.
final class TransactionChanges: Sendable {
    @TaskLocal static var current: TransactionChanges?

    private let noted = NIOLockedValueBox(CacheInvalidation())

    var collected: CacheInvalidation { noted.withLockedValue { $0 } }

    static func sessionsEnded(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        current?.noted.withLockedValue { $0.endedSessions.formUnion(ids) }
    }

    static func accountChanged(_ id: String) {
        current?.noted.withLockedValue { _ = $0.changedAccounts.insert(id) }
    }
}
