#!/usr/bin/env bash
# Company figures for docs/benchmarks.md (and GET /auth/v1/user beside the no-op route): GET /v1/companies and GET /v1/companies/{cid}/members with 10,000
# companies of 10 members in the store, company logins/s, and the no-op route in the same run, all under wrk on
# loopback against a release build on SQLite.
#   swift build -c release --product gatehouse && Benchmarks/companies.sh [path/to/gatehouse] [seconds]
set -euo pipefail
binary=${1:-.build/release/gatehouse}
seconds=${2:-10}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
work=$(mktemp -d /tmp/gatehouse-companies.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
"$binary" serve --port "$port" --data-dir "$work/data" --log-level warning --trusted-proxies 127.0.0.1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 200); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done

json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
H='Content-Type: application/json'
curl -sf "$base/auth/v1/signup" -H "$H" -d '{"email":"bench@example.com","password":"bench password 1"}' >/dev/null
code=$(python3 -m quopri -d < "$(ls -t "$work"/data/outbox/*.eml | head -1)" | tr -d '\r' | grep -oE '^[0-9]{6}$' | head -1)
access=$(curl -sf "$base/auth/v1/verify" -H "$H" -d "{\"type\":\"signup\",\"email\":\"bench@example.com\",\"token\":\"$code\"}" | json '["access_token"]')
cid=$(curl -sf "$base/v1/companies" -H "Authorization: Bearer $access" -H "$H" -d '{"name":"Bench Co"}' | json '["id"]')
curl -sf -X PUT "$base/v1/companies/$cid/credential" -H "Authorization: Bearer $access" -H "$H" \
    -d '{"username":"bench","password":"company password 1"}' >/dev/null
company=$(curl -sf "$base/v1/companies/$cid/login" -H "Authorization: Bearer $access" -H "$H" \
    -d '{"username":"bench","password":"company password 1"}' | json '["access_token"]')

# 10,000 companies of 10 members each; the bench account is in 10 of them, and Bench Co has 10 members.
python3 - "$work/data/gatehouse.sqlite" "$cid" <<'PY'
import sqlite3, sys, time, uuid
db = sqlite3.connect(sys.argv[1], timeout=30)
bench_co = sys.argv[2]
bench = db.execute("SELECT id FROM accounts WHERE email = 'bench@example.com'").fetchone()[0]
now = int(time.time() * 1000)
accounts = [str(uuid.uuid4()) for _ in range(10_000)]
db.executemany(
    "INSERT INTO accounts (id, email, user_metadata, created_at, updated_at, email_confirmed_at) VALUES (?, ?, ?, ?, ?, ?)",
    [(a, f"seed{i}@example.com", '{"first_name":"Seed","last_name":"%d"}' % i, now, now, now) for i, a in enumerate(accounts)])
companies = [str(uuid.uuid4()) for _ in range(9_999)]
db.executemany(
    "INSERT INTO companies (id, name, owner_id, tier, requires_credential, password_min_length, session_idle_timeout,"
    " session_lifetime, managers_can_share, created_at, updated_at) VALUES (?, ?, ?, 'business', 1, 8, 28800, 2592000, 0, ?, ?)",
    [(c, f"Company {i}", accounts[i], now, now) for i, c in enumerate(companies)])
rows = []
for i, c in enumerate(companies):
    rows.append((c, accounts[i], "owner"))
    for k in range(1, 10 if i >= 9 else 9):
        rows.append((c, accounts[(i + k) % 10_000], "member"))
    if i < 9:
        rows.append((c, bench, "member"))
for k in range(9):
    rows.append((bench_co, accounts[9_990 + k], "member"))
db.executemany(
    "INSERT INTO memberships (company_id, account_id, role, dept_mask, manager_mask, joined_at) VALUES (?, ?, ?, 0, 0, ?)",
    [(c, a, r, now) for c, a, r in rows])
db.commit()
print("seeded:", db.execute("SELECT COUNT(*) FROM companies").fetchone()[0], "companies,",
      db.execute("SELECT COUNT(*) FROM memberships").fetchone()[0], "memberships")
PY

cat > "$work/login.lua" <<LUA
counter = 0
request = function()
  counter = counter + 1
  -- A different client address per request, so the per-IP sign-in limit does not cap the measurement.
  local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer $access",
    ["X-Forwarded-For"] = "10." .. (counter % 250) .. "." .. math.random(0, 250) .. "." .. math.random(1, 250),
  }
  return wrk.format("POST", nil, headers, '{"username":"bench","password":"company password 1"}')
end
LUA

measure() {  # name, connections, extra wrk args…
    local name=$1 connections=$2
    shift 2
    local out
    out=$(wrk -t 2 -c "$connections" -d "${seconds}s" --latency "$@")
    local rps p99 errors
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
    errors=$(echo "$out" | awk '/Non-2xx/ {print $5}')
    printf '%-34s %10s req/s   p99 %8s   non-2xx %s\n' "$name (c=$connections)" "$rps" "$p99" "${errors:-0}"
}
wrk -t 2 -c 32 -d 2s "$base/" >/dev/null
measure "no-op GET /" 32 "$base/"
measure "GET /auth/v1/user" 32 -H "Authorization: Bearer $access" "$base/auth/v1/user"
measure "GET /auth/v1/user (half load)" 4 -H "Authorization: Bearer $access" "$base/auth/v1/user"
measure "GET /v1/companies" 32 -H "Authorization: Bearer $access" "$base/v1/companies"
measure "GET /v1/companies/{cid}/members" 32 -H "Authorization: Bearer $company" "$base/v1/companies/$cid/members"
measure "GET /v1/companies (half load)" 4 -H "Authorization: Bearer $access" "$base/v1/companies"
measure "GET members (half load)" 4 -H "Authorization: Bearer $company" "$base/v1/companies/$cid/members"
measure "POST company login" 8 -s "$work/login.lua" "$base/v1/companies/$cid/login"
echo "listed companies: $(curl -sf "$base/v1/companies" -H "Authorization: Bearer $access" | json '["companies"].__len__()'); members: $(curl -sf "$base/v1/companies/$cid/members" -H "Authorization: Bearer $company" | json '["members"].__len__()')"
