import Foundation
import SQLKit

/// One kind of row the sweeper deletes, with the table it lives in and the key a batch names its rows by.
enum SweepKind: String, CaseIterable, Sendable {
    /// Refresh tokens rotated longer ago than the reuse window.
    case rotatedTokens = "rotated_tokens"
    /// Sessions revoked longer ago than the retention.
    case revokedSessions = "revoked_sessions"
    /// Sessions past their lifetime for longer than the retention.
    case expiredSessions = "expired_sessions"
    /// Sessions idle past the server's timeout for longer than the retention.
    case idleSessions = "idle_sessions"
    /// Company sessions idle past their own, shorter timeout for longer than the retention.
    case idleCompanySessions = "idle_company_sessions"
    /// Mailed codes and links, used or not, a day after they expired.
    case codes
    /// PKCE authorization codes a day after they expired, once the session their exchange started is gone.
    case flowStates = "flow_states"
    /// Trips to an upstream provider that ended or expired.
    case oauthStates = "oauth_states"
    /// Mail the queue would give up at its next try anyway.
    case mail
    /// Failure and cooldown records whose every window has passed.
    case throttles
    /// Apple identity tokens past their expiry.
    case identityTokens = "identity_tokens"
    /// Audit events older than the audit retention.
    case audit
    /// Anonymous users with no sign-in and no session refreshed for the anonymous retention (their sessions go too).
    case anonymousAccounts = "anonymous_accounts"
    /// Second-factor challenges (they live five minutes) and enrolments never finished, past the codes' margin.
    case factorChallenges = "factor_challenges"
    case unfinishedFactors = "unfinished_factors"
    /// Passkey challenges (they live five minutes), past the codes' margin.
    case passkeyChallenges = "passkey_challenges"
    /// App Store notifications applied more than 30 days ago (Apple retries for about three).
    case appStoreNotifications = "app_store_notifications"
    /// Sign in with Apple notifications applied more than 30 days ago (their `iat` may be an hour old at most).
    case appleNotifications = "apple_notifications"
    /// Invitations by email 30 days after they ended (accepted, declined, revoked or expired).
    case invitations
    /// Trips to a SAML identity provider, a day after they expired.
    case samlRelayStates = "saml_relay_states"
    /// SAML assertion ids kept against replay, once their assertions could no longer be accepted.
    case samlAssertions = "saml_assertions"
    /// The console overview's counts (`console_series`), eight days on: the week it charts and a day to spare.
    case consoleSeries = "console_series"
    /// Console sessions idle past the console's limit whose account session has ended too (revoked, expired or
    /// swept). One whose account session lives on stays: the console must still see it, to end that session when
    /// its operator comes back (`ConsoleKit.enter`); without its row it would start a new console session instead.
    case consoleSessions = "console_sessions"
    /// Webhook deliveries 30 days after they were delivered or given up (the delivery log's reach).
    case webhookDeliveries = "webhook_deliveries"
    /// Webhook events 30 days old with no delivery left to send or show.
    case webhookEvents = "webhook_events"
    /// The OAuth provider's authorization requests a day after they expired (an exchanged code is kept that long,
    /// so that its replay still finds and ends the session it made).
    case oauthAuthorizations = "oauth_authorizations"

    var table: String {
        switch self {
        case .rotatedTokens: "refresh_tokens"
        case .revokedSessions, .expiredSessions, .idleSessions, .idleCompanySessions: "sessions"
        case .codes: "one_time_codes"
        case .flowStates: "flow_states"
        case .oauthStates: "oauth_states"
        case .mail: "mail_queue"
        case .throttles: "auth_throttle"
        case .identityTokens: "used_identity_tokens"
        case .audit: "audit_events"
        case .anonymousAccounts: "accounts"
        case .factorChallenges: "mfa_challenges"
        case .unfinishedFactors: "mfa_factors"
        case .passkeyChallenges: "passkey_challenges"
        case .appStoreNotifications: "app_store_notifications"
        case .appleNotifications: "apple_notifications"
        case .invitations: "invitations"
        case .samlRelayStates: "saml_relay_states"
        case .samlAssertions: "saml_assertions"
        case .consoleSeries: "console_series"
        case .consoleSessions: "console_sessions"
        case .webhookDeliveries: "webhook_deliveries"
        case .webhookEvents: "webhook_events"
        case .oauthAuthorizations: "oauth_authorizations"
        }
    }

