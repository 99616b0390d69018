"""Gatehouse as an OAuth 2.1 / OpenID Connect provider, held by relying parties nobody here wrote: authlib's OAuth 2
client (code flow with PKCE, refresh, userinfo, id token validation against the JWKS, client credentials, revocation,
introspection, the device authorization request) and pyoidc's (`oic`) client (discovery, the operator's registration,
the code flow with PKCE and its id token verification). Clients are registered through the admin API; the user
approves through GoTrue's consent API (`/oauth/authorizations/{id}`) with the session supabase-auth gave it.
"""

import urllib.parse

import httpx
import pytest
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import OAuth2Client
from authlib.jose import JsonWebKey
from authlib.jose import jwt as jose_jwt
from authlib.oidc.core import CodeIDToken

pytestmark = pytest.mark.serve("--oauth-server", "on")

REDIRECT = "http://localhost:8765/callback"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def register(server, service, **fields):
    """A client registered by the operator (admin API); its answer, with the secret of a confidential one."""
    body = {"client_name": "Peer", "redirect_uris": [REDIRECT], **fields}
    answer = httpx.post(
        server.auth_url + "/admin/oauth/clients",
        json=body,
        headers={"Authorization": f"Bearer {service.key}", "apikey": service.key},
        trust_env=False,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def discovery(server):
    answer = httpx.get(server.auth_url + "/.well-known/openid-configuration", trust_env=False)
    assert answer.status_code == 200
    return answer.json()


def approve(server, access_token, url):
    """Opens the authorization URL as a browser would, then approves on the consent API as the signed-in user;
    returns where the browser goes (the client's redirect URI with the code)."""
    opened = httpx.get(url, follow_redirects=False, trust_env=False)
    assert opened.status_code in (302, 303), opened.text
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(opened.headers["location"]).query)
    authorization = query["authorization_id"][0]
    bearer = {"Authorization": f"Bearer {access_token}", "apikey": "anon"}
    details = httpx.get(server.auth_url + f"/oauth/authorizations/{authorization}", headers=bearer, trust_env=False)
    assert details.status_code == 200, details.text
    if "redirect_url" in details.json():
        return details.json()["redirect_url"]
    decided = httpx.post(
        server.auth_url + f"/oauth/authorizations/{authorization}/consent",
        json={"action": "approve"},
        headers=bearer,
        trust_env=False,
    )
    assert decided.status_code == 200, decided.text
    return decided.json()["redirect_url"]


def signed_in(confirmed_account):
    client, _ = confirmed_account()
    return client.get_session().access_token


