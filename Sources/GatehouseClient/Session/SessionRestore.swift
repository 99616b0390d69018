/// The one reading of the stored sessions at launch. The first `Auth.events` subscriber starts it, so the app hears
/// `initialSession` without asking; `Auth.restoreSession()` joins a reading in flight, or the one the subscriber
/// started that no call has answered yet (so a Face ID prompt is shown once, and its outcome reaches the caller).
/// After that, a call reads the store again only if no reading has succeeded (a Keychain that was locked).
final class SessionRestore: Sendable {
    private struct State {
        var task: Task<AuthSession?, any Error>?
        /// Whether the task's outcome was handed to a `restoreSession()` caller.
        var answered = false
        var running = false
    }

    private let state = Locked(State())

    /// Starts the first reading, unless one ever started.
    func startIfNeeded(_ read: @escaping @Sendable () async throws(GatehouseError) -> AuthSession?) {
        state.withLock { state in
            guard state.task == nil else { return }
            state.task = start(read, in: &state)
        }
    }

    /// Waits for the reading in flight or not yet answered, else for a new one, and throws what it threw.
    func restore(_ read: @escaping @Sendable () async throws(GatehouseError) -> AuthSession?)
        async throws(GatehouseError)
    {
        let task = state.withLock { state in
            if let task = state.task, state.running || !state.answered {
                state.answered = true
                return task
            }
            let task = start(read, in: &state)
            state.task = task
            state.answered = true
            return task
        }
        do {
            _ = try await task.value
        } catch {
            throw GatehouseError(storeFailure: error)
        }
    }

    private func start(
        _ read: @escaping @Sendable () async throws(GatehouseError) -> AuthSession?, in state: inout State
    ) -> Task<AuthSession?, any Error> {
        state.running = true
        state.answered = false
        return Task { [self] in
            defer { self.state.withLock { $0.running = false } }
            return try await read()
        }
    }
}
