"""Sign-in through an upstream provider in the browser, as GoTrue's custom providers do it, seen through the
official client: the PKCE code exchange (`exchange_code_for_session`), the implicit flow's tokens (`set_session`),
`get_user_identities` and `unlink_identity`. The flows start with the requests `sign_in_with_oauth` and
`link_identity` make, made here (start_sign_in, start_link): supabase-auth 2.34.1 will not return them for a
`custom:` provider (see below).

The upstream is a real OpenID Connect / OAuth 2.0 provider, Tests/oidc/provider.py (Authlib's server, on Flask),
started once for the module on a port of its own. Each test's server registers it twice through the admin API: as
`custom:acme`, an OIDC provider found by discovery, and as `custom:hub`, a GitHub-like OAuth 2.0 provider without
id tokens, whose `/user` answers a numeric `id` mapped to `sub`.

The browser is an httpx client with one cookie jar (the flow is bound to it by a cookie), following redirects one
at a time. The app it comes back to, under APP_ORIGIN, listens nowhere: the browser stops at its URL and the test
reads what the app would read there, the code, the tokens or the error. The provider's sign-in page is a form; the
browser fills it in and posts it to the form's action, as a person would.
"""

import html
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

import httpx
import pydantic
import pytest
from supabase_auth.helpers import generate_pkce_challenge, generate_pkce_verifier

from conftest import POLL, WAIT, free_port, new_email

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROVIDER = os.path.join(ROOT, "Tests", "oidc", "provider.py")
APP_ORIGIN = "http://app.localhost:3000/"  # the app's site: where GoTrue lands when it knows no redirect_to
APP = APP_ORIGIN + "auth/callback"  # where the app asks to come back to, on the allow list
MAX_HOPS = 10  # redirects one navigation may take before the browser gives up

pytestmark = pytest.mark.serve("--manual-linking", "on", "--site-url", APP_ORIGIN, "--redirect-urls", APP)


# --- the upstream provider ---------------------------------------------------------------------------------------


class Provider:
    """Tests/oidc/provider.py as a process of its own: its issuer and its admin API."""

    def __init__(self):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.log_file = tempfile.NamedTemporaryFile(prefix="oidc-provider.", suffix=".log", delete=False)
        self.process = None
        self.http = httpx.Client(base_url=self.issuer, timeout=WAIT, trust_env=False)

    def start(self):
        """Starts the provider and waits, up to WAIT seconds, until its discovery document answers."""
        command = [sys.executable, PROVIDER, "--port", str(self.port)]
        self.process = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT)
        end = time.monotonic() + WAIT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the provider exited with {self.process.returncode}: {self.log()}")
            try:
                if self.http.get("/.well-known/openid-configuration").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > end:
                raise RuntimeError(f"the provider did not answer at {self.issuer} within {WAIT}s: {self.log()}")
            time.sleep(POLL)

    def stop(self):
        self.http.close()
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()
        os.unlink(self.log_file.name)

    def log(self, since=0):
        """What the provider printed (its requests, its errors), from byte `since` on."""
        with open(self.log_file.name, encoding="utf-8", errors="replace") as file:
            file.seek(since)
            return file.read().strip()

    def log_size(self):
        return os.path.getsize(self.log_file.name)

    def register_client(self, redirect_uri, auth_method):
        """A new client at the provider, for the one redirect URI: (client_id, client_secret)."""
        client_id, secret = f"client-{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
        answer = self.http.post(
            "/admin/clients",
            json={
                "client_id": client_id,
                "client_secret": secret,
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": auth_method,
            },
        )
        assert answer.status_code == 201, f"the provider refused the client: {answer.status_code} {answer.text}"
        return client_id, secret

    def kid(self):
        """The key id the provider signs id tokens with now (the only key its JWKS publishes)."""
        keys = self.http.get("/jwks").json()["keys"]
        assert len(keys) == 1, f"the provider publishes {len(keys)} keys"
        return keys[0]["kid"]

    def rotate(self, publish=True):
        """A new signing key, with a new kid, replaces the old one, which is no longer published; unless `publish`
        is false: then the JWKS keeps the old key and the new one signs tokens nobody can verify. Its kid."""
        return self.http.post("/admin/rotate", json={"publish": publish}).json()["kid"]

    def last_token_request(self):
        """How the last token request went: auth_method, code_verifier, code_challenge_method, status, error."""
        return self.http.get("/admin/last-token-request").json()


