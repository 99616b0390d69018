"""Two Gatehouses: A, an OAuth 2.1 / OpenID Connect provider (`--oauth-server on`), and B, an ordinary Gatehouse
that registers A as its custom OIDC provider `custom:gatehouse-a`. A user of A signs in to B's app through A, as
test_oauth.py's users sign in through Authlib's provider: B finds A by discovery, sends the browser to A's
`/oauth/authorize` with a PKCE challenge of its own (which A requires), and checks A's ES256 id token against A's
JWKS.

A is this test's `server` (the module's serve mark); B is started beside it through `servers`, and both are stopped
when the test ends. The browser is an httpx client with one cookie jar, following redirects one hop at a time; at
A it fills in the sign-in page and the consent page and posts them as a person's browser would, `Origin` included.
The app it comes back to, under APP_ORIGIN, listens nowhere: the browser stops at its URL and the test reads the
code there, which B's official client exchanges for B's session.
"""

import html
import re
import urllib.parse

import httpx
import pytest
from supabase_auth.helpers import generate_pkce_challenge, generate_pkce_verifier

from conftest import PASSWORD, WAIT

APP_ORIGIN = "http://app.localhost:3000/"  # B's app: where B lands when it knows no redirect_to
APP = APP_ORIGIN + "auth/callback"  # where the app asks to come back to, on B's allow list
MAX_HOPS = 10  # redirects one navigation may take before the browser gives up
PUBLIC = "http://127.0.0.1:{port}"  # each server's public URL: its issuer, and the browser's origin for its pages

pytestmark = pytest.mark.serve("--oauth-server", "on", "--public-url", PUBLIC)


class Browser:
    """A user's browser: one cookie jar (for both servers, as a browser's is for one host on two ports), redirects
    followed one hop at a time until a page or a URL under `stop_at`."""

    def __init__(self):
        self.http = httpx.Client(timeout=WAIT, trust_env=False, follow_redirects=False)
        self.visited = []  # every URL requested, oldest first

    def close(self):
        self.http.close()

    def open(self, url, stop_at):
        """Opens `url`; the page reached, or the first redirect's URL under `stop_at`."""
        return self._walk(self._request("GET", url), stop_at)

    def submit(self, page, form_id, fields, stop_at):
        """Posts the form `form_id` of `page`, its hidden fields and `fields`, from the page's origin; then follows
        on like `open`."""
        form = re.search(rf'<form[^>]*\bid="{form_id}"[^>]*>(.*?)</form>', page.text, re.S)
        assert form, f"no form {form_id} on {page.url}: {page.text[:500]}"
        action = re.search(r'\baction="([^"]*)"', form.group(0))
        url = urllib.parse.urljoin(str(page.url), html.unescape(action.group(1)) if action else "")
        inputs = re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)"', form.group(1))
        hidden = {html.unescape(name): html.unescape(value) for name, value in inputs}
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(str(page.url)))
        answer = self._request("POST", url, data={**hidden, **fields}, headers={"Origin": origin})
        return self._walk(answer, stop_at)

    def _request(self, method, url, **options):
        self.visited.append(f"{method} {url}")
        return self.http.request(method, url, **options)

    def _walk(self, response, stop_at):
        for _ in range(MAX_HOPS):
            if not response.is_redirect:
                return response
            location = urllib.parse.urljoin(str(response.url), response.headers["location"])
            if location.startswith(stop_at):
                return location
            response = self._request("GET", location)
        raise AssertionError(f"more than {MAX_HOPS} redirects: {self.visited}")


@pytest.fixture
def browser():
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


def page(reached, what, marker):
    """`reached` as the page `what`, recognised by `marker` in its HTML."""
    assert isinstance(reached, httpx.Response), f"expected {what}, the browser was sent to {reached}"
    assert reached.status_code == 200 and marker in reached.text, (
        f"no {what} at {reached.url}: {reached.status_code} {reached.text[:500]}"
    )
    return reached


def admin(key):
    """The headers of a backend calling the admin API with the service key `key`."""
    return {"Authorization": f"Bearer {key}", "apikey": key}


def start_sign_in(b):
    """What B's app does for sign_in_with_oauth with the PKCE flow, made by hand as test_oauth.py's start_sign_in
    explains (supabase-auth 2.34.1 refuses to return a `custom:` provider's URL): (the URL of B's /authorize to open
    in the browser, the PKCE code verifier)."""
    verifier = generate_pkce_verifier()
    query = {
        "redirect_to": APP,
        "code_challenge": generate_pkce_challenge(verifier),
        "code_challenge_method": "s256",
        "provider": "custom:gatehouse-a",
    }
    return f"{b.auth_url}/authorize?{urllib.parse.urlencode(query)}", verifier


