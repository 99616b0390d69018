import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// `KeychainSessionStore`'s logic against a keychain that answers Security's documented codes: seed 004's matrix, a
/// locked device, biometry, migration out of weaker items, and sealing. No Keychain, no server, no clock.
@Suite("Keychain session store")
struct KeychainStoreTests {
    static let session = AuthSession(
        accessToken: "access-token-1", refreshToken: "refresh-token-1",
        expiresAt: Date(timeIntervalSince1970: 2_000_000_000), userID: "user-1", email: "ada@example.com")
    static let renewed = AuthSession(
        accessToken: "access-token-2", refreshToken: "refresh-token-2",
        expiresAt: Date(timeIntervalSince1970: 2_000_003_600), userID: "user-1", email: "ada@example.com")

    static func store(
        _ keychain: FakeKeychain, accessibility: KeychainSessionStore.Accessibility = .whenUnlocked,
        sealer: (any SessionSealer)? = nil
    ) -> KeychainSessionStore {
        KeychainSessionStore(service: "com.example.app", accessibility: accessibility, sealer: sealer, items: keychain)
    }

    /// An item as an older version of an app wrote it.
    static func olderItem(
        _ data: Data, accessibility: KeychainAccessibility, synchronizable: Bool = false
    ) -> KeychainItem {
        KeychainItem(
            service: "com.example.app", account: "gatehouse.session", data: data, accessibility: accessibility,
            synchronizable: synchronizable)
    }

    static func json(_ session: AuthSession) throws -> Data { try JSONEncoder().encode(session) }

    // MARK: Seed 004's KeychainAuthStateStore tests

    @Test("Saving adds one local item that loads back as the session")
    func testSaveSuccess() throws {
        let keychain = FakeKeychain()
        try Self.store(keychain).save(Self.session)
        let item = try #require(keychain.items.first)
        #expect(keychain.items.count == 1)
        #expect(try JSONDecoder().decode(AuthSession.self, from: item.data) == Self.session)
        #expect(try Self.store(keychain).load() == Self.session)
    }

    @Test("Saving over an existing item updates it; a failing update is thrown, not swallowed")
    func testSaveFailure_DuplicateItem() throws {
        let keychain = FakeKeychain()
        let store = Self.store(keychain)
        try store.save(Self.session)
        keychain.clearCalls()
        try store.save(Self.renewed)
        #expect(keychain.calls == [.add, .update])
        #expect(keychain.items.count == 1)
        #expect(try store.load() == Self.renewed)

        keychain.answer(.update, with: .param)
        #expect(throws: KeychainStoreError.unexpected(.save, .param)) { try store.save(Self.session) }
        #expect(try store.load() == Self.renewed)
    }

