// The platform (passkey) provider, its requests and its credentials:
// ASAuthorizationPlatformPublicKeyCredentialProvider.h, …RegistrationRequest.h, …AssertionRequest.h,
// …Descriptor.h, …Registration.h, …Assertion.h, ASAuthorizationPublicKeyCredentialConstants.h, ASPublicKeyCredential.h,
// ASAuthorizationPublicKeyCredentialRegistrationRequest.h, ASAuthorizationPublicKeyCredentialAssertionRequest.h,
// ASAuthorizationPublicKeyCredentialAssertion.h, ASAuthorizationPublicKeyCredentialRegistration.h and
// ASAuthorizationWebBrowserPlatformPublicKeyCredentialRegistrationRequest.h.
// A property a class gets from one of those protocols is declared on the class itself, with the protocol named.
import Foundation

// typedef NSString *ASAuthorizationPublicKeyCredentialUserVerificationPreference NS_TYPED_EXTENSIBLE_ENUM;
// (The constants' string values are not in the header; the WebAuthn words stand in for them. `discouraged` is left out:
// no adapter uses it.)
/// implied: the type of `userVerificationPreference`, which an adapter sets to `.required` or `.preferred`.
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
public struct ASAuthorizationPublicKeyCredentialUserVerificationPreference: Hashable, RawRepresentable, Sendable {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let preferred = Self("preferred")
    public static let required = Self("required")
}

// typedef NS_ENUM(NSInteger, ASAuthorizationPublicKeyCredentialAttachment) {
//     ASAuthorizationPublicKeyCredentialAttachmentPlatform, ASAuthorizationPublicKeyCredentialAttachmentCrossPlatform,
// };
/// implied: the type of a credential's `attachment`, which an adapter compares with `.crossPlatform`.
public enum ASAuthorizationPublicKeyCredentialAttachment: Int, @unchecked Sendable {
    case platform = 0
    case crossPlatform = 1
}

// @interface ASAuthorizationPlatformPublicKeyCredentialDescriptor : NSObject
//     <ASAuthorizationPublicKeyCredentialDescriptor>
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialDescriptor: NSObject {
    // - (instancetype)initWithCredentialID:(NSData *)credentialID NS_DESIGNATED_INITIALIZER;
    public init(credentialID: Data) { _stub() }
    @available(*, unavailable)
    public override init() { _stub() }
}

// @interface ASAuthorizationPlatformPublicKeyCredentialProvider : NSObject <ASAuthorizationProvider>
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialProvider: NSObject {
    // - (instancetype)initWithRelyingPartyIdentifier:(NSString *)relyingPartyIdentifier NS_DESIGNATED_INITIALIZER;
    public init(relyingPartyIdentifier: String) { _stub() }
    @available(*, unavailable)
    public override init() { _stub() }
    // - (ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest *)
    //     createCredentialRegistrationRequestWithChallenge:(NSData *)challenge name:(NSString *)name
    //     userID:(NSData *)userID
    //     NS_SWIFT_NAME(createCredentialRegistrationRequest(challenge:name:userID:));
    open func createCredentialRegistrationRequest(challenge: Data, name: String, userID: Data)
        -> ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest
    { _stub() }
    // - (ASAuthorizationPlatformPublicKeyCredentialAssertionRequest *)createCredentialAssertionRequestWithChallenge:
    //     (NSData *)challenge NS_SWIFT_NAME(createCredentialAssertionRequest(challenge:));
    open func createCredentialAssertionRequest(challenge: Data)
        -> ASAuthorizationPlatformPublicKeyCredentialAssertionRequest
    { _stub() }
}

