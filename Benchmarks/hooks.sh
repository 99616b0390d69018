#!/usr/bin/env bash
# What each auth hook adds to a sign-in, for docs/benchmarks.md, against a release build (Benchmarks/hooks.py): a
# local hook receiver that answers at once, and a server started with no hook, then with each hook on alone, then
# with all of them; each times password sign-ins and sign-ups one at a time (SQLite store).
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/hooks.sh [path/to/gatehouse]
# Environment: BENCH_REQUESTS (200 of each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
requests=${BENCH_REQUESTS:-200}
work=$(mktemp -d /tmp/gatehouse-hooks-bench.XXXXXX)
server=""
receiver=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap 'stop; [ -z "$receiver" ] || kill "$receiver" 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

python3 "$root/Benchmarks/hooks.py" receiver >"$work/receiver.out" &
receiver=$!
for _ in $(seq 1 100); do grep -q READY "$work/receiver.out" 2>/dev/null && break; sleep 0.05; done
hooks="http://127.0.0.1:$(awk '/READY/ {print $2}' "$work/receiver.out")"
secret="v1,whsec_$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"

run_one() {  # label, then hook flags
    local label=$1
    shift
    local data="$work/data-$RANDOM"
    port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$data" --public-url "$base")
    "$binary" migrate "${args[@]}" >/dev/null
    "$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 "$@" &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
    curl -sf "$base/health/ready" >/dev/null || { echo "gatehouse did not become ready" >&2; exit 1; }
    key=$("$binary" keys service-key "${args[@]}" 2>/dev/null)
    python3 "$root/Benchmarks/hooks.py" run --gatehouse "$base" --key "$key" --label "$label" --requests "$requests"
    stop
}

hook() { echo "--hook-$1-uri $hooks/$2 --hook-$1-secrets $secret"; }

echo "== $(nproc) cores, $requests of each after 5 unmeasured, one at a time; SQLite; receiver on the same cores"
echo "| hooks on | sign-in median ms | sign-in p95 ms | sign-up median ms | sign-up p95 ms |"
echo "|---|---:|---:|---:|---:|"
run_one "none"
# shellcheck disable=SC2046
run_one "custom access token" $(hook custom-access-token claims)
# shellcheck disable=SC2046
run_one "password verification attempt" $(hook password-verification-attempt password)
# shellcheck disable=SC2046
run_one "before user created" $(hook before-user-created before)
# shellcheck disable=SC2046
run_one "send email" $(hook send-email email)
# shellcheck disable=SC2046
run_one "all five" $(hook custom-access-token claims) $(hook password-verification-attempt password) \
    $(hook before-user-created before) $(hook send-email email) $(hook mfa-verification-attempt mfa)
