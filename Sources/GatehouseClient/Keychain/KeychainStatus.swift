/// A Keychain call's result code: Apple's `OSStatus`, with the `errSec…` values the session store tells apart named
/// here so its logic compiles, and is tested, where Security does not exist. Open: any other code arrives as it is.
public struct KeychainStatus: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The `OSStatus` value.
    public let rawValue: Int32

    /// The status whose `OSStatus` value is `rawValue`.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `errSecSuccess`: the call did what it was asked.
    public static let success = KeychainStatus(rawValue: 0)
    /// `errSecUnimplemented`: this platform has no such function.
    public static let unimplemented = KeychainStatus(rawValue: -4)
    /// `errSecParam`: a query or attribute the Keychain does not accept.
    public static let param = KeychainStatus(rawValue: -50)
    /// `errSecAllocate`: out of memory.
    public static let allocate = KeychainStatus(rawValue: -108)
    /// `errSecUserCanceled`: the user cancelled the Face ID, Touch ID or passcode prompt an item asked for.
    public static let userCanceled = KeychainStatus(rawValue: -128)
    /// `errSecNotAvailable`: there is no keychain.
    public static let notAvailable = KeychainStatus(rawValue: -25291)
    /// `errSecAuthFailed`: the user was not recognised (or biometry is locked out) for an item that asks.
    public static let authFailed = KeychainStatus(rawValue: -25293)
    /// `errSecDuplicateItem`: an item with the same service, account, access group and synchronizable flag exists.
    public static let duplicateItem = KeychainStatus(rawValue: -25299)
    /// `errSecItemNotFound`: no item matches.
    public static let itemNotFound = KeychainStatus(rawValue: -25300)
    /// `errSecInteractionNotAllowed`: the item's protection class is not available now (the device is locked, or not
    /// yet unlocked since it started), or it needs a prompt that cannot be shown (the app is in the background).
    public static let interactionNotAllowed = KeychainStatus(rawValue: -25308)
    /// `errSecDecode`: the item's data could not be decoded.
    public static let decode = KeychainStatus(rawValue: -26275)
    /// `errSecMissingEntitlement`: the app lacks the entitlement the call needs (`keychain-access-groups`, or it is
    /// not signed).
    public static let missingEntitlement = KeychainStatus(rawValue: -34018)

    /// The `errSec…` name where the store knows it, and the number.
    public var description: String {
        let names: [Int32: String] = [
            0: "errSecSuccess", -4: "errSecUnimplemented", -50: "errSecParam", -108: "errSecAllocate",
            -128: "errSecUserCanceled", -25291: "errSecNotAvailable", -25293: "errSecAuthFailed",
            -25299: "errSecDuplicateItem", -25300: "errSecItemNotFound", -25308: "errSecInteractionNotAllowed",
            -26275: "errSecDecode", -34018: "errSecMissingEntitlement",
        ]
        return names[rawValue].map { "\($0) (\(rawValue))" } ?? "OSStatus \(rawValue)"
    }
}
