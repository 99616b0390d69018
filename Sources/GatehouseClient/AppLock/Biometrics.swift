import Foundation

/// The device's biometry, as LocalAuthentication names it.
public enum Biometry: String, Sendable, Equatable, CustomStringConvertible {
    /// Face ID.
    case faceID
    /// Touch ID.
    case touchID
    /// Optic ID (Apple Vision Pro).
    case opticID

    /// Its name as the system shows it: "Face ID", "Touch ID", "Optic ID".
    public var description: String {
        switch self {
        case .faceID: "Face ID"
        case .touchID: "Touch ID"
        case .opticID: "Optic ID"
        }
    }
}

/// Whether the app can unlock with biometrics now, and if not, why: each a state the lock screen shows differently.
public enum BiometricAvailability: Sendable, Equatable {
    /// Biometrics can be asked for.
    case available(Biometry)
    /// The device has biometrics but no face or finger is enrolled (Settings › Face ID & Passcode).
    case notEnrolled
    /// Biometrics cannot be used, and why.
    case notAvailable(UnavailableReason)
    /// Too many failed attempts: biometrics are off until the device passcode is entered.
    case lockedOut
    /// The device has no passcode, and so no biometrics either.
    case passcodeNotSet

    /// Why biometrics cannot be used.
    public enum UnavailableReason: Sendable, Equatable {
        /// The device has no biometric sensor.
        case noBiometry
        /// The device has one, but this app may not use it (turned off for the app in Settings, or by a policy).
        case notAllowed
        /// The app's Info.plist has no `NSFaceIDUsageDescription`: a mistake in the app, found before the system
        /// is asked (which would refuse or end the app).
        case usageDescriptionMissing
        /// Something else the system said (its `LAError` code).
        case other(code: Int)
    }

    /// The biometry, when it can be asked for.
    public var biometry: Biometry? {
        if case .available(let biometry) = self { return biometry }
        return nil
    }
}

/// Asks the device for biometrics or its passcode. `LocalAuthenticationEvaluator` on Apple platforms; a fake in
/// tests, previews and on Linux. The app lock's logic (`AppLock`) makes no platform call: this is all of it.
public protocol AppLockEvaluator: Sendable {
    /// Whether biometrics can be asked for now (LocalAuthentication's `canEvaluatePolicy` with the biometrics
    /// policy).
    func availability() -> BiometricAvailability

    /// Asks the user with `policy`, showing `localizedReason`; every refusal is an outcome, never a throw.
    func evaluate(_ policy: AppLock.Policy, localizedReason: String) async -> AppLock.Outcome
}

/// Why the app lock cannot open now, in words fit for the lock screen and VoiceOver.
public enum AppLockError: Error, Sendable, Equatable, LocalizedError {
    /// The face or finger was not recognised.
    case notRecognized
    /// Too many failed attempts; `passcodeOffered` when the app lets the device passcode unlock it.
    case lockedOut(passcodeOffered: Bool)
    /// No face or finger is enrolled.
    case notEnrolled
    /// Biometrics are not available to this app.
    case notAvailable
    /// The device has no passcode.
    case passcodeNotSet
    /// The app's Info.plist has no `NSFaceIDUsageDescription` (a mistake in the app, not the user's).
    case usageDescriptionMissing

    public var errorDescription: String? {
        switch self {
        case .notRecognized: "Not recognised. Try again."
        case .lockedOut(passcodeOffered: true): "Too many failed attempts. Use your device passcode to unlock."
        case .lockedOut(passcodeOffered: false):
            "Too many failed attempts. Lock your device and unlock it with its passcode, then try again."
        case .notEnrolled: "Biometric unlock is not set up. Set it up in Settings."
        case .notAvailable: "Biometric unlock is not available to this app. Turn it on in Settings."
        case .passcodeNotSet: "Set a device passcode in Settings to unlock."
        case .usageDescriptionMissing: "This app cannot use Face ID: its Info.plist has no NSFaceIDUsageDescription."
        }
    }
}
