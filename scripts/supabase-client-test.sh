#!/usr/bin/env bash
# GoTrue wire parity, held by a client nobody here wrote: Supabase's official Python client (supabase-auth, pinned in
# scripts/requirements-test.txt) against the gatehouse binary, under pytest. Tests/supabase/test_accounts.py drives
# the account flows an app built on it uses; Tests/supabase/test_parity.py holds GoTrue's behaviours the server is
# catching up on, as strict xfails until it does (a pass there fails the run: the mark has to come off).
#
# Each test starts its own server on a free loopback port with a throwaway data folder and no SMTP (mail lands in
# <data>/outbox/*.eml) and stops it when the test ends. Installs scripts/requirements-test.txt when the imports fail.
# Ends with a line "supabase-auth: <pytest's summary>" and pytest's exit status; no test collected (5) is a failure.
#
# Usage: scripts/supabase-client-test.sh [path/to/gatehouse] [pytest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/debug/gatehouse}
shift || true

modules=pytest,supabase_auth,bcrypt,argon2,pyotp,zxingcpp,cairosvg,fido2,soft_webauthn,authlib,flask,saml2,lxml,oic
if ! python3 -c "import $modules" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
# Tests/saml/idp.py (test_sso.py's identity provider) signs through pysaml2, which runs Debian's xmlsec1.
if ! command -v xmlsec1 >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q xmlsec1 >/dev/null ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q xmlsec1 >/dev/null; }
fi
if [ ! -x "$binary" ]; then
    echo "supabase-auth: no executable gatehouse at $binary" >&2
    exit 1
fi
# The tests start it from their own working folder's point of view: an absolute path.
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")

log=$(mktemp /tmp/gatehouse-supabase-log.XXXXXX)
tests=
follow=
cleanup() {
    [ -z "$tests" ] || kill "$tests" 2>/dev/null
    [ -z "$tests" ] || wait "$tests" 2>/dev/null
    [ -z "$follow" ] || kill "$follow" 2>/dev/null
    rm -f "$log"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# In the background, so a TERM (scripts/test's timeout) reaches the trap at once; pytest turns it into an interrupt
# and its fixtures stop their servers. Its output is followed as it is written and kept for the summary line. No
# bytecode or cache folders in the work tree, and no plugins but pytest's own (Schemathesis and Hypothesis add theirs).
GATEHOUSE_BINARY="$binary" PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
    python3 -m pytest -p no:cacheprovider -v -rxXfE Tests/supabase "$@" >"$log" 2>&1 &
tests=$!
tail -n +1 -f --pid="$tests" "$log" &
follow=$!
set +e
wait "$tests"
code=$?
set -e
tests=
wait "$follow" 2>/dev/null || true
follow=

# pytest's closing line, "=== 19 passed, 2 xfailed in 21.05s ===", without its rule.
line=$(grep -E '^=+ .* in [0-9.]+s( \([0-9:]+\))? =+$' "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//' || true)
if [ "$code" = 5 ]; then
    line="no tests collected (${line:-pytest printed no summary})"
fi
echo "supabase-auth: ${line:-no summary line (pytest exited with $code)}"
exit "$code"
