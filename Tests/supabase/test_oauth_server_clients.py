"""The OAuth 2.1 provider's clients as a backend manages them through Supabase's official Python client: supabase-auth
2.34.1 has GoTrue's admin OAuth calls (`client.admin.oauth`: list_clients, create_client, get_client, update_client,
delete_client, regenerate_client_secret), so these tests drive them as written and assert what the client returns or
raises. Its models decode GoTrue's client object (`OAuthClient`) and the list (`OAuthClientListResponse`, with the
`X-Total-Count` and `Link` headers read into `total`, `next_page` and `last_page`).

Dynamic registration (RFC 7591, `POST /auth/v1/oauth/clients/register`) has no call in the client: that test sends it
over httpx, and checks the RFC's error format.
"""

import uuid

import httpx
import pytest
from supabase_auth.errors import AuthApiError
from supabase_auth.types import CreateOAuthClientParams, PageParams, UpdateOAuthClientParams

pytestmark = pytest.mark.serve("--oauth-server", "on")

REDIRECT = "https://dashboard.example.com/callback"


def test_a_client_is_created_read_listed_changed_and_removed(service):
    oauth = service.admin.oauth
    created = oauth.create_client(
        CreateOAuthClientParams(
            client_name="Dashboard",
            client_uri="https://dashboard.example.com",
            redirect_uris=[REDIRECT, "http://localhost:3000/callback"],
            scope="openid email",
        )
    ).client
    assert service.last_answer.status_code == 201
    assert uuid.UUID(created.client_id)
    assert created.client_name == "Dashboard"
    assert created.client_type == "confidential"
    assert created.token_endpoint_auth_method == "client_secret_basic"
    assert created.registration_type == "manual"
    assert created.redirect_uris == [REDIRECT, "http://localhost:3000/callback"]
    assert created.grant_types == ["authorization_code", "refresh_token"]
    assert created.response_types == ["code"]
    assert created.scope == "openid email"
    assert created.client_uri == "https://dashboard.example.com"
    secret = created.client_secret
    assert secret and len(secret) >= 43

    read = oauth.get_client(created.client_id).client
    assert read.client_id == created.client_id
    assert read.client_secret is None
    assert read.created_at == created.created_at

    second = oauth.create_client(CreateOAuthClientParams(client_name="CLI", redirect_uris=["com.example.cli:/done"]))
    listed = oauth.list_clients()
    assert [client.client_id for client in listed.clients] == [second.client.client_id, created.client_id]
    assert listed.aud == "authenticated"
    assert listed.total == 2
    assert all(client.client_secret is None for client in listed.clients)
    paged = oauth.list_clients(PageParams(page=1, per_page=1))
    assert len(paged.clients) == 1 and paged.total == 2
    assert paged.next_page == 2 and paged.last_page == 2

    changed = oauth.update_client(
        created.client_id, UpdateOAuthClientParams(client_name="Dashboard 2", redirect_uris=[REDIRECT])
    ).client
    assert changed.client_name == "Dashboard 2"
    assert changed.redirect_uris == [REDIRECT]
    assert changed.client_type == "confidential"

    regenerated = oauth.regenerate_client_secret(created.client_id).client
    assert regenerated.client_secret and regenerated.client_secret != secret

    oauth.delete_client(created.client_id)
    assert service.last_answer.status_code == 204
    with pytest.raises(AuthApiError) as missing:
        oauth.get_client(created.client_id)
    assert (missing.value.code, missing.value.status) == ("oauth_client_not_found", 404)


def test_refusals_carry_gotrue_codes_and_words(server, service):
    oauth = service.admin.oauth
    with pytest.raises(AuthApiError) as fragment:
        oauth.create_client(CreateOAuthClientParams(client_name="x", redirect_uris=["https://a.example.com/cb#top"]))
    assert (fragment.value.code, fragment.value.status) == ("validation_failed", 400)
    assert fragment.value.message == (
        "invalid redirect_uri 'https://a.example.com/cb#top': fragment not allowed in redirect URI"
    )
    with pytest.raises(AuthApiError) as plain_http:
        oauth.create_client(CreateOAuthClientParams(client_name="x", redirect_uris=["http://a.example.com/cb"]))
    assert "HTTP scheme only allowed for localhost" in plain_http.value.message

    public = service.admin.oauth.create_client(
        CreateOAuthClientParams(client_name="Phone", redirect_uris=["com.example.app:/callback"])
    ).client
    # The Python client cannot ask for a public client; the admin API over HTTP can (GoTrue's client_type).
    headers = {"Authorization": f"Bearer {service.key}", "apikey": service.key}
    answer = httpx.post(
        f"{server.auth_url}/admin/oauth/clients",
        json={"client_name": "SPA", "redirect_uris": ["http://127.0.0.1:5173/cb"], "client_type": "public"},
        headers=headers,
    )
    assert answer.status_code == 201 and "client_secret" not in answer.json()
    with pytest.raises(AuthApiError) as no_secret:
        oauth.regenerate_client_secret(answer.json()["client_id"])
    assert (no_secret.value.code, no_secret.value.message) == (
        "validation_failed",
        "Cannot regenerate secret for public client",
    )
    with pytest.raises(AuthApiError) as empty:
        oauth.update_client(public.client_id, UpdateOAuthClientParams())
    assert empty.value.message == "No fields provided for update"


@pytest.mark.serve("--oauth-server", "off")
def test_the_provider_off_answers_oauth_server_disabled(service):
    with pytest.raises(AuthApiError) as disabled:
        service.admin.oauth.list_clients()
    assert (disabled.value.code, disabled.value.status) == ("oauth_server_disabled", 404)
    assert disabled.value.message == "OAuth 2.1 server is disabled"


@pytest.mark.serve("--oauth-server", "on", "--oauth-allow-dynamic-registration", "on")
def test_dynamic_registration_answers_rfc_7591(server):
    register = f"{server.base}/auth/v1/oauth/clients/register"
    answer = httpx.post(
        register,
        json={
            "client_name": "MCP agent",
            "redirect_uris": ["http://127.0.0.1:33418/callback"],
            "token_endpoint_auth_method": "none",
        },
    )
    assert answer.status_code == 201
    body = answer.json()
    assert uuid.UUID(body["client_id"])
    assert "client_secret" not in body
    assert body["client_secret_expires_at"] == 0 and body["client_id_issued_at"] > 0
    assert body["token_endpoint_auth_method"] == "none"
    assert body["redirect_uris"] == ["http://127.0.0.1:33418/callback"]
    refused = httpx.post(register, json={"redirect_uris": ["javascript:alert(1)"]})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_redirect_uri"
    metadata = httpx.post(register, json={"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]})
    assert metadata.status_code == 400 and metadata.json()["error"] == "invalid_client_metadata"
