#if canImport(LocalAuthentication) && (os(iOS) || os(macOS) || os(visionOS))
    import Foundation
    import LocalAuthentication

    /// The app lock's evaluator on Apple platforms: `LAContext`, a new one for each question. Before asking for
    /// Face ID it checks the app's Info.plist for `NSFaceIDUsageDescription`, and answers
    /// `.notAvailable(.usageDescriptionMissing)` when it is missing rather than letting the system refuse or end the
    /// app.
    public struct LocalAuthenticationEvaluator: AppLockEvaluator {
        private let hasUsageDescription: Bool

        /// An evaluator for the app whose Info.plist is `bundle`'s.
        public init(bundle: Bundle = .main) {
            hasUsageDescription = bundle.object(forInfoDictionaryKey: "NSFaceIDUsageDescription") != nil
        }

        public func availability() -> BiometricAvailability {
            let context = LAContext()
            var error: NSError?
            let usable = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
            let biometry = Self.biometry(context.biometryType)
            if biometry == .faceID, !hasUsageDescription { return .notAvailable(.usageDescriptionMissing) }
            if usable, let biometry { return .available(biometry) }
            return Self.availability(error.flatMap { LAError.Code(rawValue: $0.code) }, biometry: biometry)
        }

        public func evaluate(_ policy: AppLock.Policy, localizedReason: String) async -> AppLock.Outcome {
            let context = LAContext()
            let laPolicy: LAPolicy =
                policy == .biometrics ? .deviceOwnerAuthenticationWithBiometrics : .deviceOwnerAuthentication
            var error: NSError?
            let usable = context.canEvaluatePolicy(laPolicy, error: &error)
            let biometry = Self.biometry(context.biometryType)
            if biometry == .faceID, !hasUsageDescription {
                return .unavailable(.notAvailable(.usageDescriptionMissing))
            }
            guard usable else {
                return .unavailable(
                    Self.availability(error.flatMap { LAError.Code(rawValue: $0.code) }, biometry: biometry))
            }
            do {
                return try await context.evaluatePolicy(laPolicy, localizedReason: localizedReason) ? .success : .failed
            } catch let error as LAError {
                switch error.code {
                case .userCancel: return .cancelled(.user)
                case .appCancel: return .cancelled(.app)
                case .systemCancel: return .cancelled(.system)
                case .authenticationFailed: return .failed
                case .userFallback: return .fallbackRequested
                case .biometryLockout, .biometryNotAvailable, .biometryNotEnrolled, .passcodeNotSet:
                    return .unavailable(Self.availability(error.code, biometry: biometry))
                default: return .cancelled(.system)
                }
            } catch {
                return .cancelled(.system)
            }
        }

        private static func biometry(_ type: LABiometryType) -> Biometry? {
            switch type {
            case .faceID: .faceID
            case .touchID: .touchID
            case .opticID: .opticID
            default: nil
            }
        }

        private static func availability(_ code: LAError.Code?, biometry: Biometry?) -> BiometricAvailability {
            switch code {
            case .biometryNotEnrolled?: .notEnrolled
            case .biometryLockout?: .lockedOut
            case .passcodeNotSet?: .passcodeNotSet
            case .biometryNotAvailable?: .notAvailable(biometry == nil ? .noBiometry : .notAllowed)
            case let code?: .notAvailable(.other(code: code.rawValue))
            case nil: .notAvailable(biometry == nil ? .noBiometry : .other(code: 0))
            }
        }
    }
#endif
