// LocalAuthentication/LAContext.h and LAPublicDefines.h (whose #defines give the raw values below).
import Foundation

// typedef NS_ENUM(NSInteger, LAPolicy) { … } API_AVAILABLE(macos(10.10), ios(8.0), watchos(3.0), tvos(10.0));
// kLAPolicyDeviceOwnerAuthenticationWithBiometrics 1, …DeviceOwnerAuthentication 2, …WithWatch 3 (…WithCompanion),
// …WithBiometricsOrWatch 4 (…WithBiometricsOrCompanion), …WithWristDetection 5. Where two names share a value, Swift
// makes the current one the case and the deprecated Watch one a static alias, which is left out.
@available(iOS 8.0, macOS 10.10, tvOS 10.0, watchOS 3.0, *)
public enum LAPolicy: Int, @unchecked Sendable {
    @available(iOS 8.0, macOS 10.12.2, watchOS 3.0, tvOS 10.0, *)
    case deviceOwnerAuthenticationWithBiometrics = 1
    @available(iOS 9.0, macOS 10.11, watchOS 3.0, tvOS 10.0, *)
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithCompanion = 3
    case deviceOwnerAuthenticationWithBiometricsOrCompanion = 4
    case deviceOwnerAuthenticationWithWristDetection = 5
}

// typedef NS_ENUM(NSInteger, LABiometryType) {
//     LABiometryTypeNone = kLABiometryTypeNone (0), LABiometryTypeTouchID = kLABiometryTypeTouchID (1 << 0),
//     LABiometryTypeFaceID = kLABiometryTypeFaceID (1 << 1),
//     LABiometryTypeOpticID API_AVAILABLE(ios(17.0), macos(14.0), visionos(1.0)) = kLABiometryTypeOpticID (1 << 2),
// } API_AVAILABLE(macos(10.13.2), ios(11.0));
@available(iOS 11.0, macOS 10.13.2, *)
public enum LABiometryType: Int, @unchecked Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    @available(iOS 17.0, macOS 14.0, visionOS 1.0, *)
    case opticID = 4
}

/// implied: Foundation's `NSErrorPointer` (`AutoreleasingUnsafeMutablePointer<NSError?>?` on Apple platforms), which
/// canEvaluatePolicy(_:error:) takes and Foundation here lacks. `&error` passes an `NSError?` variable to either.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

// API_AVAILABLE(macos(10.10), ios(8.0), watchos(3.0), tvos(10.0))
// @interface LAContext : NSObject
@available(iOS 8.0, macOS 10.10, tvOS 10.0, watchOS 3.0, *)
open class LAContext: NSObject {
    // - (BOOL)canEvaluatePolicy:(LAPolicy)policy error:(NSError * __autoreleasing *)error
    //     __attribute__((swift_error(none)));
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool { _stub() }

    // - (void)evaluatePolicy:(LAPolicy)policy localizedReason:(NSString *)localizedReason
    //     reply:(void(^)(BOOL success, NSError * __nullable error))reply;
    // Swift imports it twice: with `reply:`, and as this async throwing method (SE-0297), the form adapters use.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool { _stub() }

    // @property (nonatomic, readonly) LABiometryType biometryType API_AVAILABLE(macos(10.13.2), ios(11.0));
    @available(iOS 11.0, macOS 10.13.2, *)
    open var biometryType: LABiometryType { _stub() }
}

/// Bodies are never run: these modules exist to be type-checked against.
func _stub() -> Never { fatalError("an Apple SDK stub: for type-checking only") }
