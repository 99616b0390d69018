import GatehouseClient

/// A device's biometrics as a script, for `AppLockModel(configuration:evaluator:now:)` in tests and previews: what it
/// says it offers, and the answers it gives in turn (success once they run out). It can hold an evaluation until
/// released, as a Face ID sheet stays up until the user looks.
public final class ScriptedBiometrics: AppLockEvaluator, Sendable {
    private struct State {
        var availability: BiometricAvailability
        var outcomes: [AppLock.Outcome]
        var asked: [AppLock.Policy] = []
        var holding = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Locked<State>

    /// A device that offers `availability` and answers `outcomes` in turn.
    public init(_ availability: BiometricAvailability = .available(.faceID), outcomes: [AppLock.Outcome] = []) {
        state = Locked(State(availability: availability, outcomes: outcomes))
    }

    /// What it says of its biometrics.
    public var offered: BiometricAvailability {
        get { state.withLock { $0.availability } }
        set { state.withLock { $0.availability = newValue } }
    }

    /// The policies asked for, in order.
    public var asked: [AppLock.Policy] { state.withLock { $0.asked } }

    /// The next answers to give.
    public func answer(_ outcomes: AppLock.Outcome...) { state.withLock { $0.outcomes += outcomes } }

    /// Holds evaluations until `release()`.
    public func hold() { state.withLock { $0.holding = true } }

    /// Lets the held evaluations answer.
    public func release() {
        let waiting = state.withLock { state in
            state.holding = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// What it says of its biometrics.
    public func availability() -> BiometricAvailability { offered }

    /// The next scripted answer, once any hold is released.
    public func evaluate(_ policy: AppLock.Policy, localizedReason: String) async -> AppLock.Outcome {
        state.withLock { $0.asked.append(policy) }
        await withCheckedContinuation { continuation in
            let held = state.withLock { state in
                if state.holding { state.waiting.append(continuation) }
                return state.holding
            }
            if !held { continuation.resume() }
        }
        return state.withLock { $0.outcomes.isEmpty ? .success : $0.outcomes.removeFirst() }
    }
}
