"""Account flows as an app built on Supabase's official Python client sees them, against the real server: each test
asserts what the client returns or raises, which is what GoTrue's wire format gives it (see docs/api.md).
"""

import pytest
from conftest import PASSWORD, claims, new_email
from supabase_auth.errors import AuthApiError, AuthWeakPasswordError

NEW_PASSWORD = "a brand new passphrase"
# GoTrue's default RefreshTokenReuseInterval, and the server's refresh reuse grace: a rotated refresh token presented
# again within it still answers (a client that lost the answer of its refresh), after it never.
REUSE_INTERVAL = 10


def test_sign_up_then_the_mailed_code_confirms_and_signs_in(server, mailbox):
    address = new_email()
    client = server.client()

    signed_up = client.sign_up({"email": address, "password": PASSWORD, "options": {"data": {"name": "Ada"}}})
    # Confirmation is on: a user, no session, the address not yet confirmed.
    assert signed_up.session is None
    assert signed_up.user.email == address
    assert signed_up.user.email_confirmed_at is None
    assert signed_up.user.user_metadata.get("name") == "Ada"
    assert [identity.provider for identity in signed_up.user.identities] == ["email"]

    mail = mailbox.newest(address, with_code=True)
    assert mail.type == "signup" and mail.token_hash, f"the mail's link is not a signup verify link: {mail.link}"
    confirmed = client.verify_otp({"email": address, "token": mail.code, "type": "signup"})

    session = confirmed.session
    assert session is not None and session.access_token and session.refresh_token
    assert session.token_type == "bearer"
    assert confirmed.user.id == signed_up.user.id
    assert confirmed.user.email == address
    assert confirmed.user.email_confirmed_at is not None
    assert client.get_session().access_token == session.access_token
    token = claims(session.access_token)
    assert token["sub"] == signed_up.user.id and token["email"] == address
    assert token["role"] == "authenticated" and token["aal"] == "aal1"


def test_sign_in_with_password(server, confirmed_account):
    _, address = confirmed_account()
    client = server.client()

    signed_in = client.sign_in_with_password({"email": address, "password": PASSWORD})

    assert signed_in.session is not None
    assert signed_in.user.email == address
    assert signed_in.user.last_sign_in_at is not None
    assert client.get_session().access_token == signed_in.session.access_token
    assert [entry["method"] for entry in claims(signed_in.session.access_token)["amr"]] == ["password"]


def test_wrong_password_is_invalid_credentials(server, confirmed_account):
    _, address = confirmed_account()
    client = server.client()

    with pytest.raises(AuthApiError) as wrong:
        client.sign_in_with_password({"email": address, "password": "not the password at all"})
    assert (wrong.value.code, wrong.value.status) == ("invalid_credentials", 400)
    assert wrong.value.message == "Invalid login credentials"

    # An address with no account answers the same, so the answer does not tell whether one exists.
    with pytest.raises(AuthApiError) as unknown:
        client.sign_in_with_password({"email": new_email("nobody"), "password": PASSWORD})
    assert (unknown.value.code, unknown.value.status, unknown.value.message) == (
        wrong.value.code,
        wrong.value.status,
        wrong.value.message,
    )
    assert client.get_session() is None


def test_short_password_at_sign_up_is_a_weak_password(server, mailbox):
    client = server.client()

    # Three characters: under GoTrue's default minimum (6) and the server's (8) alike.
    with pytest.raises(AuthWeakPasswordError) as weak:
        client.sign_up({"email": new_email(), "password": "abc"})

    assert weak.value.status == 422
    assert weak.value.code == "weak_password"
    assert "length" in weak.value.reasons
    assert mailbox.all() == [], "a refused sign-up sent mail"


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(("code", "email"), id="code-type-email"),
        pytest.param(("code", "magiclink"), id="code-type-magiclink"),
        pytest.param(("token_hash", "magiclink"), id="link-token-hash"),
    ],
)
def test_sign_in_with_otp_then_verify(server, mailbox, confirmed_account, how):
    first, address = confirmed_account()
    user_id = first.get_session().user.id
    client = server.client()

    sent = client.sign_in_with_otp({"email": address, "options": {"should_create_user": False}})
    assert sent.session is None and sent.user is None

    mail = mailbox.newest(address, with_code=True)
    assert mail.link, f"the sign-in mail has no verify link: {mail.text!r}"
    field, kind = how
    params = {"email": address, "token": mail.code} if field == "code" else {"token_hash": mail.token_hash}
    signed_in = client.verify_otp({**params, "type": kind})

    assert signed_in.session is not None
    assert signed_in.user.id == user_id and signed_in.user.email == address
    assert client.get_session().access_token == signed_in.session.access_token


