import Foundation

/// The app lock (seed 004 §3, §20–§23) as a pure state machine: it asks for biometrics only, unless the app allows
/// the device passcode; it locks when the app goes to the background, never on `inactive` (the notification centre,
/// the control centre, the Face ID sheet itself), and asks again once the app was away longer than the grace time;
/// back in the foreground it checks the biometrics again and says when they went away.
///
/// It makes no platform call and reads no clock: each `handle` takes what happened (times included) and answers
/// what to do, which `AppLockModel` (or an app's own driver) carries out with an `AppLockEvaluator`.
public struct AppLock: Sendable, Equatable {
    /// What the app chose.
    public struct Configuration: Sendable, Equatable {
        /// The user turned the lock on.
        public var isEnabled: Bool
        /// The device passcode may unlock too (`.deviceOwnerAuthentication`), offered once biometrics failed, are
        /// locked out or unavailable, or when the user asks. Off, only biometrics unlock.
        public var allowsPasscodeFallback: Bool
        /// How long the app may stay in the background and come back unlocked; zero locks on every background.
        public var gracePeriod: Duration
        /// Ask at once when the lock shows in the foreground (once per lock), rather than waiting for a tap.
        public var promptsAutomatically: Bool
        /// The reason the system's sheet shows ("Unlock Acme to see your clients").
        public var localizedReason: String

        /// A lock that is on, biometrics only, locking on every background, asking at once.
        public init(
            isEnabled: Bool = true, allowsPasscodeFallback: Bool = false, gracePeriod: Duration = .zero,
            promptsAutomatically: Bool = true, localizedReason: String = "Unlock to continue."
        ) {
            self.isEnabled = isEnabled
            self.allowsPasscodeFallback = allowsPasscodeFallback
            self.gracePeriod = gracePeriod
            self.promptsAutomatically = promptsAutomatically
            self.localizedReason = localizedReason
        }
    }

    /// The app's scene phase, as SwiftUI's `ScenePhase` has it.
    public enum ScenePhase: Sendable, Equatable {
        /// In the foreground and taking input.
        case active
        /// Visible but not taking input: the notification centre, the app switcher, a system sheet. Never locks.
        case inactive
        /// Not visible.
        case background
    }

    /// Where the lock stands.
    public enum Status: Sendable, Equatable {
        /// Nothing to guard: the lock is off, or no one is signed in. It never locks.
        case disarmed
        /// Open: the app's content shows.
        case unlocked
        /// Closed: the app shows its lock screen.
        case locked
        /// Closed, with the system asking for biometrics (or the passcode) now.
        case unlocking(Policy)
    }

    /// What the system is asked to check.
    public enum Policy: Sendable, Equatable {
        /// Biometrics only (LocalAuthentication's `.deviceOwnerAuthenticationWithBiometrics`).
        case biometrics
        /// Biometrics, or the device passcode (`.deviceOwnerAuthentication`): only when the app allows it.
        case biometricsOrPasscode
    }

    /// How an evaluation ended.
    public enum Outcome: Sendable, Equatable {
        /// The owner was recognised.
        case success
        /// Stopped before an answer: by the user, the app, or the system (another app came forward, the device
        /// locked). Nothing to show.
        case cancelled(Canceller)
        /// Not recognised (after the system's own retries).
        case failed
        /// The user tapped the sheet's fallback button ("Enter Password").
        case fallbackRequested
        /// Biometrics could not be used: locked out, not enrolled, not available (and why), no passcode.
        case unavailable(BiometricAvailability)
    }

    /// Who stopped an evaluation.
    public enum Canceller: Sendable, Equatable {
        /// The user closed the sheet.
        case user
        /// The app cancelled it.
        case app
        /// The system did: another app came forward, or the device locked.
        case system
    }

    /// What happened, told to the lock.
    public enum Event: Sendable, Equatable {
        /// A session was kept from the last launch: lock it (when the lock is on).
        case sessionRestored
        /// The user just signed in (a password, a code, a passkey): that proves them, so open without asking.
        case signedIn
        /// No one is signed in any more: nothing to guard.
        case signedOut
        /// The user turned the lock on or off.
        case enabledChanged(Bool)
        /// The user asked to lock now.
        case lockRequested
        /// The scene phase changed, at `at` on a clock that keeps counting while the device sleeps
        /// (`ContinuousClock`), so that setting the device's time back does not stretch the grace time.
        case scenePhase(ScenePhase, at: ContinuousClock.Instant)
        /// The user asked to unlock: biometrics when they can be used, else the passcode when allowed.
        case unlockRequested
        /// The user asked for the device passcode (ignored unless the app allows it).
        case passcodeRequested
        /// The evaluation asked for with `evaluate` ended.
        case evaluation(Outcome)
        /// What the evaluator said about biometrics, asked for with `checkAvailability`.
        case availabilityChanged(BiometricAvailability)
    }

