"""Identities through the official client: Google id tokens (`sign_in_with_id_token`), the user's identities
(`get_user_identities`) and unlinking (`unlink_identity`), against a server that fetches Google's keys from a JWKS
served here on loopback. The tokens are signed by PyJWT with a key of this module's, as Google would sign them."""

import base64
import hashlib
import http.server
import json
import threading
import time
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from supabase_auth.errors import AuthApiError

from conftest import free_port, new_email

AUDIENCE = "test-client.apps.googleusercontent.com"
KEY = ec.generate_private_key(ec.SECP256R1())
KEYS_PORT = free_port()


def _b64(number):
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).rstrip(b"=").decode()


class _Keys(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the standard library's name)
        numbers = KEY.public_key().public_numbers()
        body = json.dumps({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "test",
                                     "x": _b64(numbers.x), "y": _b64(numbers.y)}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module", autouse=True)
def google_keys():
    keys = http.server.ThreadingHTTPServer(("127.0.0.1", KEYS_PORT), _Keys)
    thread = threading.Thread(target=keys.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        keys.shutdown()
        keys.server_close()


pytestmark = pytest.mark.serve(
    "--google-client-ids", AUDIENCE, "--google-jwks-url", f"http://127.0.0.1:{KEYS_PORT}/certs",
    "--manual-linking", "on")


def google_token(subject, address, verified=True, nonce=None):
    now = int(time.time())
    claims = {"iss": "https://accounts.google.com", "aud": AUDIENCE, "sub": subject, "email": address,
              "email_verified": verified, "iat": now, "exp": now + 600, "jti": str(uuid.uuid4())}
    if nonce is not None:
        claims["nonce"] = hashlib.sha256(nonce.encode()).hexdigest()
    return jwt.encode(claims, KEY, algorithm="ES256", headers={"kid": "test"})


def test_sign_in_with_a_google_id_token_list_and_unlink_identities(server, confirmed_account):
    client, address = confirmed_account()
    subject = f"google-{uuid.uuid4().hex[:10]}"
    # The same address, verified by Google: the account is linked, not duplicated.
    signed_in = client.sign_in_with_id_token(
        {"provider": "google", "token": google_token(subject, address, nonce="raw nonce"), "nonce": "raw nonce"})
    assert signed_in.session is not None
    assert signed_in.user.email == address
    identities = client.get_user_identities().identities
    assert sorted(identity.provider for identity in identities) == ["email", "google"]
    google = next(identity for identity in identities if identity.provider == "google")
    assert google.id == subject
    assert google.identity_data["sub"] == subject

    client.unlink_identity(google)
    assert [identity.provider for identity in client.get_user_identities().identities] == ["email"]
    # The last identity stays.
    with pytest.raises(AuthApiError) as refused:
        client.unlink_identity(client.get_user_identities().identities[0])
    assert refused.value.code == "single_identity_not_deletable"


def test_refusals_name_what_is_wrong(server):
    client = server.client()
    address = new_email()
    for provider, code in (("github", "provider_disabled"), ("custom:acme", "validation_failed")):
        with pytest.raises(AuthApiError) as refused:
            client.sign_in_with_id_token({"provider": provider, "token": google_token("s", address)})
        assert refused.value.code == code
        assert f'"{provider}"' in refused.value.message
    with pytest.raises(AuthApiError) as refused:
        client.sign_in_with_id_token(
            {"provider": "google", "token": google_token("s", address, nonce="one"), "nonce": "two"})
    assert refused.value.code == "bad_jwt"
    with pytest.raises(AuthApiError) as refused:
        client.sign_in_with_id_token({"provider": "google", "token": google_token("s", address, verified=False)})
    assert refused.value.code == "provider_email_needs_verification"
    # Nothing was made by the refusals.
    with pytest.raises(AuthApiError):
        client.sign_in_with_password({"email": address, "password": "correct horse battery staple"})
