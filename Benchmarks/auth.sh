#!/usr/bin/env bash
# Auth benchmark of Gatehouse: builds the load generator in Benchmarks/gatehouse-bench, starts a gatehouse server
# on a free loopback port with a fresh data folder, creates confirmed accounts, measures the noop, password,
# refresh and user scenarios (and password and user at half their closed-loop rate), prints a summary, and stops
# the server on exit whatever happens. Everything stays on 127.0.0.1, and every step is bounded in time.
#
# Usage: Benchmarks/auth.sh [GATEHOUSE_BINARY [HASH_MS]]
#   GATEHOUSE_BINARY  the server to measure (default .build-release/release/gatehouse, from
#                     `swift build -c release --product gatehouse --scratch-path .build-release`)
#   HASH_MS           one password hash's time in ms on this machine (default 20); the password scenario is
#                     compared with the bound cores / HASH_MS, since every sign-in computes one hash
# Environment: BENCH_SECONDS (10), BENCH_WARMUP (2), BENCH_CONCURRENCY (32), BENCH_ACCOUNTS (64),
#   BENCH_HALF_LOAD (1; 0 skips the fixed-rate runs), GATEHOUSE_BENCH_DATABASE_URL (postgres://… to measure on
#   PostgreSQL instead of SQLite; use a throwaway database, the benchmark writes accounts and sessions to it),
#   BENCH_SCENARIOS ("noop password refresh user"; `name@rate` offers that many requests/s on a fixed schedule),
#   BENCH_SEED (0; that many more accounts, each with a session and a refresh token, are written straight into
#   the store before measuring, so the indexes hold as many rows as a large deployment's), BENCH_WRK (1; 0 skips the
#   wrk runs of the no-op, the protected GET and refresh, made when wrk is installed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# A binary given on the command line is relative to the caller's folder, the default to the repository's root.
if [ $# -ge 1 ]; then
    binary=$(realpath -- "$1")
else
    binary="$root/.build-release/release/gatehouse"
fi
hash_ms=${2:-20}
seconds=${BENCH_SECONDS:-10}
warmup=${BENCH_WARMUP:-2}
concurrency=${BENCH_CONCURRENCY:-32}
accounts=${BENCH_ACCOUNTS:-64}
half_load=${BENCH_HALF_LOAD:-1}
scenarios=${BENCH_SCENARIOS:-noop password refresh user}
seed=${BENCH_SEED:-0}
use_wrk=${BENCH_WRK:-1}
cores=$(nproc)

if [ ! -x "$binary" ]; then
    echo "auth.sh: no gatehouse binary at $binary; build one with" >&2
    echo "  swift build -c release --product gatehouse --scratch-path .build-release" >&2
    exit 2
fi

echo "== building gatehouse-bench (release)" >&2
package="$root/Benchmarks/gatehouse-bench"
scratch="$package/.build-bench"
swift build -c release --package-path "$package" --scratch-path "$scratch" >&2
bench="$(swift build -c release --package-path "$package" --scratch-path "$scratch" --show-bin-path)/gatehouse-bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-auth-bench.XXXXXX")
server_pid=""

# Stops the server (SIGTERM, then SIGKILL after 10 s), shows the end of its log after a failure, and removes the
# data folder, which holds mailed codes.
cleanup() {
    local status=$?
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ "$status" != 0 ] && [ -s "$work/server.log" ]; then
        echo "auth.sh: the server's log ends:" >&2
        tail -n 20 "$work/server.log" >&2
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing answers on; the server binding it a moment later could still lose a race, which it reports.
free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

port=$(free_port) || { echo "auth.sh: no free port found" >&2; exit 1; }
url="http://127.0.0.1:$port"
database="SQLite"
database_args=()
if [ -n "${GATEHOUSE_BENCH_DATABASE_URL:-}" ]; then
    database="PostgreSQL"
    database_args=(--database-url "$GATEHOUSE_BENCH_DATABASE_URL")
fi
# The server sees no GATEHOUSE_* variable of the caller's, so only the flags here configure it.
server_env=(env)
for name in $(compgen -e); do
    case "$name" in GATEHOUSE_*) server_env+=(-u "$name") ;; esac
done

