#!/usr/bin/env bash
# The auth benchmarks on both stores in one command: builds the release binary, runs Benchmarks/auth.sh on SQLite
# and on a throwaway PostgreSQL cluster (scripts/pg-cluster.sh), and writes the table between the all.sh markers
# of docs/benchmarks.md (no-op, protected GET, refresh and password sign-in: throughput, p50, p99; the half-load p99;
# the protected GET's share of the no-op route), then the PostgreSQL bound (Benchmarks/pgbench.sh: the same
# statements with nothing of Gatehouse between them) and how latency grows with the store's size: the protected GET
# and refresh at a fixed rate with 10,000, 100,000 and 1,000,000 more accounts and sessions (Benchmarks/seed.py).
#
# Usage: Benchmarks/all.sh [HASH_MS]   (HASH_MS as in auth.sh: one password hash's time here, default 19.2)
# Environment: SCALE_SIZES ("10000 100000 1000000"), SCALE_USER_RATE (2000), SCALE_REFRESH_RATE (500): the
#   fixed rates of the scale runs, well under both stores' maxima so that queueing does not hide the store.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hash_ms=${1:-19.2}
scale_sizes=${SCALE_SIZES:-10000 100000 1000000}
user_rate=${SCALE_USER_RATE:-2000}
refresh_rate=${SCALE_REFRESH_RATE:-500}
. scripts/pg-cluster.sh
# wrk, for the runs measured the way the hot-paths issue measured them (Debian's package).
if ! command -v wrk >/dev/null; then
    echo "== wrk not found: installing Debian's wrk package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
work=$(mktemp -d /tmp/gatehouse-bench-all.XXXXXX)
trap 'pg_stop; rm -rf "$work"' EXIT

echo "== building the release binary" >&2
swift build -c release --product gatehouse --scratch-path .build-release >&2
binary=.build-release/release/gatehouse

bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/sqlite.txt"
pg_start
pg_url() { echo "postgres://gatehouse@127.0.0.1:$pg_port/$1"; }
pg_database() { psql -q -v ON_ERROR_STOP=1 "$(pg_url postgres)" -c "CREATE DATABASE $1" >&2; pg_url "$1"; }
GATEHOUSE_BENCH_DATABASE_URL="$(pg_url postgres)" \
    bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/postgres.txt"
GATEHOUSE_BENCH_DATABASE_URL="$(pg_database bound)" bash Benchmarks/pgbench.sh "$binary" | tee "$work/pgbench.txt"

# Latency against the store's size: the same fixed rates, a fresh store seeded with each size.
for size in $scale_sizes; do
    for store in sqlite postgres; do
        url=""
        [ "$store" = postgres ] && url=$(pg_database "scale_$size")
        GATEHOUSE_BENCH_DATABASE_URL="$url" BENCH_SEED="$size" BENCH_HALF_LOAD=0 BENCH_WRK=0 \
            BENCH_SCENARIOS="user@$user_rate refresh@$refresh_rate" \
            bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/scale-$store-$size.txt"
    done
done