def test_gatehouse_b_signs_a_user_in_through_gatehouse_a(server, servers, service, confirmed_account, browser):
    a = server
    b = servers.start("--public-url", PUBLIC, "--site-url", APP_ORIGIN, "--redirect-urls", APP)
    a_user, address = confirmed_account()
    a_user_id = a_user.get_user().user.id

    with httpx.Client(timeout=WAIT, trust_env=False) as http:
        # A's operator registers B as a confidential client, for B's callback.
        discovery = http.get(a.auth_url + "/.well-known/openid-configuration")
        assert discovery.status_code == 200, discovery.text
        issuer = discovery.json()["issuer"]
        assert issuer == a.auth_url and discovery.json()["id_token_signing_alg_values_supported"] == ["ES256"]
        registered = http.post(
            a.auth_url + "/admin/oauth/clients",
            json={
                "client_name": "Gatehouse B",
                "redirect_uris": [b.auth_url + "/callback"],
                "client_type": "confidential",
                "scope": "openid email profile",
            },
            headers=admin(service.key),
        )
        assert registered.status_code == 201, registered.text
        client = registered.json()

        # B's operator registers A as an OpenID provider, found by discovery from its issuer.
        provider = http.post(
            b.auth_url + "/admin/custom-providers",
            json={
                "provider_type": "oidc",
                "identifier": "custom:gatehouse-a",
                "name": "Gatehouse A",
                "client_id": client["client_id"],
                "client_secret": client["client_secret"],
                "issuer": issuer,
                "scopes": ["openid", "email", "profile"],
            },
            headers=admin(b.mint_service_key()),
        )
        assert provider.status_code == 201, provider.text

    start, verifier = start_sign_in(b)
    # B sends the browser to A, which asks the signed-out user to sign in first.
    sign_in = page(browser.open(start, APP_ORIGIN), "A's sign-in page", 'id="password-sign-in"')
    assert str(sign_in.url).startswith(a.base + "/account/sign-in"), browser.visited
    authorize = [url for url in browser.visited if "/auth/v1/oauth/authorize?" in url]
    assert authorize, f"B never sent the browser to A's authorization endpoint: {browser.visited}"
    sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize[0].split(" ", 1)[1]).query))
    assert sent["client_id"] == client["client_id"] and sent["code_challenge_method"] == "S256", sent

    # Signed in, A comes back to its consent page, which names the user and the scopes B asked for.
    consent = page(
        browser.submit(sign_in, "password-sign-in", {"email": address, "password": PASSWORD}, APP_ORIGIN),
        "A's consent page",
        'id="consent-form"',
    )
    assert html.unescape(re.search(r'id="consent-email">([^<]*)<', consent.text).group(1)) == address
    assert "Gatehouse B" in html.unescape(consent.text)

    # Approved, A sends the browser to B's callback, and B on to the app with its code.
    landed = browser.submit(consent, "consent-form", {"action": "approve"}, APP_ORIGIN)
    assert isinstance(landed, str), (
        f"the approval ended at {landed.url} ({landed.status_code}: {landed.text[:500]}), not at the app; "
        f"the browser visited {browser.visited}; B's log: {b.log()}"
    )
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landed).query))
    assert landed.startswith(APP) and query.get("code"), f"no code for the app: {landed}; B's log: {b.log()}"
    callbacks = [url for url in browser.visited if url.startswith("GET " + b.auth_url + "/callback?")]
    assert callbacks, browser.visited
    came_back = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callbacks[-1]).query))
    assert came_back.get("iss") == issuer and came_back.get("state"), came_back

    # B's session is the user of A: its address, and an identity at custom:gatehouse-a whose subject is A's user id.
    app = b.client(flow_type="pkce")
    session = app.exchange_code_for_session({"auth_code": query["code"], "code_verifier": verifier}).session
    assert session is not None, "exchange_code_for_session gave no session"
    assert session.user.email == address
    assert app.get_user().user.email == address
    identities = app.get_user_identities().identities
    upstream = [identity for identity in identities if identity.provider == "custom:gatehouse-a"]
    assert len(upstream) == 1, identities
    assert upstream[0].id == a_user_id and upstream[0].identity_data.get("email") == address, upstream

    # At A, the user's grants list B.
    with httpx.Client(timeout=WAIT, trust_env=False) as http:
        grants = http.get(
            a.auth_url + "/user/oauth/grants",
            headers={"Authorization": f"Bearer {a_user.get_session().access_token}", "apikey": "anon"},
        )
    assert grants.status_code == 200, grants.text
    assert [grant["client"]["name"] for grant in grants.json()] == ["Gatehouse B"], grants.json()
    assert grants.json()[0]["client"]["id"] == client["client_id"]
    assert {"openid", "email", "profile"} <= set(grants.json()[0]["scopes"]), grants.json()

    # Another sign-in at B, in the same browser: still signed in at A, whose consent covers the scopes, the browser
    # goes through A to the app without a page, and B's session is the same user's.
    start, verifier = start_sign_in(b)
    again = browser.open(start, APP_ORIGIN)
    assert isinstance(again, str), f"the second sign-in stopped at {again.url}: {again.status_code} {again.text[:500]}"
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(again).query)).get("code")
    assert again.startswith(APP) and code, f"no code for the app: {again}"
    second = b.client(flow_type="pkce").exchange_code_for_session({"auth_code": code, "code_verifier": verifier})
    assert second.session.user.id == session.user.id and second.session.user.email == address
