import Foundation
import SQLKit

/// The failure counters and cooldowns kept in the store, as other features use them inside their own transaction:
/// count an attempt before its secret is checked, clear a key (or a key and those under it) once the secret was
/// right, claim a cooldown. The small interface Security exports over `ThrottleRepository` and `CooldownRepository`.
struct Throttles {
    private let db: any SQLDatabase

    init(db: any SQLDatabase) { self.db = db }

    /// Counts one attempt at the secret behind `key` before it is checked: nil when it may go ahead, else the
    /// seconds to wait (`ThrottleRepository.admit`).
    func admit(_ key: String, now: Date, rule: FailureBackoff.Rule) async throws -> Int? {
        try await ThrottleRepository(db: db).admit(key, now: now, rule: rule)
    }

    func clear(_ key: String) async throws { try await ThrottleRepository(db: db).clear(key) }

    /// Clears `key` and every key under it (`key:…`).
    func clear(keyAndBelow key: String) async throws {
        try await ThrottleRepository(db: db).clear(keyAndBelow: key)
    }

    /// Seconds left before `key` may be used again, or nil; starts a new period when free
    /// (`CooldownRepository.claim`).
    func claim(_ key: String, cooldown: TimeInterval, now: Date) async throws -> Int? {
        try await CooldownRepository(db: db).claim(key, cooldown: cooldown, now: now)
    }
}
