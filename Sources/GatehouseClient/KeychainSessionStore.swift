import Foundation

/// The session in the Keychain: a generic-password item that is `ThisDeviceOnly` and never synchronizable (no iCloud
/// Keychain, no backups restored elsewhere), optionally sealed with a Secure Enclave key. A keychain that cannot be
/// read yet answers `GatehouseError.sessionLocked`: the session is there, and it is never a sign-out. Other failures
/// are `KeychainStoreError`s. An item written by an older version with a weaker protection, or synchronizable, is
/// moved into the protection asked for on the first load.
public struct KeychainSessionStore: SessionStore {
    /// When the item can be read; every choice keeps it on this device.
    public enum Accessibility: Sendable, Hashable {
        /// Only while the device is unlocked (the default, `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`). A refresh
        /// while the device is locked cannot be saved until it is unlocked.
        case whenUnlocked
        /// From the device's first unlock after a restart on (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`):
        /// for apps that refresh the session in the background or from a prewarmed launch.
        case afterFirstUnlock
        /// Only after Face ID or Touch ID, with the biometrics enrolled when it was saved, and only while a passcode
        /// is set (`kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly` with `.biometryCurrentSet`).
        case biometryCurrentSet

        var keychain: KeychainAccessibility {
            switch self {
            case .whenUnlocked: .whenUnlockedThisDeviceOnly
            case .afterFirstUnlock: .afterFirstUnlockThisDeviceOnly
            case .biometryCurrentSet: .whenPasscodeSetThisDeviceOnly
            }
        }
    }

    /// The item's service (the app's bundle id, say).
    public let service: String
    /// The item's account.
    public let account: String
    /// When it can be read.
    public let accessibility: Accessibility
    /// A keychain access group shared with the app's extensions, if any.
    public let accessGroup: String?
    /// Seals the session before it is stored, if given.
    public let sealer: (any SessionSealer)?
    private let items: any KeychainItems

    /// A store of the item `service`/`account` in `items` (tests hand in a fake; apps use the initializer without
    /// `items`, which is the Keychain).
    public init(
        service: String, account: String = "gatehouse.session", accessibility: Accessibility = .whenUnlocked,
        accessGroup: String? = nil, sealer: (any SessionSealer)? = nil, items: any KeychainItems
    ) {
        self.service = service
        self.account = account
        self.accessibility = accessibility
        self.accessGroup = accessGroup
        self.sealer = sealer
        self.items = items
    }

    /// The stored session, nil when there is none. `sessionLocked` while the keychain cannot be read; a damaged item
    /// is removed and reported.
    public func load() throws -> AuthSession? {
        guard let item = try find() else { return nil }
        let (session, sealed) = try read(item)
        if item.synchronizable || item.accessibility != accessibility.keychain || (sealer != nil && !sealed) {
            migrate(session, from: item)
        }
        return session
    }

    /// Stores the session: adds the item, or updates the one there.
    public func save(_ session: AuthSession) throws {
        try write(session)
    }

    /// Deletes the item, a synchronizable one left by an older version too; none there is fine.
    public func remove() throws {
        let status = items.delete(matching: query(synchronizable: nil))
        guard status == .success || status == .itemNotFound else { throw failure(.remove, status) }
    }

    /// The item `account.name` of the same service, with the same settings.
    public func companion(named name: String) -> any SessionStore {
        KeychainSessionStore(
            service: service, account: "\(account).\(name)", accessibility: accessibility, accessGroup: accessGroup,
            sealer: sealer, items: items)
    }

    private func query(synchronizable: Bool?) -> KeychainQuery {
        KeychainQuery(service: service, account: account, accessGroup: accessGroup, synchronizable: synchronizable)
    }

    /// The local item, else a synchronizable one from an older version.
    private func find() throws -> KeychainItem? {
        for synchronizable in [false, true] {
            var found: KeychainItem?
            let status = items.copy(matching: query(synchronizable: synchronizable), result: &found)
            switch status {
            case .success:
                return found
                    ?? KeychainItem(
                        service: service, account: account, accessGroup: accessGroup, data: Data(),
                        accessibility: nil, synchronizable: synchronizable)
            case .itemNotFound: continue
            default: throw failure(.read, status)
            }
        }
        return nil
    }

    /// The session in `item`, and whether it was sealed. An item that is not one is removed, never left to fail
    /// every launch.
    private func read(_ item: KeychainItem) throws -> (AuthSession, sealed: Bool) {
        if let session = try? JSONDecoder().decode(AuthSession.self, from: item.data) { return (session, false) }
        guard let sealer, let opened = try? sealer.open(item.data) else {
            let removed = discard(item)
            throw sealer == nil ? KeychainStoreError.invalidData(removed: removed) : .cannotUnseal(removed: removed)
        }
        guard let session = try? JSONDecoder().decode(AuthSession.self, from: opened) else {
            throw KeychainStoreError.invalidData(removed: discard(item))
        }
        return (session, true)
    }

    private func discard(_ item: KeychainItem) -> Bool {
        let status = items.delete(matching: query(synchronizable: item.synchronizable))
        return status == .success || status == .itemNotFound
    }

    /// Adds the item; when it is there already, updates it, or for a biometry-bound one deletes and adds it again
    /// (deleting asks for no Face ID; an update may).
    private func write(_ session: AuthSession) throws {
        var data = try JSONEncoder().encode(session)
        if let sealer {
            do { data = try sealer.seal(data) } catch { throw KeychainStoreError.cannotSeal }
        }
        let biometric = accessibility == .biometryCurrentSet
        let item = KeychainItem(
            service: service, account: account, accessGroup: accessGroup, data: data,
            accessibility: accessibility.keychain, synchronizable: false, biometryCurrentSet: biometric)
        var status = items.add(item)
        if status == .duplicateItem {
            let local = query(synchronizable: false)
            if biometric {
                let deleted = items.delete(matching: local)
                status = deleted == .success || deleted == .itemNotFound ? items.add(item) : deleted
            } else {
                status = items.update(matching: local, to: item)
            }
        }
        guard status == .success else { throw failure(.save, status) }
    }

    /// Saves `session` as asked and deletes the synchronizable original. Best effort: when the write fails, the old
    /// item is put back if it went, and the next load tries again.
    private func migrate(_ session: AuthSession, from old: KeychainItem) {
        do {
            try write(session)
            if old.synchronizable { _ = items.delete(matching: query(synchronizable: true)) }
        } catch {
            _ = items.add(old)
        }
    }

    private func failure(_ operation: KeychainStoreError.Operation, _ status: KeychainStatus) -> any Error {
        switch status {
        case .interactionNotAllowed: GatehouseError.sessionLocked
        case .userCanceled: KeychainStoreError.biometryCancelled
        case .authFailed where accessibility == .biometryCurrentSet: KeychainStoreError.biometryFailed
        case .missingEntitlement: KeychainStoreError.missingEntitlement
        default: KeychainStoreError.unexpected(operation, status)
        }
    }
}

#if canImport(Security)
    extension KeychainSessionStore {
        /// A store of the item `service`/`account` in the Keychain.
        public init(
            service: String, account: String = "gatehouse.session", accessibility: Accessibility = .whenUnlocked,
            accessGroup: String? = nil, sealer: (any SessionSealer)? = nil
        ) {
            self.init(
                service: service, account: account, accessibility: accessibility, accessGroup: accessGroup,
                sealer: sealer, items: SecurityKeychainItems())
        }
    }
#endif
