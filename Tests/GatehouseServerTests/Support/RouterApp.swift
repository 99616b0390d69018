import Foundation
import GatehouseServer
import Hummingbird
import HummingbirdTesting

/// Runs `test` against the app `buildApplication` makes on a fresh, migrated store, through HummingbirdTesting's
/// router client (for tests that read raw responses: headers, bodies and statuses as the router writes them).
func withRouterApp(
    clock: any GatehouseClock = SystemClock(), _ configure: (inout GatehouseConfiguration) -> Void = { _ in },
    _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void
) async throws {
    var configuration = try await TestStore.configuration()
    configure(&configuration)
    let services = try GatehouseServices(configuration, logger: TestStore.quietLogger, clock: clock)
    try await services.store.migrate()
    do {
        try await buildApplication(services, router: try buildRouter(services)).test(.router, test)
    } catch {
        await services.store.close()
        throw error
    }
    await services.store.close()
}
