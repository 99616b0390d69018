#!/usr/bin/env bash
# The PostgreSQL bound: pgbench runs the statements Gatehouse runs for a session check and for a refresh rotation,
# with nothing of Gatehouse in between, on a database seeded like the auth benchmark's (Benchmarks/seed.py).
#   session check: the session row with its account and parent (SessionRepository.find), one indexed read;
#   refresh: the token with its session (findByRefreshToken), then the rotation (one INSERT into the
#     refresh_rotations view, whose trigger marks the token rotated, stores its successor, touches the session
#     and writes the audit event), each client rotating its own chain of tokens as a device does.
# The schema comes from the binary itself (`gatehouse migrate`), so the statements meet the same tables and indexes.
#
# Usage: GATEHOUSE_BENCH_DATABASE_URL=postgres://… Benchmarks/pgbench.sh GATEHOUSE_BINARY [CLIENTS [SECONDS]]
# (a throwaway database: it is migrated and seeded). Prints "pgbench-session TPS" and "pgbench-refresh TPS".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=$(realpath -- "$1")
clients=${2:-32}
seconds=${3:-10}
url=${GATEHOUSE_BENCH_DATABASE_URL:?GATEHOUSE_BENCH_DATABASE_URL must name a throwaway PostgreSQL database}
seeded=10000
work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-pgbench.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$binary" migrate --database-url "$url" --data-dir "$work/data" >&2
python3 "$here/seed.py" "$seeded" >&2
# Each client's chain starts at a token of its own session: client c rotates pgb-c-0, pgb-c-1, …
psql -q -v ON_ERROR_STOP=1 "$url" -c "INSERT INTO refresh_tokens (token_hash, session_id, created_at)
    SELECT 'pgb-' || c || '-0', 'seed-s-' || (c + 1), 0 FROM generate_series(0, $clients - 1) AS c" >&2

cat >"$work/session.sql" <<SQL
\set i random(1, $seeded)
SELECT s.account_id, s.refreshed_at, s.expires_at, s.revoked_at, s.amr, s.company_id, s.username, s.idle_timeout,
    s.parent_id, a.disabled_at, p.id AS p_id, p.refreshed_at AS p_refreshed_at, p.expires_at AS p_expires_at,
    p.revoked_at AS p_revoked_at
FROM sessions s JOIN accounts a ON a.id = s.account_id LEFT JOIN sessions p ON p.id = s.parent_id
WHERE s.id = 'seed-s-' || :i;
SQL
cat >"$work/refresh.sql" <<'SQL'
\set next :n + 1
SELECT rt.session_id AS rt_session_id, rt.rotated_at AS rt_rotated_at, s.account_id, s.refreshed_at, s.expires_at,
    s.revoked_at, s.amr, s.company_id, s.username, s.idle_timeout, s.parent_id, a.disabled_at, p.id AS p_id,
    p.refreshed_at AS p_refreshed_at, p.expires_at AS p_expires_at, p.revoked_at AS p_revoked_at
FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id JOIN accounts a ON a.id = s.account_id
LEFT JOIN sessions p ON p.id = s.parent_id
WHERE rt.token_hash = 'pgb-' || :client_id || '-' || :n;
INSERT INTO refresh_rotations (old_hash, new_hash, session_id, parent_id, at, action, account_id, company_id, ip,
    user_agent, detail)
VALUES ('pgb-' || :client_id || '-' || :n, 'pgb-' || :client_id || '-' || :next, 'seed-s-' || (:client_id + 1), NULL,
    (extract(epoch FROM now()) * 1000)::bigint, 'token_refreshed', 'seed-a-' || (:client_id + 1), NULL, '127.0.0.1',
    'pgbench', '{"session":"seed"}');
\set n :next
SQL

run() {  # name, script, extra pgbench args…
    local name=$1 script=$2
    shift 2
    local out
    out=$(pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" "$@" -f "$script" "$url" 2>&1) ||
        { echo "$out" >&2; return 1; }
    grep -q 'number of failed transactions: 0 ' <<<"$out" || { echo "$out" >&2; return 1; }
    echo "$name $(awk '/^tps = / { printf "%.1f", $3 }' <<<"$out")"
}
run pgbench-session "$work/session.sql"
run pgbench-refresh "$work/refresh.sql" -D n=0
