#!/usr/bin/env bash
# Id-token sign-ins per second for docs/benchmarks.md, against a release build, with the provider's keys cached: each
# request is `POST /auth/v1/token?grant_type=id_token` with a token of its own (a token signs in once), signed by a
# key the server fetched once from a JWKS served on loopback (Benchmarks/id-token.py). Two runs per store: first
# sign-ins (each a new person: an account, its identities and a session) and returning ones (a linked identity: a
# session). Tokens come from distinct X-Forwarded-For addresses (Benchmarks/app-store.lua), so per-IP limits stay out.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/id-token.sh [path/to/gatehouse]
# Environment: BENCH_SECONDS (10), BENCH_CONCURRENCY (16), BENCH_TOKENS (40000: more than a run uses).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
seconds=${BENCH_SECONDS:-10}
concurrency=${BENCH_CONCURRENCY:-16}
count=${BENCH_TOKENS:-40000}
. "$root/scripts/pg-cluster.sh"
if ! command -v wrk >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
work=$(mktemp -d /tmp/gatehouse-id-token-bench.XXXXXX)
chmod 755 "$work"
server=""
keys=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap 'stop; [ -z "$keys" ] || kill "$keys" 2>/dev/null; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

python3 "$root/Benchmarks/id-token.py" keys "$work"
keys_port=$(free_port)
python3 -m http.server "$keys_port" --bind 127.0.0.1 --directory "$work/jwks" >/dev/null 2>&1 &
keys=$!

serve() {  # data dir, database URL or "" → starts gatehouse, sets $base
    local data=$1 url=$2 port
    port=$(free_port)
    base="http://127.0.0.1:$port"
    local args=(serve --port "$port" --data-dir "$data" --public-url "$base" --log-level warning
        --trusted-proxies 127.0.0.1 --google-client-ids bench-client
        --google-jwks-url "http://127.0.0.1:$keys_port/certs")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" "${args[@]}" &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && return; sleep 0.05; done
    echo "gatehouse did not become ready" >&2
    exit 1
}

measure() {  # label, bodies file
    local line
    line=$(wrk -t1 -c"$concurrency" -d"${seconds}s" --latency -s "$root/Benchmarks/app-store.lua" "$base" -- "$2" \
        "/auth/v1/token?grant_type=id_token" | grep '^requests=')
    echo "$1 $line"
}

run_store() {  # label, database URL or ""
    local label=$1 url=$2
    serve "$work/data-$label" "$url"
    # First sign-ins: every token a new subject. Returning: the subjects of the first run, each token new.
    python3 "$root/Benchmarks/id-token.py" mint "$work" "$work/new.jsonl" 0 "$count" "$count" bench-client
    measure "first store=$label" "$work/new.jsonl"
    python3 "$root/Benchmarks/id-token.py" mint "$work" "$work/returning.jsonl" "$count" "$count" 2000 bench-client
    measure "returning store=$label" "$work/returning.jsonl"
    stop
}

echo "== $(nproc) cores, ${seconds}s per run, $concurrency connections, ES256 tokens, keys fetched once"
run_store sqlite ""
pg_install >/dev/null
pg_start
run_store postgres "postgres://gatehouse@127.0.0.1:$pg_port/postgres"
