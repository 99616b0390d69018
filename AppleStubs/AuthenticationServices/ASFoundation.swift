// AuthenticationServices/ASFoundation.h, as Swift imports it.
//   #if TARGET_OS_OSX  typedef NSWindow * ASPresentationAnchor;
//   #else              typedef UIWindow * ASPresentationAnchor;
// AuthenticationServices re-exports UIKit (AppKit on macOS); only the window class the anchor names is declared,
// main-actor isolated as UIKit's and AppKit's views are (NS_SWIFT_UI_ACTOR).
import Foundation

#if STUB_OS_macOS
    /// implied: the class ASPresentationAnchor names on macOS (AppKit's `NSWindow : NSResponder`).
    @MainActor open class NSWindow: NSObject {}
    public typealias ASPresentationAnchor = NSWindow
#else
    /// implied: the class ASPresentationAnchor names on iOS and visionOS (UIKit's `UIWindow : UIView`).
    @MainActor open class UIWindow: NSObject {}
    public typealias ASPresentationAnchor = UIWindow
#endif

/// Bodies are never run: these modules exist to be type-checked against.
func _stub() -> Never { fatalError("an Apple SDK stub: for type-checking only") }