    /// What the driver should do.
    public enum Effect: Sendable, Equatable {
        /// Ask the evaluator for `availability()` and tell the lock `availabilityChanged`.
        case checkAvailability
        /// Ask the evaluator to evaluate `Policy` and tell the lock the `evaluation`.
        case evaluate(Policy)
        /// Tell the app.
        case notify(Notification)
    }

    /// What the app hears.
    public enum Notification: Sendable, Equatable {
        /// The lock closed: hide the content.
        case locked
        /// The lock opened (or was disarmed).
        case unlocked
        /// Biometrics that could be used cannot any more (turned off, unenrolled, locked out): say so, and offer the
        /// passcode or signing in again.
        case biometricsUnavailable(BiometricAvailability)
    }

    /// What the app chose.
    public private(set) var configuration: Configuration
    /// Where the lock stands.
    public private(set) var status: Status = .disarmed
    /// What the evaluator last said about biometrics; nil until asked.
    public private(set) var availability: BiometricAvailability?
    /// How the last evaluation ended while the lock stays closed; nil once it opens.
    public private(set) var lastOutcome: Outcome?
    /// The scene phase as last told.
    public private(set) var phase: ScenePhase
    /// A session is there to guard.
    public private(set) var hasSession = false
    /// When the app went to the background, until it is active again.
    private var backgroundedAt: ContinuousClock.Instant?
    /// Ask as soon as the app is active and biometrics are available (once per lock, or after a tap).
    private var promptPending = false

    /// A lock with `configuration`, in the scene phase the app starts in. It guards nothing until told
    /// `sessionRestored` or `signedIn`.
    public init(configuration: Configuration = Configuration(), phase: ScenePhase = .active) {
        self.configuration = configuration
        self.phase = phase
    }

    /// What the driver does first: learn what the device offers.
    public var start: Effect { .checkAvailability }

    /// The lock is closed: the app shows its lock screen over everything.
    public var isLocked: Bool {
        switch status {
        case .locked, .unlocking: true
        case .disarmed, .unlocked: false
        }
    }

    /// The biometry the lock screen's button names, when biometrics can be asked for (or not known yet: nil).
    public var biometry: Biometry? { availability?.biometry }

    /// The lock screen offers "Use Passcode": the app allows it, the device has a passcode, and biometrics are
    /// unavailable or locked out, failed, or the user tapped the fallback.
    public var offersPasscode: Bool {
        guard status == .locked, passcodePossible else { return false }
        switch availability {
        case .available, nil: return lastOutcome == .failed || lastOutcome == .fallbackRequested
        default: return true
        }
    }

    /// Something can still open the lock here; when not, the app offers to sign in again.
    public var canUnlock: Bool {
        guard isLocked else { return false }
        switch availability {
        case .available, nil: return true
        default: return passcodePossible
        }
    }

    /// Why the lock cannot open now, for the lock screen; nil when there is nothing to say (a cancel says nothing).
    public var error: AppLockError? {
        guard isLocked else { return nil }
        switch availability {
        case .available, nil: return lastOutcome == .failed ? .notRecognized : nil
        case .notEnrolled: return .notEnrolled
        case .notAvailable(.usageDescriptionMissing): return .usageDescriptionMissing
        case .notAvailable: return .notAvailable
        case .lockedOut: return .lockedOut(passcodeOffered: passcodePossible)
        case .passcodeNotSet: return .passcodeNotSet
        }
    }

    /// Takes an event; answers what to do, in order. `notify(.locked)` and `notify(.unlocked)` come first whenever
    /// `isLocked` changed.
    public mutating func handle(_ event: Event) -> [Effect] {
        let wasLocked = isLocked
        var effects = transition(event)
        if isLocked != wasLocked { effects.insert(.notify(isLocked ? .locked : .unlocked), at: 0) }
        return effects
    }

