import Crypto
import Foundation

/// The refresh rotation rule, whole (docs/security.md, "Refresh tokens"). A refresh token is spent by its first use:
/// it rotates into its successor, an HMAC of it, so that a client racing itself gets the same successor. Every verdict
/// is decided here, from what was read; `SessionService.refresh`, `RotationQueue` and `SessionRepository.rotate` read
/// and write what it says and decide nothing of their own.
///
/// 1. A presented token, as read (`verdict`): `fresh` rotates; `lateTwin` (rotated within the grace window, a client
///    race across batches) answers with its successor; `reuse` (rotated before that) ends the whole session; `ended`
///    (signed out, revoked, account disabled) and `expired` (past its lifetime or idle timeout) are refused.
/// 2. A batch of fresh tokens on its way to the store (`plan`): the first presentation of each token is written; a
///    later one of the same token in the batch is its `twin`, answered with the first one's outcome (`twin(of:)`);
///    one this instance rotated moments ago is `rotatedLately`, answered `alreadyRotated` without asking the store.
/// 3. The store's check of a batch (`checked`): from the rows it read (locked, on PostgreSQL), each rotation is
///    `rotated`, `alreadyRotated` (another request rotated the token first: read it again, decide again) or
///    `sessionEnded` (revoked since it was read).
/// 4. The writes a `rotated` outcome makes: one row into the view `refresh_rotations`, whose trigger
///    (`RefreshRotationSQL`) marks the token rotated, stores its successor, touches the session and its parent and
///    writes the audit event. The trigger refuses a token rotated already or a session revoked, failing the whole
///    statement: that refusal is what lets `RotationQueue` send a batch unchecked first, and go through the check only
///    when it is refused.
enum RefreshRotation {
    /// What a presented token asks for, decided from its stored state; the live session comes with the verdicts that
    /// go on with it.
    enum Verdict: Equatable {
        /// Never rotated, its session live: rotate it now.
        case fresh(SessionService.LiveSession)
        /// Rotated moments ago, within the grace window (a client race): answer with the token it was rotated into.
        case lateTwin(SessionService.LiveSession)
        /// Rotated longer ago than the grace window: someone holds an old token, so the whole session ends.
        case reuse(SessionService.LiveSession)
        /// Its session was signed out, revoked or its account disabled (`signedOut`, `banned`).
        case ended(SessionService.RefreshFailure)
        /// Its session is past its lifetime or its idle timeout.
        case expired
    }

    /// The verdict for a token rotated at `rotatedAt` (nil: never), of the session `row`, which is `live` (as
    /// `SessionService.liveSession` judges it) or not.
    static func verdict(
        rotatedAt: Date?, session row: SessionRow, live: SessionService.LiveSession?, now: Date, grace: TimeInterval
    ) -> Verdict {
        guard let live else { return ending(of: row) }
        guard let rotatedAt else { return .fresh(live) }
        return now.timeIntervalSince(rotatedAt) <= grace ? .lateTwin(live) : .reuse(live)
    }

    /// Why the session of `row`, which is not live, ended. GoTrue deletes a signed-out session with its tokens, so
    /// such a token answers as one never issued; a disabled account's answers as banned.
    static func ending(of row: SessionRow) -> Verdict {
        if row.accountDisabledAt != nil { return .ended(.banned) }
        if row.revokedAt != nil || row.parent?.revokedAt != nil || (row.parentID != nil && row.parent == nil) {
            return .ended(.signedOut)
        }
        return .expired
    }

