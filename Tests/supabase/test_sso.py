"""Single sign-on through a company's SAML 2.0 identity provider, seen through the official client's
`sign_in_with_sso`: by domain, by provider id, and an unknown domain refused.

The identity provider is a real one, Tests/saml/idp.py (pysaml2, signing through Debian's xmlsec1), started once for
the module on a port of its own. Each test's server gets an account with a company, set to the Enterprise tier with
`gatehouse companies set-tier` as an operator would, and the IdP registered for a fresh domain through the admin API
(`POST /auth/v1/admin/sso/providers`); the IdP is given the server's SP metadata.

The client sends no code challenge (its default flow is implicit), so the ACS sends the browser on to redirect_to
with the session in the fragment. The browser is plain HTTP here: the IdP's page is asked for its answer as JSON
(what its auto-submitting form would post), which is posted to the ACS without following the redirect; the app,
under APP, listens nowhere: the test reads the Location as the app would.
"""

import os
import subprocess
import sys
import threading
import urllib.parse
import uuid

import httpx
import pytest
from supabase_auth.errors import AuthApiError

from conftest import WAIT, new_email

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDP = os.path.join(ROOT, "Tests", "saml", "idp.py")
APP = "http://localhost:3000/sso/callback"  # where the app asks to come back to, on the allow list

pytestmark = pytest.mark.serve("--redirect-urls", APP)


# --- the identity provider ----------------------------------------------------------------------------------------


