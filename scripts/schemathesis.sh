#!/usr/bin/env bash
# Runs Schemathesis (PyPI) with every check against the gatehouse binary, signed in as a fresh confirmed account whose
# token stays valid for the run (logout and session revocation are left out). Not yet part of scripts/test: the
# structure issue brings its failures to zero first. Usage: scripts/schemathesis.sh [path/to/gatehouse]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/debug/gatehouse}
python3 -m pip install -q --disable-pip-version-check schemathesis
work=$(mktemp -d /tmp/gatehouse-schemathesis.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$binary" serve --port "$port" --data-dir "$work/data" --log-level error --metrics-token "schemathesis-metrics-token" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.1; done
H='Content-Type: application/json'
curl -sf "$base/auth/v1/signup" -H "$H" -d '{"email":"schemathesis@example.com","password":"correct horse battery"}' >/dev/null
for _ in $(seq 100); do ls "$work"/data/outbox/*.eml >/dev/null 2>&1 && break; sleep 0.1; done
code=$(python3 -m quopri -d < "$(ls -t "$work"/data/outbox/*.eml | head -1)" | tr -d '\r' | grep -oE '^[0-9]{6}$' | head -1)
token=$(curl -sf "$base/auth/v1/verify" -H "$H" -d "{\"type\":\"signup\",\"email\":\"schemathesis@example.com\",\"token\":\"$code\"}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
schemathesis run Sources/GatehouseAPI/openapi.yaml -u "$base" -H "Authorization: Bearer $token" --checks all \
    --exclude-operation-id logout --exclude-operation-id revokeSession --max-examples 30 \
    --phases examples,coverage,fuzzing