@pytest.fixture(scope="module")
def provider():
    started = Provider()
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.fixture
def custom_providers(server, service, provider):
    """Registers the provider at this test's server as `custom:acme` (OIDC) and `custom:hub` (OAuth 2.0), each with
    a client of its own at the provider whose redirect URI is the server's callback. What the provider logged during
    the test is printed after it (pytest shows it for a test that failed)."""
    log_start = provider.log_size()
    callback = server.auth_url + "/callback"
    admin = {"Authorization": f"Bearer {service.key}", "apikey": service.key}
    # OIDC's default client authentication is HTTP Basic; GitHub-like providers take the secret in the form.
    acme_id, acme_secret = provider.register_client(callback, "client_secret_basic")
    hub_id, hub_secret = provider.register_client(callback, "client_secret_post")
    registrations = [
        {
            "provider_type": "oidc",
            "identifier": "custom:acme",
            "name": "Acme",
            "client_id": acme_id,
            "client_secret": acme_secret,
            "issuer": provider.issuer,
            "scopes": ["email", "profile"],
            "pkce_enabled": True,
        },
        {
            "provider_type": "oauth2",
            "identifier": "custom:hub",
            "name": "Hub",
            "client_id": hub_id,
            "client_secret": hub_secret,
            "authorization_url": provider.issuer + "/authorize",
            "token_url": provider.issuer + "/token",
            "userinfo_url": provider.issuer + "/user",
            "attribute_mapping": {"sub": "id", "email_verified": True},
        },
    ]
    with httpx.Client(timeout=WAIT, trust_env=False) as http:
        for body in registrations:
            answer = http.post(server.auth_url + "/admin/custom-providers", json=body, headers=admin)
            assert answer.status_code == 201, f"registering {body['identifier']}: {answer.status_code} {answer.text}"
    yield
    print(f"provider log:\n{provider.log(since=log_start)}")


# --- the browser -------------------------------------------------------------------------------------------------


class Landing:
    """The URL the browser came back to the app at, as the app reads it: its query and its fragment."""

    def __init__(self, url):
        self.url = url
        parts = urllib.parse.urlsplit(url)
        self.query = dict(urllib.parse.parse_qsl(parts.query))
        self.fragment = dict(urllib.parse.parse_qsl(parts.fragment))

    def error_code(self):
        """The error code wherever the server put it (query or fragment)."""
        return self.query.get("error_code") or self.fragment.get("error_code")

    def gave_a_session(self):
        """Whether this landing carries what would make a session: a PKCE code or an access token."""
        return "code" in self.query or "access_token" in self.fragment

    def __repr__(self):
        return f"<landed at {self.url}>"


