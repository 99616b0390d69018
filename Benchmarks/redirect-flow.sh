#!/usr/bin/env bash
# The browser redirect flow for docs/benchmarks.md, against a release build: PKCE sign-ins through the tests' real
# OpenID provider (Tests/oidc/provider.py, Authlib on Flask, unchanged), each a browser's four requests and an app's
# code exchange, with every leg timed and every request the provider answers counted (Benchmarks/redirect-flow.py).
# Per store: 8 browsers at once on the cold server (how often discovery and the keys are fetched), then N first
# sign-ins (a new person each) by 1 browser and by 8 at once, then N returning ones (those people again) by 8. Each
# sign-in has an X-Forwarded-For address of its own, so the per-IP limits stay out.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/redirect-flow.sh [path/to/gatehouse]
# Environment: BENCH_SIGNINS (500 per run), BENCH_CLIENTS ("1 8"), BENCH_STORES ("sqlite postgres").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
signins=${BENCH_SIGNINS:-500}
clients=${BENCH_CLIENTS:-1 8}
stores=${BENCH_STORES:-sqlite postgres}
. "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/gatehouse-redirect-bench.XXXXXX)
chmod 755 "$work"
server=""
provider=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
finish() {
    local status=$?
    stop
    [ -z "$provider" ] || kill "$provider" 2>/dev/null
    if [ "$status" != 0 ] || grep -q Traceback "$work/provider.log"; then
        echo "-- the provider's log:" >&2
        tail -60 "$work/provider.log" >&2
    fi
    pg_stop
    rm -rf "$work"
}
trap finish EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

provider_port=$(free_port)
issuer="http://127.0.0.1:$provider_port"
python3 "$root/Benchmarks/redirect-flow.py" provider --port "$provider_port" >"$work/provider.log" 2>&1 &
provider=$!
for _ in $(seq 1 200); do curl -sf "$issuer/.well-known/openid-configuration" >/dev/null && break; sleep 0.05; done
curl -sf "$issuer/bench/log" >/dev/null || { echo "the provider did not start" >&2; cat "$work/provider.log" >&2; exit 1; }

serve() {  # label, database URL or "" → starts gatehouse, sets $base and $key
    local label=$1 url=$2 port
    port=$(free_port)
    base="http://127.0.0.1:$port"
    local args=(--port "$port" --data-dir "$work/data-$label" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" serve "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 \
        --site-url "http://app.localhost:3000/" --redirect-urls "http://app.localhost:3000/auth/callback" &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
}

run_store() {  # label, database URL or ""
    serve "$1" "$2"
    python3 "$root/Benchmarks/redirect-flow.py" run --gatehouse "$base" --provider "$issuer" --key "$key" \
        --label "$1" --signins "$signins" --clients "$clients" --pids "gatehouse=$server,provider=$provider"
    stop
}

echo "== $(nproc) cores, $signins sign-ins per run, clients: $clients; client, provider and server on the same cores;" \
    "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for store in $stores; do
    case $store in
        sqlite) run_store sqlite "" ;;
        postgres)
            pg_install >/dev/null
            pg_start
            run_store postgres "postgres://gatehouse@127.0.0.1:$pg_port/postgres"
            ;;
    esac
done