# One row per scenario from auth.sh's summaries: "scenario req/s p50 p99 max".
row() { awk -v s="$2" '$1 == s && NF == 5 { printf "%s/s, p50 %s ms, p99 %s ms", $2, $3, $4 }' "$work/$1.txt"; }
p99() { awk -v s="$2" '$1 == s && NF == 5 { printf "%s ms", $4 }' "$work/$1.txt"; }
share() { awk '$1 == "user/noop" { print $3 }' "$work/$1.txt"; }
wrk_share() { awk '$1 == "wrk" && $2 == "user/noop" { print $4 }' "$work/$1.txt"; }
hash_bound() { awk '$1 == "password" && $2 == "vs" { printf "%s of the bound", $NF }' "$work/$1.txt"; }
pg_bound() { awk -v s="$1" '$1 == s { printf "%s/s", $2 }' "$work/pgbench.txt"; }
scaled() {  # store, size, scenario: "p50 / p99 ms"
    awk -v s="$3" '$1 == s && NF == 5 { printf "%s / %s ms", $3, $4 }' "$work/scale-$1-$2.txt"
}
scale_rows=$(
    for size in $scale_sizes; do
        printf '| %s | %s | %s | %s | %s |\n' "$size" \
            "$(scaled sqlite "$size" "user@$user_rate")" "$(scaled postgres "$size" "user@$user_rate")" \
            "$(scaled sqlite "$size" "refresh@$refresh_rate")" "$(scaled postgres "$size" "refresh@$refresh_rate")"
    done
)
table=$(
    cat <<TABLE
<!-- all.sh:begin -->
Command: \`Benchmarks/all.sh $hash_ms\` ($(date -u +%Y-%m-%d), $(git rev-parse --short HEAD); release build; 2 cores shared
by the server and the load generator; PostgreSQL is a throwaway local cluster with fsync off).

| request | SQLite | PostgreSQL | goal |
| --- | --- | --- | --- |
| no-op \`GET /\` | $(row sqlite noop) | $(row postgres noop) | |
| \`GET /auth/v1/user\` | $(row sqlite user) | $(row postgres user) | |
| refresh rotation | $(row sqlite refresh) | $(row postgres refresh) | ≥ 5,000/s |
| password sign-in | $(row sqlite password), $(hash_bound sqlite) | $(row postgres password), $(hash_bound postgres) | ~0.9 of the hash bound |
| no-op at half load, p99 | $(p99 sqlite noop-half) | $(p99 postgres noop-half) | < 5 ms |
| \`GET /auth/v1/user\` at half load, p99 | $(p99 sqlite user-half) | $(p99 postgres user-half) | < 5 ms |
| refresh rotation at half load, p99 | $(p99 sqlite refresh-half) | $(p99 postgres refresh-half) | < 5 ms |
| password sign-in at half load, p99 | $(p99 sqlite password-half) | $(p99 postgres password-half) | < 5 ms beyond the hash |
| \`GET /auth/v1/user\` ÷ no-op | $(share sqlite) | $(share postgres) | ≥ 0.6 |
| wrk: no-op \`GET /\` | $(row sqlite wrk-noop) | $(row postgres wrk-noop) | |
| wrk: \`GET /auth/v1/user\` | $(row sqlite wrk-user) | $(row postgres wrk-user) | |
| wrk: refresh rotation | $(row sqlite wrk-refresh) | $(row postgres wrk-refresh) | ≥ 5,000/s |
| wrk: \`GET /auth/v1/user\` ÷ no-op | $(wrk_share sqlite) | $(wrk_share postgres) | ≥ 0.6 |
| pgbench, the same statements alone (32 clients): session check; refresh | | $(pg_bound pgbench-session); $(pg_bound pgbench-refresh) | PostgreSQL's bound |

Latency against the store's size, p50 / p99 at fixed rates (\`GET /auth/v1/user\` $user_rate/s, refresh
$refresh_rate/s), with that many more accounts, each with a session and a refresh token, written into a fresh store
before measuring. Goal: flat within ±20%.

| more accounts and sessions | \`GET /auth/v1/user\`, SQLite | PostgreSQL | refresh, SQLite | PostgreSQL |
| --- | --- | --- | --- | --- |
$scale_rows
<!-- all.sh:end -->
TABLE
)
python3 - "$table" <<'PY'
import re, sys
path = "docs/benchmarks.md"
text = open(path).read()
table = sys.argv[1]
if "<!-- all.sh:begin -->" in text:
    text = re.sub(r"<!-- all.sh:begin -->.*?<!-- all.sh:end -->", lambda _: table, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n## All auth benchmarks, both stores (Benchmarks/all.sh)\n\n" + table + "\n"
open(path, "w").write(text)
PY
echo "== wrote the table to docs/benchmarks.md" >&2
