#if canImport(Security)
    import Foundation
    import Security

    /// The session in the Keychain: a generic-password item that is `ThisDeviceOnly` and never
    /// synchronizable (no iCloud Keychain, no backups). By default it is readable after the first unlock, so
    /// prewarmed and background launches can refresh. A keychain still locked answers `sessionLocked`: the session is
    /// there but unreadable until the device is unlocked, which is never a sign-out.
    public struct KeychainSessionStore: SessionStore {
        /// When the item can be read.
        public enum Accessibility: Sendable {
            /// After the device's first unlock since boot (the default: background refreshes work).
            case afterFirstUnlock
            /// Only while the device is unlocked.
            case whenUnlocked
            /// Only after Face ID or Touch ID, and only with the biometrics enrolled when it was saved (a passcode
            /// must be set).
            case biometryCurrentSet
        }

        /// The item's service (the app's bundle id, say).
        public let service: String
        /// The item's account.
        public let account: String
        /// When it can be read.
        public let accessibility: Accessibility
        /// A keychain access group shared with the app's extensions, if any.
        public let accessGroup: String?

        /// A store of the item `service`/`account`.
        public init(
            service: String, account: String = "gatehouse.session", accessibility: Accessibility = .afterFirstUnlock,
            accessGroup: String? = nil
        ) {
            self.service = service
            self.account = account
            self.accessibility = accessibility
            self.accessGroup = accessGroup
        }

        private var query: [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
                kSecAttrSynchronizable as String: kCFBooleanFalse as Any,
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return query
        }

        /// The stored session, nil when there is none; `sessionLocked` while the keychain cannot be read yet.
        public func load() throws -> Session? {
            var request = query
            request[kSecReturnData as String] = true
            request[kSecMatchLimit as String] = kSecMatchLimitOne
            var result: CFTypeRef?
            let status = SecItemCopyMatching(request as CFDictionary, &result)
            switch status {
            case errSecSuccess:
                guard let data = result as? Data else {
                    throw GatehouseError.sessionStore("the keychain item is empty")
                }
                do {
                    return try JSONDecoder().decode(Session.self, from: data)
                } catch {
                    throw GatehouseError.sessionStore("cannot read the keychain item: \(error.localizedDescription)")
                }
            case errSecItemNotFound: return nil
            case errSecInteractionNotAllowed: throw GatehouseError.sessionLocked
            default: throw Self.failure("read", status)
            }
        }

        /// Stores the session, replacing the item.
        public func save(_ session: Session) throws {
            let data: Data
            do {
                data = try JSONEncoder().encode(session)
            } catch {
                throw GatehouseError.sessionStore("cannot encode the session: \(error.localizedDescription)")
            }
            var item = query
            item[kSecValueData as String] = data
            switch accessibility {
            case .afterFirstUnlock:
                item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case .whenUnlocked:
                item[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .biometryCurrentSet:
                var error: Unmanaged<CFError>?
                guard
                    let control = SecAccessControlCreateWithFlags(
                        kCFAllocatorDefault, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .biometryCurrentSet,
                        &error)
                else {
                    throw GatehouseError.sessionStore("cannot make the biometric access control")
                }
                item[kSecAttrAccessControl as String] = control
            }
            // Delete and add, so a change of accessibility takes effect.
            let deleted = SecItemDelete(query as CFDictionary)
            guard deleted == errSecSuccess || deleted == errSecItemNotFound else {
                throw deleted == errSecInteractionNotAllowed
                    ? GatehouseError.sessionLocked : Self.failure("replace", deleted)
            }
            let status = SecItemAdd(item as CFDictionary, nil)
            guard status == errSecSuccess else {
                throw status == errSecInteractionNotAllowed
                    ? GatehouseError.sessionLocked : Self.failure("write", status)
            }
        }

        /// Deletes the item.
        public func remove() throws {
            let status = SecItemDelete(query as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw Self.failure("delete", status) }
        }

        /// The item `account.name` of the same service, with the same settings.
        public func companion(named name: String) -> any SessionStore {
            KeychainSessionStore(
                service: service, account: "\(account).\(name)", accessibility: accessibility, accessGroup: accessGroup)
        }

        private static func failure(_ verb: String, _ status: OSStatus) -> GatehouseError {
            let message = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
            return .sessionStore("cannot \(verb) the keychain item: \(message)")
        }
    }
#endif