    var key: String {
        switch self {
        case .rotatedTokens, .identityTokens: "token_hash"
        case .throttles: "key"
        case .appStoreNotifications: "notification_uuid"
        case .appleNotifications: "jti"
        case .samlAssertions: "assertion_id"
        case .consoleSeries: "minute"
        case .consoleSessions: "session_id"
        default: "id"
        }
    }
}

/// The moments before which each kind of row is dead, in epoch milliseconds (`SweepRules.cutoffs`).
struct SweepCutoffs: Sendable, Equatable {
    let now: Int64
    let rotatedBefore: Int64
    let sessionsEndedBefore: Int64
    /// The server's session idle timeout, seconds.
    let serverIdleSeconds: Int64
    let codesExpiredBefore: Int64
    let mailCreatedBefore: Int64
    let throttlesIdleBefore: Int64
    /// Nil when audit events are kept forever.
    let auditBefore: Int64?
    var anonymousIdleBefore: Int64 = .min
    var appStoreNotificationsBefore: Int64 = .min
    var invitationsEndedBefore: Int64 = .min
    /// The first epoch minute of the console's series that is kept.
    var consoleSeriesBefore: Int64 = .min
    /// Console sessions last seen before this (milliseconds) are idle past the console's limit.
    var consoleSessionsSeenBefore: Int64 = .min
    /// Webhook deliveries finished, and events made, before this.
    var webhooksBefore: Int64 = .min
}

/// All SQL of the sweeper. A batch is found by a plain read (no write lock held while the store is searched), then
/// deleted by its keys in a short transaction whose statement checks the same condition again, so a row that came
/// back to use between the two (a session refreshed meanwhile) stays.
struct SweepRepository {
    let db: any SQLDatabase

    /// Arbitrary constant key of the sweeper's PostgreSQL advisory lock (the migrator's is another).
    private static let advisoryLockKey = 0x7377_6570

    /// On PostgreSQL, takes the sweeper's lock for this transaction; false when another instance holds it. Always
    /// true on SQLite, where one process owns the file.
    func lock() async throws -> Bool {
        guard db.dialect.name == "postgresql" else { return true }
        return try await db.raw(
            """
            SELECT pg_try_advisory_xact_lock(\(literal: Self.advisoryLockKey), hashtext(current_schema())) AS locked
            """
        ).first(decodingColumn: "locked", as: Bool.self) ?? false
    }

    /// Lifts the bans of a set length that ended by `now` (the admin API's `ban_duration`): the accounts may sign in
    /// again. Returns their ids, for the audit trail. Call it inside a transaction.
    func liftBans(now: Int64) async throws -> [String] {
        let ids = try await db.update("accounts").set("disabled_at", to: SQLLiteral.null)
            .set("banned_until", to: SQLLiteral.null)
            .where("banned_until", .isNot, SQLLiteral.null).where("banned_until", .lessThanOrEqual, now)
            .returning("id").all(decodingColumn: "id", as: String.self)
        for id in ids { TransactionChanges.accountChanged(id) }
        return ids
    }

    /// Up to `limit` keys of dead rows of `kind`.
    func candidates(_ kind: SweepKind, _ cutoffs: SweepCutoffs, limit: Int) async throws -> [SQLBind] {
        let rows = try await db.raw(
            """
            SELECT \(ident: kind.key) AS k FROM \(ident: kind.table)
            WHERE \(Self.condition(kind, cutoffs)) LIMIT \(literal: limit)
            """
        ).all()
        return try rows.map { row in
            kind == .audit || kind == .consoleSeries
                ? SQLBind(try row.decode(column: "k", as: Int64.self))
                : SQLBind(try row.decode(column: "k", as: String.self))
        }
    }

    /// Deletes the rows of `keys` that are still dead; returns how many went. Call it inside a transaction. Deleting a
    /// session deletes its refresh tokens too (the foreign key cascades).
    func delete(_ kind: SweepKind, keys: [SQLBind], _ cutoffs: SweepCutoffs) async throws -> Int {
        guard !keys.isEmpty else { return 0 }
        return try await db.raw(
            """
            DELETE FROM \(ident: kind.table)
            WHERE \(ident: kind.key) IN (\(SQLList(keys))) AND \(Self.condition(kind, cutoffs))
            RETURNING \(ident: kind.key)
            """
        ).all().count
    }

