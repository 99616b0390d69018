#!/usr/bin/env bash
# Sync figures for docs/benchmarks.md: first sync of 10,000 and 100,000 records of about 1 KB, push throughput in
# batches of 100, change → other device latency over 1,000 changes (one instance on SQLite; two instances on one
# PostgreSQL), and the memory of idle live connections (1,000 and 10,000 on one instance), against release builds.
#   swift build -c release --product gatehouse --build-path .build-release
#   swift build -c release --package-path Benchmarks/gatehouse-bench
#   swift build -c release --package-path Benchmarks/sdk-sync        (the SDK's first sync; skipped when not built)
#   Benchmarks/sync.sh [path/to/gatehouse] [path/to/gatehouse-bench]
# PostgreSQL 15 binaries (initdb, pg_ctl) must be installed; the cluster runs as the postgres user in a temp folder.
set -euo pipefail
binary=$(realpath "${1:-.build-release/release/gatehouse}")
bench=$(realpath "${2:-Benchmarks/gatehouse-bench/.build/release/gatehouse-bench}")
# The SDK's first sync (Benchmarks/sdk-sync), when built; SDK_SYNC= skips it.
sdk=${SDK_SYNC-Benchmarks/sdk-sync/.build/release/sdk-sync}
[ -z "$sdk" ] || [ -x "$sdk" ] || sdk=""
ulimit -n "$(ulimit -Hn)"  # 10,000 idle streams need as many descriptors on each side
work=$(mktemp -d /tmp/gatehouse-sync.XXXXXX)
chmod 755 "$work"
pids=()
pg_bin=""
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    [ -n "$pg_bin" ] && su postgres -s /bin/bash -c "'$pg_bin/pg_ctl' -D '$work/pg/data' -m immediate stop" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
H='Content-Type: application/json'

serve() {  # port, data dir, public URL, extra args…: starts gatehouse and waits until ready
    local port=$1 data=$2 public=$3
    shift 3
    "$binary" serve --port "$port" --data-dir "$data" --public-url "$public" --log-level warning "$@" &
    pids+=($!)
    for _ in $(seq 1 400); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && return; sleep 0.05; done
    echo "gatehouse on $port did not become ready" >&2
    exit 1
}

