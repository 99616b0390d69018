#!/usr/bin/env bash
# The OAuth provider's token endpoint, for docs/benchmarks.md, against a release build: requests per second and
# p50/p95/p99 of the code exchange, the OAuth refresh (rotating), client credentials, and beside them the account's
# own refresh, at BENCH_CONCURRENCY connections, on SQLite then PostgreSQL; then the cost of verifying an id token
# against the JWKS (Benchmarks/oauth-server.py). wrk sends the timed requests from one thread; what they send
# (approved codes, the starts of rotation chains) is prepared beforehand, outside the timed part:
# - code exchange: one approved code per request (a code lives 60 s: they are prepared for at most 20 s just before
#   the run, which ends when they run out), client_secret_basic, PKCE verifier, scope openid email profile;
# - OAuth refresh / account refresh: one chain per connection, each request the successor the previous answer of
#   its chain carried (as Benchmarks/refresh.lua); the OAuth refresh twice, for a client with scope openid email
#   profile (an id token each answer) and for one with scope email (none);
# - client credentials: the same form every time, client_secret_basic.
# Every request comes from an X-Forwarded-For address of its own, so per-IP limits stay out.
#   swift build -c release --product gatehouse --scratch-path .build-release
#   Benchmarks/oauth-server.sh [path/to/gatehouse]
# Environment: BENCH_SECONDS (10 per run), BENCH_CONCURRENCY ("8 32"), BENCH_CODES (at most that many codes per
# exchange run: 8000), BENCH_STORES ("sqlite postgres"), BENCH_PG_PORT (a running cluster of scripts/pg-cluster.sh's
# kind, user gatehouse: a throwaway database is made on it and dropped; unset starts a cluster of its own),
# BENCH_VERIFY (id tokens verified: 500; 0 skips).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "${1:-$root/.build-release/release/gatehouse}")
seconds=${BENCH_SECONDS:-10}
concurrencies=${BENCH_CONCURRENCY:-8 32}
max_codes=${BENCH_CODES:-8000}
stores=${BENCH_STORES:-sqlite postgres}
verify=${BENCH_VERIFY:-500}
. "$root/scripts/pg-cluster.sh"
if ! command -v wrk >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
work=$(mktemp -d /tmp/gatehouse-oauth-bench.XXXXXX)
chmod 755 "$work"
server=""
database=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
psql_() {  # psql beside initdb, or Debian's
    local psql=$pg_bin/psql
    [ -x "$psql" ] || psql=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -1)
    "$psql" "$@"
}
drop() {
    [ -z "$database" ] || psql_ -q -h 127.0.0.1 -p "$pg_port" -U gatehouse -d postgres \
        -c "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
    database=""
}
trap 'stop; drop; pg_stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
bench() { python3 "$root/Benchmarks/oauth-server.py" "$@"; }

# One wrk script for the four kinds of request. Arguments: mode (bodies: each line of FILE once, then the run ends;
# rotate: FILE's refresh tokens, each answer's successor queued after them; repeat: FILE's first line every time),
# FILE, path, a file holding the Authorization header or "-", the body's template (%s: the line or token), the
# content type. A bodies run ends when the answer to its last line arrives, before -d: wrk's own duration is then
# not the run's, so the thread takes the wall clock at its first request and its last answer (two `date` calls).
cat >"$work/token.lua" <<'LUA'
local queue, first, last, counter, answered = {}, 1, 0, 0, 0
local path, authorization, template, content_type, peek
local threads = {}
-- Globals, read by done() through thread:get: the mode, the failed answers, the wall clock at start and end.
mode, failed, started, finished = nil, 0, nil, nil

