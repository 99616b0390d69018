// AuthenticationServices/ASAuthorization.h, ASAuthorizationCredential.h, ASAuthorizationRequest.h.
import Foundation

// @protocol ASAuthorizationCredential <NSObject, NSCopying, NSSecureCoding>
// (NSCopying and NSSecureCoding are left out: no adapter copies or archives a credential.)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol ASAuthorizationCredential: NSObjectProtocol {}

// @interface ASAuthorization : NSObject
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorization: NSObject {
    // @property (nonatomic, readonly, strong) id <ASAuthorizationCredential> credential;
    open var credential: any ASAuthorizationCredential { _stub() }
    // + (instancetype)new NS_UNAVAILABLE; - (instancetype)init NS_UNAVAILABLE;
    @available(*, unavailable)
    public override init() { _stub() }
}

// @interface ASAuthorizationRequest : NSObject <NSCopying, NSSecureCoding>
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationRequest: NSObject {
    // + (instancetype)new NS_UNAVAILABLE; - (instancetype)init NS_UNAVAILABLE;
    @available(*, unavailable)
    public override init() { _stub() }
}