    @Test("Loading answers the stored session")
    func testLoadSuccess() throws {
        let keychain = FakeKeychain([
            Self.olderItem(try Self.json(Self.session), accessibility: .whenUnlockedThisDeviceOnly)
        ])
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.calls == [.copy])
    }

    @Test("Loading with no item answers no session, without an error")
    func testLoadFailure_NotFound() throws {
        let keychain = FakeKeychain()
        #expect(try Self.store(keychain).load() == nil)
        #expect(keychain.calls == [.copy, .copy])  // the local item, then a synchronizable one of an older version
    }

    @Test("A damaged item is a clear error and is removed, so the next launch starts signed out")
    func testLoadFailure_InvalidData() throws {
        let keychain = FakeKeychain([
            Self.olderItem(Data("not a session".utf8), accessibility: .whenUnlockedThisDeviceOnly)
        ])
        let store = Self.store(keychain)
        let error = #expect(throws: KeychainStoreError.invalidData(removed: true)) { try store.load() }
        #expect(error?.localizedDescription.contains("removed") == true)
        #expect(keychain.items.isEmpty)
        #expect(try store.load() == nil)

        // When even the removal fails, the error says so.
        keychain.add(Self.olderItem(Data(), accessibility: .whenUnlockedThisDeviceOnly))
        keychain.answer(.delete, with: .param)
        #expect(throws: KeychainStoreError.invalidData(removed: false)) { try store.load() }
    }

    @Test("Clearing deletes the item, and a synchronizable one an older version left")
    func testClearSuccess() throws {
        let keychain = FakeKeychain([
            Self.olderItem(try Self.json(Self.session), accessibility: .afterFirstUnlock, synchronizable: true)
        ])
        let store = Self.store(keychain)
        try store.save(Self.renewed)
        #expect(keychain.items.count == 2)
        try store.remove()
        #expect(keychain.items.isEmpty)
        #expect(try store.load() == nil)
    }

    @Test("Clearing when there is no item is fine")
    func testClearFailure_NotFound() throws {
        let keychain = FakeKeychain()
        try Self.store(keychain).remove()
        #expect(keychain.calls == [.delete])
    }

    // MARK: Locked device and biometry

    @Test("A locked device (interaction not allowed) makes the session unavailable, not gone")
    func interactionNotAllowed() throws {
        let keychain = FakeKeychain()
        let store = Self.store(keychain)
        try store.save(Self.session)
        keychain.answer(.copy, with: .interactionNotAllowed)
        #expect(throws: GatehouseError.sessionLocked) { try store.load() }
        #expect(keychain.items.count == 1)
        keychain.answer(.add, with: .interactionNotAllowed)
        #expect(throws: GatehouseError.sessionLocked) { try store.save(Self.renewed) }
        #expect(try store.load() == Self.session)  // unlocked: it is all there
    }

    @Test("Through the SDK, a locked keychain at launch is sessionLocked and the session is there after the unlock")
    func lockedAtLaunchThroughTheSDK() async throws {
        let keychain = FakeKeychain()
        try Self.store(keychain).save(Self.session)
        keychain.answer(.copy, with: .interactionNotAllowed)
        let client = GatehouseClient(url: URL(string: "http://127.0.0.1:9")!, sessionStore: Self.store(keychain))
        await #expect(throws: GatehouseError.sessionLocked) { try await client.auth.restoreSession() }
        #expect(keychain.items.count == 1)
        #expect(try await client.auth.restoreSession() == Self.session)
    }

    @Test("Through the SDK, a damaged item is a store error that says it was removed")
    func damagedThroughTheSDK() async throws {
        let keychain = FakeKeychain([Self.olderItem(Data([0xFF]), accessibility: .whenUnlockedThisDeviceOnly)])
        let client = GatehouseClient(url: URL(string: "http://127.0.0.1:9")!, sessionStore: Self.store(keychain))
        do throws(GatehouseError) {
            _ = try await client.auth.restoreSession()
            Issue.record("a damaged item restored")
        } catch {
            #expect(error == .keychain(.invalidData(removed: true)))
            #expect(error.localizedDescription == "Your saved sign-in couldn’t be read.")
            #expect(error.recoverySuggestion == "Sign in again.")
        }
        #expect(keychain.items.isEmpty)
    }

    @Test("Through the SDK, a cancelled Face ID is biometry_cancelled with nothing to suggest, and the session is kept")
    func biometryCancelledThroughTheSDK() async throws {
        let keychain = FakeKeychain()
        try Self.store(keychain, accessibility: .biometryCurrentSet).save(Self.session)
        let client = GatehouseClient(
            url: URL(string: "http://127.0.0.1:9")!,
            sessionStore: Self.store(keychain, accessibility: .biometryCurrentSet))
        keychain.answer(.copy, with: .userCanceled)
        do throws(GatehouseError) {
            _ = try await client.auth.restoreSession()
            Issue.record("a cancelled prompt restored the session")
        } catch {
            #expect(error == .keychain(.biometryCancelled))
            #expect(error.code == .biometryCancelled)
            #expect(error.recoverySuggestion == nil)
        }
        keychain.answer(.copy, with: .authFailed)
        await #expect(throws: GatehouseError.keychain(.biometryFailed)) { try await client.auth.restoreSession() }
        #expect(keychain.items.count == 1)
        #expect(try await client.auth.restoreSession() == Self.session)
    }

    @Test("Cancelling Face ID on a biometry-bound item is its own error, and the session is kept")
    func biometryCancelled() throws {
        let keychain = FakeKeychain()
        let store = Self.store(keychain, accessibility: .biometryCurrentSet)
        try store.save(Self.session)
        keychain.answer(.copy, with: .userCanceled)
        #expect(throws: KeychainStoreError.biometryCancelled) { try store.load() }
        keychain.answer(.copy, with: .authFailed)
        #expect(throws: KeychainStoreError.biometryFailed) { try store.load() }
        #expect(keychain.items.count == 1)
        #expect(try store.load() == Self.session)
    }

    @Test("A biometry-bound item is replaced by delete and add, never updated")
    func biometryBoundReplace() throws {
        let keychain = FakeKeychain()
        let store = Self.store(keychain, accessibility: .biometryCurrentSet)
        try store.save(Self.session)
        keychain.clearCalls()
        try store.save(Self.renewed)
        #expect(keychain.calls == [.add, .delete, .add])
        let item = try #require(keychain.items.first)
        #expect(item.biometryCurrentSet && item.accessibility == .whenPasscodeSetThisDeviceOnly)
        #expect(try store.load() == Self.renewed)
    }

    // MARK: What is written, and migration

    @Test(
        "Every item written is ThisDeviceOnly and never synchronizable",
        arguments: [
            (KeychainSessionStore.Accessibility.whenUnlocked, KeychainAccessibility.whenUnlockedThisDeviceOnly),
            (.afterFirstUnlock, .afterFirstUnlockThisDeviceOnly),
            (.biometryCurrentSet, .whenPasscodeSetThisDeviceOnly),
        ])
    func attributesWritten(choice: KeychainSessionStore.Accessibility, expected: KeychainAccessibility) throws {
        let keychain = FakeKeychain([
            Self.olderItem(try Self.json(Self.session), accessibility: .afterFirstUnlock, synchronizable: true)
        ])
        let store = Self.store(keychain, accessibility: choice)
        _ = try store.load()  // migrates
        try store.save(Self.renewed)  // replaces
        try store.companion(named: "company").save(Self.session)  // adds
        #expect(keychain.written.count >= 3)
        for item in keychain.written {
            #expect(item.accessibility == expected)
            #expect(item.accessibility?.isThisDeviceOnly == true)
            #expect(!item.synchronizable)
            #expect(item.biometryCurrentSet == (choice == .biometryCurrentSet))
        }
        #expect(keychain.items.allSatisfy { !$0.synchronizable })
    }

    @Test("The default store is while-unlocked, this device only")
    func defaultAccessibility() throws {
        let keychain = FakeKeychain()
        let store = KeychainSessionStore(service: "com.example.app", items: keychain)
        try store.save(Self.session)
        #expect(store.accessibility == .whenUnlocked)
        #expect(keychain.items.first?.accessibility == .whenUnlockedThisDeviceOnly)
    }

    @Test("An item saved after-first-unlock and restorable elsewhere is re-saved with the strong protection")
    func migrationFromWeakerAccessibility() throws {
        let keychain = FakeKeychain([Self.olderItem(try Self.json(Self.session), accessibility: .afterFirstUnlock)])
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.calls == [.copy, .add, .update])  // updated in place: no moment without the item
        #expect(keychain.items.count == 1)
        #expect(keychain.items.first?.accessibility == .whenUnlockedThisDeviceOnly)
        keychain.clearCalls()
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.calls == [.copy])  // once only
    }

    @Test("A synchronizable item is re-saved locally and the synchronizable one deleted")
    func migrationFromSynchronizable() throws {
        let keychain = FakeKeychain([
            Self.olderItem(try Self.json(Self.session), accessibility: .afterFirstUnlock, synchronizable: true)
        ])
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.calls == [.copy, .copy, .add, .delete])  // added before the original goes
        let item = try #require(keychain.items.first)
        #expect(keychain.items.count == 1)
        #expect(!item.synchronizable && item.accessibility == .whenUnlockedThisDeviceOnly)
    }

    @Test("A migration that cannot be written keeps the old item and still answers the session")
    func migrationFailureKeepsTheItem() throws {
        let old = Self.olderItem(try Self.json(Self.session), accessibility: .afterFirstUnlock)
        let keychain = FakeKeychain([old])
        keychain.answer(.update, with: .interactionNotAllowed)
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.items == [old])
        #expect(try Self.store(keychain).load() == Self.session)
        #expect(keychain.items.first?.accessibility == .whenUnlockedThisDeviceOnly)
    }

    @Test("Other Keychain answers are typed errors that name the code")
    func otherStatuses() throws {
        let keychain = FakeKeychain()
        let store = Self.store(keychain)
        keychain.answer(.add, with: .missingEntitlement)
        #expect(throws: KeychainStoreError.missingEntitlement) { try store.save(Self.session) }
        keychain.answer(.delete, with: .param)
        let error = #expect(throws: KeychainStoreError.unexpected(.remove, .param)) { try store.remove() }
        #expect(error.map(String.init(describing:))?.contains("errSecParam (-50)") == true)
        keychain.answer(.copy, with: .notAvailable)
        #expect(throws: KeychainStoreError.unexpected(.read, .notAvailable)) { try store.load() }
        keychain.answer(.copy, with: .authFailed)  // not biometry-bound: not a biometry failure
        #expect(throws: KeychainStoreError.unexpected(.read, .authFailed)) { try store.load() }
    }

    @Test("The status codes are Apple's OSStatus values")
    func statusValues() {
        let values: [(KeychainStatus, Int32)] = [
            (.success, 0), (.unimplemented, -4), (.param, -50), (.allocate, -108), (.userCanceled, -128),
            (.notAvailable, -25291), (.authFailed, -25293), (.duplicateItem, -25299), (.itemNotFound, -25300),
            (.interactionNotAllowed, -25308), (.decode, -26275), (.missingEntitlement, -34018),
        ]
        for (status, value) in values { #expect(status.rawValue == value) }
        #expect(KeychainStatus(rawValue: -25300) == .itemNotFound)
        #expect(KeychainStatus(rawValue: -1).description == "OSStatus -1")
    }

    // MARK: Sealing

    @Test("A sealed session is stored as ciphertext and loads back")
    func sealedRoundTrip() throws {
        let keychain = FakeKeychain()
        let sealer = SoftwareSessionSealer()
        try Self.store(keychain, sealer: sealer).save(Self.session)
        let stored = try #require(keychain.items.first?.data)
        #expect(stored.range(of: Data("access-token-1".utf8)) == nil)
        #expect((try? JSONDecoder().decode(AuthSession.self, from: stored)) == nil)
        let sameKey = try SoftwareSessionSealer(rawRepresentation: sealer.rawRepresentation)
        #expect(try Self.store(keychain, sealer: sameKey).load() == Self.session)
    }

    @Test("A sealed item whose key is gone is a clear error and is removed")
    func sealedKeyGone() throws {
        let keychain = FakeKeychain()
        try Self.store(keychain, sealer: SoftwareSessionSealer()).save(Self.session)
        let store = Self.store(keychain, sealer: SoftwareSessionSealer())
        let error = #expect(throws: KeychainStoreError.cannotUnseal(removed: true)) { try store.load() }
        #expect(error?.localizedDescription.contains("sign in again") == true)
        #expect(keychain.items.isEmpty)
        #expect(try store.load() == nil)
    }

    @Test("An unsealed item is sealed on the first load with a sealer")
    func migrationToSealed() throws {
        let keychain = FakeKeychain([
            Self.olderItem(try Self.json(Self.session), accessibility: .whenUnlockedThisDeviceOnly)
        ])
        let sealer = SoftwareSessionSealer()
        #expect(try Self.store(keychain, sealer: sealer).load() == Self.session)
        let stored = try #require(keychain.items.first?.data)
        #expect(try JSONDecoder().decode(AuthSession.self, from: sealer.open(stored)) == Self.session)
    }

    @Test("A sealed box altered by one byte does not open")
    func sealedBoxIsAuthenticated() throws {
        let sealer = SoftwareSessionSealer()
        let sealed = try sealer.seal(Data("secret".utf8))
        #expect(try sealer.open(sealed) == Data("secret".utf8))
        for index in [0, 10, sealed.count - 1] {
            var altered = sealed
            altered[altered.startIndex + index] ^= 0x01
            #expect(throws: (any Error).self) { try sealer.open(altered) }
        }
        #expect(throws: (any Error).self) { try sealer.open(Data()) }
    }
}

