#!/usr/bin/env bash
# Console page times for docs/benchmarks.md, against a release build (Benchmarks/console.py): a store seeded with N
# accounts (Benchmarks/seed.py: each with a live session and refresh token, written straight into the store), an
# operator at aal2, then each console page asked for one request at a time: the median and 95th percentile time and
# the page's size. Run at 1 000 and at 1 000 000 accounts: the user list's first page and a search by email should take
# about as long at both (keyset paging on indexes; no OFFSET, no count of every row).
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/console.sh [path/to/gatehouse]
# Environment: BENCH_CONSOLE_USERS ("1000 1000000"), BENCH_REQUESTS (30 per page), BENCH_STORES ("sqlite postgres").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
sizes=${BENCH_CONSOLE_USERS:-1000 1000000}
requests=${BENCH_REQUESTS:-30}
stores=${BENCH_STORES:-sqlite postgres}
. "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/gatehouse-console-bench.XXXXXX)
chmod 755 "$work"
server=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap 'stop; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 -c 'import pyotp' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check pyotp==2.12.0

run_one() {  # store label, database URL or "", account count
    local store=$1 url=$2 count=$3 label data
    label="$store, $count accounts"
    data="$work/data-$store-$count"
    port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$data" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" migrate "${args[@]}" >/dev/null
    if [ -z "$url" ]; then
        BENCH_SEED_SQLITE="$data/gatehouse.sqlite" python3 "$root/Benchmarks/seed.py" "$count" >&2
    else
        GATEHOUSE_BENCH_DATABASE_URL="$url" python3 "$root/Benchmarks/seed.py" "$count" >&2
    fi
    "$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
    python3 "$root/Benchmarks/console.py" operator --gatehouse "$base" --key "$key" >"$work/operator.json"
    email=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["email"])' "$work/operator.json")
    "$binary" operators add "$email" "${args[@]}" >&2
    python3 "$root/Benchmarks/console.py" run --gatehouse "$base" --operator "$work/operator.json" --label "$label" \
        --requests "$requests"
    stop
}

echo "== $(nproc) cores, $requests requests per page after 3 unmeasured; client and server on the same cores"
echo "| store, accounts | page | median ms | p95 ms | size KiB |"
echo "|---|---|---:|---:|---:|"
for store in $stores; do
    for count in $sizes; do
        case $store in
            sqlite) run_one sqlite "" "$count" ;;
            postgres)
                pg_install >/dev/null
                pg_start >/dev/null
                run_one postgres "postgres://gatehouse@127.0.0.1:$pg_port/postgres" "$count"
                pg_stop
                ;;
        esac
    done
done