class Browser:
    """A user's browser: one cookie jar, redirects followed one hop at a time until a page or the app."""

    def __init__(self):
        self.http = httpx.Client(timeout=WAIT, trust_env=False, follow_redirects=False)
        self.visited = []  # every URL requested, oldest first

    def close(self):
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def page(self, url):
        """Opens `url` and follows it to the provider's sign-in page."""
        reached = self._walk(self._request("GET", url), APP_ORIGIN)
        assert isinstance(reached, httpx.Response), f"{url} led back to the app ({reached}), not to a sign-in page"
        assert reached.status_code == 200 and 'id="approve"' in reached.text, (
            f"no sign-in page at {reached.url}: {reached.status_code} {reached.text[:500]}"
        )
        return reached

    def land(self, url, stop_at=APP_ORIGIN):
        """Opens `url` and follows it until a redirect points under `stop_at`; that URL as a Landing."""
        return self._landed(self._walk(self._request("GET", url), stop_at), url)

    def approve(self, page, user, stop_at=APP_ORIGIN):
        """Signs in at the provider's page as `user` (the form's fields) and follows on until `stop_at`."""
        return self._submit(page, {**user, "decision": "approve"}, stop_at)

    def deny(self, page):
        """Refuses at the provider's page and follows on back to the app."""
        return self._submit(page, {"decision": "deny"}, APP_ORIGIN)

    def callback(self):
        """The last URL of the server's OAuth callback this browser requested."""
        found = [url for url in self.visited if urllib.parse.urlsplit(url).path.endswith("/auth/v1/callback")]
        assert found, f"the browser never reached the callback; it visited {self.visited}"
        return found[-1]

    def _submit(self, page, fields, stop_at):
        form = re.search(r'<form[^>]*\baction="([^"]*)"', page.text)
        action = urllib.parse.urljoin(str(page.url), html.unescape(form.group(1)) if form else "")
        return self._landed(self._walk(self._request("POST", action, data=fields), stop_at), action)

    def _request(self, method, url, **options):
        self.visited.append(url)
        return self.http.request(method, url, **options)

    def _walk(self, response, stop_at):
        """Follows `response`'s redirects: the URL of the first one under `stop_at`, else the page reached."""
        for _ in range(MAX_HOPS):
            if not response.is_redirect:
                return response
            location = urllib.parse.urljoin(str(response.url), response.headers["location"])
            if location.startswith(stop_at):
                return location
            response = self._request("GET", location)
        raise AssertionError(f"more than {MAX_HOPS} redirects: {self.visited}")

    @staticmethod
    def _landed(reached, started_at):
        assert isinstance(reached, str), (
            f"{started_at} ended at {reached.url} ({reached.status_code}: {reached.text[:500]}), not at the app"
        )
        return Landing(reached)


@pytest.fixture
def browser():
    with Browser() as opened:
        yield opened


# --- helpers -----------------------------------------------------------------------------------------------------


def upstream_user(email=None, verified=True, sub=None, name="Ada Lovelace"):
    """The sign-in form's fields for a user of the provider; an unchecked email_verified is not sent at all."""
    fields = {"email": email or new_email("upstream"), "sub": sub or f"acme-{uuid.uuid4().hex[:12]}", "name": name}
    if verified:
        fields["email_verified"] = "on"
    return fields


def github_user(email=None):
    """A user of the GitHub-like provider: its sub is a number, which /user answers as the integer `id`."""
    return upstream_user(email=email, sub=str(uuid.uuid4().int % 10**9))


# supabase-auth 2.34.1 builds the URL of a `custom:` provider's sign-in and link like any other, then refuses to
# return it: its OAuthResponse types `provider` as a Literal of GoTrue's built-in names (supabase-js has taken
# `custom:<name>` since supabase/supabase-js#2134). Until it does too, start_sign_in and start_link make the very
# requests sign_in_with_oauth and link_identity make, and the official client does all the rest: the code exchange,
# set_session, identities, unlinking. test_the_official_client_starts_a_custom_provider_flow is the strict xfail
# that says when to switch back.


def start_sign_in(server, provider_id, pkce):
    """What sign_in_with_oauth does for `provider_id` with a new client: (the client, the URL of the server's
    /authorize to open in the browser, the PKCE code verifier or None for the implicit flow)."""
    client = server.client(flow_type="pkce" if pkce else "implicit")
    query = {"redirect_to": APP}
    verifier = None
    if pkce:
        verifier = generate_pkce_verifier()
        query.update(code_challenge=generate_pkce_challenge(verifier), code_challenge_method="s256")
    query["provider"] = provider_id
    return client, f"{server.auth_url}/authorize?{urllib.parse.urlencode(query)}", verifier


