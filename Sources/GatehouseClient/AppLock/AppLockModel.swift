import Foundation
import Observation

/// Drives an `AppLock` with an evaluator, for SwiftUI: forward the scene phase, show a lock screen while
/// `lock.isLocked`, and call `unlock()` from its button. Concurrent `unlock()` calls share one evaluation.
///
/// ```swift
/// .onChange(of: scenePhase) { _, phase in
///     appLock.scenePhaseChanged(phase == .background ? .background : phase == .active ? .active : .inactive)
/// }
/// ```
@MainActor
@Observable
public final class AppLockModel {
    /// The lock: its status, availability, error, and whether it offers the passcode.
    public private(set) var lock: AppLock
    /// What asks the device.
    @ObservationIgnored public let evaluator: any AppLockEvaluator
    @ObservationIgnored private let now: @Sendable () -> ContinuousClock.Instant
    @ObservationIgnored private let broadcast = Broadcast<AppLock.Notification>()
    /// The evaluations under way (one at most, but a fallback starts the next before the first is dropped).
    @ObservationIgnored private var running: [UUID: Task<Void, Never>] = [:]

    /// A model over `evaluator` (`LocalAuthenticationEvaluator()` on Apple platforms). `now` is the clock the grace
    /// time is measured on: one that counts while the device sleeps.
    public init(
        configuration: AppLock.Configuration = AppLock.Configuration(), evaluator: any AppLockEvaluator,
        phase: AppLock.ScenePhase = .active, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        lock = AppLock(configuration: configuration, phase: phase)
        self.evaluator = evaluator
        self.now = now
        run(lock.start)
    }

    /// What the lock tells the app (`locked`, `unlocked`, `biometricsUnavailable`), from now on.
    public var notifications: AsyncStream<AppLock.Notification> { broadcast.stream() }

    /// Tells the lock the scene phase; it locks on `background` (after the grace time), never on `inactive`.
    public func scenePhaseChanged(_ phase: AppLock.ScenePhase) { send(.scenePhase(phase, at: now())) }

    /// Asks to unlock (biometrics, or the passcode when they cannot and the app allows it) and waits for the
    /// answer; true when the lock is open. A call while another is asking waits for that one.
    @discardableResult
    public func unlock() async -> Bool {
        send(.unlockRequested)
        await settled()
        return !lock.isLocked
    }

    /// Asks for the device passcode, when the app allows it; true when the lock is open.
    @discardableResult
    public func unlockWithPasscode() async -> Bool {
        send(.passcodeRequested)
        await settled()
        return !lock.isLocked
    }

    /// Locks now (a "Lock" button).
    public func lockNow() { send(.lockRequested) }

    /// A session was kept from the last launch: locks it when the lock is on (asking at once when it prompts
    /// automatically), and waits for that answer.
    public func sessionRestored() async {
        send(.sessionRestored)
        await settled()
    }

    /// The user signed in: open without asking.
    public func signedIn() { send(.signedIn) }

    /// No one is signed in: nothing to guard.
    public func signedOut() { send(.signedOut) }

    /// Turns the lock on or off (the user's setting).
    public func setEnabled(_ enabled: Bool) { send(.enabledChanged(enabled)) }

    /// Asks the device again what it offers (after the app sends the user to Settings, say).
    public func checkAvailability() { send(.availabilityChanged(evaluator.availability())) }

    /// Waits until no evaluation is under way.
    public func settled() async {
        while let task = running.values.first { await task.value }
    }

    private func send(_ event: AppLock.Event) {
        for effect in lock.handle(event) { run(effect) }
    }

    private func run(_ effect: AppLock.Effect) {
        switch effect {
        case .checkAvailability:
            send(.availabilityChanged(evaluator.availability()))
        case .evaluate(let policy):
            let id = UUID()
            let evaluator = self.evaluator
            let reason = lock.configuration.localizedReason
            running[id] = Task {
                let outcome = await evaluator.evaluate(policy, localizedReason: reason)
                self.send(.evaluation(outcome))
                self.running[id] = nil
            }
        case .notify(let notification):
            broadcast.send(notification)
        }
    }
}
