import Foundation

/// Why `KeychainSessionStore` could not read or write the session. A keychain that is locked is not one of these: it
/// is `GatehouseError.sessionLocked`, the session kept but unreadable until the device is unlocked.
public enum KeychainStoreError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// What the store was doing.
    public enum Operation: String, Sendable, Hashable {
        /// Loading the session (`SecItemCopyMatching`).
        case read
        /// Storing the session (`SecItemAdd`, then `SecItemUpdate`, or for a biometry-bound item a delete and an add).
        case save
        /// Deleting the session (`SecItemDelete`).
        case remove
    }

    /// The user cancelled the Face ID or Touch ID prompt of a biometry-bound session: it is kept; ask again when the
    /// user wants to unlock.
    case biometryCancelled
    /// Face ID or Touch ID did not recognise the user, or is locked out: the session is kept.
    case biometryFailed
    /// The stored item was not a session (damaged, or from an unknown format); it was removed unless `removed` is
    /// false. The user signs in again.
    case invalidData(removed: Bool)
    /// The stored session is sealed with a key this device no longer has (or no sealer was given); it was removed
    /// unless `removed` is false. The user signs in again.
    case cannotUnseal(removed: Bool)
    /// The sealer could not seal the session, so nothing was saved.
    case cannotSeal
    /// The app lacks the keychain entitlement (`keychain-access-groups`), or is not signed.
    case missingEntitlement
    /// Any other Keychain answer.
    case unexpected(Operation, KeychainStatus)

    /// A short sentence for an alert; it carries no secret.
    public var errorDescription: String? {
        switch self {
        case .biometryCancelled:
            "Face ID or Touch ID was cancelled. You are still signed in: unlock to continue."
        case .biometryFailed:
            "Face ID or Touch ID did not recognise you. You are still signed in: try again."
        case .invalidData(true):
            "The saved sign-in was damaged and has been removed. Please sign in again."
        case .invalidData(false):
            "The saved sign-in is damaged and could not be removed. Please sign in again."
        case .cannotUnseal(true):
            "The saved sign-in needs a key this device no longer has, and has been removed. Please sign in again."
        case .cannotUnseal(false):
            "The saved sign-in needs a key this device no longer has, and could not be removed. Please sign in again."
        case .cannotSeal:
            "The sign-in could not be sealed with this device's key, so it was not saved."
        case .missingEntitlement:
            "The app cannot use the keychain: it lacks its keychain entitlement or is not signed."
        case .unexpected(let operation, let status):
            "The keychain could not \(operation.rawValue) the sign-in (\(status))."
        }
    }

    /// The same sentence, so that `String(describing:)` (in logs) reads well.
    public var description: String { errorDescription ?? "keychain error" }
}
