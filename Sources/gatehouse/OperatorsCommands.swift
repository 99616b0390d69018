import ArgumentParser
import Foundation
import GatehouseServer

/// `gatehouse operators add | remove | list`: who may open the console.
struct Operators: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Grant or take away the operator role, which opens the console (/console).",
        discussion: """
            An operator signs in on the account pages, with a second factor (an authenticator app's code or a \
            passkey), then opens /console. The role is read on every request: removing it closes the console at once.
            """,
        subcommands: [Add.self, Remove.self, List.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make the account of EMAIL an operator.")
        @Argument(help: "The account's email address.") var email: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            switch try await withOperator(options, { try await $0.addOperator(email: email) }) {
            case .changed(let id): print("\(email) (\(id)) is now an operator")
            case .unchanged(let id): print("\(email) (\(id)) is already an operator")
            case .noAccount: throw NotFound(description: "no account \(email)")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take the operator role from the account of EMAIL.")
        @Argument(help: "The account's email address.") var email: String
        @OptionGroup var options: ServerOptions
        func run() async throws {
            switch try await withOperator(options, { try await $0.removeOperator(email: email) }) {
            case .changed(let id): print("\(email) (\(id)) is no longer an operator")
            case .unchanged(let id): print("\(email) (\(id)) was not an operator")
            case .noAccount: throw NotFound(description: "no account \(email)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every operator.")
        @OptionGroup var options: ServerOptions
        func run() async throws {
            for line in try await withOperator(options, { try await $0.operators() }) { print(line) }
        }
    }
}
