// The seeds' path through the SDK's public API only, as two people on two devices:
// Ada signs up by code, creates a company and her credential, and shares a link; Bob signs up, accepts the link,
// makes his own credential and logs in; both edit one record and each sees the other's change arrive live.
//
//   swift run gatehouse-example --server http://127.0.0.1:8080 ada@example.com bob@example.com
//
// It asks for each mailed code on standard input, and once for an operator to move the company to the Business
// tier (sharing needs it). See the README's "The Swift SDK" section.
import Foundation
import GatehouseClient

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
                default: emails.append(argument)
                }
            }
            guard emails.count == 2 else { throw Usage() }
        }
    }

    struct Usage: Error, CustomStringConvertible {
        var description: String {
            "usage: gatehouse-example [--server URL] [--data FOLDER] FIRST-EMAIL SECOND-EMAIL"
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
        try await ada.companies.login(to: company.id, username: "ada", password: "acme ledger 1815")
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
        try await bob.companies.login(to: company.id, username: "bob", password: "acme abacus 1642")
        say("Bob joined and logged in. Members: \(try await bob.companies.members().map(\.displayName).sorted())")

        let adaStore = try await ada.companyStore(
            companyID: company.id, directory: arguments.data.appendingPathComponent("ada"))
        let bobStore = try await bob.companyStore(
            companyID: company.id, directory: arguments.data.appendingPathComponent("bob"))
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
        try await ada.auth.signOut()
        try await bob.auth.signOut()
        say("Both signed out. Done.")
    }
}
