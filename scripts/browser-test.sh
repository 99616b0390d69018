#!/usr/bin/env bash
# The web pages in a real browser: headless Chromium (selenium) against the gatehouse binary, every page rendered,
# its forms used end to end with the keyboard alone, axe-core 4.9 in light and dark (no violation of any impact), a
# visible focus indicator on every control, a mail scanner's GET and HEAD of a magic link, account deletion, passkeys
# (a virtual authenticator in the browser), sign-in through an upstream OpenID provider and linking one from the account
# page (Tests/oidc/provider.py, which the tests start on a free port and register through the admin API), single
# sign-on through a company's SAML identity provider on the HTTP-POST binding, its IdP page posting to the assertion
# consumer service, and an XML signature wrapping and an unsigned answer refused (test_saml_sign_in: Tests/saml/idp.py,
# pysaml2 with Debian's xmlsec1, started on a free port and registered through the admin API for an Enterprise
# company), and a company's invitation by email accepted from the account page its mailed link opens
# (test_invitation_acceptance), and the operator console (test_console: an operator with an authenticator app walks
# every console page and action through its confirmation step, at 375 px and in German, stored markup shown as text),
# and Gatehouse as an OAuth provider (the server runs with --oauth-server on; clients registered through the admin API):
# its consent page reached from /auth/v1/oauth/authorize through sign-in, Allow landing on the client's redirect URI
# with the code exchanged under PKCE and Deny with access_denied (test_oauth_consent), acr_values=aal2 through the
# second-factor page (test_oauth_step_up), and the device page with a typed code, its consent and the device's poll
# (test_oauth_device).
# Screenshots of each page in light and dark are written to docs/pages/NAME-{light,dark}.png on every run.
#
# The server runs on a free loopback port with a throwaway data folder and no SMTP, so mail lands in
# <data>/outbox/*.eml; it is stopped when this script exits. Its public URL is http://localhost:PORT, with passkeys on:
# WebAuthn takes a domain as the relying party, never an IP address, and http only on localhost; manual linking is
# on (the account page's Link and Remove buttons). Loopback is a trusted proxy, so a test may give its browser an address of its own
# (`X-Forwarded-For` through the DevTools protocol: test_console, after the suite's address spent its sign-in limit). Installs Debian's chromium, chromium-driver and xmlsec1 and the Python
# packages of scripts/requirements-test.txt when missing.
#
# Usage: scripts/browser-test.sh [path/to/gatehouse] [test names...]   (names with or without test_)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/debug/gatehouse}
shift || true

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "==> installing Debian's chromium and chromium-driver" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if ! command -v xmlsec1 >/dev/null; then
    echo "==> installing Debian's xmlsec1 (the SAML identity provider signs with it)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq xmlsec1 >/dev/null
fi
if ! python3 -c 'import selenium, axe_selenium_python, selenium_axe_python, pyotp, zxingcpp, saml2, lxml' 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi

work=$(mktemp -d /tmp/gatehouse-browser.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$binary" serve --port "$port" --data-dir "$work/data" --log-level error \
    --public-url "http://localhost:$port" --passkeys on --manual-linking on --oauth-server on \
    --app-url gatehouse-example:// --app-store-url https://apps.example.com/gatehouse \
    --trusted-proxies 127.0.0.1,::1 &
server=$!
tests=
cleanup() {
    [ -z "$tests" ] || kill "$tests" 2>/dev/null
    [ -z "$tests" ] || wait "$tests" 2>/dev/null
    kill $server 2>/dev/null
    wait $server 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
base="http://localhost:$port"
ready=no
for _ in $(seq 300); do
    if curl -sf "$base/health/ready" >/dev/null; then ready=yes && break; fi
    kill -0 $server 2>/dev/null || break
    sleep 0.1
done
if [ $ready != yes ]; then
    echo "browser: the server did not become ready at $base" >&2
    exit 1
fi

# In the background, so a TERM (scripts/test's timeout) reaches the trap at once; the tests quit their browsers on it.
PYTHONDONTWRITEBYTECODE=1 python3 -u Tests/browser/pages.py --base "$base" --data-dir "$work/data" --binary "$binary" --shots docs/pages "$@" &
tests=$!
set +e
wait $tests
code=$?
set -e
tests=
exit $code
