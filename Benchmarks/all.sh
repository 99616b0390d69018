#!/usr/bin/env bash
# The auth benchmarks on both stores in one command: builds the release binary, runs Benchmarks/auth.sh on SQLite
# and on a throwaway PostgreSQL cluster (scripts/pg-cluster.sh), and writes the table between the all.sh markers
# of docs/benchmarks.md (no-op, protected GET, refresh and password sign-in: throughput, p50, p99; the half-load p99;
# the protected GET's share of the no-op route), then the PostgreSQL bound (Benchmarks/pgbench.sh: the same
# statements with nothing of Gatehouse between them) and how latency grows with the store's size: the protected GET
# and refresh at a fixed rate with 10,000, 100,000 and 1,000,000 more accounts and sessions (Benchmarks/seed.py).
#
# Then the hot-paths table (issue 27), each goal a ratio of one run: refresh while clients race against plain
# refresh (auth.sh's refresh-race), the first sync of 10,000 and 100,000 records by a plain client and through the
# SDK (Benchmarks/sync.sh), the idle RSS (Benchmarks/foundation.py), and growth: the protected GET and refresh at
# their maximum with a million more accounts against the fresh store's, and refresh after a million rotations
# against a fresh store's (Benchmarks/sweep.sh, before its sweep).
#
# Usage: Benchmarks/all.sh [HASH_MS]   (HASH_MS as in auth.sh: one password hash's time here, default 19.2)
# Environment: SCALE_SIZES ("10000 100000 1000000"), SCALE_USER_RATE (2000), SCALE_REFRESH_RATE (500): the
#   fixed rates of the scale runs, well under both stores' maxima so that queueing does not hide the store;
#   GROWTH_SIZE (1000000: the scale run on SQLite that also measures the maximum rates, for the growth row).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hash_ms=${1:-19.2}
scale_sizes=${SCALE_SIZES:-10000 100000 1000000}
user_rate=${SCALE_USER_RATE:-2000}
refresh_rate=${SCALE_REFRESH_RATE:-500}
growth_size=${GROWTH_SIZE:-1000000}
scenarios="noop password refresh refresh-race user"
. scripts/pg-cluster.sh
# wrk, for the runs measured the way the hot-paths issue measured them (Debian's package).
if ! command -v wrk >/dev/null; then
    echo "== wrk not found: installing Debian's wrk package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
work=$(mktemp -d /tmp/gatehouse-bench-all.XXXXXX)
trap 'pg_stop; rm -rf "$work"' EXIT

echo "== building the release binary, the load generator and the SDK's benchmark" >&2
swift build -c release --product gatehouse --scratch-path .build-release >&2
swift build -c release --package-path Benchmarks/gatehouse-bench >&2
swift build -c release --package-path Benchmarks/sdk-sync >&2
binary=.build-release/release/gatehouse

python3 Benchmarks/foundation.py --binary "$binary" --runs 3 --seconds 5 | tee "$work/foundation.txt"
BENCH_SCENARIOS="$scenarios" bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/sqlite.txt"
SYNC_IDLE_CONNECTIONS="" bash Benchmarks/sync.sh "$binary" | tee "$work/sync.txt"
SWEEP_AFTER=0 bash Benchmarks/sweep.sh "$binary" | tee "$work/sweep.txt"
pg_start
pg_url() { echo "postgres://gatehouse@127.0.0.1:$pg_port/$1"; }
pg_database() { psql -q -v ON_ERROR_STOP=1 "$(pg_url postgres)" -c "CREATE DATABASE $1" >&2; pg_url "$1"; }
GATEHOUSE_BENCH_DATABASE_URL="$(pg_url postgres)" BENCH_SCENARIOS="$scenarios" \
    bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/postgres.txt"
GATEHOUSE_BENCH_DATABASE_URL="$(pg_database bound)" bash Benchmarks/pgbench.sh "$binary" | tee "$work/pgbench.txt"

