#!/usr/bin/env bash
# The auth benchmarks on both stores in one command: builds the release binary, runs Benchmarks/auth.sh on SQLite
# and on a throwaway PostgreSQL cluster (scripts/pg-cluster.sh), and writes the table between the all.sh markers
# of docs/benchmarks.md (no-op, protected GET, refresh and password sign-in: throughput, p50, p99; the half-load p99;
# the protected GET's share of the no-op route).
#
# Usage: Benchmarks/all.sh [HASH_MS]   (HASH_MS as in auth.sh: one password hash's time here, default 19.2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hash_ms=${1:-19.2}
. scripts/pg-cluster.sh
work=$(mktemp -d /tmp/gatehouse-bench-all.XXXXXX)
trap 'pg_stop; rm -rf "$work"' EXIT

echo "== building the release binary" >&2
swift build -c release --product gatehouse --scratch-path .build-release >&2
binary=.build-release/release/gatehouse

bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/sqlite.txt"
pg_start
GATEHOUSE_BENCH_DATABASE_URL="postgres://gatehouse@127.0.0.1:$pg_port/postgres" \
    bash Benchmarks/auth.sh "$binary" "$hash_ms" | tee "$work/postgres.txt"

# One row per scenario from auth.sh's summaries: "scenario req/s p50 p99 max".
row() { awk -v s="$2" '$1 == s && NF == 5 { printf "%s/s, p50 %s ms, p99 %s ms", $2, $3, $4 }' "$work/$1.txt"; }
p99() { awk -v s="$2" '$1 == s && NF == 5 { printf "%s ms", $4 }' "$work/$1.txt"; }
share() { awk '$1 == "user/noop" { print $3 }' "$work/$1.txt"; }
bound() { awk '$1 == "password" && $2 == "vs" { printf "%s of the bound", $NF }' "$work/$1.txt"; }
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
| password sign-in | $(row sqlite password), $(bound sqlite) | $(row postgres password), $(bound postgres) | ~0.9 of the hash bound |
| \`GET /auth/v1/user\` at half load, p99 | $(p99 sqlite user-half) | $(p99 postgres user-half) | < 5 ms |
| password sign-in at half load, p99 | $(p99 sqlite password-half) | $(p99 postgres password-half) | < 5 ms beyond the hash |
| \`GET /auth/v1/user\` ÷ no-op | $(share sqlite) | $(share postgres) | ≥ 0.6 |
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