    /// The token a refresh token rotates into: an HMAC of it under the server's secret. Deterministic, so a client
    /// racing within the grace window gets the same successor without any token being stored in the clear.
    static func successor(of token: String, key: SymmetricKey) -> String {
        Secrets.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: key)))
    }

    // MARK: A batch

    /// What rotating a fresh token came to at the store.
    enum Outcome: Equatable {
        case rotated
        /// Another request rotated it first: read it again and decide again.
        case alreadyRotated
        /// Another request of the same batch presented the same token and rotated it to the same successor: this
        /// one answers with that successor (the grace window's replay) without reading again; the batch wrote its
        /// audit row.
        case rotatedByTwin
        /// The session was revoked since it was read.
        case sessionEnded
    }

    /// Where one rotation of a batch goes.
    enum Slot: Equatable {
        /// Written to the store as the `index`th row of the batch's statement.
        case written(Int)
        /// The same token as the `index`th row written: it gets that row's outcome, through `twin(of:)`.
        case twin(of: Int)
        /// Rotated by this instance moments ago: `alreadyRotated` without asking the store (where writing it would
        /// fail the batch's statement and send every rotation in it through the check).
        case rotatedLately
    }

    /// The slot of each of `tokens`, in order, and the tokens' indexes that are written, in the order written.
    static func plan(_ tokens: [String], rotatedLately: Set<String>) -> (slots: [Slot], written: [Int]) {
        var first: [String: Int] = [:]
        var written: [Int] = []
        let slots = tokens.enumerated().map { index, token -> Slot in
            if let row = first[token] { return .twin(of: row) }
            if rotatedLately.contains(token) { return .rotatedLately }
            first[token] = written.count
            written.append(index)
            return .written(written.count - 1)
        }
        return (slots, written)
    }

    /// The outcome of a twin of a rotation that came to `outcome`: where the first rotated, the twin replays.
    static func twin<Failure>(of outcome: Result<Outcome, Failure>) -> Result<Outcome, Failure> {
        if case .success(.rotated) = outcome { return .success(.rotatedByTwin) }
        return outcome
    }

    /// A presented token as the store's check reads it, with its session's revocation.
    struct Stored: Equatable {
        let rotatedAt: Int64?
        let sessionID: String
        let sessionRevokedAt: Int64?
    }

    /// The store's verdict for each of `presented` (a token's digest and the session it was read with), in order,
    /// from the rows its check read (keyed by digest). A token gone, rotated, or presented earlier in the same list is
    /// `alreadyRotated`; one whose session is revoked, or is no longer the one it was read with, `sessionEnded`.
    static func checked(
        _ presented: [(digest: String, sessionID: String)], stored: [String: Stored]
    ) -> [Outcome] {
        var earlier: Set<String> = []
        return presented.map { digest, sessionID in
            guard let token = stored[digest], token.rotatedAt == nil, earlier.insert(digest).inserted else {
                return .alreadyRotated
            }
            guard token.sessionID == sessionID, token.sessionRevokedAt == nil else { return .sessionEnded }
            return .rotated
        }
    }
}

/// The store's half of the rule (step 4 above): the view and trigger of migration 6, in each store's own dialect.
/// Inserting into the view rotates: the trigger refuses a token rotated already (another request did it first) or a
/// session revoked, and otherwise writes what a rotation writes, in one statement. `RotationQueue` reads a refusal as
/// "check first": the batch goes again through `SessionRepository.rotate`, whose check gives each rotation its own
/// outcome.
enum RefreshRotationSQL {
    static let alreadyRotated = "gatehouse: refresh token already rotated"
    static let sessionEnded = "gatehouse: session ended"

    static func view(_ dialect: String) -> String {
        let text = dialect == "postgresql" ? "NULL::text" : "NULL"
        let number = dialect == "postgresql" ? "NULL::bigint" : "NULL"
        let columns = [
            "old_hash", "new_hash", "session_id", "parent_id", "action", "account_id", "company_id", "ip",
            "user_agent", "detail",
        ]
        .map { "\(text) AS \($0)" }
        return "CREATE VIEW refresh_rotations AS SELECT \(columns.joined(separator: ", ")), \(number) AS at WHERE 1 = 0"
    }

    private static let writes = """
        INSERT INTO refresh_tokens (token_hash, session_id, created_at) VALUES (NEW.new_hash, NEW.session_id, NEW.at);
        UPDATE sessions SET refreshed_at = NEW.at WHERE id = NEW.session_id OR id = NEW.parent_id;
        INSERT INTO audit_events (occurred_at, action, account_id, company_id, ip, user_agent, detail)
        VALUES (NEW.at, NEW.action, NEW.account_id, NEW.company_id, NEW.ip, NEW.user_agent, NEW.detail);
        """

    static func trigger(_ dialect: String) -> [String] {
        if dialect == "postgresql" {
            return [
                """
                CREATE FUNCTION refresh_rotation() RETURNS trigger LANGUAGE plpgsql AS $body$
                BEGIN
                UPDATE refresh_tokens SET rotated_at = NEW.at WHERE token_hash = NEW.old_hash AND rotated_at IS NULL;
                IF NOT FOUND THEN RAISE EXCEPTION '\(alreadyRotated)'; END IF;
                PERFORM 1 FROM sessions WHERE id = NEW.session_id AND revoked_at IS NULL;
                IF NOT FOUND THEN RAISE EXCEPTION '\(sessionEnded)'; END IF;
                \(writes)
                RETURN NEW;
                END
                $body$
                """,
                """
                CREATE TRIGGER refresh_rotation INSTEAD OF INSERT ON refresh_rotations
                FOR EACH ROW EXECUTE FUNCTION refresh_rotation()
                """,
            ]
        }
        return [
            """
            CREATE TRIGGER refresh_rotation INSTEAD OF INSERT ON refresh_rotations
            BEGIN
            SELECT RAISE(ABORT, '\(alreadyRotated)')
            WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens WHERE token_hash = NEW.old_hash AND rotated_at IS NULL);
            SELECT RAISE(ABORT, '\(sessionEnded)')
            WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id AND revoked_at IS NULL);
            UPDATE refresh_tokens SET rotated_at = NEW.at WHERE token_hash = NEW.old_hash;
            \(writes)
            END
            """
        ]
    }
}
