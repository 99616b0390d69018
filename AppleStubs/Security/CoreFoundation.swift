// The CoreFoundation types the Security adapters use, which `import Security` brings with it on Apple platforms
// (Security's headers import CoreFoundation/CFBase.h). Foundation here has no CoreFoundation types and no
// toll-free bridging, so the bridged ones are the Foundation classes they bridge to: `dictionary as CFDictionary` and
// `string as String` then compile as they do on Apple, and a CFString still cannot stand for a String unconverted.
import Foundation

// CFBase.h: typedef const CF_BRIDGED_TYPE(id) void * CFTypeRef;  (Swift: AnyObject)
public typealias CFTypeRef = AnyObject
// CFBase.h: typedef const struct CF_BRIDGED_TYPE(NSString) __CFString * CFStringRef;
public typealias CFString = NSString
// CFDictionary.h: typedef const struct CF_BRIDGED_TYPE(NSDictionary) __CFDictionary * CFDictionaryRef;
public typealias CFDictionary = NSDictionary
/// implied: the error out-parameter of SecAccessControlCreateWithFlags (`Unmanaged<CFError>`).
// CFError.h: typedef struct CF_BRIDGED_TYPE(NSError) __CFError * CFErrorRef;
public typealias CFError = NSError
/// implied: the allocator parameter of SecAccessControlCreateWithFlags.
// CFBase.h: typedef const struct CF_BRIDGED_TYPE(id) __CFAllocator * CFAllocatorRef;
public final class CFAllocator {}

/// implied: what the SecItem functions return.
// MacTypes.h: typedef SInt32 OSStatus;
public typealias OSStatus = Int32

/// Bodies are never run: these modules exist to be type-checked against.
func _stub() -> Never { fatalError("an Apple SDK stub: for type-checking only") }