echo "== starting $binary on $url ($database)" >&2
"${server_env[@]}" "$binary" serve --host 127.0.0.1 --port "$port" --data-dir "$work/data" \
    --log-level warning --trusted-proxies 127.0.0.1 "${database_args[@]}" >"$work/server.log" 2>&1 &
server_pid=$!

ready=0
for _ in $(seq 1 600); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        break
    fi
    if curl -fsS --max-time 1 -o /dev/null "$url/health/ready" 2>/dev/null; then
        ready=1
        break
    fi
    sleep 0.1
done
if [ "$ready" != 1 ]; then
    echo "auth.sh: the server did not become ready within 60 s" >&2
    exit 1
fi

# A random password for this run only, passed through the environment so that it never shows in `ps`.
GATEHOUSE_BENCH_PASSWORD="bench-$(head -c 18 /dev/urandom | base64 | tr '+/' 'xy')"
export GATEHOUSE_BENCH_PASSWORD
accounts_file="$work/accounts.txt"
# Every bench process is stopped if it overruns the measured time plus warm-up plus 90 s; --foreground lets a
# Ctrl-C reach it at once rather than after its run.
limit=$(awk -v s="$seconds" -v w="$warmup" 'BEGIN { printf "%d", s + w + 90 }')

echo "== creating $accounts confirmed accounts" >&2
timeout --foreground --kill-after=5 300 "$bench" setup --url "$url" --outbox "$work/data/outbox" \
    --accounts "$accounts" --out "$accounts_file" >&2

if [ "$seed" -gt 0 ]; then
    echo "== seeding $seed more accounts with a session and a refresh token each" >&2
    BENCH_SEED_SQLITE="$work/data/gatehouse.sqlite" timeout 1200 python3 "$here/seed.py" "$seed" >&2
fi

failed=0
declare -A results

# Runs one scenario, prints its line, and keeps it; an invalid run (any non-2xx answer) fails the script at the end.
measure() {
    local key=$1 scenario=$2
    shift 2
    local line status=0
    line=$(timeout --foreground --kill-after=5 "$limit" "$bench" run "$scenario" --url "$url" \
        --accounts-file "$accounts_file" --concurrency "$concurrency" --seconds "$seconds" --warmup "$warmup" "$@") ||
        status=$?
    # A Ctrl-C ends the bench by signal, and bash would go on with the next run: stop here instead.
    if [ "$status" -ge 128 ]; then
        echo "auth.sh: the $scenario run was stopped by a signal" >&2
        exit "$status"
    fi
    if [ "$status" != 0 ]; then
        failed=1
        line="${line:-$scenario: failed with exit status $status} INVALID"
    fi
    echo "$line"
    results[$key]=$line
}

# The value of `name=` in a result line, without a unit.
field() {
    sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<"$1"
}

echo "== measuring: concurrency $concurrency, ${warmup} s warm-up + ${seconds} s each" >&2
for entry in $scenarios; do
    case "$entry" in
    *@*) measure "$entry" "${entry%@*}" --rate "${entry#*@}" ;;
    *) measure "$entry" "$entry" ;;
    esac
done

if [ "$half_load" = 1 ]; then
    for scenario in noop password refresh user; do
        [ -n "${results[$scenario]:-}" ] || continue
        rps=$(field "${results[$scenario]}" rps)
        rate=$(awk -v r="${rps:-0}" 'BEGIN { printf "%.1f", r / 2 }')
        if awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
            measure "$scenario-half" "$scenario" --rate "$rate"
        fi
    done
fi

# The same requests under wrk (the tool of the hot-paths issue's figures), which leaves the server more of the two
# cores than the Swift load generator does: the no-op, the protected GET with one session's token, and refresh with
# one refresh token per connection, each rotated into the successor its answer carries (Benchmarks/refresh.lua).
if [ "$use_wrk" = 1 ] && command -v wrk >/dev/null; then
    # One session per connection and one more per thread: wrk calls request() once before the run, which takes a
    # token from the first thread's share without sending it.
    echo "== wrk: signing in $((concurrency + 2)) sessions" >&2
    python3 - "$url" "$accounts_file" "$work/refresh-tokens.txt" "$work/access-token.txt" "$((concurrency + 2))" <<'PY2'
