// AuthenticationServices/ASAuthorizationController.h (Xcode 16 SDK, NS_HEADER_AUDIT_BEGIN(nullability, sendability)).
// Both protocols are NS_SWIFT_UI_ACTOR, so Swift imports them @MainActor (and, being imported from a header,
// @preconcurrency). The delegate's two methods are @optional in the header; here they are requirements, so a
// misspelt delegate method is an error instead of a silent no-op (Swift only warns of a near miss on Apple).
import Foundation

// NS_SWIFT_UI_ACTOR
// @protocol ASAuthorizationControllerDelegate <NSObject>
// @optional
// - (void)authorizationController:(ASAuthorizationController *)controller
//       didCompleteWithAuthorization:(ASAuthorization *)authorization
//       NS_SWIFT_NAME(authorizationController(controller:didCompleteWithAuthorization:));
// - (void)authorizationController:(ASAuthorizationController *)controller didCompleteWithError:(NSError *)error
//       NS_SWIFT_NAME(authorizationController(controller:didCompleteWithError:));
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@preconcurrency @MainActor
public protocol ASAuthorizationControllerDelegate: NSObjectProtocol {
    func authorizationController(
        controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
    func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error)
}

// NS_SWIFT_UI_ACTOR
// @protocol ASAuthorizationControllerPresentationContextProviding <NSObject>
// @required
// - (ASPresentationAnchor)presentationAnchorForAuthorizationController:(ASAuthorizationController *)controller;
@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
@available(watchOS, unavailable)
@preconcurrency @MainActor
public protocol ASAuthorizationControllerPresentationContextProviding: NSObjectProtocol {
    func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor
}

// @interface ASAuthorizationController : NSObject
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationController: NSObject {
    // @property (nonatomic, weak, nullable) id <ASAuthorizationControllerDelegate> delegate;
    weak open var delegate: (any ASAuthorizationControllerDelegate)?
    // @property (nonatomic, weak, nullable) id <ASAuthorizationControllerPresentationContextProviding>
    //     presentationContextProvider API_UNAVAILABLE(watchos);
    @available(watchOS, unavailable)
    weak open var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
    // - (instancetype)initWithAuthorizationRequests:(NSArray<ASAuthorizationRequest *> *)authorizationRequests
    //     NS_DESIGNATED_INITIALIZER;
    public init(authorizationRequests: [ASAuthorizationRequest]) { _stub() }
    // - (instancetype)init NS_UNAVAILABLE;
    @available(*, unavailable)
    public override init() { _stub() }
    // - (void)performRequests;
    open func performRequests() { _stub() }
    // - (void)cancel API_AVAILABLE(macos(13.0), ios(16.0), tvos(18.0)) API_UNAVAILABLE(watchos);
    @available(iOS 16.0, macOS 13.0, tvOS 18.0, *)
    @available(watchOS, unavailable)
    open func cancel() { _stub() }
}
