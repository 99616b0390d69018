// Sign in with Apple: ASAuthorization.h (the scopes), ASAuthorizationOpenIDRequest.h, ASAuthorizationAppleIDProvider.h,
// ASAuthorizationAppleIDRequest.h and ASAuthorizationAppleIDCredential.h. What no adapter uses (the request's `state`
// and `requestedOperation`, the credential's `user`, `email` and `realUserStatus`, the provider's credential state) is
// left out.
import Foundation

// typedef NSString * ASAuthorizationScope NS_TYPED_ENUM NS_SWIFT_NAME(ASAuthorization.Scope);
// AS_EXTERN ASAuthorizationScope const ASAuthorizationScopeFullName;
// AS_EXTERN ASAuthorizationScope const ASAuthorizationScopeEmail;
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension ASAuthorization {
    /// implied: the type of `requestedScopes`, which an adapter sets to `[.fullName, .email]`.
    public struct Scope: Hashable, RawRepresentable, @unchecked Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let fullName = Scope(rawValue: "full_name")
        public static let email = Scope(rawValue: "email")
    }
}

// @interface ASAuthorizationOpenIDRequest : ASAuthorizationRequest
/// implied: the superclass of `ASAuthorizationAppleIDRequest`, whose properties an adapter sets.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationOpenIDRequest: ASAuthorizationRequest {
    // @property (nonatomic, copy, nullable) NSArray<ASAuthorizationScope> *requestedScopes;
    open var requestedScopes: [ASAuthorization.Scope]? {
        get { _stub() }
        set { _stub() }
    }
    // @property (nonatomic, copy, nullable) NSString *nonce;
    open var nonce: String? {
        get { _stub() }
        set { _stub() }
    }
}

// @interface ASAuthorizationAppleIDRequest : ASAuthorizationOpenIDRequest
/// implied: what `createRequest()` returns.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDRequest: ASAuthorizationOpenIDRequest {}

// @interface ASAuthorizationAppleIDProvider : NSObject <ASAuthorizationProvider>
// (Its `init` is NSObject's, inherited.)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDProvider: NSObject {
    // - (ASAuthorizationAppleIDRequest *)createRequest;
    open func createRequest() -> ASAuthorizationAppleIDRequest { _stub() }
}

// @interface ASAuthorizationAppleIDCredential : NSObject <ASAuthorizationCredential>
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDCredential: NSObject, ASAuthorizationCredential {
    // @property (nonatomic, readonly, copy, nullable) NSData *authorizationCode;
    open var authorizationCode: Data? { _stub() }
    // @property (nonatomic, readonly, copy, nullable) NSData *identityToken;
    open var identityToken: Data? { _stub() }
    // @property (nonatomic, readonly, copy, nullable) NSPersonNameComponents *fullName;
    open var fullName: PersonNameComponents? { _stub() }
    // + (instancetype)new NS_UNAVAILABLE; - (instancetype)init NS_UNAVAILABLE;
    @available(*, unavailable)
    public override init() { _stub() }
}