/// A keychain in memory that answers as Security documents: items are keyed by service, account, access group and
/// the synchronizable flag; a call's next answers can be set to any status (nothing is changed then).
final class FakeKeychain: KeychainItems, @unchecked Sendable {
    enum Call: Hashable {
        case add, copy, update, delete
    }

    private let lock = NSLock()
    private var stored: [KeychainItem]
    private var scripted: [Call: [KeychainStatus]] = [:]
    private var log: [Call] = []
    private var writes: [KeychainItem] = []

    init(_ items: [KeychainItem] = []) { stored = items }

    /// The items held.
    var items: [KeychainItem] { lock.withLock { stored } }
    /// The calls made, in order.
    var calls: [Call] { lock.withLock { log } }
    /// Every item added, and every item as an update left it.
    var written: [KeychainItem] { lock.withLock { writes } }

    func clearCalls() { lock.withLock { log = [] } }

    /// The next `call` answers `status` and does nothing.
    func answer(_ call: Call, with status: KeychainStatus) {
        lock.withLock { scripted[call, default: []].append(status) }
    }

    @discardableResult
    func add(_ item: KeychainItem) -> KeychainStatus {
        lock.withLock {
            if let status = next(.add) { return status }
            let key = KeychainQuery(
                service: item.service, account: item.account, accessGroup: item.accessGroup,
                synchronizable: item.synchronizable)
            guard !stored.contains(where: { Self.matches(key, $0) }) else { return .duplicateItem }
            stored.append(item)
            writes.append(item)
            return .success
        }
    }