    private mutating func transition(_ event: Event) -> [Effect] {
        switch event {
        case .sessionRestored:
            hasSession = true
            guard configuration.isEnabled else { return [] }
            lock(prompting: configuration.promptsAutomatically)
            return [.checkAvailability]
        case .signedIn:
            hasSession = true
            status = configuration.isEnabled ? .unlocked : .disarmed
            lastOutcome = nil
            return availability == nil ? [.checkAvailability] : []
        case .signedOut:
            hasSession = false
            status = .disarmed
            lastOutcome = nil
            promptPending = false
            return []
        case .enabledChanged(let enabled):
            configuration.isEnabled = enabled
            if !enabled {
                status = .disarmed
                lastOutcome = nil
            } else if hasSession, status == .disarmed {
                status = .unlocked
            }
            return []
        case .lockRequested:
            if status == .unlocked { lock(prompting: false) }
            return []
        case .scenePhase(let phase, let now):
            return scenePhase(phase, at: now)
        case .unlockRequested:
            guard status == .locked else { return [] }
            switch availability {
            case .available, nil: return [evaluate(.biometrics)]
            default:
                if passcodePossible { return [evaluate(.biometricsOrPasscode)] }
                // Nothing can open it as things stood: look again (the user may have just turned Face ID on), and
                // ask if biometrics are back.
                promptPending = true
                return [.checkAvailability]
            }
        case .passcodeRequested:
            guard status == .locked, passcodePossible else { return [] }
            return [evaluate(.biometricsOrPasscode)]
        case .evaluation(let outcome):
            return evaluated(outcome)
        case .availabilityChanged(let new):
            var effects = updateAvailability(new)
            if status == .locked, phase == .active, promptPending, new.biometry != nil {
                effects.append(evaluate(.biometrics))
            }
            return effects
        }
    }

    private mutating func scenePhase(_ new: ScenePhase, at now: ContinuousClock.Instant) -> [Effect] {
        let previous = phase
        phase = new
        switch new {
        case .inactive:
            return []
        case .background:
            guard previous != .background else { return [] }
            backgroundedAt = now
            if status == .unlocked, configuration.gracePeriod <= .zero { lock(prompting: false) }
            return []
        case .active:
            guard let since = backgroundedAt else {
                // Back from `inactive` only (a sheet, the notification centre): ask if a prompt waits.
                if status == .locked, promptPending, availability?.biometry != nil { return [evaluate(.biometrics)] }
                return []
            }
            backgroundedAt = nil
            if status == .unlocked, since.duration(to: now) >= configuration.gracePeriod { lock(prompting: false) }
            // A new return to the foreground deserves a new prompt, once biometrics are checked again.
            if status == .locked { promptPending = configuration.promptsAutomatically }
            return [.checkAvailability]
        }
    }

    private mutating func evaluated(_ outcome: Outcome) -> [Effect] {
        guard case .unlocking(let policy) = status else { return [] }
        switch outcome {
        case .success:
            status = .unlocked
            lastOutcome = nil
            // After the passcode, biometrics may be back (a lockout ends with it): look again.
            return availability?.biometry == nil ? [.checkAvailability] : []
        case .fallbackRequested where policy == .biometrics && passcodePossible:
            return [evaluate(.biometricsOrPasscode)]
        case .unavailable(let new):
            status = .locked
            lastOutcome = outcome
            return updateAvailability(new)
        case .cancelled, .failed, .fallbackRequested:
            status = .locked
            lastOutcome = outcome
            return []
        }
    }

    /// Keeps what the evaluator said; tells the app when biometrics that could be used cannot any more.
    private mutating func updateAvailability(_ new: BiometricAvailability) -> [Effect] {
        let old = availability
        availability = new
        if new.biometry != nil, case .unavailable = lastOutcome { lastOutcome = nil }
        guard old?.biometry != nil, new.biometry == nil else { return [] }
        return [.notify(.biometricsUnavailable(new))]
    }

    private mutating func lock(prompting: Bool) {
        status = .locked
        lastOutcome = nil
        promptPending = prompting
    }

    private mutating func evaluate(_ policy: Policy) -> Effect {
        status = .unlocking(policy)
        promptPending = false
        return .evaluate(policy)
    }

    /// The app allows the passcode and it can work here (a device with a passcode, an app that may ask).
    private var passcodePossible: Bool {
        configuration.allowsPasscodeFallback && availability != .passcodeNotSet
            && availability != .notAvailable(.usageDescriptionMissing)
    }
}