// @interface ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest : ASAuthorizationRequest
//     <ASAuthorizationPublicKeyCredentialRegistrationRequest>
/// implied: what `createCredentialRegistrationRequest(challenge:name:userID:)` returns.
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest: ASAuthorizationRequest {
    // ASAuthorizationPublicKeyCredentialRegistrationRequest:
    //   @property (nonatomic, nullable, copy) NSString *displayName;
    open var displayName: String? {
        get { _stub() }
        set { _stub() }
    }
    // ASAuthorizationPublicKeyCredentialRegistrationRequest:
    //   @property (nonatomic) ASAuthorizationPublicKeyCredentialUserVerificationPreference userVerificationPreference;
    open var userVerificationPreference: ASAuthorizationPublicKeyCredentialUserVerificationPreference {
        get { _stub() }
        set { _stub() }
    }
    // ASAuthorizationWebBrowserPlatformPublicKeyCredentialRegistrationRequest (which this class adopts):
    //   @property (nonatomic, nullable, copy) NSArray<ASAuthorizationPlatformPublicKeyCredentialDescriptor *>
    //       *excludedCredentials;
    // Apple's documentation: `var excludedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor]?
    // { get set }`, iOS 17.4+, Mac Catalyst 16.6+, macOS 13.5+, and no visionOS or tvOS.
    @available(iOS 17.4, macOS 13.5, *)
    @available(tvOS, unavailable)
    @available(watchOS, unavailable)
    @available(visionOS, unavailable)
    open var excludedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor]? {
        get { _stub() }
        set { _stub() }
    }
}

// @interface ASAuthorizationPlatformPublicKeyCredentialAssertionRequest : ASAuthorizationRequest
//     <ASAuthorizationPublicKeyCredentialAssertionRequest>
/// implied: what `createCredentialAssertionRequest(challenge:)` returns.
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialAssertionRequest: ASAuthorizationRequest {
    // @property (nonatomic, copy) NSArray<ASAuthorizationPlatformPublicKeyCredentialDescriptor *> *allowedCredentials;
    open var allowedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor] {
        get { _stub() }
        set { _stub() }
    }
    // ASAuthorizationPublicKeyCredentialAssertionRequest:
    //   @property (nonatomic, copy) ASAuthorizationPublicKeyCredentialUserVerificationPreference
    //       userVerificationPreference;
    open var userVerificationPreference: ASAuthorizationPublicKeyCredentialUserVerificationPreference {
        get { _stub() }
        set { _stub() }
    }
}

// @interface ASAuthorizationPlatformPublicKeyCredentialRegistration : NSObject
//     <ASAuthorizationPublicKeyCredentialRegistration>
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialRegistration: NSObject, ASAuthorizationCredential {
    // ASPublicKeyCredential: @property (nonatomic, readonly, copy) NSData *rawClientDataJSON;
    open var rawClientDataJSON: Data { _stub() }
    // ASPublicKeyCredential: @property (nonatomic, readonly, copy) NSData *credentialID;
    open var credentialID: Data { _stub() }
    // ASAuthorizationPublicKeyCredentialRegistration: @property (nonatomic, readonly, nullable, copy)
    //     NSData *rawAttestationObject;
    open var rawAttestationObject: Data? { _stub() }
    // @property (nonatomic, readonly) ASAuthorizationPublicKeyCredentialAttachment attachment;
    // (Apple's documentation: iOS 16.6+, macOS 13.5+, visionOS 1.0+.)
    @available(iOS 16.6, macOS 13.5, visionOS 1.0, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { _stub() }
    @available(*, unavailable)
    public override init() { _stub() }
}

// @interface ASAuthorizationPlatformPublicKeyCredentialAssertion : NSObject
//     <ASAuthorizationPublicKeyCredentialAssertion>
// Swift imports ASAuthorizationPublicKeyCredentialAssertion's three properties as implicitly unwrapped optionals:
// Apple's documentation declares `var rawAuthenticatorData: Data! { get }`, and `userID` and `signature` alike.
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
open class ASAuthorizationPlatformPublicKeyCredentialAssertion: NSObject, ASAuthorizationCredential {
    // ASPublicKeyCredential: @property (nonatomic, readonly, copy) NSData *rawClientDataJSON;
    open var rawClientDataJSON: Data { _stub() }
    // ASPublicKeyCredential: @property (nonatomic, readonly, copy) NSData *credentialID;
    open var credentialID: Data { _stub() }
    // @property (nonatomic, readonly, copy) NSData *rawAuthenticatorData;
    open var rawAuthenticatorData: Data! { _stub() }
    // @property (nonatomic, readonly, copy) NSData *userID;
    open var userID: Data! { _stub() }
    // @property (nonatomic, readonly, copy) NSData *signature;
    open var signature: Data! { _stub() }
    // @property (nonatomic, readonly) ASAuthorizationPublicKeyCredentialAttachment attachment;
    // (Apple's documentation: iOS 16.6+, macOS 13.5+, visionOS 1.0+.)
    @available(iOS 16.6, macOS 13.5, visionOS 1.0, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { _stub() }
    @available(*, unavailable)
    public override init() { _stub() }
}
