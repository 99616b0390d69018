import Foundation
import SQLKit

/// One versioned schema change. Versions are consecutive from 1 and never reused.
public struct Migration: Sendable {
    public let version: Int
    public let name: String
    /// Applies the change inside the migrator's transaction.
    public let apply: @Sendable (any SQLDatabase) async throws -> Void

    public init(version: Int, name: String, apply: @escaping @Sendable (any SQLDatabase) async throws -> Void) {
        self.version = version
        self.name = name
        self.apply = apply
    }
}

/// What a migration run did.
public struct MigrationReport: Sendable, Equatable {
    /// The schema version after the run.
    public let version: Int
    /// Versions applied by this run, oldest first; empty when the schema was current.
    public let applied: [Int]
}

/// A schema this binary must not touch.
public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case schemaNewerThanBinary(database: Int, binary: Int)

    public var description: String {
        switch self {
        case .schemaNewerThanBinary(let database, let binary):
            "the database schema is version \(database), newer than this gatehouse knows (\(binary)); "
                + "run a gatehouse release that knows schema \(database) or later"
        }
    }
}

/// Applies migrations in order, recording each in `gatehouse_migrations`, one transaction per run.
struct Migrator {
    let store: Store
    let migrations: [Migration]

    /// Arbitrary constant key for PostgreSQL's advisory lock, so concurrent instances migrate one at a time.
    private static let advisoryLockKey = 0x6761_7465

    func run() async throws -> MigrationReport {
        precondition(
            migrations.enumerated().allSatisfy { $0.offset + 1 == $0.element.version },
            "migration versions must run 1, 2, 3, … without gaps")
        if case .sqlite = store.location {
            // WAL persists in the file: readers never block the writer.
            _ = try await store.database.raw("PRAGMA journal_mode=WAL").all()
        }
        let known = migrations.last?.version ?? 0
        return try await store.transaction { db in
            if case .postgres = store.location {
                // One lock per schema: instances sharing a schema take turns; separate schemas do not wait.
                try await db.raw(
                    "SELECT pg_advisory_xact_lock(\(literal: Self.advisoryLockKey), hashtext(current_schema()))"
                ).run()
            }
            try await db.create(table: "gatehouse_migrations")
                .ifNotExists()
                .column("version", type: .bigint, .primaryKey(autoIncrement: false))
                .column("name", type: .text, .notNull)
                .column("applied_at", type: .bigint, .notNull)
                .run()
            let current =
                try await db.raw("SELECT COALESCE(MAX(version), 0) AS version FROM gatehouse_migrations")
                .first(decodingColumn: "version", as: Int.self) ?? 0
            guard current <= known else {
                throw MigrationError.schemaNewerThanBinary(database: current, binary: known)
            }
            var applied: [Int] = []
            for migration in migrations where migration.version > current {
                try await migration.apply(db)
                try await db.insert(into: "gatehouse_migrations")
                    .columns("version", "name", "applied_at")
                    .values(
                        SQLBind(migration.version), SQLBind(migration.name),
                        SQLBind(Date().epochMilliseconds)
                    )
                    .run()
                applied.append(migration.version)
            }
            return MigrationReport(version: max(current, known), applied: applied)
        }
    }
}

