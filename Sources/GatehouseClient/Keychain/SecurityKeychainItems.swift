#if canImport(Security)
    import Foundation
    import Security

    /// The Keychain itself: generic-password items in the data-protection keychain (on macOS too), through the four
    /// `SecItem` calls.
    public struct SecurityKeychainItems: KeychainItems {
        /// The Keychain.
        public init() {}

        /// `SecItemAdd`.
        public func add(_ item: KeychainItem) -> KeychainStatus {
            var attributes = Self.search(
                KeychainQuery(
                    service: item.service, account: item.account, accessGroup: item.accessGroup,
                    synchronizable: item.synchronizable))
            guard Self.protect(&attributes, as: item) else { return .param }
            return KeychainStatus(rawValue: SecItemAdd(attributes as CFDictionary, nil))
        }

        /// `SecItemCopyMatching` for one item, its data and attributes.
        public func copy(matching query: KeychainQuery, result: inout KeychainItem?) -> KeychainStatus {
            var request = Self.search(query)
            request[kSecReturnData as String] = true
            request[kSecReturnAttributes as String] = true
            request[kSecMatchLimit as String] = kSecMatchLimitOne
            var found: CFTypeRef?
            let status = KeychainStatus(rawValue: SecItemCopyMatching(request as CFDictionary, &found))
            if status == .success {
                let attributes = found as? [String: Any] ?? [:]
                let accessible = attributes[kSecAttrAccessible as String] as? String
                result = KeychainItem(
                    service: query.service, account: query.account, accessGroup: query.accessGroup,
                    data: attributes[kSecValueData as String] as? Data ?? Data(),
                    accessibility: KeychainAccessibility.allCases.first { Self.constant($0) as String == accessible },
                    synchronizable: attributes[kSecAttrSynchronizable as String] as? Bool ?? false)
            }
            return status
        }

        /// `SecItemUpdate` of the data and the protection.
        public func update(matching query: KeychainQuery, to item: KeychainItem) -> KeychainStatus {
            var attributes: [String: Any] = [:]
            guard Self.protect(&attributes, as: item) else { return .param }
            return KeychainStatus(
                rawValue: SecItemUpdate(Self.search(query) as CFDictionary, attributes as CFDictionary))
        }

        /// `SecItemDelete`.
        public func delete(matching query: KeychainQuery) -> KeychainStatus {
            KeychainStatus(rawValue: SecItemDelete(Self.search(query) as CFDictionary))
        }

        private static func search(_ query: KeychainQuery) -> [String: Any] {
            var search: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: query.service,
                kSecAttrAccount as String: query.account,
                kSecAttrSynchronizable as String: query.synchronizable.map { $0 as Any } ?? kSecAttrSynchronizableAny,
                kSecUseDataProtectionKeychain as String: true,
            ]
            if let group = query.accessGroup { search[kSecAttrAccessGroup as String] = group }
            return search
        }

        /// The data and either `kSecAttrAccessible` or, biometry-bound, a `kSecAttrAccessControl` of the same class.
        private static func protect(_ attributes: inout [String: Any], as item: KeychainItem) -> Bool {
            attributes[kSecValueData as String] = item.data
            guard let accessibility = item.accessibility else { return true }
            guard item.biometryCurrentSet else {
                attributes[kSecAttrAccessible as String] = constant(accessibility)
                return true
            }
            guard
                let control = SecAccessControlCreateWithFlags(
                    nil, constant(accessibility), .biometryCurrentSet, nil)
            else { return false }
            attributes[kSecAttrAccessControl as String] = control
            return true
        }

        private static func constant(_ accessibility: KeychainAccessibility) -> CFString {
            switch accessibility {
            case .whenPasscodeSetThisDeviceOnly: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
            case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case .whenUnlocked: kSecAttrAccessibleWhenUnlocked
            case .afterFirstUnlock: kSecAttrAccessibleAfterFirstUnlock
            }
        }
    }
#endif
