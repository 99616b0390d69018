// LocalAuthentication/LAError.h with LAPublicDefines.h's values. The header declares `NS_ENUM(NSInteger, LAError)`;
// Swift imports it as an error struct wrapping the NSError (domain LAErrorDomain) with a nested `Code` enum, the shape
// of every imported error enum. Deprecated names sharing a value (touchIDNotAvailable -6, touchIDNotEnrolled -7,
// touchIDLockout -8, watchNotAvailable -11) are static aliases in Swift and left out.
import Foundation

@available(iOS 8.0, macOS 10.10, tvOS 10.0, watchOS 3.0, *)
public struct LAError: _BridgedStoredNSError {
    public let _nsError: NSError
    public init(_nsError: NSError) { self._nsError = _nsError }
    // extern NSString *const __nonnull LAErrorDomain; (#define kLAErrorDomain "com.apple.LocalAuthentication")
    public static var _nsErrorDomain: String { "com.apple.LocalAuthentication" }

    /// implied: the nested enum every imported error type has; `error.code` is one.
    public enum Code: Int, _ErrorCodeProtocol, @unchecked Sendable {
        public typealias _ErrorType = LAError
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        @available(iOS 11.0, macOS 10.13, watchOS 4.0, tvOS 11.0, *)
        case biometryNotAvailable = -6
        @available(iOS 11.0, macOS 10.13, watchOS 4.0, tvOS 11.0, *)
        case biometryNotEnrolled = -7
        @available(iOS 11.0, macOS 10.13, watchOS 4.0, tvOS 11.0, *)
        case biometryLockout = -8
        @available(iOS 9.0, macOS 10.11, *)
        case appCancel = -9
        @available(iOS 9.0, macOS 10.11, *)
        case invalidContext = -10
        // kLAErrorCompanionNotAvailable is kLAErrorWatchNotAvailable: -11.
        case companionNotAvailable = -11
        @available(macOS 11.2, *)
        @available(iOS, unavailable)
        @available(watchOS, unavailable)
        @available(tvOS, unavailable)
        case biometryNotPaired = -12
        @available(macOS 11.2, *)
        @available(iOS, unavailable)
        @available(watchOS, unavailable)
        @available(tvOS, unavailable)
        case biometryDisconnected = -13
        @available(macOS 12.0, *)
        @available(iOS, unavailable)
        @available(watchOS, unavailable)
        @available(tvOS, unavailable)
        case invalidDimensions = -14
        @available(iOS 8.0, macOS 10.10, watchOS 3.0, tvOS 10.0, *)
        case notInteractive = -1004
    }
}