def start_link(server, client, provider_id):
    """What link_identity does for `provider_id`: asks the server, as the signed-in user, where to send the browser
    (`skip_http_redirect`), and returns that URL."""
    query = {"redirect_to": APP, "skip_http_redirect": "true", "provider": provider_id}
    bearer = {"Authorization": f"Bearer {client.get_session().access_token}"}
    with httpx.Client(timeout=WAIT, trust_env=False) as http:
        answer = http.get(server.auth_url + "/user/identities/authorize", params=query, headers=bearer)
    assert answer.status_code == 200 and answer.json().get("url"), f"link refused: {answer.status_code} {answer.text}"
    return answer.json()["url"]


def sign_in_with_pkce(server, browser, provider_id, user):
    """A PKCE sign-in approved at the provider as `user`, its code exchanged by the official client: the client
    holding the session, and the session."""
    client, url, verifier = start_sign_in(server, provider_id, pkce=True)
    landed = browser.approve(browser.page(url), user)
    assert landed.url.startswith(APP) and landed.query.get("code"), f"no code for the app: {landed}"
    session = client.exchange_code_for_session({"auth_code": landed.query["code"], "code_verifier": verifier}).session
    assert session is not None, "exchange_code_for_session gave no session"
    return client, session


def providers_of(client):
    """The providers of the signed-in user's identities, sorted."""
    return sorted(identity.provider for identity in client.get_user_identities().identities)


def identity_of(client, provider_id):
    """The signed-in user's identity at `provider_id`."""
    identities = client.get_user_identities().identities
    found = [identity for identity in identities if identity.provider == provider_id]
    assert len(found) == 1, f"{len(found)} identities at {provider_id}: {identities}"
    return found[0]


# --- sign-in -----------------------------------------------------------------------------------------------------


def test_oidc_sign_in_with_pkce(server, browser, provider, custom_providers):
    user = upstream_user()
    client, session = sign_in_with_pkce(server, browser, "custom:acme", user)
    assert session.user.email == user["email"]
    assert client.get_user().user.email == user["email"]
    # The identity is the provider's user: its sub, and the address it gave.
    identity = identity_of(client, "custom:acme")
    assert identity.id == user["sub"] and identity.identity_data.get("email") == user["email"], identity
    # The server used PKCE upstream too: its token request carried a verifier for an S256 challenge.
    upstream = provider.last_token_request()
    assert upstream["status"] == 200 and upstream["error"] is None, upstream
    assert upstream["code_verifier"] and upstream["code_challenge_method"] == "S256", upstream


def test_oauth2_sign_in_with_the_implicit_flow(server, browser, provider, custom_providers):
    user = github_user()
    client, url, _ = start_sign_in(server, "custom:hub", pkce=False)
    landed = browser.approve(browser.page(url), user)
    assert landed.url.startswith(APP), landed
    tokens = landed.fragment
    assert tokens.get("access_token") and tokens.get("refresh_token") and tokens.get("expires_in"), landed
    assert tokens.get("token_type", "").lower() == "bearer", landed
    session = client.set_session(tokens["access_token"], tokens["refresh_token"]).session
    assert session.user.email == user["email"]
    # `sub` is mapped from the provider's numeric `id`: the identity is that user, who signs in to the same account
    # again.
    assert identity_of(client, "custom:hub").id == user["sub"]
    _, again_session = sign_in_with_pkce(server, browser, "custom:hub", user)
    assert again_session.user.id == session.user.id


def test_a_signing_key_rotated_upstream_is_fetched_again(server, browser, provider, custom_providers):
    user = upstream_user()
    _, first = sign_in_with_pkce(server, browser, "custom:acme", user)
    before = provider.kid()
    assert provider.rotate() != before
    # The server has the old key set; the new id token's kid is unknown to it until it fetches the keys again.
    _, second = sign_in_with_pkce(server, browser, "custom:acme", user)
    assert second.user.id == first.user.id and second.user.email == user["email"]


