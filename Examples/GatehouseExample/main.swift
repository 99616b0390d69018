// The seeds' path through the SDK's public API only, as two people on two devices:
// Ada signs up by code, creates a company and her credential, and shares a link; Bob signs up, accepts the link,
// makes his own credential and logs in; both edit one record and each sees the other's change arrive live.
// Then Ada's phone as an app drives it (`LoginFlowModel`): a company passkey (`SoftwareAuthenticator`), a second
// factor, and the app lock (`AppLockModel`, over a scripted Face ID here; an app passes
// `LocalAuthenticationEvaluator()`): locked at launch, Face ID, the passkey login, the lock after a while in the
// background, Face ID turned off, and signing in again with the password and the second factor.
//
//   swift run gatehouse-example --server http://127.0.0.1:8080 ada@example.com bob@example.com
//
// It asks for each mailed code and each authenticator-app code on standard input, and once for an operator to move
// the company to the Business tier (sharing needs it). Company passkeys need the server's `--passkeys on` with the
// relying party of `--passkey-origin` (https://localhost by default); without them Ada uses her password.
// See the SDK's guide, docs/sdk.md, and its first-hour article.
import Foundation
import GatehouseClient
import GatehouseClientTesting

@main
struct Example {
    static func main() async {
        do {
            try await run(Arguments(CommandLine.arguments.dropFirst()))
        } catch {
            FileHandle.standardError.write(Data("gatehouse-example: \(error)\n".utf8))
            exit(1)
        }
    }

    struct Arguments {
        var server = URL(string: "http://127.0.0.1:8080")!
        var data = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-example")
        var passkeyOrigin = "https://localhost"
        var emails: [String] = []

        init<S: Sequence<String>>(_ arguments: S) throws {
            var iterator = arguments.makeIterator()
            while let argument = iterator.next() {
                switch argument {
                case "--server":
                    guard let value = iterator.next(), let url = URL(string: value) else { throw Usage() }
                    server = url
                case "--data":
                    guard let value = iterator.next() else { throw Usage() }
                    data = URL(fileURLWithPath: value)
                case "--passkey-origin":
                    guard let value = iterator.next() else { throw Usage() }
                    passkeyOrigin = value
                default: emails.append(argument)
                }
            }
            guard emails.count == 2 else { throw Usage() }
        }
    }

    struct Usage: Error, CustomStringConvertible {
        var description: String {
            "usage: gatehouse-example [--server URL] [--data FOLDER] [--passkey-origin URL] FIRST-EMAIL SECOND-EMAIL"
        }
    }

    /// One person on one device: a client with its own session file and company-store folder.
    static func device(_ name: String, _ arguments: Arguments) -> GatehouseClient {
        let folder = arguments.data.appendingPathComponent(name)
        return GatehouseClient(
            url: arguments.server, sessionStore: FileSessionStore(url: folder.appendingPathComponent("session.json")))
    }

    /// Writes a line at once (a pipe would buffer `print`).
    static func say(_ line: String, terminator: String = "\n") {
        FileHandle.standardOutput.write(Data((line + terminator).utf8))
    }

    static func ask(_ prompt: String) throws -> String {
        say(prompt)
        guard let line = readLine() else { throw Usage() }
        return line.trimmingCharacters(in: .whitespaces)
    }

    static func signUp(_ client: GatehouseClient, email: String, name: String) async throws {
        try await client.auth.signUp(
            email: email, password: "\(name) account passphrase", profile: ["first_name": name])
        let code = try ask("Type the code mailed to \(email), then press return:")
        try await client.auth.verify(email: email, code: code, type: .signup)
        say("\(name) signed up and in.")
    }

    /// Waits until `store` holds the record with `field` equal to `value`, from its change events.
    static func waitFor(_ store: CompanyStore, _ id: String, _ field: String, _ value: FieldValue) async throws {
        let events = store.events
        if try await store.record(id)?.fields[field] == value { return }
        for await event in events {
            if case .changed(let ids) = event, ids.contains(id),
                try await store.record(id)?.fields[field] == value
            {
                return
            }
        }
    }

