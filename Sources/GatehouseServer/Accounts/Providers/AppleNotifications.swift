import Foundation
import GatehouseAPI
import JWTKit
import SQLKit

/// Sign in with Apple's server-to-server notifications, at the URL the operator gives Apple
/// (`POST /v1/apple/notifications`). Apple posts `{"payload": JWS}`, signed with the keys it signs identity tokens
/// with; the `events` claim is a JSON string. Each notification (its `jti`) is applied once; an `iat` older than an
/// hour is refused, so a captured notification cannot be replayed after its `jti` was swept.
struct AppleNotifications: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let keys: JWKSCache
    let deletion: AccountDeletion

    static let issuer = "https://appleid.apple.com"
    /// How old a notification may be, and how far ahead of our clock its `iat` may lie.
    static let maximumAge: TimeInterval = 3600
    static let clockSkew: TimeInterval = 300

    struct Claims: JWTPayload {
        var iss: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var jti: String?
        var events: String

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The event inside `events`.
    struct Event: Decodable, Equatable {
        var type: String
        var sub: String
        var event_time: Int64?
        var email: String?
        var is_private_email: BoolClaim?

        static func == (lhs: Event, rhs: Event) -> Bool {
            lhs.type == rhs.type && lhs.sub == rhs.sub && lhs.email == rhs.email
        }
    }

    static func malformed(_ why: String) -> APIError {
        APIError(.badRequest, code: .appleNotificationMalformed, message: "The notification is malformed: \(why)")
    }

    static func untrusted(_ why: String) -> APIError {
        APIError(.badRequest, code: .appleNotificationUntrusted, message: "The notification is not trusted: \(why)")
    }

    /// Checks a verified notification's claims and reads its event; pure, so the rules are tested without keys.
    static func event(_ claims: Claims, audiences: [String], now: Date) throws -> (jti: String, event: Event) {
        guard claims.iss == issuer else { throw untrusted("it was not issued by Apple") }
        guard claims.aud.value.contains(where: audiences.contains) else { throw untrusted("it is for another app") }
        let age = now.timeIntervalSince(claims.iat.value)
        guard age <= maximumAge else { throw untrusted("it was issued more than an hour ago") }
        guard age >= -clockSkew else { throw untrusted("it was issued in the future") }
        guard let jti = claims.jti, !jti.isEmpty else { throw malformed("it has no jti") }
        guard let event = try? JSONDecoder().decode(Event.self, from: Data(claims.events.utf8)) else {
            throw malformed("its events claim is not the JSON Apple sends")
        }
        return (jti, event)
    }

    func receive(_ payload: String, client: ClientInfo) async throws {
        guard !settings.appleAudiences.isEmpty else {
            throw APIError(.notFound, code: .providerDisabled, message: "Sign in with Apple is not configured")
        }
        guard payload.split(separator: ".", omittingEmptySubsequences: false).count == 3 else {
            throw Self.malformed("the payload is not a JWS")
        }
        let jti: String
        let event: Event
        do {
            let claims = try await keys.verify(payload, as: Claims.self)
            (jti, event) = try Self.event(claims, audiences: settings.appleAudiences, now: clock.now)
        } catch let error as APIError {
            await trail.record(
                client.event(.appleNotificationRefused, accountID: nil, detail: ["reason": error.code]))
            throw error
        } catch {
            await trail.record(
                client.event(.appleNotificationRefused, accountID: nil, detail: ["reason": "\(error)"]))
            throw Self.untrusted("\(error)")
        }
        let now = clock.now
        let orphan: String? = try await store.transaction { db in
            let providers = ProviderRepository(db: db)
            guard try await providers.claimNotification(jti: jti, now: now) else { return nil }
            var accountID: String?
            var orphan: String?
            switch event.type {
            case "email-disabled":
                accountID = try await providers.setMailDisabled(provider: "apple", providerID: event.sub, at: now)
            case "email-enabled":
                accountID = try await providers.setMailDisabled(provider: "apple", providerID: event.sub, at: nil)
            case "consent-revoked":
                accountID = try await providers.revokeConsent(provider: "apple", providerID: event.sub, at: now)
                if let accountID { _ = try await SessionChanges(db: db).end(.account(accountID), now: now) }
            case "account-delete":
                let accounts = AccountRepository(db: db)
                if let identity = try await accounts.identity(provider: "apple", providerID: event.sub) {
                    accountID = identity.accountID
                    _ = try await providers.deleteIdentity(id: identity.id, accountID: identity.accountID)
                    if try await !canSignIn(accountID: identity.accountID, appleEmail: identity.email, db: db) {
                        orphan = identity.accountID
                    }
                }
            default:
                break
            }
            try await trail.within(db).record(
                client.event(
                    .appleNotified, accountID: accountID, detail: ["type": String(event.type.prefix(40))]))
            return orphan
        }
        // An account left with no way to sign in goes as its own deletion would, in its own transaction.
        if let orphan, let account = try await AccountRepository(db: store.database).find(id: orphan) {
            try? await deletion.erase(
                account, client: client, refusal: .accountDeletionRefused, tombstone: ["by": "apple_account_delete"])
        }
    }

    /// Whether the account has another way in than the Apple identity just removed: a password, a passkey, another
    /// provider's identity, or an address that is not the Apple relay one (it still receives codes).
    private func canSignIn(accountID: String, appleEmail: String?, db: any SQLDatabase) async throws -> Bool {
        let accounts = AccountRepository(db: db)
        guard let account = try await accounts.find(id: accountID) else { return true }
        if account.passwordHash != nil { return true }
        if try await accounts.identities(accountID: accountID).contains(where: { $0.provider != "email" }) {
            return true
        }
        if try await PasskeyDirectory(db: db).hasAccountPasskey(accountID: accountID) { return true }
        return !account.email.hasSuffix("@" + AccountDirectory.appleRelayDomain)
    }
}