# Latency against the store's size: the same fixed rates, a fresh store seeded with each size.
for size in $scale_sizes; do
    for store in sqlite postgres; do
        url=""
        [ "$store" = postgres ] && url=$(pg_database "scale_$size")
        # The growth run also measures the maximum rates, under wrk as the fresh store's were.
        wrk=0 at_size="user@$user_rate refresh@$refresh_rate"
        [ "$store" = sqlite ] && [ "$size" = "$growth_size" ] && wrk=1 at_size="$at_size user refresh"
        GATEHOUSE_BENCH_DATABASE_URL="$url" BENCH_SEED="$size" BENCH_HALF_LOAD=0 BENCH_WRK="$wrk" \
            BENCH_SCENARIOS="$at_size" \
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
# The hot-paths table: figures of this run, each goal a ratio of two of them.
rps() { awk -v s="$2" '$1 == s && NF == 5 { print $2 }' "$work/$1.txt"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > 0 && b > 0 ? sprintf("%.3f", a / b) : "n/a") }'; }
sync_field() {  # line prefix, nth line (1: 10,000 records, 2: 100,000), field
    awk -v p="$1" -v n="$2" -v f="$3" '$1 == p { if (++seen == n) for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) print kv[2] } }' "$work/sync.txt"
}
sweep_rps() { awk -v s="$1" '$1 == s { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "rps") print kv[2] } }' "$work/sweep.txt"; }
idle_rss=$(sed -n 's/^idle RSS: \([0-9.]*\) MiB.*/\1/p' "$work/foundation.txt")
plain10=$(sync_field first-sync 1 seconds) plain100=$(sync_field first-sync 2 seconds)
sdk10=$(sync_field sdk-first-sync 1 seconds) sdk100=$(sync_field sdk-first-sync 2 seconds)
growth="scale-sqlite-$growth_size"
hot_rows=$(
    cat <<ROWS
| no-op \`GET /\`, wrk | $(row sqlite wrk-noop) | — |
| \`GET /auth/v1/user\` ÷ no-op, wrk | $(wrk_share sqlite) ($(rps sqlite wrk-user)/s) | ≥ 0.6 |
| refresh ÷ no-op, wrk | $(ratio "$(rps sqlite wrk-refresh)" "$(rps sqlite wrk-noop)") ($(row sqlite wrk-refresh)) | ≥ 0.15 |
| refresh at half load, p99 | $(p99 sqlite refresh-half) | < 5 ms |
| refresh while clients race ÷ plain refresh (the load generator's \`refresh-race\` and \`refresh\`) | $(ratio "$(rps sqlite refresh-race)" "$(rps sqlite refresh)") ($(rps sqlite refresh-race)/s and $(rps sqlite refresh)/s) | ≥ 0.8 |
| password sign-in | $(row sqlite password), $(hash_bound sqlite) | at the hash bound |
| first sync, 10,000 / 100,000 records, plain HTTP client | $plain10 s / $plain100 s | — |
| first sync through the SDK into its store | $sdk10 s / $sdk100 s (peak RSS $(sync_field sdk-first-sync 1 peak_rss_mib) / $(sync_field sdk-first-sync 2 peak_rss_mib) MiB) | < 0.5 s / < 3 s |
| SDK ÷ plain | $(ratio "$sdk10" "$plain10") / $(ratio "$sdk100" "$plain100") | ≤ 1.5 |
| an open SDK store with nothing to sync, CPU in 10 s | $(sync_field sdk-first-sync 1 idle_cpu_s) s | ~0 |
| idle RSS of \`gatehouse serve\` | $idle_rss MiB | < 40 MiB |
| $growth_size more accounts ÷ fresh store, wrk: \`GET /auth/v1/user\`; refresh | $(ratio "$(rps "$growth" wrk-user)" "$(rps sqlite wrk-user)"); $(ratio "$(rps "$growth" wrk-refresh)" "$(rps sqlite wrk-refresh)") | within 10% (0.9–1.1) |
| after 1,000,000 rotations ÷ fresh store, wrk refresh | $(ratio "$(sweep_rps history:refresh-before-sweep)" "$(sweep_rps fresh:refresh)") ($(sweep_rps history:refresh-before-sweep)/s and $(sweep_rps fresh:refresh)/s) | within 10% |
ROWS
)
table=$(
    cat <<TABLE
<!-- all.sh:begin -->
Command: \`Benchmarks/all.sh $hash_ms\` ($(date -u +%Y-%m-%d), $(git rev-parse --short HEAD); release build; 2 cores shared
by the server and the load generator; PostgreSQL is a throwaway local cluster with fsync off).

Hot paths (issue 27), SQLite, each goal a ratio of this run's figures (wrk -t2 -c32 as in the issue):

| figure | result | goal |
| --- | --- | --- |
$hot_rows

All requests, both stores:

| request | SQLite | PostgreSQL | goal |
| --- | --- | --- | --- |
| no-op \`GET /\` | $(row sqlite noop) | $(row postgres noop) | |
| \`GET /auth/v1/user\` | $(row sqlite user) | $(row postgres user) | |
| refresh rotation | $(row sqlite refresh) | $(row postgres refresh) | ≥ 5,000/s |
| refresh while clients race (pairs of the same token) | $(row sqlite refresh-race) | $(row postgres refresh-race) | ≥ 0.8 of refresh |
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
