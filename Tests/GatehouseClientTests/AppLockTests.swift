import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// The app lock (seed 004 §3, §20–§23) as a pure state machine, with seed 004's biometric tests by name; then
/// `AppLockModel` over a fake evaluator and a clock the test moves. No platform call, no real time.
@Suite("App lock")
struct AppLockTests {
    let t0 = ContinuousClock.now
    let faceID = BiometricAvailability.available(.faceID)

    /// A lock over a kept session, asked to unlock at once, after the device said `availability`.
    func restored(
        _ configuration: AppLock.Configuration = AppLock.Configuration(), availability: BiometricAvailability? = nil
    ) -> AppLock {
        var lock = AppLock(configuration: configuration)
        #expect(lock.handle(.sessionRestored) == [.notify(.locked), .checkAvailability])
        #expect(lock.isLocked)
        _ = lock.handle(.availabilityChanged(availability ?? faceID))
        return lock
    }

    /// A lock that is open over a signed-in session.
    func unlocked(_ configuration: AppLock.Configuration = AppLock.Configuration()) -> AppLock {
        var lock = AppLock(configuration: configuration)
        _ = lock.handle(.availabilityChanged(faceID))
        #expect(lock.handle(.signedIn) == [])
        #expect(lock.status == .unlocked)
        return lock
    }

    // MARK: Seed 004's biometric tests

    @Test("Face ID recognises the owner: biometrics only by default, asked at once, and the lock opens")
    func testBiometricSuccess() {
        var lock = AppLock()
        #expect(lock.start == .checkAvailability)
        #expect(lock.handle(.sessionRestored) == [.notify(.locked), .checkAvailability])
        #expect(lock.handle(.availabilityChanged(faceID)) == [.evaluate(.biometrics)])
        #expect(lock.status == .unlocking(.biometrics))
        #expect(lock.biometry == .faceID)
        #expect(lock.handle(.evaluation(.success)) == [.notify(.unlocked)])
        #expect(lock.status == .unlocked && !lock.isLocked && lock.error == nil && lock.lastOutcome == nil)
    }

    @Test(
        "A cancelled Face ID (user, app or system) stays locked, says nothing, offers no passcode, and asks again on a tap"
    )
    func testBiometricFailure_Cancelled() {
        for canceller in [AppLock.Canceller.user, .app, .system] {
            var lock = restored(AppLock.Configuration(allowsPasscodeFallback: true))
            #expect(lock.handle(.evaluation(.cancelled(canceller))) == [])
            #expect(lock.status == .locked)
            #expect(lock.error == nil && !lock.offersPasscode && lock.canUnlock)
            // The sheet going away is not a new foreground: no prompt of its own.
            #expect(lock.handle(.scenePhase(.inactive, at: t0)) == [])
            #expect(lock.handle(.scenePhase(.active, at: t0)) == [])
            #expect(lock.handle(.unlockRequested) == [.evaluate(.biometrics)])
        }
    }

    @Test("A lockout keeps the lock closed, says so, tells the app biometrics went away, and asks nothing more")
    func testBiometricFailure_Lockout() {
        var lock = restored()
        #expect(lock.handle(.evaluation(.unavailable(.lockedOut))) == [.notify(.biometricsUnavailable(.lockedOut))])
        #expect(lock.status == .locked && lock.availability == .lockedOut)
        #expect(lock.error == .lockedOut(passcodeOffered: false))
        #expect(!lock.offersPasscode && !lock.canUnlock)
        // A tap looks again (the device passcode ends a lockout) but asks for nothing while it lasts.
        #expect(lock.handle(.unlockRequested) == [.checkAvailability])
        #expect(lock.handle(.availabilityChanged(.lockedOut)) == [])
        #expect(lock.handle(.passcodeRequested) == [])
        #expect(lock.status == .locked)
        // Once the device was unlocked with its passcode, Face ID is back and the waiting tap asks.
        #expect(lock.handle(.availabilityChanged(faceID)) == [.evaluate(.biometrics)])
        #expect(lock.error == nil)
    }

