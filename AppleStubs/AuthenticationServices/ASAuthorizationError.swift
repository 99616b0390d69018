// AuthenticationServices/ASAuthorizationError.h: an NS_ERROR_ENUM, which Swift imports as a struct wrapping the
// NSError with a nested `Code` enum (the shape below is that of every imported error enum).
//   typedef NS_ERROR_ENUM(ASAuthorizationErrorDomain, ASAuthorizationError) {
//       ASAuthorizationErrorUnknown = 1000, Canceled = 1001, InvalidResponse = 1002, NotHandled = 1003, Failed = 1004,
//       NotInteractive API_AVAILABLE(ios(15.0), macos(12.0)) API_UNAVAILABLE(tvos, watchos) = 1005,
//       MatchedExcludedCredential AS_API_AVAILABLE(ios(18.0), macos(15.0), visionos(2.0)) = 1006,
//       CredentialImport AS_API_AVAILABLE(ios(18.2), macos(15.2), visionos(2.2)) = 1007,
//       CredentialExport AS_API_AVAILABLE(ios(18.2), macos(15.2), visionos(2.2)) = 1008,
//   } API_AVAILABLE(ios(13.0), macos(10.15), tvos(13.0), watchos(6.0));
// (Later SDKs add 1009 and 1010; the enum is open, so a switch over it needs `@unknown default` either way.)
import Foundation

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct ASAuthorizationError: _BridgedStoredNSError {
    public let _nsError: NSError
    public init(_nsError: NSError) { self._nsError = _nsError }
    // AS_EXTERN NSErrorDomain const ASAuthorizationErrorDomain;
    public static var _nsErrorDomain: String { "com.apple.AuthenticationServices.AuthorizationError" }

    /// implied: the nested enum every imported error type has; `error.code` is one.
    public enum Code: Int, _ErrorCodeProtocol, @unchecked Sendable {
        public typealias _ErrorType = ASAuthorizationError
        case unknown = 1000
        case canceled = 1001
        case invalidResponse = 1002
        case notHandled = 1003
        case failed = 1004
        @available(iOS 15.0, macOS 12.0, *)
        @available(tvOS, unavailable)
        @available(watchOS, unavailable)
        case notInteractive = 1005
        @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
        case matchedExcludedCredential = 1006
        @available(iOS 18.2, macOS 15.2, visionOS 2.2, *)
        case credentialImport = 1007
        @available(iOS 18.2, macOS 15.2, visionOS 2.2, *)
        case credentialExport = 1008
    }
}