/// The schema, in order. Features add their tables here.
public enum Migrations {
    public static let all: [Migration] = [
        Migration(version: 1, name: "audit events") { db in
            try await db.create(table: "audit_events")
                .column("id", type: .bigint, .primaryKey(autoIncrement: true))
                .column("occurred_at", type: .bigint, .notNull)
                .column("action", type: .text, .notNull)
                .column("account_id", type: .text)
                .column("company_id", type: .text)
                .column("ip", type: .text)
                .column("user_agent", type: .text)
                .column("detail", type: .text)
                .run()
            try await db.create(index: "audit_events_account").on("audit_events").column("account_id").column("id")
                .run()
            try await db.create(index: "audit_events_company").on("audit_events").column("company_id").column("id")
                .run()
        },
        Migration(version: 2, name: "accounts, codes, sessions, signing keys") { db in
            try await db.create(table: "accounts")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("email", type: .text, .notNull, .unique)
                .column("email_confirmed_at", type: .bigint)
                .column("password_hash", type: .text)
                .column("user_metadata", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .column("last_sign_in_at", type: .bigint)
                .column("disabled_at", type: .bigint)
                .run()
            try await db.create(table: "identities")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("provider", type: .text, .notNull)
                .column("provider_id", type: .text, .notNull)
                .column("email", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .column("last_sign_in_at", type: .bigint)
                .unique("provider", "provider_id")
                .run()
            try await db.create(index: "identities_account").on("identities").column("account_id").run()
            try await db.create(table: "one_time_codes")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("email", type: .text, .notNull)
                .column("purpose", type: .text, .notNull)
                .column("code_hash", type: .text, .notNull)
                .column("link_hash", type: .text, .notNull, .unique)
                .column("account_id", type: .text, .references("accounts", "id", onDelete: .cascade))
                .column("new_email", type: .text)
                .column("attempts", type: .bigint, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("consumed_at", type: .bigint)
                .run()
            try await db.create(index: "one_time_codes_email").on("one_time_codes").column("email").column("purpose")
                .run()
            try await db.create(table: "sessions")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("created_at", type: .bigint, .notNull)
                .column("refreshed_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("revoked_at", type: .bigint)
                .column("user_agent", type: .text)
                .column("ip", type: .text)
                .column("aal", type: .text, .notNull)
                .column("amr", type: .text, .notNull)
                .run()
            try await db.create(index: "sessions_account").on("sessions").column("account_id").run()
            try await db.create(table: "refresh_tokens")
                .column("token_hash", type: .text, .primaryKey(autoIncrement: false))
                .column("session_id", type: .text, .notNull, .references("sessions", "id", onDelete: .cascade))
                .column("created_at", type: .bigint, .notNull)
                .column("rotated_at", type: .bigint)
                .run()
            try await db.create(index: "refresh_tokens_session").on("refresh_tokens").column("session_id").run()
            try await db.create(table: "signing_keys")
                .column("kid", type: .text, .primaryKey(autoIncrement: false))
                .column("algorithm", type: .text, .notNull)
                .column("private_key", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("retired_at", type: .bigint)
                .run()
            try await db.create(table: "server_secrets")
                .column("name", type: .text, .primaryKey(autoIncrement: false))
                .column("value", type: .text, .notNull)
                .run()
            try await db.create(table: "auth_throttle")
                .column("key", type: .text, .primaryKey(autoIncrement: false))
                .column("failures", type: .bigint, .notNull)
                .column("window_started_at", type: .bigint, .notNull)
                .column("last_failure_at", type: .bigint, .notNull)
                .run()
        },
        Migration(version: 3, name: "companies, memberships, credentials, share links") { db in
            try await db.create(table: "companies")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("name", type: .text, .notNull)
                .column("logo_url", type: .text)
                .column("owner_id", type: .text, .notNull, .references("accounts", "id"))
                .column("tier", type: .text, .notNull)
                .column("requires_credential", type: .bigint, .notNull)
                .column("password_min_length", type: .bigint, .notNull)
                .column("session_idle_timeout", type: .bigint, .notNull)
                .column("session_lifetime", type: .bigint, .notNull)
                .column("managers_can_share", type: .bigint, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            try await db.create(table: "memberships")
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("role", type: .text, .notNull)
                .column("dept_mask", type: .bigint, .notNull)
                .column("manager_mask", type: .bigint, .notNull)
                .column("joined_at", type: .bigint, .notNull)
                .primaryKey("company_id", "account_id")
                .run()
            try await db.create(index: "memberships_account").on("memberships").column("account_id").run()
            try await db.create(table: "company_credentials")
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("username", type: .text, .notNull)
                .column("password_hash", type: .text, .notNull)
                .column("email", type: .text)
                .column("image", type: .blob)
                .column("image_type", type: .text)
                .column("super_user", type: .bigint, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .primaryKey("company_id", "account_id")
                .unique("company_id", "username")
                .run()
            try await db.create(table: "share_links")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("token_hash", type: .text, .notNull, .unique)
                .column("permission", type: .text, .notNull)
                .column("created_by", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint)
                .column("max_uses", type: .bigint)
                .column("uses", type: .bigint, .notNull)
                .column("revoked_at", type: .bigint)
                .run()
            try await db.create(index: "share_links_company").on("share_links").column("company_id").run()
            // A company login is a session of its own, scoped to one company, with that company's timeouts.
            try await db.alter(table: "sessions").column("company_id", type: .text).run()
            try await db.alter(table: "sessions").column("username", type: .text).run()
            try await db.alter(table: "sessions").column("idle_timeout", type: .bigint).run()
            try await db.create(index: "sessions_company").on("sessions").column("company_id").column("account_id")
                .run()
        },
        Migration(version: 4, name: "attack review: pending sign-ups, PKCE, child sessions, mail queue, token replay") {
            db in
            // What a sign-up chose (password digest, metadata) waits on its own code until that code is verified.
            // Unconfirmed accounts written by older releases hold whatever their sign-up chose, maybe an attacker's:
            // it is dropped, and the owner chooses again when confirming.
            try await db.update("accounts").set("password_hash", to: SQLLiteral.null).set("user_metadata", to: "{}")
                .where("email_confirmed_at", .is, SQLLiteral.null).run()
            try await db.alter(table: "one_time_codes").column("pending_password_hash", type: .text).run()
            try await db.alter(table: "one_time_codes").column("pending_metadata", type: .text).run()
            try await db.alter(table: "one_time_codes").column("code_challenge", type: .text).run()
            // A company session is a child of the account session it was opened from.
            try await db.alter(table: "sessions").column("parent_id", type: .text).run()
            try await db.create(index: "sessions_parent").on("sessions").column("parent_id").run()
            // PKCE: a verified link leaves an authorization code that only the device holding the verifier can use.
            try await db.create(table: "flow_states")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("auth_code_hash", type: .text, .notNull, .unique)
                .column("code_challenge", type: .text, .notNull)
                .column("verified", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("used_at", type: .bigint)
                .column("session_id", type: .text)
                .run()
            // Mail waits here, encrypted, until a worker sends it: off the request path, and nothing lost in an outage.
            try await db.create(table: "mail_queue")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("recipient_digest", type: .text, .notNull)
                .column("message", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("attempts", type: .bigint, .notNull)
                .column("next_attempt_at", type: .bigint, .notNull)
                .column("claimed_until", type: .bigint)
                .run()
            try await db.create(index: "mail_queue_due").on("mail_queue").column("next_attempt_at").run()
            // Identity tokens from Apple already used, until they expire.
            try await db.create(table: "used_identity_tokens")
                .column("token_hash", type: .text, .primaryKey(autoIncrement: false))
                .column("expires_at", type: .bigint, .notNull)
                .run()
        },
        Migration(version: 5, name: "company records, change log, mutation results, access epochs") { db in
            // Per company: the last seq given to a transaction, and the newest seq whose tombstones are compacted.
            try await db.alter(table: "companies").column("sync_seq", type: .bigint, .notNull, .default(0)).run()
            try await db.alter(table: "companies").column("sync_compacted_seq", type: .bigint, .notNull, .default(0))
                .run()
            // Bumped when a member's view changes (masks, role, removal): their tokens re-filter, live streams close.
            try await db.alter(table: "memberships").column("access_epoch", type: .bigint, .notNull, .default(0)).run()
            // The current state of each record is the change log: `seq` is its last write, `field_seqs` each field's.
            try await db.create(table: "records")
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("id", type: .text, .notNull)
                .column("type", type: .text, .notNull)
                .column("fields", type: .text, .notNull)
                .column("field_seqs", type: .text, .notNull)
                .column("dept_mask", type: .bigint, .notNull)
                .column("mask_seq", type: .bigint, .notNull)
                .column("created_by", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .column("created_seq", type: .bigint, .notNull)
                .column("seq", type: .bigint, .notNull)
                .column("deleted", type: .bigint, .notNull)
                .primaryKey("company_id", "id")
                .run()
            try await db.create(index: "records_seq").on("records").column("company_id").column("seq").column("id")
                .run()
            try await db.create(index: "records_type").on("records").column("company_id").column("type").column("id")
                .run()
            // The first result of each (device, mutation), so a mutation sent again never applies twice.
            try await db.create(table: "sync_mutations")
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("account_id", type: .text, .notNull)
                .column("client_id", type: .text, .notNull)
                .column("mid", type: .text, .notNull)
                .column("result", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .primaryKey("company_id", "account_id", "client_id", "mid")
                .run()
            try await db.create(index: "sync_mutations_age").on("sync_mutations").column("created_at").run()
        },
        Migration(version: 6, name: "refresh rotation in one statement") { db in
            // Inserting into this view rotates a refresh token (Sessions/RefreshRotation.swift, beside the rule it
            // enforces): one statement, so one short turn at SQLite's write lock instead of a transaction of six
            // round trips.
            try await db.raw(SQLQueryString(RefreshRotationSQL.view(db.dialect.name))).run()
            for statement in RefreshRotationSQL.trigger(db.dialect.name) {
                try await db.raw(SQLQueryString(statement)).run()
            }
        },
        Migration(version: 7, name: "hardening") { db in
            try await db.create(index: "audit_events_age").on("audit_events").column("occurred_at").run()
            // The sweeper's searches (SweepRepository): rotated tokens by age (only rotated ones are indexed, so a new
            // token costs no entry), sessions by each way they end, spent codes and idle throttle records by age.
            for statement in [
                "CREATE INDEX refresh_tokens_rotated ON refresh_tokens (rotated_at) WHERE rotated_at IS NOT NULL",
                "CREATE INDEX sessions_revoked ON sessions (revoked_at) WHERE revoked_at IS NOT NULL",
                "CREATE INDEX sessions_expires ON sessions (expires_at)",
                "CREATE INDEX sessions_refreshed ON sessions (refreshed_at)",
                "CREATE INDEX one_time_codes_expires ON one_time_codes (expires_at)",
                "CREATE INDEX flow_states_expires ON flow_states (expires_at)",
                "CREATE INDEX auth_throttle_window ON auth_throttle (window_started_at)",
            ] {
                try await db.raw(SQLQueryString(statement)).run()
            }
            // A username is private to its account (company login looks up the caller's own credential), so it need
            // not be unique in the company: a uniqueness check told members each other's usernames.
            if db.dialect.name == "postgresql" {
                try await db.raw(
                    """
                    ALTER TABLE company_credentials DROP CONSTRAINT IF EXISTS company_credentials_company_id_username_key
                    """
                ).run()
            } else {
                try await db.create(table: "company_credentials_v7")
                    .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                    .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                    .column("username", type: .text, .notNull)
                    .column("password_hash", type: .text, .notNull)
                    .column("email", type: .text)
                    .column("image", type: .blob)
                    .column("image_type", type: .text)
                    .column("super_user", type: .bigint, .notNull)
                    .column("created_at", type: .bigint, .notNull)
                    .column("updated_at", type: .bigint, .notNull)
                    .primaryKey("company_id", "account_id")
                    .run()
                let columns =
                    "company_id, account_id, username, password_hash, email, image, image_type, super_user, "
                    + "created_at, updated_at"
                try await db.raw(
                    """
                    INSERT INTO company_credentials_v7 (\(unsafeRaw: columns))
                    SELECT \(unsafeRaw: columns) FROM company_credentials
                    """
                ).run()
                try await db.raw("DROP TABLE company_credentials").run()
                try await db.raw("ALTER TABLE company_credentials_v7 RENAME TO company_credentials").run()
            }
            // A membership's first access epoch: a sync token from before it (an earlier membership) is refused.
            try await db.alter(table: "memberships").column("joined_epoch", type: .bigint, .notNull, .default(0)).run()
            // How an account's last membership of a company ended, so removal and demotion stick: links older than a
            // removal do not re-admit, links older than a departure re-admit at most with the role held then, and a
            // new membership's epochs start after the old one's.
            try await db.create(table: "former_members")
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("removed_at", type: .bigint)
                .column("left_at", type: .bigint)
                .column("left_role", type: .text)
                .column("access_epoch", type: .bigint, .notNull)
                .primaryKey("company_id", "account_id")
                .run()
            // Each record's field bytes, so a page is cut by bytes before fields are read; and every department mask
            // it has had (the sign bit for 0, everyone), so only members who may have seen it are told it went out
            // of sight. A record whose mask changed before this release may have been seen by anyone.
            try await db.alter(table: "records").column("fields_size", type: .bigint, .notNull, .default(0)).run()
            try await db.alter(table: "records").column("past_masks", type: .bigint, .notNull, .default(0)).run()
            let bytes = db.dialect.name == "postgresql" ? "octet_length(fields)" : "length(CAST(fields AS BLOB))"
            try await db.raw(
                """
                UPDATE records SET fields_size = \(unsafeRaw: bytes), past_masks = CASE
                WHEN mask_seq > created_seq THEN -1 WHEN dept_mask = 0 THEN \(bind: Int64.min) ELSE dept_mask END
                """
            ).run()
        },
        Migration(version: 8, name: "Supabase parity: email changes, admin API, service keys") { db in
            // The change asked for, as GoTrue keeps it: the new address, when its codes went out, and whether one of
            // the two addresses has confirmed it.
            try await db.alter(table: "accounts").column("email_change", type: .text).run()
            try await db.alter(table: "accounts").column("email_change_sent_at", type: .bigint).run()
            try await db.alter(table: "accounts")
                .column("email_change_confirmed", type: .bigint, .notNull, .default(0)).run()
            // What only the admin API writes (GoTrue's `raw_app_meta_data`), and when a ban of a set length ends (the
            // sweeper lifts it; a ban without an end is `disabled_at` alone).
            try await db.alter(table: "accounts").column("app_metadata", type: .text).run()
            try await db.alter(table: "accounts").column("banned_until", type: .bigint).run()
            // An anonymous user (GoTrue's anonymous sign-in) until it confirms an email; its address column holds a
            // placeholder in the reserved .invalid domain, which no mail is ever sent to.
            try await db.alter(table: "accounts").column("is_anonymous", type: .bigint, .notNull, .default(0)).run()
            // When the last sign-up code, recovery or sign-in link and invitation went out (GoTrue's stamps).
            for column in ["confirmation_sent_at", "recovery_sent_at", "invited_at"] {
                try await db.alter(table: "accounts").column(column, type: .bigint).run()
            }
            try await db.create(index: "accounts_banned_until").on("accounts").column("banned_until").run()
            try await db.create(index: "accounts_created").on("accounts").column("created_at").column("id").run()
            // One row per service key minted; the key itself is never stored.
            try await db.create(table: "service_keys")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("created_at", type: .bigint, .notNull)
                .column("revoked_at", type: .bigint)
                .run()
        },
        Migration(version: 9, name: "second factors: TOTP, challenges, recovery codes; companies that require one") {
            db in
            // One row per factor: a TOTP secret (sealed, bound to the factor's id) or a set of recovery codes. The
            // last time step a TOTP code was accepted for, so no code is accepted twice.
            try await db.create(table: "mfa_factors")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("factor_type", type: .text, .notNull)
                .column("friendly_name", type: .text, .notNull)
                .column("status", type: .text, .notNull)
                .column("secret", type: .text)
                .column("last_used_step", type: .bigint)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .column("last_challenged_at", type: .bigint)
                .run()
            try await db.create(index: "mfa_factors_account").on("mfa_factors").column("account_id").run()
            // A challenge is answered once, from the address it was made from, within five minutes.
            try await db.create(table: "mfa_challenges")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("factor_id", type: .text, .notNull, .references("mfa_factors", "id", onDelete: .cascade))
                .column("created_at", type: .bigint, .notNull)
                .column("ip", type: .text)
                .column("verified_at", type: .bigint)
                .run()
            try await db.create(index: "mfa_challenges_factor").on("mfa_challenges").column("factor_id").run()
            try await db.create(index: "mfa_challenges_created").on("mfa_challenges").column("created_at").run()
            // Recovery codes as keyed digests, each spent once.
            try await db.create(table: "mfa_recovery_codes")
                .column("factor_id", type: .text, .notNull, .references("mfa_factors", "id", onDelete: .cascade))
                .column("digest", type: .text, .notNull)
                .column("used_at", type: .bigint)
                .primaryKey("factor_id", "digest")
                .run()
            // The factor that raised a session to aal2: removing it lowers the session again.
            try await db.alter(table: "sessions").column("factor_id", type: .text).run()
            try await db.create(index: "sessions_factor").on("sessions").column("factor_id").run()
            try await db.alter(table: "companies").column("requires_mfa", type: .bigint, .notNull, .default(0)).run()
        },
        Migration(version: 10, name: "passkeys: account and company passkeys, their challenges") { db in
            // One row per registered credential. `company_id` NULL is an account passkey (it signs the account in);
            // otherwise it logs its member in to that company, and goes with the membership. The credential id is
            // unique across both kinds; the public key is the COSE key the authenticator sent.
            try await db.create(table: "passkeys")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("company_id", type: .text)
                .column("credential_id", type: .text, .notNull, .unique)
                .column("public_key", type: .text, .notNull)
                .column("algorithm", type: .bigint, .notNull)
                .column("sign_count", type: .bigint, .notNull)
                .column("aaguid", type: .text, .notNull)
                .column("backup_eligible", type: .bigint, .notNull)
                .column("backed_up", type: .bigint, .notNull)
                .column("transports", type: .text, .notNull)
                .column("friendly_name", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .column("last_used_at", type: .bigint)
                .foreignKey(
                    ["company_id", "account_id"], references: "memberships", ["company_id", "account_id"],
                    onDelete: .cascade
                )
                .run()
            try await db.create(index: "passkeys_account").on("passkeys").column("account_id").column("company_id")
                .run()
            // A challenge is for one ceremony (and its account and company, where it names them), used once.
            try await db.create(table: "passkey_challenges")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("ceremony", type: .text, .notNull)
                .column("account_id", type: .text, .references("accounts", "id", onDelete: .cascade))
                .column("company_id", type: .text)
                .column("challenge", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "passkey_challenges_created").on("passkey_challenges").column("created_at")
                .run()
        },
        Migration(version: 11, name: "company tiers bought in the app: purchase tokens, subscriptions, notifications") {
            db in
            // Where a company's tier came from (`app_store`, `operator`, or NULL for never set), an operator's reason,
            // and the UUID an app sets as a purchase's `appAccountToken`, one per company.
            try await db.alter(table: "companies").column("tier_source", type: .text).run()
            try await db.alter(table: "companies").column("tier_reason", type: .text).run()
            try await db.alter(table: "companies").column("app_account_token", type: .text).run()
            for row in try await db.select().column("id").from("companies").all() {
                try await db.update("companies").set("app_account_token", to: Secrets.identifier())
                    .where("id", .equal, try row.decode(column: "id", as: String.self)).run()
            }
            try await db.create(index: "companies_app_account_token").unique().on("companies")
                .column("app_account_token").run()
            // One row per original transaction, bound to the company that first presented it and never to another
            // (no foreign key: a deleted company keeps its binding, so its purchase cannot buy a tier elsewhere).
            try await db.create(table: "app_store_subscriptions")
                .column("original_transaction_id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull)
                .column("environment", type: .text, .notNull)
                .column("product_id", type: .text, .notNull)
                .column("tier", type: .text, .notNull)
                .column("state", type: .text, .notNull)
                .column("transaction_id", type: .text, .notNull)
                .column("expires_at", type: .bigint)
                .column("grace_expires_at", type: .bigint)
                .column("signed_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "app_store_subscriptions_company").on("app_store_subscriptions")
                .column("company_id").run()
            // Notifications applied, by Apple's `notificationUUID`: each is applied once.
            try await db.create(table: "app_store_notifications")
                .column("notification_uuid", type: .text, .primaryKey(autoIncrement: false))
                .column("type", type: .text, .notNull)
                .column("received_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "app_store_notifications_received").on("app_store_notifications")
                .column("received_at").run()
        },
        Migration(version: 12, name: "identities: provider tokens, Apple's revocations and notifications") { db in
            // Apple's refresh token, sealed (SecretBox, bound to the identity's id); when the user revoked consent
            // at Apple; when Apple stopped forwarding mail to the identity's relay address.
            try await db.alter(table: "identities").column("provider_token", type: .text).run()
            try await db.alter(table: "identities").column("consent_revoked_at", type: .bigint).run()
            try await db.alter(table: "identities").column("mail_disabled_at", type: .bigint).run()
            // Apple refresh tokens to revoke, outliving the identity they came from: retried until Apple takes them.
            try await db.create(table: "apple_revocations")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("sealed_token", type: .text, .notNull)
                .column("client_id", type: .text, .notNull)
                .column("attempts", type: .bigint, .notNull)
                .column("next_attempt_at", type: .bigint, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "apple_revocations_due").on("apple_revocations").column("next_attempt_at")
                .run()
            // Sign in with Apple notifications applied, by `jti`: each is applied once.
            try await db.create(table: "apple_notifications")
                .column("jti", type: .text, .primaryKey(autoIncrement: false))
                .column("received_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "apple_notifications_received").on("apple_notifications")
                .column("received_at").run()
        },
        Migration(version: 13, name: "custom OAuth and OIDC providers; spent id tokens by expiry") { db in
            // Each id-token sign-in forgets the spent tokens that expired: by index, not a scan.
            try await db.create(index: "used_identity_tokens_expires").on("used_identity_tokens").column("expires_at")
                .run()
            // GoTrue's custom providers: the fields as JSON (never the secret), the client secret sealed.
            try await db.create(table: "custom_providers")
                .column("identifier", type: .text, .primaryKey(autoIncrement: false))
                .column("id", type: .text, .notNull)
                .column("provider_type", type: .text, .notNull)
                .column("settings", type: .text, .notNull)
                .column("sealed_secret", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
        },
        Migration(version: 14, name: "the browser's redirect flow through upstream providers") { db in
            // One row per trip to a provider and back: found by the digest of the `state` it carries, bound to the
            // browser that started it, five minutes, single use. The nonce and PKCE verifier sent upstream are sealed.
            try await db.create(table: "oauth_states")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("state_hash", type: .text, .notNull, .unique)
                .column("provider", type: .text, .notNull)
                .column("redirect_to", type: .text, .notNull)
                .column("code_challenge", type: .text)
                .column("link_account_id", type: .text)
                .column("returns_to", type: .text, .notNull)
                .column("browser_hash", type: .text)
                .column("continue_hash", type: .text)
                .column("sealed", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("used_at", type: .bigint)
                .run()
            try await db.create(index: "oauth_states_continue").on("oauth_states").column("continue_hash").run()
            try await db.create(index: "oauth_states_expires").on("oauth_states").column("expires_at").run()
        },
        Migration(version: 15, name: "invitations by email") { db in
            // One row per invitation: to a normalized address, with the role and masks it grants. The link's token
            // and the mailed code are kept only as digests. At most one open invitation per company and address
            // (a second one replaces the first, in `InvitationRepository.insert`).
            try await db.create(table: "invitations")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("email", type: .text, .notNull)
                .column("role", type: .text, .notNull)
                .column("dept_mask", type: .bigint, .notNull)
                .column("manager_mask", type: .bigint, .notNull)
                .column("token_hash", type: .text, .notNull, .unique)
                .column("code_hash", type: .text, .notNull)
                .column("invited_by", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("sent_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("used_at", type: .bigint)
                .column("used_by", type: .text)
                .column("declined_at", type: .bigint)
                .column("revoked_at", type: .bigint)
                .run()
            try await db.create(index: "invitations_company").on("invitations").column("company_id").run()
            try await db.create(index: "invitations_email").on("invitations").column("email").run()
            try await db.create(index: "invitations_expires").on("invitations").column("expires_at").run()
        },
        Migration(version: 16, name: "company domains proven by a DNS TXT record") { db in
            // A company's domains; a verified one is re-checked at `next_check_at`. One company at a time holds a
            // domain verified: the partial unique index is the rule's last word when two verify at once.
            try await db.create(table: "company_domains")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("domain", type: .text, .notNull)
                .column("token", type: .text, .notNull)
                .column("verified_at", type: .bigint)
                .column("failures", type: .bigint, .notNull)
                .column("next_check_at", type: .bigint)
                .column("last_checked_at", type: .bigint)
                .column("created_at", type: .bigint, .notNull)
                .unique("company_id", "domain")
                .run()
            try await db.raw(
                "CREATE UNIQUE INDEX company_domains_verified ON company_domains (domain) WHERE verified_at IS NOT NULL"
            ).run()
            try await db.create(index: "company_domains_due").on("company_domains").column("next_check_at").run()
            // Joining by domain: each company's choice (no row: off), and the requests that wait for its owner.
            try await db.create(table: "company_domain_join")
                .column(
                    "company_id", type: .text, .primaryKey(autoIncrement: false),
                    .references("companies", "id", onDelete: .cascade)
                )
                .column("mode", type: .text, .notNull)
                .column("role", type: .text, .notNull)
                .column("dept_mask", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            try await db.create(table: "domain_join_requests")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column("created_at", type: .bigint, .notNull)
                .unique("company_id", "account_id")
                .run()
        },
        Migration(version: 17, name: "single sign-on per company: SAML 2.0 and OIDC identity providers") { db in
            // A company's identity providers (GoTrue's sso_providers with saml_providers folded in): a SAML IdP's
            // entity id is held by one provider at a time; an OIDC provider keeps its registration as JSON and its
            // client secret sealed.
            try await db.create(table: "sso_providers")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("company_id", type: .text, .notNull, .references("companies", "id", onDelete: .cascade))
                .column("type", type: .text, .notNull)
                .column("resource_id", type: .text)
                .column("disabled", type: .bigint, .notNull)
                .column("entity_id", type: .text)
                .column("metadata_xml", type: .text)
                .column("metadata_url", type: .text)
                .column("attribute_mapping", type: .text)
                .column("name_id_format", type: .text)
                .column("oidc", type: .text)
                .column("sealed_secret", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            try await db.raw(
                "CREATE UNIQUE INDEX sso_providers_entity ON sso_providers (entity_id) WHERE entity_id IS NOT NULL"
            ).run()
            try await db.raw(
                "CREATE UNIQUE INDEX sso_providers_resource ON sso_providers (resource_id) WHERE resource_id IS NOT NULL"
            ).run()
            try await db.create(index: "sso_providers_company").on("sso_providers").column("company_id").run()
            // The email domains a provider signs in (one provider per domain).
            try await db.create(table: "sso_domains")
                .column("domain", type: .text, .primaryKey(autoIncrement: false))
                .column("provider_id", type: .text, .notNull, .references("sso_providers", "id", onDelete: .cascade))
                .column("created_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "sso_domains_provider").on("sso_domains").column("provider_id").run()
            // One row per SP-initiated sign-in (GoTrue's saml_relay_states): the AuthnRequest's id the answer must
            // name, where the browser returns, the app's PKCE challenge; single use.
            try await db.create(table: "saml_relay_states")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("provider_id", type: .text, .notNull, .references("sso_providers", "id", onDelete: .cascade))
                .column("request_id", type: .text, .notNull)
                .column("redirect_to", type: .text, .notNull)
                .column("code_challenge", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .column("used_at", type: .bigint)
                .run()
            try await db.create(index: "saml_relay_states_expires").on("saml_relay_states").column("expires_at").run()
            // Assertion ids seen, each kept until its assertion expires: an assertion signs in once.
            try await db.create(table: "saml_assertions")
                .column("provider_id", type: .text, .notNull)
                .column("assertion_id", type: .text, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .primaryKey("provider_id", "assertion_id")
                .run()
            try await db.create(index: "saml_assertions_expires").on("saml_assertions").column("expires_at").run()
            // A company that requires its identity provider (no row: it does not).
            try await db.create(table: "company_sso")
                .column(
                    "company_id", type: .text, .primaryKey(autoIncrement: false),
                    .references("companies", "id", onDelete: .cascade)
                )
                .column("required", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            // An account made by single sign-on (GoTrue's is_sso_user): its provider, and the address the provider
            // gave, which is never an email sign-in's: `email` holds a placeholder in the reserved .invalid domain,
            // so no email sign-in, link or mail ever finds it, and the same address may have an account of its own.
            try await db.alter(table: "accounts").column("sso_provider_id", type: .text).run()
            try await db.alter(table: "accounts").column("sso_email", type: .text).run()
        },
        Migration(version: 18, name: "the operator console: operators, console sessions, the overview's series") { db in
            // Accounts that may open the console (`gatehouse operators add`).
            try await db.create(table: "operators")
                .column(
                    "account_id", type: .text, .primaryKey(autoIncrement: false),
                    .references("accounts", "id", onDelete: .cascade)
                )
                .column("granted_at", type: .bigint, .notNull)
                .run()
            // One row per account session that opened the console: it ends when idle or old, and its session with it.
            try await db.create(table: "console_sessions")
                .column("session_id", type: .text, .primaryKey(autoIncrement: false))
                .column("account_id", type: .text, .notNull)
                .column("started_at", type: .bigint, .notNull)
                .column("last_seen_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "console_sessions_seen").on("console_sessions").column("last_seen_at").run()
            // The overview's time series: a count per minute (epoch minutes) and series, summed over every instance
            // (each adds its own minute's counts); kept for eight days.
            try await db.create(table: "console_series")
                .column("minute", type: .bigint, .notNull)
                .column("series", type: .text, .notNull)
                .column("value", type: .bigint, .notNull)
                .primaryKey("minute", "series")
                .run()
            // The user list's other sort, and the audit explorer's filters, each paged by id.
            try await db.create(index: "accounts_last_sign_in").on("accounts").column("last_sign_in_at").column("id")
                .run()
            // The console's company list, newest first, paged by keyset.
            try await db.create(index: "companies_created").on("companies").column("created_at").column("id").run()
            // The console's email-prefix search also reads single sign-on addresses.
            try await db.create(index: "accounts_sso_email").on("accounts").column("sso_email").run()
            try await db.create(index: "audit_events_action").on("audit_events").column("action").column("id").run()
            try await db.create(index: "audit_events_ip").on("audit_events").column("ip").column("id").run()
            // The request an event came from (its `X-Request-Id`) and the session it names, which the audit explorer
            // follows.
            try await db.alter(table: "audit_events").column("request_id", type: .text).run()
            try await db.alter(table: "audit_events").column("session_id", type: .text).run()
            try await db.create(index: "audit_events_request").on("audit_events").column("request_id").run()
            try await db.create(index: "audit_events_session").on("audit_events").column("session_id").column("id")
                .run()
        },
        Migration(version: 19, name: "webhooks: endpoints, events committed with their change, deliveries") { db in
            // Endpoints the operator registered: the events they take (comma-separated, or `*`), and their signing
            // secret sealed (`SecretBox`), with the one it replaced while a rotation lasts.
            try await db.create(table: "webhook_endpoints")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("url", type: .text, .notNull)
                .column("events", type: .text, .notNull)
                .column("include_record_fields", type: .bigint, .notNull)
                .column("description", type: .text)
                .column("secret", type: .text, .notNull)
                .column("previous_secret", type: .text)
                .column("previous_until", type: .bigint)
                .column("enabled", type: .bigint, .notNull)
                .column("disabled_reason", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .run()
            // One row per event, written in the transaction of the change it tells of; its payload as sent.
            try await db.create(table: "webhook_events")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("type", type: .text, .notNull)
                .column("payload", type: .text, .notNull)
                .column("fields_payload", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .run()
            // One row per event and endpoint: what the worker sends, retries and logs.
            try await db.create(table: "webhook_deliveries")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column(
                    "event_id", type: .text, .notNull, .references("webhook_events", "id", onDelete: .cascade)
                )
                .column(
                    "endpoint_id", type: .text, .notNull,
                    .references("webhook_endpoints", "id", onDelete: .cascade)
                )
                .column("status", type: .text, .notNull)
                .column("attempts", type: .bigint, .notNull)
                .column("next_attempt_at", type: .bigint)
                .column("leased_until", type: .bigint)
                .column("last_status_code", type: .bigint)
                .column("last_latency_ms", type: .bigint)
                .column("last_error", type: .text)
                .column("created_at", type: .bigint, .notNull)
                .column("finished_at", type: .bigint)
                .run()
            try await db.create(index: "webhook_deliveries_due").on("webhook_deliveries").column("status")
                .column("next_attempt_at").run()
            try await db.create(index: "webhook_deliveries_endpoint").on("webhook_deliveries").column("endpoint_id")
                .column("created_at").run()
            try await db.create(index: "webhook_deliveries_event").on("webhook_deliveries").column("event_id").run()
            try await db.create(index: "webhook_events_created").on("webhook_events").column("created_at").run()
        },
        Migration(version: 20, name: "the OAuth 2.1 and OpenID Connect provider: clients, authorizations, consents") {
            db in
            // Applications that sign in with Gatehouse's accounts. A confidential client's secret is kept as a digest
            // (`Secrets.digest`); the lists are JSON arrays.
            try await db.create(table: "oauth_clients")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("name", type: .text, .notNull)
                .column("client_type", type: .text, .notNull)
                .column("secret_hash", type: .text)
                .column("token_endpoint_auth_method", type: .text, .notNull)
                .column("registration_type", type: .text, .notNull)
                .column("client_uri", type: .text)
                .column("logo_uri", type: .text)
                .column("redirect_uris", type: .text, .notNull)
                .column("grant_types", type: .text, .notNull)
                .column("response_types", type: .text, .notNull)
                .column("scope", type: .text, .notNull)
                .column("created_at", type: .bigint, .notNull)
                .column("updated_at", type: .bigint, .notNull)
                .run()
            // One request to sign in to a client: by the browser (`kind` code, with PKCE) or by a device that shows
            // a code (`kind` device). Claimed by the user who opens it, then approved or denied; an approved code
            // request carries its code's digest until the code is exchanged once.
            try await db.create(table: "oauth_authorizations")
                .column("id", type: .text, .primaryKey(autoIncrement: false))
                .column("kind", type: .text, .notNull)
                .column(
                    "client_id", type: .text, .notNull, .references("oauth_clients", "id", onDelete: .cascade)
                )
                .column("account_id", type: .text)
                .column("redirect_uri", type: .text)
                .column("scope", type: .text, .notNull)
                .column("state", type: .text)
                .column("nonce", type: .text)
                .column("code_challenge", type: .text)
                .column("acr", type: .text)
                .column("max_age", type: .bigint)
                .column("prompt", type: .text)
                .column("status", type: .text, .notNull)
                .column("code_hash", type: .text)
                .column("session_id", type: .text)
                .column("company_id", type: .text)
                .column("username", type: .text)
                .column("auth_time", type: .bigint)
                .column("aal", type: .text)
                .column("amr", type: .text)
                .column("device_code_hash", type: .text)
                .column("user_code", type: .text)
                .column("poll_interval", type: .bigint)
                .column("polled_at", type: .bigint)
                .column("created_at", type: .bigint, .notNull)
                .column("expires_at", type: .bigint, .notNull)
                .run()
            try await db.create(index: "oauth_authorizations_code").unique().on("oauth_authorizations")
                .column("code_hash").run()
            try await db.create(index: "oauth_authorizations_device").unique().on("oauth_authorizations")
                .column("device_code_hash").run()
            try await db.create(index: "oauth_authorizations_user_code").unique().on("oauth_authorizations")
                .column("user_code").run()
            try await db.create(index: "oauth_authorizations_expiry").on("oauth_authorizations").column("expires_at")
                .run()
            // What a user let a client have: the scopes granted so far; revoking the grant ends its sessions.
            try await db.create(table: "oauth_consents")
                .column("account_id", type: .text, .notNull, .references("accounts", "id", onDelete: .cascade))
                .column(
                    "client_id", type: .text, .notNull, .references("oauth_clients", "id", onDelete: .cascade)
                )
                .column("scope", type: .text, .notNull)
                .column("granted_at", type: .bigint, .notNull)
                .primaryKey("account_id", "client_id")
                .run()
            try await db.create(index: "oauth_consents_client").on("oauth_consents").column("client_id").run()
            // A client's sessions are sessions: refresh rotation, reuse detection and sign-out everywhere apply.
            try await db.alter(table: "sessions").column("oauth_client_id", type: .text).run()
            try await db.alter(table: "sessions").column("oauth_scope", type: .text).run()
            try await db.create(index: "sessions_oauth_client").on("sessions").column("oauth_client_id")
                .column("account_id").run()
        },
    ]
}
