import Foundation

/// The time the SDK's session decisions read and wait on: the system's in an app, one a test moves by hand.
public protocol SessionClock: Sendable {
    /// The current time.
    var now: Date { get }
    /// Returns at `deadline`, or at once when it has passed; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// The device's wall clock.
public struct SystemSessionClock: SessionClock {
    /// The wall clock.
    public init() {}

    /// The current time.
    public var now: Date { Date() }

    /// Sleeps until `deadline` on the wall clock.
    public func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSinceNow
        guard seconds > 0 else { return try Task.checkCancellation() }
        try await Task.sleep(for: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }
}

extension SessionClock where Self == SystemSessionClock {
    /// The device's wall clock.
    public static var system: SystemSessionClock { SystemSessionClock() }
}

extension Duration {
    /// The duration in seconds, for the session machine's dates.
    var timeInterval: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
