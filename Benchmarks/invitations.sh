#!/usr/bin/env bash
# Invitation round trips for docs/benchmarks.md, against a release build (Benchmarks/invitations.py): an owner's
# company on the Enterprise tier (no participant limit), invitees with confirmed addresses made through the admin API,
# then per client count N invitations made (POST /v1/companies/{cid}/invitations, the owner's company session) and
# those N accepted by their invitees (POST /v1/invitations/{id}/accept), C at once; last M whole round trips one at a
# time: invite, the mail read from the outbox, accept with its code. SQLite, then a throwaway PostgreSQL cluster.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/invitations.sh [path/to/gatehouse]
# Environment: BENCH_INVITATIONS (1000 per run), BENCH_CLIENTS ("1 8"), BENCH_FLOWS (200),
#   BENCH_STORES ("sqlite postgres").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
count=${BENCH_INVITATIONS:-1000}
clients=${BENCH_CLIENTS:-1 8}
flows=${BENCH_FLOWS:-200}
stores=${BENCH_STORES:-sqlite postgres}
. "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/gatehouse-invitations-bench.XXXXXX)
chmod 755 "$work"
server=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap 'stop; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

serve() {  # label, database URL or "" → starts gatehouse (same port and store on a restart), sets $base, $key, $args
    local label=$1 url=$2
    [ -n "${port:-}" ] || port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$work/data-$label" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
}

run_store() {  # label, database URL or ""
    local label=$1 url=$2 cid
    port=""
    serve "$label" "$url"
    python3 "$root/Benchmarks/invitations.py" owner --gatehouse "$base" --data-dir "$work/data-$label" \
        >"$work/owner-$label.json"
    cid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cid"])' "$work/owner-$label.json")
    stop  # the tier is set with the store closed, then the server starts again on it
    "$binary" companies set-tier "$cid" enterprise --reason benchmark "${args[@]}" >&2
    serve "$label" "$url"
    python3 "$root/Benchmarks/invitations.py" run --gatehouse "$base" --key "$key" --data-dir "$work/data-$label" \
        --owner "$work/owner-$label.json" --label "$label" --count "$count" --clients "$clients" --flows "$flows"
    stop
}

echo "== $(nproc) cores, $count invitations per run, clients: $clients, $flows whole round trips;" \
    "client and server on the same cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
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
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