    static func run(_ arguments: Arguments) async throws {
        try? FileManager.default.removeItem(at: arguments.data)
        let ada = device("ada", arguments)
        let bob = device("bob", arguments)

        try await signUp(ada, email: arguments.emails[0], name: "Ada")
        let company = try await ada.companies.create(name: "Acme Ltd")
        _ = try await ada.companies.createCredential(in: company.id, username: "ada", password: "acme ledger 1815")
        try await ada.companies.signIn(to: company.id, username: "ada", password: "acme ledger 1815")
        say("Ada created \(company.name) and logged in to it with her own credential.")
        _ = try ask(
            "Sharing needs the Business tier: run `gatehouse companies set-tier \(company.id) business`, then press return:"
        )
        let share = try await ada.companies.createShare(permission: .readWrite, expiresIn: 86_400)
        guard let link = share.url else { throw Usage() }
        say("Ada shares \(link.absoluteString)")

        try await signUp(bob, email: arguments.emails[1], name: "Bob")
        let preview = try await bob.companies.previewShare(link)
        say("Bob sees an invitation from \(preview.inviterName) to \(preview.companyName).")
        _ = try await bob.companies.acceptShare(link)
        _ = try await bob.companies.createCredential(in: company.id, username: "bob", password: "acme abacus 1642")
        try await bob.companies.signIn(to: company.id, username: "bob", password: "acme abacus 1642")
        say("Bob joined and logged in. Members: \(try await bob.companies.members().map(\.displayName).sorted())")

        // Open, bring up to date (a first sync reports its pages), then keep in sync live.
        let adaStore = try await ada.openCompanyStore(
            companyID: company.id, directory: arguments.data.appendingPathComponent("ada"))
        let bobStore = try await bob.openCompanyStore(
            companyID: company.id, directory: arguments.data.appendingPathComponent("bob"))
        for store in [adaStore, bobStore] {
            let summary = try await store.sync { say("  synced \($0.records) records in \($0.pages) pages so far") }
            say("First sync: \(summary.records) records, \(try await store.count()) in the store.")
            await store.startSyncing()
        }
        let id = try await adaStore.save(
            type: "Client", fields: ["name": .string("Grace Hopper"), "phone": .string("555-0100")])
        say("Ada saved a client; waiting for it on Bob's device…")
        try await waitFor(bobStore, id, "name", .string("Grace Hopper"))
        say("Bob sees it live.")
        try await bobStore.save(type: "Client", id: id, fields: ["phone": .string("555-0199")])
        say("Bob changed the phone; waiting for it on Ada's device…")
        try await waitFor(adaStore, id, "phone", .string("555-0199"))
        let seen = try await adaStore.record(id)?.fields ?? [:]
        say("Ada sees it live: \(seen["name"].map { "\($0)" } ?? "?"), \(seen["phone"].map { "\($0)" } ?? "?")")
        await adaStore.close()
        await bobStore.close()
        try await bob.auth.signOut()

        let phone = SoftwareAuthenticator(origin: arguments.passkeyOrigin)
        let passkeys = try await registerPasskey(ada, company, phone)
        try await turnOnSecondFactor(ada)
        try await adasPhone(arguments, company, passkeys ? phone : nil)
        say("Both signed out. Done.")
    }

    /// Ada, logged in to the company, registers a passkey that logs her in to it; false when the server has
    /// passkeys off.
    static func registerPasskey(_ ada: GatehouseClient, _ company: Company, _ phone: SoftwareAuthenticator)
        async throws -> Bool
    {
        do throws(GatehouseError) {
            try await ada.companies.registerPasskey(for: company.id, using: phone)
        } catch {
            guard error.code == .passkeyDisabled else { throw error }
            say("The server has passkeys off: Ada will log in to \(company.name) with her password.")
            return false
        }
        say("Ada registered a passkey for \(company.name) on her phone.")
        return true
    }

    /// Ada turns on a second factor: an authenticator app's code, and recovery codes beside it.
    static func turnOnSecondFactor(_ ada: GatehouseClient) async throws {
        let factor = try await ada.auth.mfa.enroll(friendlyName: "Ada's phone", issuer: "Gatehouse example")
        let code = try ask("Type the code your authenticator app shows for \(factor.secret), then press return:")
        try await ada.auth.mfa.challengeAndVerify(factorID: factor.id, code: code)
        let recoveryCodes = try await ada.auth.mfa.generateRecoveryCodes()
        say("Ada turned on a second factor and put \(recoveryCodes.count) recovery codes away.")
    }

