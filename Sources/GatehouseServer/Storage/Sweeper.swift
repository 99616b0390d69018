import Foundation
import Logging
import SQLKit
import ServiceLifecycle

/// When each kind of row stops being of use to any request (docs/operators.md, "A bounded store"), with the clock
/// passed in.
enum SweepRules {
    /// A used or expired mailed code, link or PKCE code is kept a day past its expiry, so that a link opened again
    /// still says it was used rather than that it never existed.
    static let spentCodeMargin: TimeInterval = 24 * 3600
    /// The longest window of any failure or cooldown record (`FailureBackoff.Rule.codes`: a day).
    static let throttleWindow: TimeInterval = 24 * 3600
    /// An applied App Store notification is remembered 30 days: Apple retries one for about three.
    static let appStoreNotificationRetention: TimeInterval = 30 * 24 * 3600
    /// How long an ended invitation stays listed for its company (accepted, declined, revoked or expired).
    static let endedInvitationRetention: TimeInterval = 30 * 24 * 3600
    /// The console overview charts a week at most; its counts are kept a day longer.
    static let consoleSeriesRetention: TimeInterval = 8 * 24 * 3600
    /// A finished webhook delivery stays in its endpoint's log 30 days.
    static let webhookLogRetention: TimeInterval = 30 * 24 * 3600

    /// How long a rotated refresh token is kept: a day, as GoTrue's cleanup keeps revoked tokens, or four
    /// access-token lifetimes if that is longer, and never less than the reuse grace. A device whose token was stolen
    /// and rotated by the thief presents it again when it wakes, overnight included, and its session ends (reuse
    /// detection). A token rotated longer ago is forgotten: presented again it is refused as unknown
    /// (`refresh_token_not_found`), like any token the store never issued, and its session goes on. Without this every
    /// refresh would add a row for the session's whole lifetime (90 days of a refresh every 15 minutes: 8,640 rows per
    /// device; with it, 96).
    static func reuseWindow(_ auth: AuthSettings) -> TimeInterval {
        max(auth.refreshReuseGrace, 4 * auth.accessTokenLifetime, 24 * 3600)
    }

    static func cutoffs(now: Date, sweep: SweepSettings, auth: AuthSettings) -> SweepCutoffs {
        func before(_ age: TimeInterval) -> Int64 { now.addingTimeInterval(-age).epochMilliseconds }
        var cutoffs = SweepCutoffs(
            now: now.epochMilliseconds,
            rotatedBefore: before(reuseWindow(auth)),
            sessionsEndedBefore: before(sweep.endedSessionRetention),
            serverIdleSeconds: Int64(auth.sessionIdleTimeout),
            codesExpiredBefore: before(spentCodeMargin),
            mailCreatedBefore: before(MailQueue.giveUpAfter + spentCodeMargin),
            throttlesIdleBefore: before(max(throttleWindow, auth.resendCooldown)),
            auditBefore: sweep.auditRetention > 0 ? before(sweep.auditRetention) : nil,
            anonymousIdleBefore: before(sweep.anonymousRetention),
            appStoreNotificationsBefore: before(appStoreNotificationRetention),
            invitationsEndedBefore: before(endedInvitationRetention))
        cutoffs.consoleSeriesBefore = ConsoleSeriesRecorder.minute(now.addingTimeInterval(-consoleSeriesRetention))
        cutoffs.consoleSessionsSeenBefore = before(ConsoleKit.idleLimit)
        cutoffs.webhooksBefore = before(webhookLogRetention)
        return cutoffs
    }
}

/// What one sweep deleted, per kind, and whether it gave way to another instance sweeping the same store.
struct SweepReport: Sendable, Equatable {
    var deleted: [SweepKind: Int] = [:]
    /// Accounts whose ban of a set length ended.
    var bansLifted = 0
    var batches = 0
    /// True when another instance held the sweeper's lock (PostgreSQL), so this sweep stopped early.
    var yielded = false

    var total: Int { deleted.values.reduce(0, +) }
}

/// Keeps the store bounded: on every instance, every `interval` (with jitter), deletes what no request can use any
/// more, kind by kind (`SweepKind`), in batches of `batchSize` rows, each batch its own short transaction through the
/// store's write path. On PostgreSQL each batch first takes an advisory lock, so instances sharing a store sweep one
/// at a time: the one that finds the lock taken stops its sweep. One info line per sweep gives the counts.
struct Sweeper: Service {
    let store: Store
    let settings: SweepSettings
    let auth: AuthSettings
    let clock: any GatehouseClock
    let logger: Logger

    func run() async throws {
        // The first sweep comes within the first interval (the store is migrated by then), at a random point so that
        // instances started together do not sweep together; then every interval, give or take a tenth.
        var wait = settings.interval * Double.random(in: 0.5...1)
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let pause = Duration.milliseconds(Int64(wait * 1000))
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
            wait = settings.interval * Double.random(in: 0.9...1.1)
            do {
                _ = try await sweep()
            } catch {
                logger.warning("store sweep failed", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }

    /// Sweeps once, now, and logs what went.
    @discardableResult
    func sweep() async throws -> SweepReport {
        let started = ContinuousClock.now
        let cutoffs = SweepRules.cutoffs(now: clock.now, sweep: settings, auth: auth)
        let batchSize = max(1, settings.batchSize)
        var report = SweepReport()
        report.bansLifted = try await store.transaction { [clock] db in
            let lifted = try await SweepRepository(db: db).liftBans(now: cutoffs.now)
            let audit = AuditRepository(db: db, clock: clock)
            for id in lifted { try await audit.record(AuditEvent(.banLifted, accountID: id)) }
            return lifted.count
        }
        kinds: for kind in SweepKind.allCases {
            if kind == .audit, cutoffs.auditBefore == nil { continue }
            var deleted = 0
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                let keys = try await SweepRepository(db: store.database).candidates(kind, cutoffs, limit: batchSize)
                if keys.isEmpty { break }
                let went = try await store.transaction { db in
                    let sweep = SweepRepository(db: db)
                    guard try await sweep.lock() else { return nil as Int? }
                    return try await sweep.delete(kind, keys: keys, cutoffs)
                }
                report.batches += 1
                guard let went else {
                    report.yielded = true
                    report.deleted[kind] = deleted
                    break kinds
                }
                deleted += went
                // A short batch was the last; a batch whose rows all came back to use is not read again.
                if keys.count < batchSize || went == 0 { break }
                await Task.yield()
            }
            report.deleted[kind] = deleted
        }
        var metadata: Logger.Metadata = [
            "deleted": "\(report.total)", "batches": "\(report.batches)",
            "ms": "\(Int((ContinuousClock.now - started) / .milliseconds(1)))",
        ]
        for (kind, count) in report.deleted where count > 0 { metadata[kind.rawValue] = "\(count)" }
        if report.bansLifted > 0 { metadata["bans_lifted"] = "\(report.bansLifted)" }
        if report.yielded { metadata["yielded"] = "another instance is sweeping" }
        logger.info("store swept", metadata: metadata)
        return report
    }
}
