#!/usr/bin/env bash
# Webhook delivery throughput for docs/benchmarks.md, against a release build (Benchmarks/webhooks.py): a minimal
# receiver on loopback (each delivery verified with the `standardwebhooks` package, answered 204 at once), E endpoints
# on it for user.created, then N users created through the admin API by C clients at once; the figure is events
# delivered per second from the first creation to the last delivery, and the lag of the last delivery behind the last
# creation, with the backlog left when the last creation was answered and how fast it drained (the dispatcher alone).
# SQLite, then a throwaway PostgreSQL cluster.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/webhooks.sh [path/to/gatehouse]
# Environment: BENCH_WEBHOOK_EVENTS (2000), BENCH_CLIENTS (8), BENCH_WEBHOOK_ENDPOINTS ("1 4"),
#   BENCH_STORES ("sqlite postgres").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
events=${BENCH_WEBHOOK_EVENTS:-2000}
clients=${BENCH_CLIENTS:-8}
endpoint_counts=${BENCH_WEBHOOK_ENDPOINTS:-1 4}
stores=${BENCH_STORES:-sqlite postgres}
. "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/gatehouse-webhooks-bench.XXXXXX)
chmod 755 "$work"
server=""
receiver=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
stop_receiver() {
    [ -z "$receiver" ] || { kill "$receiver" 2>/dev/null; wait "$receiver" 2>/dev/null || true; receiver=""; }
}
trap 'stop; stop_receiver; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 -c 'import standardwebhooks' 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check standardwebhooks==1.1.0

start_receiver() {  # a fresh receiver for each run (its counts start at zero); sets $receiver_url
    local out="$work/receiver-$1.out"
    mkfifo "$work/receiver-in"
    python3 "$root/Benchmarks/webhooks.py" receive >"$out" <"$work/receiver-in" &
    receiver=$!
    exec {receiver_in}>"$work/receiver-in"  # held open: the receiver exits when it closes
    rm "$work/receiver-in"
    for _ in $(seq 1 200); do grep -q READY "$out" 2>/dev/null && break; sleep 0.05; done
    grep -q READY "$out" || { echo "the receiver did not start" >&2; exit 1; }
    receiver_url="http://127.0.0.1:$(awk '/READY/ {print $2}' "$out")"
}

run_one() {  # store label, database URL or "", endpoint count
    local store=$1 url=$2 endpoints=$3 data
    data="$work/data-$store-$endpoints"
    port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$data" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 \
        --webhooks-allow-private-targets on &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
    start_receiver "$store-$endpoints"
    python3 "$root/Benchmarks/webhooks.py" run --gatehouse "$base" --key "$key" --receiver "$receiver_url" \
        --label "$store" --events "$events" --clients "$clients" --endpoints "$endpoints"
    exec {receiver_in}>&-
    stop_receiver
    stop
}

echo "== $(nproc) cores, $clients clients creating users; client, server and receiver on the same cores"
echo "| store | users | endpoints | create s | first creation → last delivery s | deliveries/s |" \
    "lag after last creation s | backlog then | backlog drained/s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for store in $stores; do
    for endpoints in $endpoint_counts; do
        case $store in
            sqlite) run_one sqlite "" "$endpoints" ;;
            postgres)
                pg_install >/dev/null
                pg_start >/dev/null
                run_one postgres "postgres://gatehouse@127.0.0.1:$pg_port/postgres" "$endpoints"
                pg_stop
                ;;
        esac
    done
done