    /// Ada's phone as an app drives it: the login flow with the app lock and her company passkey.
    @MainActor
    static func adasPhone(_ arguments: Arguments, _ company: Company, _ passkey: SoftwareAuthenticator?)
        async throws
    {
        let faceID = ScriptedFaceID()
        let clock = ManualClock()
        let appLock = AppLockModel(
            configuration: AppLock.Configuration(
                gracePeriod: .seconds(60), localizedReason: "Unlock to see \(company.name)'s clients."),
            evaluator: faceID, now: { clock.now })
        let client = device("ada", arguments)
        let model = LoginFlowModel(
            client: client, selectedCompanyID: company.id, appLock: appLock, passkeyAuthenticator: passkey)
        let biometrics = appLock.notifications

        // Launch: the kept session opens only through the app lock, which asks at once; Ada cancels.
        faceID.answers = [.cancelled(.user)]
        await model.start()
        try expect(model.flow.screen == .locked(.app), "the app lock at launch", model)
        say("Ada opens the app: it is locked, and she cancels Face ID.")
        await model.unlock()
        guard case .companyLogin(let summary, nil) = model.flow.screen else {
            throw Unexpected(what: "\(company.name)'s login after Face ID", screen: model.flow.screen)
        }
        say("Face ID recognises her: \(summary.name)'s login shows.")
        if model.flow.offersPasskey {
            await model.signInWithPasskey()
            try expect(model.flow.screen == .home(summary), "home after the passkey", model)
            say("She logs in to \(summary.name) with her passkey.")
        } else {
            await model.signIn(username: "ada", password: "acme ledger 1815")
            try expect(model.flow.screen == .home(summary), "home after the password", model)
            say("She logs in to \(summary.name) with her password.")
        }

        // The notification centre never locks; a minute in the background does, until Face ID.
        await model.scenePhaseChanged(.inactive)
        await model.scenePhaseChanged(.active)
        await model.scenePhaseChanged(.background)
        clock.advance(by: .seconds(20))
        await model.scenePhaseChanged(.active)
        try expect(model.flow.screen == .home(summary), "home after twenty seconds away", model)
        say("The notification centre and twenty seconds away leave it unlocked.")
        await model.scenePhaseChanged(.background)
        clock.advance(by: .seconds(600))
        await model.scenePhaseChanged(.active)
        try expect(model.flow.screen == .home(summary), "home after Face ID", model)
        say("Back after ten minutes: locked, Face ID, and \(summary.name) again (asked \(faceID.asked) times).")

        // Face ID turned off in Settings: the app hears it; the lock allows no passcode, so Ada signs in again,
        // and her account asks for its second factor.
        await model.scenePhaseChanged(.background)
        faceID.offering = .notAvailable(.notAllowed)
        clock.advance(by: .seconds(600))
        await model.scenePhaseChanged(.active)
        for await notification in biometrics where notification.isBiometricsUnavailable { break }
        try expect(model.flow.screen == .locked(.app) && !appLock.lock.canUnlock, "a lock that cannot open", model)
        say("Face ID was turned off: \(appLock.lock.error?.localizedDescription ?? "?") Ada signs in again.")
        try await model.signOut()
        while model.flow.screen != .signIn(notice: nil) { await Task.yield() }
        try await model.signIn(email: arguments.emails[0], password: "Ada account passphrase")
        try expect(model.flow.screen == .secondFactor(company: nil, error: nil), "the second factor", model)
        let code = try ask("Type the code your authenticator app shows now, then press return:")
        await model.verifySecondFactor(code: code)
        try expect(model.flow.screen == .companyLogin(summary, error: nil), "the company login", model)
        await model.signIn(username: "ada", password: "acme ledger 1815")
        try expect(model.flow.screen == .home(summary), "home after the second factor", model)
        say("Password, authenticator code, company login: Ada is back in \(summary.name).")
        model.stop()
        try await client.auth.signOut()
    }

    struct Unexpected: Error, CustomStringConvertible {
        let what: String
        let screen: LoginFlow.Screen
        var description: String { "expected \(what), got \(screen)" }
    }

    @MainActor
    static func expect(_ condition: Bool, _ what: String, _ model: LoginFlowModel) throws {
        if !condition { throw Unexpected(what: what, screen: model.flow.screen) }
    }
}

/// Face ID as a script: what the device offers, and the answers it gives in turn (success once they run out). An
/// app passes `LocalAuthenticationEvaluator()` instead.
final class ScriptedFaceID: AppLockEvaluator, @unchecked Sendable {
    private let lock = NSLock()
    private var offered = BiometricAvailability.available(.faceID)
    private var script: [AppLock.Outcome] = []
    private var count = 0

    /// What the device says of Face ID.
    var offering: BiometricAvailability {
        get { lock.withLock { offered } }
        set { lock.withLock { offered = newValue } }
    }

    var answers: [AppLock.Outcome] {
        get { lock.withLock { script } }
        set { lock.withLock { script = newValue } }
    }

    /// How many times it was asked.
    var asked: Int { lock.withLock { count } }

    func availability() -> BiometricAvailability { offering }

    func evaluate(_ policy: AppLock.Policy, localizedReason: String) async -> AppLock.Outcome { next() }

    private func next() -> AppLock.Outcome {
        lock.withLock {
            count += 1
            return script.isEmpty ? .success : script.removeFirst()
        }
    }
}

/// The clock the app lock's grace time is measured on, moved by the example instead of waiting.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = ContinuousClock.now

    var now: ContinuousClock.Instant { lock.withLock { current } }
    func advance(by duration: Duration) { lock.withLock { current += duration } }
}

extension AppLock.Notification {
    var isBiometricsUnavailable: Bool {
        if case .biometricsUnavailable = self { true } else { false }
    }
}