account() {  # base, data dir[, email] → an account access token (sign-up confirmed with the code from the outbox)
    local base=$1 data=$2 email=${3:-"bench-$RANDOM$RANDOM@example.com"}
    curl -sf "$base/auth/v1/signup" -H "$H" -d "{\"email\":\"$email\",\"password\":\"bench password 1\"}" >/dev/null
    local code mail
    # The mail queue delivers after the sign-up answers: wait for the message (ten seconds at most).
    for _ in $(seq 1 200); do
        mail=$(grep -l "$email" "$data"/outbox/*.eml 2>/dev/null | head -1 || true)
        [ -n "$mail" ] && break
        sleep 0.05
    done
    [ -n "$mail" ] || { echo "no confirmation mail for $email" >&2; exit 1; }
    code=$(python3 -m quopri -d <"$mail" | tr -d '\r' | grep -oE '^[0-9]{6}$' | head -1)
    curl -sf "$base/auth/v1/verify" -H "$H" -d "{\"type\":\"signup\",\"email\":\"$email\",\"token\":\"$code\"}" \
        | json '["access_token"]'
}

company() {  # base, account token → "cid company-session-token"
    local base=$1 access=$2 cid
    cid=$(curl -sf "$base/v1/companies" -H "Authorization: Bearer $access" -H "$H" -d '{"name":"Bench Co"}' | json '["id"]')
    curl -sf -X PUT "$base/v1/companies/$cid/credential" -H "Authorization: Bearer $access" -H "$H" \
        -d '{"username":"bench","password":"company password 1"}' >/dev/null
    echo "$cid $(curl -sf "$base/v1/companies/$cid/login" -H "Authorization: Bearer $access" -H "$H" \
        -d '{"username":"bench","password":"company password 1"}' | json '["access_token"]')"
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

echo "== SQLite, one instance"
port=$(free_port)
base="http://127.0.0.1:$port"
serve "$port" "$work/sqlite" "$base"
server=${pids[-1]}
email="bench-$RANDOM$RANDOM@example.com"
access=$(account "$base" "$work/sqlite" "$email")
for records in 10000 100000; do
    read -r cid token <<<"$(company "$base" "$access")"
    GATEHOUSE_BENCH_BEARER=$token "$bench" sync first-sync --url "$base" --company "$cid" --records "$records"
    # The same company's first sync on a second device of the account, through GatehouseClient into its store.
    [ -z "$sdk" ] || "$sdk" "$base" "$email" "bench password 1" "$cid" bench "company password 1" "$records" 5000 10
done
read -r cid token <<<"$(company "$base" "$access")"
GATEHOUSE_BENCH_BEARER=$token "$bench" sync push --url "$base" --company "$cid" --batches 200 --concurrency 4
GATEHOUSE_BENCH_BEARER=$token "$bench" sync latency --url "$base" --company "$cid" --changes 1000
# Each stream is one company session's; since the hardening issue a session may hold at most 100 (--live-streams-per-
# session), so these runs answer 429 until gatehouse-bench spreads its streams over sessions. SYNC_IDLE_CONNECTIONS=""
# skips them.
for connections in ${SYNC_IDLE_CONNECTIONS-1000 10000}; do
    before=$(rss_kib "$server")
    GATEHOUSE_BENCH_BEARER=$token "$bench" sync idle --url "$base" --company "$cid" --connections "$connections" \
        --concurrency 8 --hold 5 >"$work/idle.out" &
    idle=$!
    for _ in $(seq 1 1200); do grep -q '^open' "$work/idle.out" 2>/dev/null && break; sleep 0.1; done
    during=$(rss_kib "$server")
    wait "$idle"
    echo "idle connections=$connections rss_before_mib=$((before / 1024)) rss_open_mib=$((during / 1024)) per_connection_kib=$(((during - before) / connections))"
done

echo "== PostgreSQL, two instances on one database"
pg_bin=$(dirname "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | head -1)")
mkdir -p "$work/pg" && chown postgres "$work/pg"
pg_port=$(free_port)
su postgres -s /bin/bash -c "'$pg_bin/initdb' -D '$work/pg/data' -U gatehouse -A trust -E UTF8 --no-locale" >/dev/null
su postgres -s /bin/bash -c "'$pg_bin/pg_ctl' -D '$work/pg/data' -l '$work/pg/log' -w -t 60 -o \"-p $pg_port -k '$work/pg' -c listen_addresses=127.0.0.1\" start" >/dev/null
url="postgres://gatehouse@127.0.0.1:$pg_port/postgres"
one=$(free_port)
two=$(free_port)
# One issuer and one data folder (the key file) for both, as a deployment behind one URL would have.
serve "$one" "$work/pgdata" "http://127.0.0.1:$one" --database-url "$url"
serve "$two" "$work/pgdata" "http://127.0.0.1:$one" --database-url "$url"
access=$(account "http://127.0.0.1:$one" "$work/pgdata")
read -r cid token <<<"$(company "http://127.0.0.1:$one" "$access")"
GATEHOUSE_BENCH_BEARER=$token "$bench" sync push --url "http://127.0.0.1:$one" --company "$cid" --batches 200 --concurrency 4
GATEHOUSE_BENCH_BEARER=$token "$bench" sync latency --url "http://127.0.0.1:$one" --company "$cid" --changes 1000
GATEHOUSE_BENCH_BEARER=$token "$bench" sync latency --url "http://127.0.0.1:$one" --other-url "http://127.0.0.1:$two" \
    --company "$cid" --changes 1000
read -r cid token <<<"$(company "http://127.0.0.1:$one" "$access")"
GATEHOUSE_BENCH_BEARER=$token "$bench" sync first-sync --url "http://127.0.0.1:$one" --company "$cid" --records 10000