def test_authlib_code_flow_refresh_userinfo_revocation_introspection(server, service, confirmed_account):
    config = discovery(server)
    registered = register(server, service, client_type="confidential", scope="openid email profile")
    access_token = signed_in(confirmed_account)
    oauth = OAuth2Client(
        registered["client_id"],
        registered["client_secret"],
        scope="openid email profile",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
        trust_env=False,
    )
    verifier = generate_token(64)
    nonce = generate_token(16)
    url, _ = oauth.create_authorization_url(config["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    redirect = approve(server, access_token, url)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(redirect).query)["iss"] == [config["issuer"]]
    token = oauth.fetch_token(config["token_endpoint"], authorization_response=redirect, code_verifier=verifier)
    assert token["token_type"].lower() == "bearer"
    assert token["refresh_token"] and token["id_token"]

    keys = JsonWebKey.import_key_set(httpx.get(config["jwks_uri"], trust_env=False).json())
    claims = jose_jwt.decode(
        token["id_token"],
        keys,
        claims_cls=CodeIDToken,
        claims_options={"iss": {"essential": True, "value": config["issuer"]}},
        claims_params={"nonce": nonce, "client_id": registered["client_id"], "access_token": token["access_token"]},
    )
    claims.validate()
    assert claims["aud"] == registered["client_id"]
    assert claims["email"] and claims["email_verified"] is True

    info = oauth.get(config["userinfo_endpoint"])
    assert info.status_code == 200
    assert info.json()["sub"] == claims["sub"]

    refreshed = oauth.refresh_token(config["token_endpoint"], refresh_token=token["refresh_token"])
    assert refreshed["refresh_token"] != token["refresh_token"]

    seen = oauth.introspect_token(config["introspection_endpoint"], token=refreshed["access_token"])
    assert seen.json()["active"] is True
    assert seen.json()["client_id"] == registered["client_id"]

    revoked = oauth.revoke_token(
        config["revocation_endpoint"], token=refreshed["refresh_token"], token_type_hint="refresh_token"
    )
    assert revoked.status_code == 200
    gone = oauth.introspect_token(config["introspection_endpoint"], token=refreshed["access_token"])
    assert gone.json() == {"active": False}
    again = httpx.post(
        config["token_endpoint"],
        data={"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"]},
        auth=(registered["client_id"], registered["client_secret"]),
        trust_env=False,
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_authlib_client_credentials_and_device_request(server, service):
    config = discovery(server)
    machine = register(server, service, client_type="confidential", grant_types=["client_credentials"])
    oauth = OAuth2Client(machine["client_id"], machine["client_secret"], trust_env=False)
    token = oauth.fetch_token(config["token_endpoint"], grant_type="client_credentials")
    assert token["access_token"] and "refresh_token" not in token
    # Not a user's token: the account API refuses it.
    user = httpx.get(
        server.auth_url + "/user",
        headers={"Authorization": f"Bearer {token['access_token']}", "apikey": "anon"},
        trust_env=False,
    )
    assert user.status_code in (401, 403)

    device = register(
        server, service, client_type="public", grant_types=[DEVICE_GRANT, "refresh_token"], scope="openid email"
    )
    started = httpx.post(
        config["device_authorization_endpoint"],
        data={"client_id": device["client_id"], "scope": "openid email"},
        trust_env=False,
    )
    assert started.status_code == 200, started.text
    assert started.json()["verification_uri_complete"].endswith(started.json()["user_code"])
    poll = {"grant_type": DEVICE_GRANT, "device_code": started.json()["device_code"], "client_id": device["client_id"]}
    pending = httpx.post(config["token_endpoint"], data=poll, trust_env=False)
    assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending"
    hurried = httpx.post(config["token_endpoint"], data=poll, trust_env=False)
    assert hurried.json()["error"] == "slow_down"
    refused = httpx.post(
        config["device_authorization_endpoint"],
        data={"client_id": device["client_id"], "scope": "profile"},
        trust_env=False,
    )
    assert refused.json()["error"] == "invalid_scope"


def test_pyoidc_discovery_registration_and_code_flow(server, service, confirmed_account):
    from oic.oic import Client
    from oic.oic.message import AuthorizationResponse, RegistrationResponse
    from oic.utils.authn.client import CLIENT_AUTHN_METHOD

    issuer = discovery(server)["issuer"]
    registered = register(server, service, client_type="confidential", scope="openid email")
    access_token = signed_in(confirmed_account)

    client = Client(client_authn_method=CLIENT_AUTHN_METHOD)
    client.provider_config(issuer)
    client.store_registration_info(
        RegistrationResponse(
            client_id=registered["client_id"],
            client_secret=registered["client_secret"],
            redirect_uris=[REDIRECT],
        )
    )
    state, nonce = generate_token(16), generate_token(16)
    pkce, verifier = client.add_code_challenge()
    request = client.construct_AuthorizationRequest(
        request_args={
            "client_id": registered["client_id"],
            "response_type": "code",
            "scope": ["openid", "email"],
            "nonce": nonce,
            "redirect_uri": REDIRECT,
            "state": state,
            **pkce,
        }
    )
    redirect = approve(server, access_token, request.request(client.authorization_endpoint))
    answer = client.parse_response(
        AuthorizationResponse, info=urllib.parse.urlsplit(redirect).query, sformat="urlencoded"
    )
    assert answer["state"] == state
    tokens = client.do_access_token_request(
        state=state,
        request_args={"code": answer["code"], "redirect_uri": REDIRECT, "code_verifier": verifier},
        authn_method="client_secret_basic",
    )
    id_token = tokens["id_token"]
    assert id_token["iss"] == issuer
    assert id_token["aud"] == [registered["client_id"]]
    assert id_token["nonce"] == nonce
    info = client.do_user_info_request(state=state, method="GET")
    assert info["sub"] == id_token["sub"]