def test_refresh_gives_a_new_refresh_token_and_the_old_one_is_refused_later(server, confirmed_account):
    client, _ = confirmed_account()
    first = client.get_session()

    second = client.refresh_session().session
    assert second.refresh_token != first.refresh_token
    assert client.get_session().refresh_token == second.refresh_token
    assert client.get_user().user.id == first.user.id
    # The server's time once the first token is rotated away: its reuse window starts no later than this answer.
    rotated = server.clock()
    # Refreshed once more, the first token is no longer the parent of the live one: GoTrue answers a rotated token
    # with the live one, however late, while the live one is its child. Now only the reuse window lets it answer.
    third = client.refresh_session().session
    assert third.refresh_token not in (first.refresh_token, second.refresh_token)

    # Past the reuse window as the server counts it (its Date header is whole seconds, hence the spare ones).
    server.wait_for_clock(rotated + REUSE_INTERVAL + 2, deadline=REUSE_INTERVAL + 10)
    with pytest.raises(AuthApiError) as reused:
        server.client().refresh_session(first.refresh_token)
    assert (reused.value.code, reused.value.status) == ("refresh_token_already_used", 400)
    assert reused.value.message == "Invalid Refresh Token: Already Used"


def test_get_user(server, confirmed_account):
    client, address = confirmed_account()
    session = client.get_session()

    mine = client.get_user()
    assert mine.user.id == session.user.id and mine.user.email == address
    # With an explicit token, from a client holding no session (a backend checking a token it was sent).
    other = server.client().get_user(session.access_token)
    assert other.user.id == session.user.id
    assert server.client().get_user() is None


def test_update_user_data_round_trips(server, confirmed_account):
    client, address = confirmed_account(data={"name": "Ada"})

    updated = client.update_user({"data": {"theme": "dark", "plan": {"tier": 2}}})

    # GoTrue merges the keys sent into user_metadata; the keys not sent stay.
    expected = {"name": "Ada", "theme": "dark", "plan": {"tier": 2}}
    assert {key: updated.user.user_metadata.get(key) for key in expected} == expected
    assert client.get_session().user.user_metadata == updated.user.user_metadata
    assert client.get_user().user.user_metadata == updated.user.user_metadata
    # A new sign-in elsewhere sees them too.
    elsewhere = server.client().sign_in_with_password({"email": address, "password": PASSWORD})
    assert elsewhere.user.user_metadata == updated.user.user_metadata


def test_access_token_carries_the_users_metadata(server, confirmed_account):
    client, address = confirmed_account(data={"name": "Ada"})
    client.update_user({"data": {"theme": "dark"}})

    # Apps read these from the token (get_claims, row-level security policies) without asking for the user.
    signed_in = server.client().sign_in_with_password({"email": address, "password": PASSWORD})
    token = claims(signed_in.session.access_token)
    assert token.get("user_metadata") == signed_in.user.user_metadata
    assert token.get("app_metadata") == signed_in.user.app_metadata
    assert token["app_metadata"]["provider"] == "email"


def test_password_reset_by_mailed_code(server, mailbox, confirmed_account):
    _, address = confirmed_account()
    client = server.client()

    client.reset_password_for_email(address)
    mail = mailbox.newest(address, with_code=True)
    assert mail.type == "recovery", f"the reset mail's link is not a recovery link: {mail.link}"
    recovered = client.verify_otp({"email": address, "token": mail.code, "type": "recovery"})
    assert recovered.session is not None and recovered.user.email == address

    updated = client.update_user({"password": NEW_PASSWORD})
    assert updated.user.email == address

    with pytest.raises(AuthApiError) as old:
        server.client().sign_in_with_password({"email": address, "password": PASSWORD})
    assert old.value.code == "invalid_credentials"
    signed_in = server.client().sign_in_with_password({"email": address, "password": NEW_PASSWORD})
    assert signed_in.user.email == address


def test_sign_out_ends_the_session(server, confirmed_account):
    client, _ = confirmed_account()
    session = client.get_session()

    client.sign_out()

    assert client.get_session() is None
    assert client.get_user() is None
    # The access token has not expired, but its session is gone.
    with pytest.raises(AuthApiError) as gone:
        server.client().get_user(session.access_token)
    assert (gone.value.code, gone.value.status) == ("session_not_found", 403)
