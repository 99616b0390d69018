import Foundation
import NIOConcurrencyHelpers

/// A token bucket: `burst` requests at once, refilled at `limit` per `window`.
public struct RateLimit: Sendable, Equatable {
    public var limit: Int
    public var window: TimeInterval
    public var burst: Int

    public init(limit: Int, per window: TimeInterval, burst: Int? = nil) {
        self.limit = limit
        self.window = window
        self.burst = burst ?? limit
    }

    var refillPerSecond: Double { Double(limit) / window }
}

/// The state of one bucket, as a pure value: take a token or learn how long to wait.
struct TokenBucket: Equatable {
    var tokens: Double
    var updatedAt: Date
    /// When it will be full again if nothing is taken: from then on it holds no information.
    var fullAt: Date = .distantFuture

    /// Takes a token if one is left, else says how many whole seconds until one is.
    mutating func take(_ rule: RateLimit, now: Date) -> Int? {
        let elapsed = max(0, now.timeIntervalSince(updatedAt))
        tokens = min(Double(rule.burst), tokens + elapsed * rule.refillPerSecond)
        updatedAt = now
        defer { fullAt = now.addingTimeInterval((Double(rule.burst) - tokens) / rule.refillPerSecond) }
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return max(1, Int(((1 - tokens) / rule.refillPerSecond).rounded(.up)))
    }
}

/// Per-key token buckets held in memory by this instance (per IP, per address).
///
/// Buckets that have refilled completely hold no information and are forgotten when the map grows past `pruneAt`,
/// which then doubles over what is left: the sweep is paid once per doubling, never per request. It kept every bucket
/// used within an hour before, so past 50,000 keys an hour (addresses, refresh clients behind many IPs) every check
/// filtered the whole map again: under a refresh load from many addresses, a third of the rate.
public final class RateLimiter: Sendable {
    /// Keys held before the first sweep.
    static let pruneThreshold = 50_000

    private struct State {
        var buckets: [String: TokenBucket] = [:]
        var pruneAt = RateLimiter.pruneThreshold
    }

    private let state = NIOLockedValueBox(State())
    private let clock: any GatehouseClock

    public init(clock: any GatehouseClock) {
        self.clock = clock
    }

    /// Nil when the request may go ahead; otherwise the seconds to put in `Retry-After`.
    public func check(_ key: String, _ rule: RateLimit) -> Int? {
        let now = clock.now
        return state.withLockedValue { state in
            if state.buckets.count > state.pruneAt {
                state.buckets = state.buckets.filter { $0.value.fullAt > now }
                state.pruneAt = max(Self.pruneThreshold, 2 * state.buckets.count)
            }
            var bucket = state.buckets[key] ?? TokenBucket(tokens: Double(rule.burst), updatedAt: now)
            let wait = bucket.take(rule, now: now)
            state.buckets[key] = bucket
            return wait
        }
    }

    /// How many keys are held, for tests.
    var count: Int { state.withLockedValue { $0.buckets.count } }
}

/// Failed attempts at one secret (a password for one email, a company login, the codes mailed to one address):
/// exponential backoff after a few free tries, and a ceiling per window. It slows guessing; it never disables the
/// account. Every attempt is counted before the secret is checked (`ThrottleRepository.admit`), so parallel guesses
/// all count; a success clears the count.
public struct FailureBackoff: Sendable, Equatable {
    public var failures: Int
    public var windowStartedAt: Date
    public var lastFailureAt: Date

    /// How one kind of secret is guarded.
    public struct Rule: Sendable, Equatable {
        /// Failures allowed before any delay.
        public var freeFailures: Int
        /// The longest delay between two attempts.
        public var maximumDelay: TimeInterval
        /// The period the ceiling counts over.
        public var window: TimeInterval
        /// Failures allowed in one window.
        public var ceiling: Int

        public init(freeFailures: Int, maximumDelay: TimeInterval, window: TimeInterval, ceiling: Int) {
            self.freeFailures = freeFailures
            self.maximumDelay = maximumDelay
            self.window = window
            self.ceiling = ceiling
        }

        /// Passwords: 3 free, then 1 s doubling to 15 minutes, `ceiling` an hour.
        public static func passwords(ceiling: Int) -> Rule {
            Rule(freeFailures: 3, maximumDelay: 15 * 60, window: 3600, ceiling: ceiling)
        }

        /// Mailed codes of one address: each code has its own five tries; across codes, `ceiling` a day.
        public static func codes(ceiling: Int) -> Rule {
            Rule(freeFailures: .max, maximumDelay: 0, window: 24 * 3600, ceiling: ceiling)
        }
    }

    /// Failures allowed before any delay.
    public static let freeFailures = 3
    /// The longest delay between two attempts.
    public static let maximumDelay: TimeInterval = 15 * 60
    public static let window: TimeInterval = 3600

    public init(failures: Int, windowStartedAt: Date, lastFailureAt: Date) {
        self.failures = failures
        self.windowStartedAt = windowStartedAt
        self.lastFailureAt = lastFailureAt
    }

    /// Nil when an attempt may be made now; otherwise whole seconds to wait.
    public func retryAfter(now: Date, ceiling: Int) -> Int? {
        retryAfter(now: now, rule: .passwords(ceiling: ceiling))
    }

    /// Nil when an attempt may be made now under `rule`; otherwise whole seconds to wait.
    public func retryAfter(now: Date, rule: Rule) -> Int? {
        if now.timeIntervalSince(windowStartedAt) >= rule.window { return nil }
        if failures >= rule.ceiling {
            return max(1, Int(windowStartedAt.addingTimeInterval(rule.window).timeIntervalSince(now).rounded(.up)))
        }
        guard failures > rule.freeFailures else { return nil }
        let delay = min(rule.maximumDelay, pow(2, Double(failures - rule.freeFailures - 1)))
        let readyAt = lastFailureAt.addingTimeInterval(delay)
        return readyAt > now ? max(1, Int(readyAt.timeIntervalSince(now).rounded(.up))) : nil
    }

    /// The state after one more failure at `now`; an hour-old window starts over.
    public func recordingFailure(now: Date) -> FailureBackoff {
        recordingFailure(now: now, window: Self.window)
    }

    /// The state after one more failure at `now`; a window older than `window` starts over.
    public func recordingFailure(now: Date, window: TimeInterval) -> FailureBackoff {
        if now.timeIntervalSince(windowStartedAt) >= window {
            return FailureBackoff(failures: 1, windowStartedAt: now, lastFailureAt: now)
        }
        return FailureBackoff(failures: failures + 1, windowStartedAt: windowStartedAt, lastFailureAt: now)
    }

    /// One attempt under `rule`: refused with the seconds to wait, or admitted and counted as a failure until a
    /// success clears it.
    public func admitting(now: Date, rule: Rule) -> (wait: Int?, next: FailureBackoff) {
        if let wait = retryAfter(now: now, rule: rule) { return (wait, self) }
        return (nil, recordingFailure(now: now, window: rule.window))
    }
}
