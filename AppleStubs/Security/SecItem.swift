// Security/SecItem.h (CF_ASSUME_NONNULL_BEGIN, CF_IMPLICIT_BRIDGING_ENABLED). Its constants are
// `extern const CFStringRef kSec…`, which Swift imports as `let kSec…: CFString`; their string values are not in the
// header, so each stub's value is its own name. Only the constants an adapter uses are declared.
import Foundation

// OSStatus SecItemCopyMatching(CFDictionaryRef query, CFTypeRef * __nullable CF_RETURNS_RETAINED result)
//     API_AVAILABLE(macos(10.6), ios(2.0));
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    _stub()
}
// OSStatus SecItemAdd(CFDictionaryRef attributes, CFTypeRef * __nullable CF_RETURNS_RETAINED result)
//     API_AVAILABLE(macos(10.6), ios(2.0));
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    _stub()
}
// OSStatus SecItemUpdate(CFDictionaryRef query, CFDictionaryRef attributesToUpdate)
//     API_AVAILABLE(macos(10.6), ios(2.0));
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { _stub() }
// OSStatus SecItemDelete(CFDictionaryRef query) API_AVAILABLE(macos(10.6), ios(2.0));
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { _stub() }

// Class key and value.
nonisolated(unsafe) public let kSecClass: CFString = "kSecClass"
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "kSecClassGenericPassword"

// Attribute keys.
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "kSecAttrAccessible"
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "kSecAttrAccessControl"
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "kSecAttrAccessGroup"
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "kSecAttrSynchronizable"
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = "kSecAttrSynchronizableAny"
nonisolated(unsafe) public let kSecAttrAccount: CFString = "kSecAttrAccount"
nonisolated(unsafe) public let kSecAttrService: CFString = "kSecAttrService"

// kSecAttrAccessible values.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "kSecAttrAccessibleWhenUnlocked"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "kSecAttrAccessibleAfterFirstUnlock"
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString =
    "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly"
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString =
    "kSecAttrAccessibleWhenUnlockedThisDeviceOnly"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString =
    "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"

// Search and return keys and values.
nonisolated(unsafe) public let kSecMatchLimit: CFString = "kSecMatchLimit"
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "kSecMatchLimitOne"
nonisolated(unsafe) public let kSecReturnData: CFString = "kSecReturnData"
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "kSecReturnAttributes"
nonisolated(unsafe) public let kSecValueData: CFString = "kSecValueData"

// extern const CFStringRef kSecUseDataProtectionKeychain API_AVAILABLE(macos(10.15), ios(13.0));
@available(iOS 13.0, macOS 10.15, *)
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "kSecUseDataProtectionKeychain"