class IdentityProvider:
    """Tests/saml/idp.py as a process of its own: it prints "READY <port>" and exits when its stdin closes."""

    def __init__(self):
        self.process = None
        self.base = None
        self.http = None
        self.output = []

    def start(self):
        self.process = subprocess.Popen(
            [sys.executable, IDP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()

        def read():
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                if line.startswith("READY ") and not ready.is_set():
                    self.base = f"http://127.0.0.1:{int(line.split()[1])}"
                    ready.set()
            ready.set()  # it exited before it was ready

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(WAIT) or self.base is None:
            self.stop()
            raise RuntimeError(
                "the SAML identity provider did not start (pysaml2 from scripts/requirements-test.txt, and Debian's "
                f"xmlsec1): {self.log()}"
            )
        self.http = httpx.Client(base_url=self.base, timeout=WAIT, trust_env=False)
        return self

    def stop(self):
        if self.http:
            self.http.close()
        if self.process and self.process.poll() is None:
            self.process.stdin.close()  # its way to end
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self):
        return "\n".join(self.output)

    def metadata(self):
        answer = self.http.get("/metadata")
        assert answer.status_code == 200, f"the IdP's metadata: {answer.status_code} {answer.text}"
        return answer.text

    def register(self, sp_metadata):
        answer = self.http.post("/sp", content=sp_metadata.encode())
        assert answer.status_code == 204, f"the IdP refused our SP metadata: {answer.status_code} {answer.text}"

    def next(self, shape):
        """The shape of the IdP's next answer: name_id, attributes, mode (see Tests/saml/idp.py)."""
        answer = self.http.post("/next", json=shape)
        assert answer.status_code == 204, f"the IdP refused {shape}: {answer.status_code} {answer.text}"

    def answer(self, url):
        """What the IdP's page would post to the ACS for the AuthnRequest in `url`: acs_url, SAMLResponse,
        RelayState."""
        assert url.startswith(self.base + "/sso/redirect?"), f"not this IdP's sign-in URL: {url}"
        answer = self.http.get(url, headers={"Accept": "application/json"})
        assert answer.status_code == 200, f"the IdP answered {answer.status_code}: {answer.text}"
        return answer.json()


@pytest.fixture(scope="module")
def idp():
    started = IdentityProvider()
    try:
        yield started.start()
    finally:
        started.stop()


# --- the company and its provider ---------------------------------------------------------------------------------


def set_tier(server, company_id, tier):
    """`gatehouse companies set-tier ID TIER --data-dir <the server's data>`, beside the running server."""
    command = [server.binary, "companies", "set-tier", company_id, tier, "--reason", "SSO test"]
    command += ["--data-dir", server.data_dir]
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, f"`gatehouse companies set-tier` exited with {done.returncode}: {done.stderr.strip()}"


class Setup:
    def __init__(self, company_id, provider_id, domain):
        self.company_id = company_id
        self.provider_id = provider_id
        self.domain = domain


@pytest.fixture
def sso(server, service, idp, confirmed_account):
    """An Enterprise company whose SAML provider, the module's IdP, signs in a fresh domain: its Setup."""
    owner, _ = confirmed_account()
    with httpx.Client(base_url=server.base, timeout=WAIT, trust_env=False) as http:
        bearer = {"Authorization": f"Bearer {owner.get_session().access_token}"}
        created = http.post("/v1/companies", json={"name": "SSO Co"}, headers=bearer)
        assert created.status_code == 201, f"creating the company: {created.status_code} {created.text}"
        company_id = created.json()["id"]
        set_tier(server, company_id, "enterprise")

        sp_metadata = http.get("/auth/v1/sso/saml/metadata")
        assert sp_metadata.status_code == 200, f"the SP metadata: {sp_metadata.status_code} {sp_metadata.text}"
        idp.register(sp_metadata.text)

        domain = f"sso-{uuid.uuid4().hex[:10]}.example"
        admin = {"Authorization": f"Bearer {service.key}", "apikey": service.key}
        body = {"type": "saml", "company_id": company_id, "metadata_xml": idp.metadata(), "domains": [domain]}
        registered = http.post("/auth/v1/admin/sso/providers", json=body, headers=admin)
        assert registered.status_code == 201, f"registering the provider: {registered.status_code} {registered.text}"
        provider_id = registered.json()["id"]
    yield Setup(company_id, provider_id, domain)
    print(f"identity provider log:\n{idp.log()}")


# --- the browser --------------------------------------------------------------------------------------------------


def post_to_acs(server, idp, answer):
    """Posts the IdP's answer to the ACS as its auto-submitting form would (a cross-site form post from the IdP's
    page), without following the redirect: (status, the Location, its query, its fragment)."""
    assert answer["acs_url"] == server.auth_url + "/sso/saml/acs", answer["acs_url"]
    form = {"SAMLResponse": answer["SAMLResponse"]}
    if answer.get("RelayState") is not None:
        form["RelayState"] = answer["RelayState"]
    with httpx.Client(timeout=WAIT, trust_env=False, follow_redirects=False) as browser:
        reply = browser.post(
            answer["acs_url"], data=form, headers={"Origin": idp.base, "Sec-Fetch-Site": "cross-site"}
        )
    location = reply.headers.get("location")
    assert location, f"the ACS did not redirect: {reply.status_code} {reply.text}"
    parts = urllib.parse.urlsplit(location)
    return reply.status_code, location, dict(urllib.parse.parse_qsl(parts.query)), dict(
        urllib.parse.parse_qsl(parts.fragment)
    )


def sign_in(server, idp, credentials, email):
    """sign_in_with_sso with `credentials`, the IdP answering for `email`, the tokens set on the client: the client,
    the URL the client was given."""
    client = server.client()
    started = client.sign_in_with_sso(credentials)
    url = started.url
    parts = urllib.parse.urlsplit(url)
    assert url.startswith(idp.base + "/sso/redirect?"), f"not the IdP's sign-in: {url}"
    assert "SAMLRequest" in urllib.parse.parse_qs(parts.query), f"no AuthnRequest in {url}"

    idp.next({"name_id": email, "attributes": {"email": [email], "name": ["Ada Lovelace"]}})
    status, location, query, fragment = post_to_acs(server, idp, idp.answer(url))
    assert status == 303, f"the ACS answered {status}, to {location}"
    assert location.startswith(APP), location
    assert "error_code" not in query and "error_code" not in fragment, location
    assert fragment.get("access_token") and fragment.get("refresh_token"), f"no session in {location}"
    assert fragment.get("token_type", "").lower() == "bearer", location

    session = client.set_session(fragment["access_token"], fragment["refresh_token"]).session
    assert session is not None, "set_session gave no session"
    return client, session


def assert_sso_user(client, setup, email):
    user = client.get_user().user
    assert user.email == email
    assert user.is_sso_user is True, user
    providers = [identity.provider for identity in user.identities or []]
    assert providers == [f"sso:{setup.provider_id}"], user.identities
    # The raw answer says the same (the model defaults is_sso_user to False when the field is missing).
    raw = client.last_answer.json()
    assert raw.get("is_sso_user") is True, raw
    return user


# --- the tests ----------------------------------------------------------------------------------------------------


def test_sign_in_with_sso_by_domain(server, idp, sso):
    email = f"ada@{sso.domain}"
    credentials = {"domain": sso.domain, "options": {"redirect_to": APP}}
    client, session = sign_in(server, idp, credentials, email)
    assert session.user.email == email
    user = assert_sso_user(client, sso, email)
    # The next sign-in finds the same account.
    again, _ = sign_in(server, idp, credentials, email)
    assert again.get_user().user.id == user.id


def test_sign_in_with_sso_by_provider_id(server, idp, sso):
    email = f"grace@{sso.domain}"
    credentials = {"provider_id": sso.provider_id, "options": {"redirect_to": APP}}
    client, session = sign_in(server, idp, credentials, email)
    assert session.user.email == email
    assert_sso_user(client, sso, email)


def test_an_unknown_domain_is_not_found(server, idp, sso):
    client = server.client()
    unknown = new_email("nobody").split("@")[0] + ".example"
    with pytest.raises(AuthApiError) as raised:
        client.sign_in_with_sso({"domain": unknown, "options": {"redirect_to": APP}})
    assert (raised.value.code, raised.value.status) == ("sso_provider_not_found", 404), (
        raised.value,
        client.last_answer.text if client.last_answer else None,
    )
