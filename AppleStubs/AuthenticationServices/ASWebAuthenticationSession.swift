// AuthenticationServices/ASWebAuthenticationSession.h and ASWebAuthenticationSessionError.h (Xcode 16 SDK). The
// presentation protocol is not NS_SWIFT_UI_ACTOR there: Swift imports its requirement nonisolated (a main-actor witness
// is refused, "cannot be used to satisfy nonisolated requirement"), so it is declared nonisolated here too. The
// completion handler is declared @Sendable, the stricter of the two ways an SDK may import it: a closure that type-checks
// here does against either. What no adapter uses (`canStart`, `additionalHeaderFields`, the iOS 17.4 `Callback`
// initializer) is left out.
import Foundation

// API_AVAILABLE(ios(13.0), macCatalyst(13.0), macos(10.15), watchos(6.2), tvos(16.0))
// @protocol ASWebAuthenticationPresentationContextProviding <NSObject>
// - (ASPresentationAnchor)presentationAnchorForWebAuthenticationSession:(ASWebAuthenticationSession *)session;
@available(iOS 13.0, macOS 10.15, watchOS 6.2, tvOS 16.0, *)
public protocol ASWebAuthenticationPresentationContextProviding: NSObjectProtocol {
    func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor
}

// API_AVAILABLE(ios(12.0), macCatalyst(13.0), macos(10.15), watchos(6.2), tvos(16.0))
// @interface ASWebAuthenticationSession : NSObject
@available(iOS 12.0, macOS 10.15, watchOS 6.2, tvOS 16.0, *)
open class ASWebAuthenticationSession: NSObject {
    // typedef void (^ASWebAuthenticationSessionCompletionHandler)(NSURL * _Nullable callbackURL,
    //     NSError * _Nullable error) NS_SWIFT_NAME(ASWebAuthenticationSession.CompletionHandler);
    // - (instancetype)initWithURL:(NSURL *)URL callbackURLScheme:(nullable NSString *)callbackURLScheme
    //     completionHandler:(ASWebAuthenticationSessionCompletionHandler)completionHandler;
    public init(
        url URL: URL, callbackURLScheme: String?,
        completionHandler: @escaping @Sendable (URL?, (any Error)?) -> Void
    ) { _stub() }
    // + (instancetype)new NS_UNAVAILABLE; - (instancetype)init NS_UNAVAILABLE;
    @available(*, unavailable)
    public override init() { _stub() }
    // @property (nonatomic, weak) id <ASWebAuthenticationPresentationContextProviding> presentationContextProvider
    //     API_AVAILABLE(ios(13.0), macCatalyst(13.0), macos(10.15));
    @available(iOS 13.0, macOS 10.15, *)
    weak open var presentationContextProvider: (any ASWebAuthenticationPresentationContextProviding)?
    // @property (nonatomic) BOOL prefersEphemeralWebBrowserSession API_AVAILABLE(ios(13.0), macos(10.15));
    @available(iOS 13.0, macOS 10.15, *)
    open var prefersEphemeralWebBrowserSession: Bool {
        get { _stub() }
        set { _stub() }
    }
    // - (BOOL)start;
    open func start() -> Bool { _stub() }
    // - (void)cancel;
    open func cancel() { _stub() }
}

// typedef NS_ERROR_ENUM(ASWebAuthenticationSessionErrorDomain, ASWebAuthenticationSessionErrorCode) {
//     ASWebAuthenticationSessionErrorCodeCanceledLogin = 1,
//     ASWebAuthenticationSessionErrorCodePresentationContextNotProvided API_AVAILABLE(ios(13.0), macos(10.15)) = 2,
//     ASWebAuthenticationSessionErrorCodePresentationContextInvalid API_AVAILABLE(ios(13.0), macos(10.15)) = 3,
// } API_AVAILABLE(ios(12.0), macCatalyst(13.0), macos(10.15), watchos(6.2), tvos(16.0));
// Swift names the wrapper after the enum less its `Code`, as it names ASAuthorizationError.
@available(iOS 12.0, macOS 10.15, watchOS 6.2, tvOS 16.0, *)
public struct ASWebAuthenticationSessionError: _BridgedStoredNSError {
    public let _nsError: NSError
    public init(_nsError: NSError) { self._nsError = _nsError }
    // AS_EXTERN NSErrorDomain const ASWebAuthenticationSessionErrorDomain;
    public static var _nsErrorDomain: String { "com.apple.AuthenticationServices.WebAuthenticationSession" }

    /// implied: the nested enum every imported error type has; `error.code` is one.
    public enum Code: Int, _ErrorCodeProtocol, @unchecked Sendable {
        public typealias _ErrorType = ASWebAuthenticationSessionError
        case canceledLogin = 1
        @available(iOS 13.0, macOS 10.15, *)
        case presentationContextNotProvided = 2
        @available(iOS 13.0, macOS 10.15, *)
        case presentationContextInvalid = 3
    }
}
