import Foundation

/// What happened to the sessions, for the app's UI.
public enum AuthEvent: Sendable, Equatable {
    /// The account session found at launch (nil when signed out): the first event of every `events` stream, which
    /// reads the stored session by itself; a stream opened later gets the session as it stands then.
    case initialSession(AuthSession?)
    /// A new account session from a sign-in.
    case signedIn(AuthSession)
    /// The account session's tokens were renewed.
    case refreshed(AuthSession)
    /// The account session ended, and why.
    case signedOut(SignOutReason)
    /// The session ends at `endsAt` whatever the refreshes (its lifetime), five minutes from now by default: the
    /// account's when `companyID` is nil, else that company's. Offer to sign in again before it does.
    case expiringSoon(companyID: String?, endsAt: Date)
    /// The company signed in to changed: a company sign-in or switch, or nil when the company session ended.
    case companyChanged(companyID: String?)
    /// The account is no longer a member of this company (removed, or it left): its local data was wiped.
    case companyAccessRevoked(companyID: String)
    /// The app told the client its lock screen went up (`Auth.lock()`): the sessions are kept, nothing refreshes or
    /// warns by itself until it unlocks. A locked app is never signed out.
    case locked
    /// The app told the client its lock screen went away (`Auth.unlock()`): what fell due meanwhile happens now.
    case unlocked
}

/// Why a session ended.
public enum SignOutReason: Sendable, Equatable {
    /// The app signed out.
    case requested
    /// The server ended it: revoked elsewhere, expired, reused refresh token, or the account disabled.
    case sessionEnded
}

/// Hands each event to every open `events` stream. A new stream starts with the account session as it stands, once
/// the client has restored or signed in.
final class AuthEventHub: Sendable {
    private let broadcast = Broadcast<AuthEvent>()
    /// The account session as the events told it; nil inside until the first restore or sign-in.
    private let known = Locked<AuthSession??>(nil)

    /// A new stream of events.
    func stream() -> AsyncStream<AuthEvent> {
        broadcast.stream { known.withLock { $0.map { AuthEvent.initialSession($0) } } }
    }

    /// Sends `event` to every stream.
    func send(_ event: AuthEvent) {
        broadcast.send(event) {
            known.withLock { known in
                switch event {
                case .initialSession(let session): known = .some(session)
                case .signedIn(let session), .refreshed(let session): known = .some(session)
                case .signedOut: known = .some(nil)
                case .companyChanged, .companyAccessRevoked, .expiringSoon, .locked, .unlocked: break
                }
            }
        }
    }
}

/// A value behind a lock, for the few places an actor would be too much (the test doubles of
/// GatehouseClientTesting use it too).
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
