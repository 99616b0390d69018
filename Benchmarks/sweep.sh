#!/usr/bin/env bash
# The sweeper's benchmark (docs/operators.md, "A bounded store"): does a store stay bounded after a million refresh
# rotations, and does refresh stay as fast as on a fresh store? Two runs of the release binary on SQLite, each on a fresh data
# folder seeded by Benchmarks/sweep.py with DEVICES live sessions and BENCH sessions whose tokens wrk rotates:
#   fresh:   no history; wrk refresh for SECONDS.
#   history: every device refreshed every 15 minutes ROTATIONS times (DEVICES × ROTATIONS rotated tokens and as many
#            audit events); wrk refresh before the first sweep, then the sweep (logged by the server), then wrk again.
# The store's size (pages in use; rows and bytes of refresh_tokens, sessions, audit_events) is printed before and
# after the sweep. The server runs with --audit-retention 86400 (a day, the shortest allowed), so that the audit
# events of the seeded days show the retention at work; with the default (400 days) they would all stay.
#
# Usage: Benchmarks/sweep.sh [GATEHOUSE_BINARY]   (default .build-release/release/gatehouse)
# Environment: DEVICES (1000), ROTATIONS (1000), BENCH (34: 32 wrk connections and one more per thread),
#   SECONDS_RUN (10), SWEEP_WAIT (3600: the first sweep starts within the sweep interval, 300 s, and a backlog of a million rows takes minutes),
#   SWEEP_AFTER (1; 0 stops after the history run's first refresh, for the growth figure of Benchmarks/all.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
binary=$(realpath -- "${1:-$root/.build-release/release/gatehouse}")
devices=${DEVICES:-1000}
rotations=${ROTATIONS:-1000}
bench=${BENCH:-34}
seconds=${SECONDS_RUN:-10}
sweep_wait=${SWEEP_WAIT:-3600}
command -v wrk >/dev/null || { echo "sweep.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
[ -x "$binary" ] || { echo "sweep.sh: no binary at $binary" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-sweep-bench.XXXXXX")
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
    done
    return 1
}

# Starts the server on a data folder (migrating it), stops it, seeds it, and starts it again: the sweeper's first
# sweep then comes between 150 and 300 s after this start.
start() {  # name, rotations
    name=$1
    local rotations=$2
    data="$work/$name"
    port=$(free_port)
    url="http://127.0.0.1:$port"
    log="$work/$name.log"
    run_server() {
        env -u GATEHOUSE_DATABASE_URL "$binary" serve --host 127.0.0.1 --port "$port" --data-dir "$data" \
            --log-level info --audit-retention 86400 --trusted-proxies 127.0.0.1 >>"$log" 2>&1 &
        server_pid=$!
        for _ in $(seq 1 600); do
            curl -fsS --max-time 1 -o /dev/null "$url/health/ready" 2>/dev/null && return 0
            sleep 0.1
        done
        echo "sweep.sh: the server did not become ready" >&2
        exit 1
    }
    run_server
    kill -TERM "$server_pid"; wait "$server_pid" || true
    echo "== $name: seeding $devices devices × $rotations rotations" >&2
    local started=$SECONDS
    python3 "$here/sweep.py" seed "$data/gatehouse.sqlite" "$devices" "$rotations" "$bench" >"$work/$name.tokens"
    echo "== $name: seeded in $((SECONDS - started)) s" >&2
    run_server
}

stop() {
    kill -TERM "$server_pid"; wait "$server_pid" || true
    server_pid=""
}

refresh() {  # label: one wrk run of refresh rotations, printed as "label rps p50 p99"
    local out
    out=$(wrk -t 2 -c 32 -d "${seconds}s" --latency -s "$here/refresh.lua" "$url" -- "$work/$name.tokens" 2)
    local rps p50 p99 non2xx
    rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
    p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
    p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
    non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
    echo "$1 rps=$rps p50=$p50 p99=$p99${non2xx:+ non2xx=$non2xx INVALID}"
}

size() {  # label
    echo "$1 $(python3 "$here/sweep.py" size "$data/gatehouse.sqlite") file=$(stat -c %s "$data/gatehouse.sqlite")"
}

start fresh 0
size "fresh:size"
refresh "fresh:refresh"
stop

# wrk keeps the successors in memory only, so the history run gets its own bench sessions.
start history "$rotations"
size "history:size-before-sweep"
refresh "history:refresh-before-sweep"
if [ "${SWEEP_AFTER:-1}" = 0 ]; then
    stop
    exit 0
fi
echo "== history: waiting for the first sweep (up to $sweep_wait s)" >&2
for _ in $(seq 1 "$sweep_wait"); do
    grep -q '"store swept"\|store swept' "$log" && break
    sleep 1
done
{ grep 'store swept' "$log" || echo 'no sweep logged'; } | tail -1 | sed 's/^/history:sweep /'
size "history:size-after-sweep"
python3 "$here/sweep.py" tokens "$data/gatehouse.sqlite" "$bench" >"$work/history.tokens"
refresh "history:refresh-after-sweep"
stop
