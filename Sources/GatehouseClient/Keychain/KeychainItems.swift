import Foundation

/// The four Keychain calls the session store makes, over generic-password items: `SecItemAdd`,
/// `SecItemCopyMatching`, `SecItemUpdate` and `SecItemDelete`, answering their status codes. `SecurityKeychainItems`
/// is the Keychain itself; tests hand the store a fake that answers the documented codes.
public protocol KeychainItems: Sendable {
    /// Adds `item`; `duplicateItem` when one with the same service, account, access group and synchronizable flag
    /// exists.
    func add(_ item: KeychainItem) -> KeychainStatus
    /// Finds one item matching `query` and puts it, with its data and attributes, in `result`.
    func copy(matching query: KeychainQuery, result: inout KeychainItem?) -> KeychainStatus
    /// Gives the items matching `query` the data and protection of `item`.
    func update(matching query: KeychainQuery, to item: KeychainItem) -> KeychainStatus
    /// Deletes every item matching `query`; `itemNotFound` when there was none.
    func delete(matching query: KeychainQuery) -> KeychainStatus
}

/// Which generic-password items a call is about.
public struct KeychainQuery: Sendable, Hashable {
    /// `kSecAttrService`.
    public var service: String
    /// `kSecAttrAccount`.
    public var account: String
    /// `kSecAttrAccessGroup`; nil for any group of the app's.
    public var accessGroup: String?
    /// `kSecAttrSynchronizable`: only synchronizable items, only local ones, or nil for either
    /// (`kSecAttrSynchronizableAny`).
    public var synchronizable: Bool?

    /// The items `service`/`account` of `accessGroup`, synchronizable or not as `synchronizable` says.
    public init(service: String, account: String, accessGroup: String? = nil, synchronizable: Bool?) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
    }
}

/// One generic-password item: where it is, its data, and how it is protected.
public struct KeychainItem: Sendable, Hashable {
    /// `kSecAttrService`.
    public var service: String
    /// `kSecAttrAccount`.
    public var account: String
    /// `kSecAttrAccessGroup`; nil for the app's default group.
    public var accessGroup: String?
    /// `kSecValueData`.
    public var data: Data
    /// `kSecAttrAccessible`; nil for a class the store does not write or recognise (`kSecAttrAccessibleAlways`).
    public var accessibility: KeychainAccessibility?
    /// `kSecAttrSynchronizable`: whether it travels through iCloud Keychain.
    public var synchronizable: Bool
    /// Written with a `SecAccessControl` of `accessibility` and `.biometryCurrentSet`: reading it asks for Face ID or
    /// Touch ID, with the biometrics enrolled when it was written. `copy` does not report it.
    public var biometryCurrentSet: Bool

    /// An item with these attributes.
    public init(
        service: String, account: String, accessGroup: String? = nil, data: Data,
        accessibility: KeychainAccessibility?, synchronizable: Bool, biometryCurrentSet: Bool = false
    ) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.data = data
        self.accessibility = accessibility
        self.synchronizable = synchronizable
        self.biometryCurrentSet = biometryCurrentSet
    }
}

/// When the system lets an item be read (`kSecAttrAccessible`). The session store writes only the `ThisDeviceOnly`
/// classes; the others are what it finds from older versions, and moves out of.
public enum KeychainAccessibility: Sendable, Hashable, CaseIterable {
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: while unlocked, only with a passcode set (removing the
    /// passcode deletes the item).
    case whenPasscodeSetThisDeviceOnly
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: while the device is unlocked.
    case whenUnlockedThisDeviceOnly
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: from the first unlock after a restart on, locked or not.
    case afterFirstUnlockThisDeviceOnly
    /// `kSecAttrAccessibleWhenUnlocked`: while unlocked, and restored to other devices from a backup.
    case whenUnlocked
    /// `kSecAttrAccessibleAfterFirstUnlock`: after the first unlock, and restored to other devices from a backup.
    case afterFirstUnlock

    /// Whether the item stays on this device (not in backups restored elsewhere).
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenPasscodeSetThisDeviceOnly, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly: true
        case .whenUnlocked, .afterFirstUnlock: false
        }
    }
}