function setup(thread)
  thread:set("id", #threads)
  threads[#threads + 1] = thread
end

local function now()
  local clock = io.popen("date +%s.%N")
  local value = tonumber(clock:read("*l"))
  clock:close()
  return value
end

function init(args)
  mode, path, template, content_type = args[1], args[3], args[5], args[6]
  for line in io.lines(args[2]) do if line ~= "" then last = last + 1; queue[last] = line end end
  if args[4] ~= "-" then authorization = io.open(args[4]):read("*l") end
  -- wrk builds one request on the first thread before the run and never sends it: that one only peeks.
  peek = id == 0 and mode == "bodies"
  -- Only these modes read the answers (wrk reads bodies only for a script with a response function).
  if mode == "rotate" then response = rotated elseif mode == "bodies" then response = counted end
end

function rotated(status, headers, body)
  local token = body:match('"refresh_token":"([^"]+)"')
  if token then last = last + 1; queue[last] = token
  else io.stderr:write("token.lua: answer " .. status .. ": " .. body:sub(1, 200) .. "\n") end
end

function counted(status, headers, body)
  answered = answered + 1
  if status ~= 200 then
    failed = failed + 1
    if failed <= 3 then io.stderr:write("token.lua: answer " .. status .. ": " .. body:sub(1, 200) .. "\n") end
  end
  if answered == last then
    finished = now()
    wrk.thread:stop()
  end
end

-- A connection whose lines ran out waits (the run ends with the last answer) rather than send anything else.
function delay()
  if mode == "bodies" and first > last then return 60000 end
  return 0
end

function request()
  counter = counter + 1
  local item
  if mode == "repeat" or peek then
    item = queue[first]
    peek = false
  else
    item = queue[first]
    queue[first] = nil
    first = first + 1
    if started == nil then started = now() end
  end
  if item == nil then
    if mode == "rotate" then error("no refresh token left: an answer carried none") end
    return wrk.format("GET", "/health/ready")
  end
  local headers = {
    ["Content-Type"] = content_type,
    ["X-Forwarded-For"] = "10." .. (counter % 250) .. "." .. math.random(0, 250) .. "." .. math.random(1, 250),
  }
  if authorization then headers["Authorization"] = authorization end
  return wrk.format("POST", path, headers, string.format(template, item))
end

function done(summary, latency, requests)
  local seconds, non200 = summary.duration / 1e6, summary.errors.status
  local thread = threads[1]
  if thread:get("mode") == "bodies" then
    non200 = thread:get("failed")
    if thread:get("finished") then seconds = thread:get("finished") - thread:get("started") end
  end
  io.write(string.format(
    "requests=%d non200=%d errors=%d seconds=%.2f rps=%.1f p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f\n",
    summary.requests, non200, summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout, seconds, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
LUA

serve() {  # data dir, database URL or "" → migrates, starts gatehouse, sets $base and $args
    local data=$1 url=$2 port
    port=$(free_port)
    base="http://127.0.0.1:$port"
    args=(--data-dir "$data" --public-url "$base")
    [ -z "$url" ] || args+=(--database-url "$url")
    "$binary" migrate "${args[@]}" >/dev/null
    "$binary" serve --port "$port" "${args[@]}" --log-level warning --trusted-proxies 127.0.0.1 --oauth-server on &
    server=$!
    for _ in $(seq 1 400); do curl -sf "$base/health/ready" >/dev/null && return; sleep 0.05; done
    echo "gatehouse did not become ready" >&2
    exit 1
}

measure() {  # store, connections, label, wrk script arguments…
    local store=$1 connections=$2 label=$3 line
    shift 3
    line=$(wrk -t1 -c"$connections" -d"${seconds}s" --latency -s "$work/token.lua" "$base" -- "$@" |
        grep '^requests=')
    echo "store=$store c=$connections grant=$label $line" | tee -a "$work/results" >&2
}

run_store() {  # label, database URL or ""
    local store=$1 url=$2 c
    local form=application/x-www-form-urlencoded
    serve "$work/data-$store" "$url"
    bench setup --gatehouse "$base" --key "$("$binary" keys service-key "${args[@]}" 2>/dev/null)" --out "$work"
    for c in $concurrencies; do
        bench chains --gatehouse "$base" --out "$work" --count $((c + 2))
        measure "$store" "$c" account_refresh rotate "$work/account.tokens" "/auth/v1/token?grant_type=refresh_token" \
            - '{"refresh_token":"%s"}' application/json
        measure "$store" "$c" oauth_refresh rotate "$work/oauth.tokens" /auth/v1/oauth/token "$work/app.auth" \
            'grant_type=refresh_token&refresh_token=%s' "$form"
        measure "$store" "$c" plain_refresh rotate "$work/plain.tokens" /auth/v1/oauth/token "$work/plain.auth" \
            'grant_type=refresh_token&refresh_token=%s' "$form"
        measure "$store" "$c" client_credentials repeat "$work/cc.body" /auth/v1/oauth/token "$work/machine.auth" \
            '%s' "$form"
        bench codes --gatehouse "$base" --out "$work" --count "$max_codes" --seconds 20
        measure "$store" "$c" code_exchange bodies "$work/codes.body" /auth/v1/oauth/token "$work/app.auth" '%s' "$form"
    done
    if [ "$verify" -gt 0 ] && [ "$store" = sqlite ]; then
        bench verify --gatehouse "$base" --out "$work" --count "$verify" >"$work/verify"
    fi
    stop
}

echo "== $(nproc) cores shared by wrk (1 thread), the preparing Python and the server; ${seconds}s per run"
for store in $stores; do
    if [ "$store" = sqlite ]; then
        run_store sqlite ""
    else
        pg_install >/dev/null
        if [ -n "${BENCH_PG_PORT:-}" ]; then
            pg_port=$BENCH_PG_PORT
            database="bench_oauth_$$"
            psql_ -q -h 127.0.0.1 -p "$pg_port" -U gatehouse -d postgres -c "CREATE DATABASE $database"
        else
            pg_start
            database=""
        fi
        run_store postgres "postgres://gatehouse@127.0.0.1:$pg_port/${database:-postgres}"
        drop
    fi
done
bench table "$work/results"
[ ! -s "$work/verify" ] || { echo; cat "$work/verify"; }
