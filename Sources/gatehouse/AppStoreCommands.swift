import ArgumentParser
import GatehouseServer

/// `gatehouse app-store reconcile`.
struct AppStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-store", abstract: "Company tiers bought in the app.", subcommands: [Reconcile.self])

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the App Store Server API about every subscribed company and repair missed notifications.",
            discussion: """
                Calls Get All Subscription Statuses for each subscription bound to a company, with a JWT signed by \\
                the in-app purchase key (--app-store-issuer-id, --app-store-key-id, --app-store-key-file), and \\
                applies what it says by the same rules as a notification: newer signed data wins. Prints one line \\
                per subscription: company, original transaction, state, and what happened.
                """)
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let services = try GatehouseServices(try options.resolve())
            do {
                try await services.store.migrate()
                for line in try await services.reconcileAppStore() { print(line) }
            } catch {
                await services.store.close()
                throw error
            }
            await services.store.close()
        }
    }
}