import json, os, sys, urllib.request
url, accounts, tokens_out, access_out, count = sys.argv[1:6]
emails = [line.strip() for line in open(accounts) if line.strip()]
refresh, access = [], None
for i in range(int(count)):
    body = json.dumps({"email": emails[i % len(emails)], "password": os.environ["GATEHOUSE_BENCH_PASSWORD"]}).encode()
    request = urllib.request.Request(url + "/auth/v1/token?grant_type=password", data=body, headers={
        "Content-Type": "application/json", "X-Forwarded-For": f"10.250.{i // 250}.{i % 250 + 1}"})
    session = json.load(urllib.request.urlopen(request, timeout=30))
    refresh.append(session["refresh_token"])
    access = access or session["access_token"]
open(tokens_out, "w").write("\n".join(refresh) + "\n")
open(access_out, "w").write(access)
PY2
    wrk_measure() {  # key, extra wrk args…
        local key=$1 out
        shift
        out=$(timeout --kill-after=5 "$limit" wrk -t 2 -c "$concurrency" -d "${seconds}s" --latency "$@") || true
        local rps p50 p99 non2xx
        rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
        p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
        p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
        non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
        # wrk writes latencies with their unit (us, ms, s); the summary keeps milliseconds.
        ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[0-9]s$/) n *= 1000; printf "%.2f", n }'; }
        local line="$key: rps=$rps p50=$(ms "$p50") p99=$(ms "$p99") max=0 non2xx=${non2xx:-0}"
        if [ -z "$rps" ] || [ -n "$non2xx" ] || grep -q 'error' <<<"$out"; then
            failed=1
            line="$line INVALID"
            echo "$out" >&2
        fi
        echo "$line"
        results[$key]=$line
    }
    echo "== wrk: 2 threads, $concurrency connections, ${seconds} s each" >&2
    wrk -t 2 -c "$concurrency" -d "${warmup}s" "$url/" >/dev/null
    wrk_measure wrk-noop "$url/"
    wrk_measure wrk-user -H "Authorization: Bearer $(cat "$work/access-token.txt")" "$url/auth/v1/user"
    wrk_measure wrk-refresh -s "$here/refresh.lua" "$url" -- "$work/refresh-tokens.txt" 2
    scenarios="$scenarios wrk-noop wrk-user wrk-refresh"
fi

noop_rps=$(field "${results[noop]:-}" rps)
password_rps=$(field "${results[password]:-}" rps)
user_rps=$(field "${results[user]:-}" rps)
echo
echo "== summary: $(basename "$binary") ($binary) on $database, $cores cores shared by server and load generator"
printf '%-14s %10s %10s %10s %10s\n' scenario "req/s" "p50 ms" "p99 ms" "max ms"
for key in $scenarios noop-half password-half refresh-half user-half; do
    [ -n "${results[$key]:-}" ] || continue
    line=${results[$key]}
    printf '%-14s %10s %10s %10s %10s%s\n' "$key" "$(field "$line" rps)" "$(field "$line" p50)" \
        "$(field "$line" p99)" "$(field "$line" max)" "$(grep -q INVALID <<<"$line" && echo '  INVALID' || true)"
done
wrk_share=$(awk -v u="$(field "${results[wrk-user]:-}" rps)" -v n="$(field "${results[wrk-noop]:-}" rps)" \
    'BEGIN { print (n > 0 ? sprintf("%.3f", u / n) : "n/a") }')
echo "wrk user/noop throughput: $wrk_share"
awk -v u="${user_rps:-0}" -v n="${noop_rps:-0}" -v p="${password_rps:-0}" -v c="$cores" -v h="$hash_ms" 'BEGIN {
    bound = c * 1000 / h
    printf "user/noop throughput: %s\n", (n > 0 ? sprintf("%.3f", u / n) : "n/a")
    printf "password vs hash bound: %.1f req/s of %.1f (= %d cores / %s ms per hash): %s\n", p, bound, c, h,
        (bound > 0 ? sprintf("%.3f", p / bound) : "n/a")
}'
if [ "$failed" != 0 ]; then
    echo "auth.sh: some runs were not valid (non-2xx answers or errors); see the lines marked INVALID" >&2
    exit 1
fi