    @Test("Face ID not available (off for the app, not enrolled, no passcode): the state says which, and nothing opens")
    func testBiometricFailure_NotAvailable() {
        let cases: [(BiometricAvailability, AppLockError)] = [
            (.notAvailable(.notAllowed), .notAvailable), (.notAvailable(.noBiometry), .notAvailable),
            (.notEnrolled, .notEnrolled), (.passcodeNotSet, .passcodeNotSet),
        ]
        for (availability, error) in cases {
            var lock = restored()
            #expect(
                lock.handle(.evaluation(.unavailable(availability))) == [.notify(.biometricsUnavailable(availability))])
            #expect(lock.status == .locked && lock.availability == availability && lock.error == error)
            #expect(!lock.canUnlock && !lock.offersPasscode)
            #expect(lock.error?.errorDescription?.isEmpty == false)
        }
        // Known before asking: no prompt at all.
        var lock = AppLock()
        _ = lock.handle(.sessionRestored)
        #expect(lock.handle(.availabilityChanged(.notAvailable(.noBiometry))) == [])
        #expect(lock.status == .locked && !lock.canUnlock)
    }

    @Test("The passcode only when the app allows it: after a failure, a lockout, or the sheet's fallback button")
    func testPasscodeFallback() {
        // Allowed: a failure offers it, a tap on it asks with .deviceOwnerAuthentication, and it opens.
        var allowed = restored(AppLock.Configuration(allowsPasscodeFallback: true))
        #expect(!allowed.offersPasscode)
        #expect(allowed.handle(.evaluation(.failed)) == [])
        #expect(allowed.error == .notRecognized && allowed.offersPasscode)
        #expect(allowed.handle(.passcodeRequested) == [.evaluate(.biometricsOrPasscode)])
        #expect(allowed.handle(.evaluation(.success)) == [.notify(.unlocked)])

        // The sheet's fallback button goes straight to the passcode when allowed.
        var fallback = restored(AppLock.Configuration(allowsPasscodeFallback: true))
        #expect(fallback.handle(.evaluation(.fallbackRequested)) == [.evaluate(.biometricsOrPasscode)])
        #expect(fallback.status == .unlocking(.biometricsOrPasscode))

        // Not allowed (the default): no passcode, ever; the fallback button leaves the lock closed.
        var biometricsOnly = restored()
        #expect(biometricsOnly.handle(.evaluation(.failed)) == [])
        #expect(biometricsOnly.error == .notRecognized && !biometricsOnly.offersPasscode)
        #expect(biometricsOnly.handle(.passcodeRequested) == [])
        #expect(biometricsOnly.handle(.unlockRequested) == [.evaluate(.biometrics)])
        #expect(biometricsOnly.handle(.evaluation(.fallbackRequested)) == [])
        #expect(biometricsOnly.status == .locked && !biometricsOnly.offersPasscode)
    }

    @Test("Back in the foreground it checks again and tells the app when biometrics went away")
    func testBiometricMonitoring() {
        var lock = unlocked(AppLock.Configuration(gracePeriod: .seconds(300)))
        #expect(lock.handle(.scenePhase(.background, at: t0)) == [])
        #expect(lock.handle(.scenePhase(.inactive, at: t0 + .seconds(10))) == [])
        #expect(lock.handle(.scenePhase(.active, at: t0 + .seconds(10))) == [.checkAvailability])
        #expect(lock.handle(.availabilityChanged(.notEnrolled)) == [.notify(.biometricsUnavailable(.notEnrolled))])
        #expect(lock.status == .unlocked && lock.availability == .notEnrolled)
        // Still gone: told once, not again.
        _ = lock.handle(.scenePhase(.background, at: t0 + .seconds(20)))
        #expect(lock.handle(.scenePhase(.active, at: t0 + .seconds(30))) == [.checkAvailability])
        #expect(lock.handle(.availabilityChanged(.notEnrolled)) == [])
        // Back, then gone another way.
        #expect(lock.handle(.availabilityChanged(.available(.touchID))) == [])
        #expect(
            lock.handle(.availabilityChanged(.notAvailable(.notAllowed)))
                == [.notify(.biometricsUnavailable(.notAvailable(.notAllowed)))])
    }

    // MARK: Scene phases and the grace time

    @Test("Inactive never locks: the notification centre, the control centre, the app switcher, the Face ID sheet")
    func inactiveNeverLocks() {
        var lock = unlocked()
        for second in 0..<5 {
            #expect(lock.handle(.scenePhase(.inactive, at: t0 + .seconds(second * 600))) == [])
            #expect(lock.handle(.scenePhase(.active, at: t0 + .seconds(second * 600 + 599))) == [])
        }
        #expect(lock.status == .unlocked)
        // The sheet itself makes the app inactive while it asks: nothing changes.
        var asking = restored()
        #expect(asking.status == .unlocking(.biometrics))
        #expect(asking.handle(.scenePhase(.inactive, at: t0)) == [])
        #expect(asking.handle(.scenePhase(.active, at: t0)) == [])
        #expect(asking.status == .unlocking(.biometrics))
    }

    @Test("The background locks at once by default; with a grace time, only a longer absence locks")
    func graceTime() {
        var strict = unlocked()
        #expect(strict.handle(.scenePhase(.background, at: t0)) == [.notify(.locked)])
        #expect(strict.handle(.scenePhase(.active, at: t0 + .milliseconds(1))) == [.checkAvailability])
        #expect(strict.handle(.availabilityChanged(faceID)) == [.evaluate(.biometrics)])

        var lenient = unlocked(AppLock.Configuration(gracePeriod: .seconds(60)))
        #expect(lenient.handle(.scenePhase(.background, at: t0)) == [])
        #expect(lenient.handle(.scenePhase(.inactive, at: t0 + .seconds(59))) == [])
        #expect(lenient.handle(.scenePhase(.active, at: t0 + .seconds(59))) == [.checkAvailability])
        #expect(lenient.status == .unlocked)
        #expect(lenient.handle(.availabilityChanged(faceID)) == [])
        #expect(lenient.handle(.scenePhase(.background, at: t0 + .seconds(100))) == [])
        #expect(
            lenient.handle(.scenePhase(.active, at: t0 + .seconds(160))) == [.notify(.locked), .checkAvailability])
        #expect(lenient.handle(.availabilityChanged(faceID)) == [.evaluate(.biometrics)])
        #expect(lenient.handle(.evaluation(.success)) == [.notify(.unlocked)])
    }

    @Test("Biometrics gone while locked: the state says so; the unlock falls back to the passcode only if allowed")
    func availabilityLostWhileLocked() {
        for allowed in [false, true] {
            var lock = unlocked(AppLock.Configuration(allowsPasscodeFallback: allowed))
            _ = lock.handle(.scenePhase(.background, at: t0))
            #expect(lock.handle(.scenePhase(.active, at: t0 + .seconds(5))) == [.checkAvailability])
            let gone = BiometricAvailability.notAvailable(.notAllowed)
            #expect(lock.handle(.availabilityChanged(gone)) == [.notify(.biometricsUnavailable(gone))])
            #expect(lock.status == .locked && lock.error == .notAvailable)
            #expect(lock.canUnlock == allowed && lock.offersPasscode == allowed)
            #expect(
                lock.handle(.unlockRequested) == (allowed ? [.evaluate(.biometricsOrPasscode)] : [.checkAvailability]))
        }
    }

    @Test("A missing NSFaceIDUsageDescription is an error value that says so, never a prompt")
    func missingUsageDescription() {
        let missing = BiometricAvailability.notAvailable(.usageDescriptionMissing)
        var lock = AppLock(configuration: AppLock.Configuration(allowsPasscodeFallback: true))
        _ = lock.handle(.sessionRestored)
        #expect(lock.handle(.availabilityChanged(missing)) == [])
        #expect(lock.status == .locked && lock.error == .usageDescriptionMissing)
        #expect(lock.error?.errorDescription?.contains("NSFaceIDUsageDescription") == true)
        // Even the passcode goes through Face ID first: nothing is offered.
        #expect(!lock.canUnlock && !lock.offersPasscode)
        #expect(lock.handle(.passcodeRequested) == [])
        // Found by the evaluation instead (the adapter checks before asking): the same.
        var asked = restored()
        _ = asked.handle(.evaluation(.unavailable(missing)))
        #expect(asked.error == .usageDescriptionMissing && !asked.canUnlock)
    }

    @Test("A lockout offers the passcode only when the app allows it")
    func lockoutOffersPasscodeOnlyWhenAllowed() {
        var allowed = restored(AppLock.Configuration(allowsPasscodeFallback: true))
        _ = allowed.handle(.evaluation(.unavailable(.lockedOut)))
        #expect(allowed.offersPasscode && allowed.canUnlock)
        #expect(allowed.error == .lockedOut(passcodeOffered: true))
        #expect(allowed.error?.errorDescription == "Too many failed attempts. Use your device passcode to unlock.")
        #expect(allowed.handle(.unlockRequested) == [.evaluate(.biometricsOrPasscode)])
        // The passcode opened it: biometrics are looked at again, as a lockout ends with the passcode.
        #expect(allowed.handle(.evaluation(.success)) == [.notify(.unlocked), .checkAvailability])

        var refused = restored()
        _ = refused.handle(.evaluation(.unavailable(.lockedOut)))
        #expect(!refused.offersPasscode && !refused.canUnlock)
        #expect(refused.handle(.passcodeRequested) == [])
    }

    @Test("Unlock requests while one is asking coalesce into the one evaluation")
    func concurrentRequestsCoalesce() {
        var lock = restored(AppLock.Configuration(promptsAutomatically: false))
        #expect(lock.status == .locked)
        #expect(lock.handle(.unlockRequested) == [.evaluate(.biometrics)])
        #expect(lock.handle(.unlockRequested) == [])
        #expect(lock.handle(.passcodeRequested) == [])
        #expect(lock.handle(.evaluation(.success)) == [.notify(.unlocked)])
        // A stale answer changes nothing.
        #expect(lock.handle(.evaluation(.failed)) == [])
        #expect(lock.status == .unlocked)
    }

    @Test("Off or signed out it never locks; a sign-in opens without asking; a user's lock waits for a tap")
    func armingAndDisarming() {
        var off = AppLock(configuration: AppLock.Configuration(isEnabled: false))
        #expect(off.handle(.sessionRestored) == [])
        #expect(off.status == .disarmed)
        #expect(off.handle(.scenePhase(.background, at: t0)) == [])
        #expect(!off.isLocked)
        #expect(off.handle(.enabledChanged(true)) == [])
        #expect(off.status == .unlocked)

        var lock = restored()
        #expect(lock.handle(.signedOut) == [.notify(.unlocked)])
        #expect(lock.status == .disarmed)
        #expect(lock.handle(.scenePhase(.background, at: t0)) == [])
        #expect(lock.handle(.scenePhase(.active, at: t0 + .seconds(600))) == [.checkAvailability])
        #expect(!lock.isLocked)
        #expect(lock.handle(.signedIn) == [])
        #expect(lock.status == .unlocked)
        #expect(lock.handle(.lockRequested) == [.notify(.locked)])
        #expect(lock.handle(.availabilityChanged(faceID)) == [])
        #expect(lock.handle(.unlockRequested) == [.evaluate(.biometrics)])
    }

    // MARK: The model

    @Test("The model: a restored session asks at once; concurrent unlocks share one evaluation")
    @MainActor
    func modelCoalesces() async {
        let device = ScriptedBiometrics(outcomes: [.cancelled(.user)])
        let model = AppLockModel(evaluator: device)
        await model.sessionRestored()
        #expect(device.asked == [.biometrics])
        #expect(model.lock.status == .locked)

        device.hold()
        let callers = (0..<3).map { _ in Task { await model.unlock() } }
        for _ in 0..<50 { await Task.yield() }
        #expect(model.lock.status == .unlocking(.biometrics))
        device.release()
        for caller in callers { #expect(await caller.value) }
        #expect(device.asked == [.biometrics, .biometrics])
        #expect(model.lock.status == .unlocked)
    }

    @Test("The model: the scene phase on an injected clock, and biometrics going away told on its stream")
    @MainActor
    func modelNotifies() async {
        let clock = ManualClock()
        let device = ScriptedBiometrics()
        let model = AppLockModel(
            configuration: AppLock.Configuration(gracePeriod: .seconds(30)), evaluator: device, now: { clock.now })
        var notifications = model.notifications.makeAsyncIterator()
        model.signedIn()
        model.scenePhaseChanged(.background)
        clock.advance(by: .seconds(10))
        device.offered = .notEnrolled
        model.scenePhaseChanged(.active)
        #expect(model.lock.status == .unlocked)
        #expect(await notifications.next() == .biometricsUnavailable(.notEnrolled))

        device.offered = faceID
        model.scenePhaseChanged(.background)
        clock.advance(by: .seconds(31))
        model.scenePhaseChanged(.active)
        #expect(await notifications.next() == .locked)
        await model.settled()
        #expect(await notifications.next() == .unlocked)
        #expect(device.asked == [.biometrics])
    }
}

/// A continuous clock the test moves.
final class ManualClock: Sendable {
    private let current = Locked(ContinuousClock.now)
    var now: ContinuousClock.Instant { current.withLock { $0 } }
    func advance(by duration: Duration) { current.withLock { $0 = $0 + duration } }
}
