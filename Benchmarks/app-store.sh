#!/usr/bin/env bash
# App Store figures for docs/benchmarks.md, against a release build: notifications applied per second on SQLite and on
# PostgreSQL (each one SUBSCRIBED of its own subscription: two JWS verified, a subscription bound, the company's tier
# settled, an audit event, one transaction), and JWS verifications per second on both cores and on one (the same
# notification replayed: both its JWS verified in full, then found applied already). Notifications are signed by a
# chain of the tests' peer (Tests/GatehouseServerTests/Support/app_store_peer.py: cryptography and PyJWT), which the
# server is told to trust; wrk posts them (Benchmarks/app-store.lua).
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/app-store.sh [path/to/gatehouse]
# Environment: BENCH_SECONDS (10), BENCH_CONCURRENCY (16), BENCH_NOTIFICATIONS (30000: more than a run applies).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
seconds=${BENCH_SECONDS:-10}
concurrency=${BENCH_CONCURRENCY:-16}
count=${BENCH_NOTIFICATIONS:-30000}
peer="$root/Tests/GatehouseServerTests/Support/app_store_peer.py"
. "$root/scripts/pg-cluster.sh"
if ! command -v wrk >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
work=$(mktemp -d /tmp/gatehouse-app-store-bench.XXXXXX)
chmod 755 "$work"
server=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap 'stop; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
H='Content-Type: application/json'

python3 "$peer" chain "$work"

serve() {  # data dir, database URL or "", pinned cores or "" → starts gatehouse, sets $base
    local data=$1 url=$2 cores=$3 port
    port=$(free_port)
    base="http://127.0.0.1:$port"
    local args=(serve --port "$port" --data-dir "$data" --public-url "$base" --log-level warning
        --app-store-bundle-ids com.example.gatehouse --app-store-app-id 1234567890
        --app-store-products com.example.gatehouse.business.monthly=business
        --app-store-root-certificates "$work/root.pem")
    [ -z "$url" ] || args+=(--database-url "$url")
    if [ -n "$cores" ]; then taskset -c "$cores" "$binary" "${args[@]}" & else "$binary" "${args[@]}" & fi
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && return; sleep 0.05; done
    echo "gatehouse did not become ready" >&2
    exit 1
}

company_token() {  # data dir → the app_account_token of a new company (its owner confirmed from the outbox)
    local data=$1 email="bench-$RANDOM$RANDOM@example.com" mail code access cid session
    curl -sf "$base/auth/v1/signup" -H "$H" -d "{\"email\":\"$email\",\"password\":\"bench password 1\"}" >/dev/null
    for _ in $(seq 1 200); do
        mail=$(grep -l "$email" "$data"/outbox/*.eml 2>/dev/null | head -1 || true)
        [ -n "$mail" ] && break
        sleep 0.05
    done
    code=$(python3 -m quopri -d <"$mail" | tr -d '\r' | grep -oE '^[0-9]{6}$' | head -1)
    access=$(curl -sf "$base/auth/v1/verify" -H "$H" -d "{\"type\":\"signup\",\"email\":\"$email\",\"token\":\"$code\"}" \
        | json '["access_token"]')
    cid=$(curl -sf "$base/v1/companies" -H "Authorization: Bearer $access" -H "$H" -d '{"name":"Bench Co"}' | json '["id"]')
    curl -sf -X PUT "$base/v1/companies/$cid/credential" -H "Authorization: Bearer $access" -H "$H" \
        -d '{"username":"bench","password":"company password 1"}' >/dev/null
    session=$(curl -sf "$base/v1/companies/$cid/login" -H "Authorization: Bearer $access" -H "$H" \
        -d '{"username":"bench","password":"company password 1"}' | json '["access_token"]')
    curl -sf "$base/v1/companies/$cid" -H "Authorization: Bearer $session" | json '["app_account_token"]'
}

measure() {  # label, bodies file
    local line
    line=$(wrk -t1 -c"$concurrency" -d"${seconds}s" --latency -s "$root/Benchmarks/app-store.lua" "$base" -- "$2" \
        | grep '^requests=')
    echo "$1 $line"
}

run_store() {  # label, database URL or ""
    local label=$1 url=$2 token
    serve "$work/data-$label" "$url" ""
    token=$(company_token "$work/data-$label")
    python3 "$peer" bulk "$work" "$token" "$count"
    measure "applied store=$label" "$work/notifications.jsonl"
    head -1 "$work/notifications.jsonl" >"$work/one.jsonl"
    measure "replayed store=$label cores=2" "$work/one.jsonl"
    stop
    if [ "$label" = sqlite ]; then
        serve "$work/data-$label" "" 0
        measure "replayed store=$label cores=1" "$work/one.jsonl"
        stop
    fi
}

echo "== $(nproc) cores, ${seconds}s per run, $concurrency connections, notifications signed by the peer's chain"
run_store sqlite ""
pg_install >/dev/null
pg_start
run_store postgres "postgres://gatehouse@127.0.0.1:$pg_port/postgres"
