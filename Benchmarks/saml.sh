#!/usr/bin/env bash
# SAML assertions verified per second, end to end, for docs/benchmarks.md, against a release build
# (Benchmarks/saml.py): the tests' pysaml2 identity provider (Tests/saml/idp.py, unchanged; RSA-2048, RSA-SHA256 and
# SHA-256 digests, encryption AES-256-CBC with the key under RSA-OAEP) registered for an Enterprise company, unsolicited
# responses made ahead (each assertion signs in once) and posted to POST /auth/v1/sso/saml/acs without RelayState.
# Per mode (signed-response, signed-both, encrypted-assertion): N posts by 1 client and by 8 at once, the server on
# both cores with the client beside it; then the same 8 at once with the server pinned to core 0 and the client to
# core 1 (one core's rate). Each figure includes the sign-in behind the ACS (account found, session, tokens).
# SQLite, then (BENCH_STORES) a throwaway PostgreSQL cluster. There is no in-process figure: Benchmarks/gatehouse-bench
# is an HTTP load generator and does not link GatehouseServer.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/saml.sh [path/to/gatehouse]
# Environment: BENCH_RESPONSES (300 per run: a response expires 5 minutes after it is made), BENCH_CLIENTS ("1 8"), BENCH_PINNED_CLIENTS (8; "" for no pinned run),
#   BENCH_MODES ("signed-response signed-both encrypted-assertion"), BENCH_STORES ("sqlite"), BENCH_IDPS (2: IdPs making
#   responses at once, pysaml2 being the slow part; each a provider of its own).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
count=${BENCH_RESPONSES:-300}
clients=${BENCH_CLIENTS:-1 8}
pinned=${BENCH_PINNED_CLIENTS-8}
modes=${BENCH_MODES:-signed-response signed-both encrypted-assertion}
stores=${BENCH_STORES:-sqlite}
idps=${BENCH_IDPS:-2}
. "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/gatehouse-saml-bench.XXXXXX)
chmod 755 "$work"
server=""
idp_pids=()
idp_fds=()
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
finish() {
    stop
    for fd in "${idp_fds[@]}"; do exec {fd}>&-; done
    for pid in "${idp_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pg_stop
    rm -rf "$work"
}
trap finish EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The IdPs serve until their standard input closes: a FIFO this script holds open (one per IdP, on fds 3, 4, ...).
# Several make responses at once, each registered as a provider of its own with a domain of its own.
idp_urls=()
for k in $(seq 1 "$idps"); do
    mkfifo "$work/idp$k.in"
    python3 "$root/Tests/saml/idp.py" <"$work/idp$k.in" >"$work/idp$k.out" 2>"$work/idp$k.log" &
    idp_pids+=($!)
    exec {fd}>"$work/idp$k.in"
    idp_fds+=("$fd")
    for _ in $(seq 1 200); do grep -q READY "$work/idp$k.out" && break; sleep 0.05; done
    idp_urls+=("http://127.0.0.1:$(awk '/READY/ { print $2 }' "$work/idp$k.out")")
    curl -sf "${idp_urls[-1]}/metadata" >/dev/null || { echo "IdP $k did not start" >&2; cat "$work/idp$k.log" >&2; exit 1; }
done

serve() {  # label, database URL or "", cores or "" → starts gatehouse (same port and store again), sets $base, $key
    local label=$1 url=$2 cores=$3
    [ -n "${port:-}" ] || port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$work/data-$label" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    local command=("$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1)
    if [ -n "$cores" ]; then taskset -c "$cores" "${command[@]}" & else "${command[@]}" & fi
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
}

run_store() {  # label, database URL or ""
    local label=$1 url=$2 cid
    port=""
    serve "$label" "$url" ""
    python3 "$root/Benchmarks/invitations.py" owner --gatehouse "$base" --data-dir "$work/data-$label" \
        >"$work/owner-$label.json"
    cid=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cid"])' "$work/owner-$label.json")
    stop  # SSO needs the Enterprise tier: set with the store closed, then the server starts again on it
    "$binary" companies set-tier "$cid" enterprise --reason benchmark "${args[@]}" >&2
    serve "$label" "$url" ""
    local sources=() k=0
    for idp_url in "${idp_urls[@]}"; do
        k=$((k + 1))
        python3 "$root/Benchmarks/saml.py" setup --gatehouse "$base" --key "$key" --idp "$idp_url" --cid "$cid" \
            >"$work/setup-$label-$k.json"
        sources+=(--idp "$idp_url" --setup "$work/setup-$label-$k.json")
    done
    python3 "$root/Benchmarks/saml.py" run --gatehouse "$base" "${sources[@]}" \
        --label "$label" --count "$count" --clients "$clients" --modes "$modes" --pid "$server"
    stop
    if [ -n "$pinned" ]; then
        serve "$label" "$url" 0
        taskset -c 1 python3 "$root/Benchmarks/saml.py" run --gatehouse "$base" "${sources[@]}" \
            --label "$label-server-on-core-0" --count "$count" --clients "$pinned" \
            --modes "$modes" --pid "$server"
        stop
    fi
}

echo "== $(nproc) cores, $count responses per run, clients: $clients (pinned: ${pinned:-none}), modes: $modes;" \
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
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
