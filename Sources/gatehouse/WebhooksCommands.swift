import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse webhooks add | list | remove`: the endpoints events are delivered to.
struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, list or remove webhook endpoints.",
        discussion: """
            Each endpoint receives the events it names, signed per Standard Webhooks with its whsec_ secret \
            (printed once by add). The running server delivers them; docs/webhooks.md describes the events.
            """,
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register URL for the events given; prints its id and its secret, once.")
        @Argument(help: "Where deliveries are POSTed (http or https).") var url: String
        @Option(help: "Event types separated by commas (user.created,company.member_added), or *.") var events: String
        @Flag(help: "records.changed carries the changed records' fields.") var includeRecordFields = false
        @Option(help: "A note for operators.") var description: String?
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            let list = events.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let added = try await withOperator(options) {
                try await $0.addWebhook(
                    url: url, events: list, includeRecordFields: includeRecordFields, description: description,
                    configuration: configuration)
            }
            print("webhook \(added.id)")
            print(added.secret)
            FileHandle.standardError.write(Data("the secret is shown once: keep it secret\n".utf8))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every endpoint.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            for line in try await withOperator(options, { try await $0.webhookLines(configuration: configuration) }) {
                print(line)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an endpoint and its delivery log.")
        @Argument(help: "The endpoint's id.") var id: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            let configuration = try options.resolve()
            guard try await withOperator(options, { try await $0.removeWebhook(id, configuration: configuration) })
            else { throw NotFound(description: "no webhook \(id)") }
            print("webhook \(id) removed")
        }
    }
}