def test_an_id_token_signed_by_an_unpublished_key_is_refused(server, browser, provider, custom_providers):
    user = upstream_user()
    _, url, _ = start_sign_in(server, "custom:acme", pkce=True)
    provider.rotate(publish=False)
    try:
        landed = browser.approve(browser.page(url), user)
    finally:
        provider.rotate()  # a published key again, for the module's other tests
    assert landed.url.startswith(APP) and landed.query.get("error"), landed
    assert not landed.gave_a_session(), landed


# --- linking -----------------------------------------------------------------------------------------------------


def test_link_and_unlink_an_upstream_identity(server, browser, provider, custom_providers, confirmed_account):
    client, address = confirmed_account()
    url = start_link(server, client, "custom:acme")
    # The upstream account may have another address: linking adds an identity, it does not change the email.
    landed = browser.approve(browser.page(url), upstream_user())
    assert landed.url.startswith(APP) and landed.error_code() is None, landed
    assert providers_of(client) == ["custom:acme", "email"]
    assert client.get_user().user.email == address

    client.unlink_identity(identity_of(client, "custom:acme"))
    assert providers_of(client) == ["email"]


# --- refusals ----------------------------------------------------------------------------------------------------


def test_a_replayed_callback_is_refused(server, browser, provider, custom_providers):
    sign_in_with_pkce(server, browser, "custom:acme", upstream_user())
    replayed = browser.land(browser.callback())
    assert replayed.error_code() == "bad_oauth_state", replayed
    assert not replayed.gave_a_session(), replayed


def test_a_callback_in_another_browser_is_refused(server, browser, provider, custom_providers):
    _, url, _ = start_sign_in(server, "custom:acme", pkce=True)
    # The user approves, but the provider's redirect to the callback is taken to another browser.
    stolen = browser.approve(browser.page(url), upstream_user(), stop_at=server.auth_url + "/callback")
    with Browser() as other:
        landed = other.land(stolen.url)
    assert landed.error_code() == "bad_oauth_state", landed
    assert not landed.gave_a_session(), landed


def test_denied_at_the_provider(server, browser, provider, custom_providers):
    _, url, _ = start_sign_in(server, "custom:acme", pkce=True)
    landed = browser.deny(browser.page(url))
    # A PKCE app reads its errors from the query.
    assert landed.url.startswith(APP) and landed.query.get("error") == "access_denied", landed
    assert not landed.gave_a_session(), landed


def test_an_unverified_upstream_email_does_not_take_an_existing_account(
    server, browser, provider, custom_providers, confirmed_account
):
    owner, address = confirmed_account()
    _, url, _ = start_sign_in(server, "custom:acme", pkce=True)
    landed = browser.approve(browser.page(url), upstream_user(email=address, verified=False))
    assert landed.url.startswith(APP) and landed.query.get("error_code") == "provider_email_needs_verification", landed
    assert not landed.gave_a_session(), landed
    assert providers_of(owner) == ["email"]


# --- the official client ----------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    raises=pydantic.ValidationError,
    reason="supabase-auth 2.34.1 refuses `custom:` provider ids in OAuthResponse; start_sign_in and start_link stand "
    "in for sign_in_with_oauth and link_identity until it does not",
)
def test_the_official_client_starts_a_custom_provider_flow(server, provider, custom_providers, confirmed_account):
    started = server.client().sign_in_with_oauth({"provider": "custom:acme", "options": {"redirect_to": APP}})
    assert started.url == start_sign_in(server, "custom:acme", pkce=False)[1]
    client, _ = confirmed_account()
    linking = client.link_identity({"provider": "custom:acme", "options": {"redirect_to": APP}})
    assert linking.url.startswith(server.auth_url + "/")
