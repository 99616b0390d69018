#!/usr/bin/env bash
# `gatehouse users import` on a Supabase export of N users (auth.users as COPY ... CSV writes it, each with a bcrypt
# hash made by Python's bcrypt at cost 4), into a fresh SQLite store: the dry run (every row checked against the
# file and the store), the import, and a second run of the same file (every user already here). Then the first
# password sign-in of imported users, whose hash is checked and replaced by yescrypt, against a signed-in user's.
#
# Usage: Benchmarks/import.sh [path/to/gatehouse] [N]   (default: .build-release/release/gatehouse, 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build-release/release/gatehouse}
count=${2:-10000}
python3 -m pip install -q --disable-pip-version-check bcrypt==5.0.0
work=$(mktemp -d /tmp/gatehouse-import-bench.XXXXXX)
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null
    [ -z "$server" ] || wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

python3 - "$count" >"$work/users.csv" <<'EOF'
import bcrypt, csv, json, sys, uuid
hashed = bcrypt.hashpw(b"bench passphrase 1", bcrypt.gensalt(rounds=4)).decode()
writer = csv.writer(sys.stdout, lineterminator="\n")
writer.writerow(["id", "email", "encrypted_password", "email_confirmed_at", "created_at", "raw_app_meta_data",
                 "raw_user_meta_data"])
for index in range(int(sys.argv[1])):
    writer.writerow([str(uuid.uuid4()), f"user{index}@example.com", hashed, "2024-01-02 03:04:05+00",
                     "2024-01-01 00:00:00+00", "{}", json.dumps({"n": index})])
EOF
data="$work/data"
timed() {
    local label=$1
    shift
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
    end=$(date +%s.%N)
    printf '%-44s %6.2f s   %s\n' "$label" "$(echo "$end - $start" | bc)" "$(tail -1 "$work/out")"
}
echo "users: $count (bcrypt cost 4), SQLite"
timed "dry run (checks only)" "$binary" users import "$work/users.csv" --from supabase --dry-run --data-dir "$data"
timed "import" "$binary" users import "$work/users.csv" --from supabase --data-dir "$data"
timed "the same file again" "$binary" users import "$work/users.csv" --from supabase --data-dir "$data"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$binary" serve --port "$port" --data-dir "$data" --log-level error &
server=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
# Each first sign-in checks the imported bcrypt hash, then rehashes to yescrypt; the second checks yescrypt.
python3 - "$port" <<'EOF'
import json, statistics, sys, time, urllib.request
port = sys.argv[1]
def sign_in(index):
    body = json.dumps({"email": f"user{index}@example.com", "password": "bench passphrase 1"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/auth/v1/token?grant_type=password", body,
                                     {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200
    return (time.perf_counter() - start) * 1000
# Twelve of each: the per-address sign-in limit (30 in 5 minutes) holds the rest back.
first = [sign_in(index) for index in range(12)]
second = [sign_in(index) for index in range(12)]
print(f"first sign-in (bcrypt check + yescrypt rehash), median of 12: {statistics.median(first):.1f} ms")
print(f"second sign-in (yescrypt), median of 12:                  {statistics.median(second):.1f} ms")
EOF
