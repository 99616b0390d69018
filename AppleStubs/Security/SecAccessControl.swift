// Security/SecBase.h and Security/SecAccessControl.h.
import Foundation

/// implied: what SecAccessControlCreateWithFlags returns.
// SecBase.h: typedef struct CF_BRIDGED_TYPE(id) __SecAccessControl *SecAccessControlRef;
public final class SecAccessControl {}

// typedef CF_OPTIONS(CFOptionFlags, SecAccessControlCreateFlags) {
//     kSecAccessControlUserPresence = 1u << 0,
//     kSecAccessControlBiometryAny API_AVAILABLE(macos(10.13.4), ios(11.3)) = 1u << 1,
//     kSecAccessControlBiometryCurrentSet API_AVAILABLE(macos(10.13.4), ios(11.3)) = 1u << 3,
//     kSecAccessControlDevicePasscode API_AVAILABLE(macos(10.11), ios(9.0)) = 1u << 4,
//     … } API_AVAILABLE(macos(10.10), ios(8.0));
// CFOptionFlags is `unsigned long`: UInt. Only the options an adapter uses are declared.
/// implied: the type of SecAccessControlCreateWithFlags's flags, which an adapter passes as `.biometryCurrentSet`.
public struct SecAccessControlCreateFlags: OptionSet, @unchecked Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    @available(iOS 11.3, macOS 10.13.4, *)
    public static var biometryCurrentSet: SecAccessControlCreateFlags { SecAccessControlCreateFlags(rawValue: 1 << 3) }
}

// __nullable SecAccessControlRef SecAccessControlCreateWithFlags(CFAllocatorRef __nullable allocator,
//     CFTypeRef protection, SecAccessControlCreateFlags flags, CFErrorRef *error)
//     API_AVAILABLE(macos(10.10), ios(8.0));
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? { _stub() }
