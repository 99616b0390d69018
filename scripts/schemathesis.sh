#!/usr/bin/env bash
# The contract check scripts/test runs: Schemathesis (from PyPI) with every check against the gatehouse binary.
#
# It signs up a confirmed account, creates a Business company with a credential and logs in to it, so protected
# operations run past 401/403: account operations with the account token, company operations with the company
# session on that company's id. Three operations would end the run's own sessions or company and are left out:
# logout, deleteCompany and deleteCredential (flow tests cover them). The live stream (syncLive) runs with the account
# token: with a company session it would stream for as long as the session lives (SyncFlowTests cover it). The admin
# API's operations carry a service key. The HTML pages are router routes outside the document;
# scripts/browser-test.sh drives them.
#
# Expected statuses of schema-valid requests include Supabase's refusals of well-formed requests (400 for a wrong
# password, code or grant; 422 weak password; 410 an expired share link): the document cannot know a password.
# Required: no failure of any check (no server error, no schema violation, no undocumented status).
#
# Usage: scripts/schemathesis.sh [path/to/gatehouse]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/debug/gatehouse}
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
work=$(mktemp -d /tmp/gatehouse-schemathesis.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Passkeys, the app-site association and the OAuth provider (with dynamic registration) on, so their routes are
# exercised past "off".
"$binary" serve --port "$port" --data-dir "$work/data" --log-level error --metrics-token "schemathesis-metrics-token" \
    --passkeys on --apple-app-ids ABCDE12345.com.example.app --oauth-server on --oauth-allow-dynamic-registration on &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.1; done
H='Content-Type: application/json'
field() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }

curl -sf "$base/auth/v1/signup" -H "$H" -d '{"email":"schemathesis@example.com","password":"correct horse battery"}' >/dev/null
for _ in $(seq 100); do ls "$work"/data/outbox/*.eml >/dev/null 2>&1 && break; sleep 0.1; done
code=$(python3 -m quopri -d < "$(ls -t "$work"/data/outbox/*.eml | head -1)" | tr -d '\r' | grep -oE '^[0-9]{6}$' | head -1)
account=$(curl -sf "$base/auth/v1/verify" -H "$H" \
    -d "{\"type\":\"signup\",\"email\":\"schemathesis@example.com\",\"token\":\"$code\"}" | field access_token)
cid=$(curl -sf "$base/v1/companies" -H "$H" -H "Authorization: Bearer $account" -d '{"name":"Contract Co"}' | field id)
"$binary" companies set-tier "$cid" business --data-dir "$work/data" >/dev/null
curl -sf -X PUT "$base/v1/companies/$cid/credential" -H "$H" -H "Authorization: Bearer $account" \
    -d '{"username":"owner","password":"a long company password"}' >/dev/null
company=$(curl -sf "$base/v1/companies/$cid/login" -H "$H" -H "Authorization: Bearer $account" \
    -d '{"username":"owner","password":"a long company password"}' | field access_token)

# The admin API's operations run with a service key, minted by the command while the server runs.
service=$("$binary" keys service-key --data-dir "$work/data" 2>/dev/null)

cat > "$work/schemathesis.toml" <<EOF
[headers]
Authorization = "Bearer $account"

[parameters]
"path.cid" = "$cid"

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "410", "422", "429"]

[[operations]]
include-operation-id = ["getCompany", "updateCompany", "getCredential", "changeCredentialPassword", "listShares",
    "createShare", "revokeShare", "listMembers", "updateMember", "removeMember", "memberImage", "leaveCompany",
    "transferOwnership", "companyAudit", "syncPull", "syncPush", "syncDigest", "listRecords", "getRecord",
    "listDomains", "addDomain", "verifyDomain", "removeDomain", "getDomainJoin", "setDomainJoin", "listJoinRequests",
    "approveJoinRequest", "declineJoinRequest"]
headers = { Authorization = "Bearer $company" }

[[operations]]
include-operation-id = ["adminListUsers", "adminCreateUser", "adminGetUser", "adminUpdateUser", "adminDeleteUser",
    "adminGenerateLink", "invite", "adminInvite", "adminAudit", "adminListOAuthClients", "adminCreateOAuthClient",
    "adminGetOAuthClient", "adminUpdateOAuthClient", "adminDeleteOAuthClient", "adminRegenerateOAuthClientSecret"]
headers = { Authorization = "Bearer $service" }

[[operations]]
include-operation-id = "getMetrics"
headers = { Authorization = "Bearer schemathesis-metrics-token" }

[[operations]]
include-operation-id = ["logout", "deleteCompany", "deleteCredential"]
enabled = false

# GET /auth/v1/verify is the mailed link's HTML page, a router route outside the contract: the Allow header of a
# refused OPTIONS rightly lists it beside the documented POST.
[[operations]]
include-operation-id = "verify"
checks.unsupported_method.enabled = false
EOF
schemathesis --config-file "$work/schemathesis.toml" run Sources/GatehouseAPI/openapi.yaml -u "$base" --checks all \
    --max-examples 30 --phases examples,coverage,fuzzing --seed 1 --no-color