    /// What makes a row of `kind` dead, as a condition on its own table.
    private static func condition(_ kind: SweepKind, _ c: SweepCutoffs) -> SQLQueryString {
        let idleMillis = c.serverIdleSeconds * 1000
        switch kind {
        case .rotatedTokens:
            return "rotated_at IS NOT NULL AND rotated_at < \(bind: c.rotatedBefore)"
        case .revokedSessions:
            return "revoked_at IS NOT NULL AND revoked_at < \(bind: c.sessionsEndedBefore)"
        case .expiredSessions:
            return "expires_at < \(bind: c.sessionsEndedBefore)"
        case .idleSessions:
            return "refreshed_at < \(bind: c.sessionsEndedBefore - idleMillis)"
        case .idleCompanySessions:
            return """
                refreshed_at < \(bind: c.sessionsEndedBefore) AND idle_timeout IS NOT NULL \
                AND idle_timeout < \(bind: c.serverIdleSeconds) \
                AND refreshed_at + idle_timeout * 1000 < \(bind: c.sessionsEndedBefore)
                """
        case .codes, .oauthStates, .samlRelayStates:
            return "expires_at < \(bind: c.codesExpiredBefore)"
        case .flowStates:
            // A used code whose session still exists ends that session when it is replayed (RFC 9700 4.2.1).
            return """
                expires_at < \(bind: c.codesExpiredBefore) AND (session_id IS NULL OR NOT EXISTS \
                (SELECT 1 FROM sessions s WHERE s.id = flow_states.session_id))
                """
        case .mail:
            return """
                created_at < \(bind: c.mailCreatedBefore) \
                AND (claimed_until IS NULL OR claimed_until < \(bind: c.now))
                """
        case .throttles:
            return """
                window_started_at < \(bind: c.throttlesIdleBefore) \
                AND last_failure_at < \(bind: c.throttlesIdleBefore)
                """
        case .identityTokens, .samlAssertions:
            return "expires_at < \(bind: c.now)"
        case .factorChallenges, .passkeyChallenges:
            return "created_at < \(bind: c.codesExpiredBefore)"
        case .unfinishedFactors:
            return "status = 'unverified' AND created_at < \(bind: c.codesExpiredBefore)"
        case .appStoreNotifications, .appleNotifications:
            return "received_at < \(bind: c.appStoreNotificationsBefore)"
        case .invitations:
            let at = c.invitationsEndedBefore
            return """
                expires_at < \(bind: at) OR used_at < \(bind: at) OR declined_at < \(bind: at) \
                OR revoked_at < \(bind: at)
                """
        case .consoleSeries:
            return "minute < \(bind: c.consoleSeriesBefore)"
        case .consoleSessions:
            return """
                last_seen_at < \(bind: c.consoleSessionsSeenBefore) AND NOT EXISTS \
                (SELECT 1 FROM sessions s WHERE s.id = console_sessions.session_id \
                AND s.revoked_at IS NULL AND s.expires_at > \(bind: c.now))
                """
        case .webhookDeliveries:
            return "finished_at IS NOT NULL AND finished_at < \(bind: c.webhooksBefore)"
        case .webhookEvents:
            return """
                created_at < \(bind: c.webhooksBefore) AND NOT EXISTS \
                (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)
                """
        case .oauthAuthorizations:
            return "expires_at < \(bind: c.codesExpiredBefore)"
        case .audit:
            // Never reached with no retention: the sweeper skips the kind.
            return "occurred_at < \(bind: c.auditBefore ?? Int64.min)"
        case .anonymousAccounts:
            return """
                is_anonymous = 1 AND created_at < \(bind: c.anonymousIdleBefore) \
                AND COALESCE(last_sign_in_at, 0) < \(bind: c.anonymousIdleBefore) AND NOT EXISTS \
                (SELECT 1 FROM sessions s WHERE s.account_id = accounts.id \
                AND s.refreshed_at >= \(bind: c.anonymousIdleBefore))
                """
        }
    }

    /// How many rows `table` holds (the benchmark's and the tests' measure).
    func count(_ table: String) async throws -> Int {
        try await db.raw("SELECT COUNT(*) AS n FROM \(ident: table)").first(decodingColumn: "n", as: Int.self) ?? 0
    }
}