    func copy(matching query: KeychainQuery, result: inout KeychainItem?) -> KeychainStatus {
        lock.withLock {
            if let status = next(.copy) { return status }
            guard var found = stored.first(where: { Self.matches(query, $0) }) else { return .itemNotFound }
            found.biometryCurrentSet = false  // SecItemCopyMatching does not say
            result = found
            return .success
        }
    }

    func update(matching query: KeychainQuery, to item: KeychainItem) -> KeychainStatus {
        lock.withLock {
            if let status = next(.update) { return status }
            guard stored.contains(where: { Self.matches(query, $0) }) else { return .itemNotFound }
            for index in stored.indices where Self.matches(query, stored[index]) {
                stored[index].data = item.data
                stored[index].accessibility = item.accessibility
                stored[index].biometryCurrentSet = item.biometryCurrentSet
                writes.append(stored[index])
            }
            return .success
        }
    }

    func delete(matching query: KeychainQuery) -> KeychainStatus {
        lock.withLock {
            if let status = next(.delete) { return status }
            guard stored.contains(where: { Self.matches(query, $0) }) else { return .itemNotFound }
            stored.removeAll { Self.matches(query, $0) }
            return .success
        }
    }

    private func next(_ call: Call) -> KeychainStatus? {
        log.append(call)
        guard var queue = scripted[call], !queue.isEmpty else { return nil }
        let status = queue.removeFirst()
        scripted[call] = queue
        return status
    }

    private static func matches(_ query: KeychainQuery, _ item: KeychainItem) -> Bool {
        query.service == item.service && query.account == item.account
            && (query.accessGroup == nil || query.accessGroup == item.accessGroup)
            && (query.synchronizable == nil || query.synchronizable == item.synchronizable)
    }
}
