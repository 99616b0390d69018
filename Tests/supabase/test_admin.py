"""GoTrue's admin API as a backend drives it through Supabase's official Python client: `client.admin`
(`SyncGoTrueAdminAPI`) on a client whose headers carry a service key, as supabase-py's create_client makes one for the
service role. Each test asserts what the client returns or raises, written to what GoTrue answers (its source:
internal/api/admin.go, mail.go adminGenerateLink, invite.go, token.go, auth.go requireAdmin). Where the server
answers otherwise the test is a strict xfail naming the difference, so the change that makes it pass must take the
mark off.
"""

import re
import urllib.parse
import uuid

import bcrypt
import pytest
from conftest import PASSWORD, new_email
from supabase_auth.errors import AuthApiError

NEW_PASSWORD = "a brand new passphrase"
# GoTrue's Link header (pagination.go addPaginationHeaders): the next page while there is one, then always the last,
# each the request's own URL with `page` set, query keys sorted as Go's url.Values.Encode sorts them.
LINK = re.compile(r'<(?P<next>[^>]+)>; rel="next", <(?P<last>[^>]+)>; rel="last"')
LAST_ONLY = re.compile(r'<(?P<last>[^>]+)>; rel="last"')


def subset(mapping, expected):
    """The entries of `mapping` under the keys of `expected`: GoTrue may add keys of its own (email_verified...)."""
    return {key: mapping.get(key) for key in expected}


def sign_in(server, address, password=PASSWORD):
    """A new client signed in with the password, like another device; returns its session."""
    return server.client().sign_in_with_password({"email": address, "password": password}).session


def refused(call, *arguments):
    """The AuthApiError a client call raises, as (code, status)."""
    with pytest.raises(AuthApiError) as error:
        call(*arguments)
    return error.value.code, error.value.status


# --- 1, 2. creating users --------------------------------------------------------------------------------------------


def test_created_user_signs_in_and_keeps_its_metadata(server, service):
    address = new_email("created")

    created = service.admin.create_user(
        {
            "email": address,
            "password": PASSWORD,
            "email_confirm": True,
            "user_metadata": {"name": "Ada", "plan": {"tier": 2}},
            "app_metadata": {"roles": ["editor"]},
        }
    ).user

    # GoTrue answers 200 (not 201) with the user, its email identity included.
    assert service.last_answer.status_code == 200
    assert created.email == address
    assert created.email_confirmed_at is not None
    assert [identity.provider for identity in created.identities] == ["email"]
    expected = {"name": "Ada", "plan": {"tier": 2}}
    assert subset(created.user_metadata, expected) == expected
    # app_metadata: GoTrue's provider and providers, with what was set merged on top.
    assert created.app_metadata["provider"] == "email"
    assert created.app_metadata["providers"] == ["email"]
    assert created.app_metadata["roles"] == ["editor"]

    signed_in = server.client().sign_in_with_password({"email": address, "password": PASSWORD})
    assert signed_in.session is not None
    assert signed_in.user.id == created.id
    assert signed_in.user.user_metadata == created.user_metadata
    assert signed_in.user.app_metadata == created.app_metadata

    # The address is taken now.
    assert refused(service.admin.create_user, {"email": address, "password": PASSWORD}) == ("email_exists", 422)


def test_user_imported_with_a_bcrypt_hash_signs_in_with_the_old_password(server, service):
    address = new_email("imported")
    old_password = "the password from the old system"
    hashed = bcrypt.hashpw(old_password.encode(), bcrypt.gensalt(rounds=10)).decode()
    assert hashed.startswith("$2b$10$")
    kept_id = str(uuid.uuid4())  # a migration keeps the user's id from the old system

    created = service.admin.create_user(
        {"id": kept_id, "email": address, "password_hash": hashed, "email_confirm": True}
    ).user

    assert created.id == kept_id
    assert created.email == address
    assert sign_in(server, address, old_password).user.id == kept_id
    assert refused(server.client().sign_in_with_password, {"email": address, "password": PASSWORD}) == (
        "invalid_credentials",
        400,
    )
    # Again, once the server has had the password in hand (it may store a hash of its own then).
    assert sign_in(server, address, old_password).user.id == kept_id


# --- 3. listing ------------------------------------------------------------------------------------------------------


def test_list_users_pages_with_gotrues_headers(server, service):
    created = [
        service.admin.create_user({"email": new_email(f"listed{n}"), "password": PASSWORD}).user for n in range(5)
    ]

    first = service.admin.list_users(page=1, per_page=2)

    # Newest first (GoTrue's default sort, created_at desc).
    assert [user.id for user in first] == [created[4].id, created[3].id]
    answer = service.last_answer
    assert answer.headers["X-Total-Count"] == "5"
    links = LINK.fullmatch(answer.headers["Link"])
    assert links, f"not GoTrue's Link header: {answer.headers['Link']!r}"
    for rel, page in (("next", "2"), ("last", "3")):
        url = urllib.parse.urlsplit(links.group(rel))
        # GoTrue's link is its request URI, relative; the path is the one it saw (behind a gateway that strips
        # /auth/v1 it has no prefix), so only its end is GoTrue's for sure.
        assert url.path.endswith("/admin/users") and not url.scheme, f"rel={rel}: {links.group(rel)!r}"
        assert url.query == f"page={page}&per_page=2", f"rel={rel}: {links.group(rel)!r}"

    last = service.admin.list_users(page=3, per_page=2)
    assert [user.id for user in last] == [created[0].id]
    # On the last page there is no next.
    links = LAST_ONLY.fullmatch(service.last_answer.headers["Link"])
    assert links and urllib.parse.urlsplit(links.group("last")).query == "page=3&per_page=2"

    # With no arguments the client sends page and per_page empty, which GoTrue reads as its defaults (1 and 50).
    everyone = service.admin.list_users()
    assert service.last_answer.request.url.query == b"page=&per_page="
    assert [user.id for user in everyone] == [user.id for user in reversed(created)]
    assert service.last_answer.headers["X-Total-Count"] == "5"


# --- 4. one user: read, change, ban, delete --------------------------------------------------------------------------


def test_get_update_and_delete_a_user(server, service):
    address = new_email("managed")
    metadata = {"name": "Ada", "theme": "light"}
    user = service.admin.create_user(
        {"email": address, "password": PASSWORD, "email_confirm": True, "user_metadata": metadata}
    ).user

    got = service.admin.get_user_by_id(user.id).user
    assert (got.id, got.email, got.user_metadata) == (user.id, address, user.user_metadata)

    renamed = new_email("renamed")
    updated = service.admin.update_user_by_id(
        user.id, {"email": renamed, "user_metadata": {"theme": "dark", "plan": "pro"}}
    ).user

    # The address changes at once (no confirmation asked); metadata merges: keys not sent stay.
    assert updated.id == user.id
    assert updated.email == renamed
    expected = {"name": "Ada", "theme": "dark", "plan": "pro"}
    assert subset(updated.user_metadata, expected) == expected
    assert service.admin.get_user_by_id(user.id).user.email == renamed
    assert sign_in(server, renamed).user.id == user.id
    assert refused(server.client().sign_in_with_password, {"email": address, "password": PASSWORD}) == (
        "invalid_credentials",
        400,
    )

    # DELETE answers {} (the client returns None); the user is gone.
    assert service.admin.delete_user(user.id) is None
    assert service.last_answer.status_code == 200
    assert refused(service.admin.get_user_by_id, user.id) == ("user_not_found", 404)
    assert refused(server.client().sign_in_with_password, {"email": renamed, "password": PASSWORD}) == (
        "invalid_credentials",
        400,
    )


def test_admin_password_change_ends_the_users_sessions(server, service):
    address = new_email("reset")
    user = service.admin.create_user({"email": address, "password": PASSWORD, "email_confirm": True}).user
    session = sign_in(server, address)

    service.admin.update_user_by_id(user.id, {"password": NEW_PASSWORD})

    # GoTrue's UpdatePassword signs the user out everywhere: the session's refresh token is gone with it.
    assert refused(server.client().refresh_session, session.refresh_token) == ("refresh_token_not_found", 400)
    assert refused(server.client().sign_in_with_password, {"email": address, "password": PASSWORD}) == (
        "invalid_credentials",
        400,
    )
    assert sign_in(server, address, NEW_PASSWORD).user.id == user.id


def test_a_ban_refuses_the_users_refresh_and_none_lifts_it(server, service):
    address = new_email("banned")
    user = service.admin.create_user({"email": address, "password": PASSWORD, "email_confirm": True}).user
    session = sign_in(server, address)

    banned = service.admin.update_user_by_id(user.id, {"ban_duration": "1h"}).user

    assert banned.banned_until is not None
    # GoTrue's refresh of a banned user's session (token_refresh.go).
    with pytest.raises(AuthApiError) as refresh:
        server.client().refresh_session(session.refresh_token)
    assert (refresh.value.code, refresh.value.status) == ("user_banned", 400)
    assert refresh.value.message == "Invalid Refresh Token: User Banned"

    lifted = service.admin.update_user_by_id(user.id, {"ban_duration": "none"}).user

    assert lifted.banned_until is None
    assert sign_in(server, address).user.id == user.id


def test_a_banned_user_signing_in_is_told_user_banned(server, service):
    # GoTrue checks the ban before the password; Gatehouse tells only the right password, so a guess learns nothing.
    address = new_email("banned")
    user = service.admin.create_user({"email": address, "password": PASSWORD, "email_confirm": True}).user
    service.admin.update_user_by_id(user.id, {"ban_duration": "1h"})

    with pytest.raises(AuthApiError) as banned:
        server.client().sign_in_with_password({"email": address, "password": PASSWORD})

    assert (banned.value.code, banned.value.status) == ("user_banned", 400)
    assert banned.value.message == "User is banned"


# --- 5. generated links ----------------------------------------------------------------------------------------------


def assert_link(link, kind, address):
    """A generate_link answer as GoTrue gives it: the user, and the link, code and hash nothing was mailed with."""
    properties = link.properties
    assert link.user.email == address
    assert properties.verification_type == kind
    assert re.fullmatch(r"\d{6}", properties.email_otp), properties.email_otp
    assert properties.hashed_token
    assert properties.redirect_to
    url = urllib.parse.urlsplit(properties.action_link)
    query = urllib.parse.parse_qs(url.query)
    assert url.scheme in ("http", "https") and url.path.endswith("/auth/v1/verify"), properties.action_link
    assert query.get("token") == [properties.hashed_token], properties.action_link
    assert query.get("type") == [kind], properties.action_link
    assert query.get("redirect_to") == [properties.redirect_to], properties.action_link


def test_generate_link_gives_codes_and_links_and_mails_nothing(server, mailbox, service):
    address = new_email("linked")

    signup = service.admin.generate_link({"type": "signup", "email": address, "password": PASSWORD})

    assert_link(signup, "signup", address)
    assert signup.user.email_confirmed_at is None
    confirmed = server.client().verify_otp({"email": address, "token": signup.properties.email_otp, "type": "signup"})
    assert confirmed.session is not None and confirmed.user.id == signup.user.id
    assert confirmed.user.email_confirmed_at is not None
    assert sign_in(server, address).user.id == signup.user.id

    magic = service.admin.generate_link({"type": "magiclink", "email": address})

    assert_link(magic, "magiclink", address)
    client = server.client()
    by_link = client.verify_otp({"type": "magiclink", "token_hash": magic.properties.hashed_token})
    assert by_link.session is not None and by_link.user.id == signup.user.id
    assert client.get_user().user.id == signup.user.id

    # Made after the magic link was used: GoTrue keeps one recovery token per user, and both kinds use it.
    recovery = service.admin.generate_link({"type": "recovery", "email": address})

    assert_link(recovery, "recovery", address)
    code = recovery.properties.email_otp
    recovered = server.client().verify_otp({"email": address, "token": code, "type": "recovery"})
    assert recovered.session is not None and recovered.user.id == signup.user.id

    # A magic link for an address with no account is a sign-up link (GoTrue turns the type into signup).
    unknown = new_email("unknown")
    first_contact = service.admin.generate_link({"type": "magiclink", "email": unknown})
    assert_link(first_contact, "signup", unknown)

    # Nothing was mailed. The outbox is written oldest queued mail first, so once a mail queued after all of the
    # above is there, any mail they had queued would be there too.
    later = new_email("later")
    server.client().sign_up({"email": later, "password": PASSWORD})
    mailbox.newest(later)
    mailed = [mail for mail in mailbox.all() if address in mail.to or unknown in mail.to]
    assert mailed == [], f"generate_link mailed: {mailed}"


def test_generate_link_answer_carries_gotrues_stamps(server, service):
    address = new_email("stamped")

    signup = service.admin.generate_link(
        {"type": "signup", "email": address, "password": PASSWORD, "options": {"data": {"team": "blue"}}}
    )
    confirmed = server.client().verify_otp({"email": address, "token": signup.properties.email_otp, "type": "signup"})
    magic = service.admin.generate_link({"type": "magiclink", "email": address})

    assert confirmed.user.user_metadata.get("team") == "blue"
    assert signup.user.confirmation_sent_at is not None
    assert signup.user.user_metadata.get("team") == "blue"
    assert magic.user.recovery_sent_at is not None


# --- 6. invitations --------------------------------------------------------------------------------------------------


def test_invite_then_the_mailed_link_signs_in(server, mailbox, service):
    address = new_email("invited")

    invited = service.admin.invite_user_by_email(address, {"data": {"team": "blue"}}).user

    assert invited.email == address
    assert invited.email_confirmed_at is None
    mail = mailbox.newest(address, subject="You have been invited")
    assert mail.type == "invite" and mail.token_hash, f"the invite mail's link is not an invite link: {mail.link}"

    client = server.client()
    accepted = client.verify_otp({"type": "invite", "token_hash": mail.token_hash})

    assert accepted.session is not None
    assert accepted.user.id == invited.id
    assert accepted.user.email_confirmed_at is not None
    assert accepted.user.user_metadata.get("team") == "blue"
    assert client.get_session().access_token == accepted.session.access_token
    assert client.get_user().user.id == invited.id

    # The address is confirmed now: inviting it again is refused.
    assert refused(service.admin.invite_user_by_email, address) == ("email_exists", 422)


def test_invite_answer_carries_gotrues_stamps(server, mailbox, service):
    address = new_email("invited")

    invited = service.admin.invite_user_by_email(address, {"data": {"team": "blue"}}).user

    assert invited.user_metadata.get("team") == "blue"
    assert invited.invited_at is not None
    assert invited.confirmation_sent_at is not None
    accepted = server.client().verify_otp({"type": "invite", "token_hash": mailbox.newest(address).token_hash})
    assert accepted.user.invited_at is not None


# --- 7. who may call it ----------------------------------------------------------------------------------------------


def test_admin_api_without_a_service_key(server, confirmed_account):
    # No Authorization header at all (a client made without a key).
    assert refused(server.client().admin.list_users) == ("no_authorization", 401)

    # A user's own access token: a JWT of role authenticated, not an admin role.
    user_client, _ = confirmed_account()
    as_user = server.client({"Authorization": f"Bearer {user_client.get_session().access_token}"})
    assert refused(as_user.admin.list_users) == ("not_admin", 403)
    assert refused(as_user.admin.create_user, {"email": new_email(), "password": PASSWORD}) == ("not_admin", 403)


# A revoked key is a token that verifies as nothing any more: GoTrue's service key is revoked by rotating the JWT
# secret, after which the old key fails parseJWTClaims with 403 bad_jwt (not_admin is for a valid token of a role that
# is not an admin role).
REVOKED = ("bad_jwt", 403)


def test_a_service_key_rotated_away_is_refused(server, service):
    assert service.admin.list_users() == []

    rotated = server.service_client(server.mint_service_key("--revoke-others"))

    assert refused(service.admin.list_users) == REVOKED
    assert rotated.admin.list_users() == []


def test_a_revoked_service_key_is_refused(server, service):
    assert service.admin.list_users() == []

    server.keys("revoke-service-key", "--all")

    assert refused(service.admin.list_users) == REVOKED
    # A key minted afterwards works.
    assert server.service_client(server.mint_service_key()).admin.list_users() == []


def test_a_users_token_as_bearer_is_not_admin_whatever_the_apikey(server, service, confirmed_account):
    user_client, _ = confirmed_account()
    token = user_client.get_session().access_token
    # A service-role client whose Authorization was switched to a signed-in user's token, apikey left as it was:
    # GoTrue reads only the bearer token (requireAdminCredentials), and so does Gatehouse when there is one.
    client = server.client({"Authorization": f"Bearer {token}", "apikey": service.key})

    assert refused(client.admin.list_users) == ("not_admin", 403)


def test_the_service_key_as_apikey_alone_is_accepted(server, service):
    # A deliberate difference: GoTrue reads only the bearer token (401 no_authorization here; on hosted Supabase the
    # gateway checks apikey). Gatehouse has no gateway in front, and takes the service key as apikey when no bearer
    # token is sent, as its issue asks.
    client = server.client({"apikey": service.key})

    assert client.admin.list_users() == []


def test_a_bearer_that_is_not_a_jwt_is_bad_jwt(server):
    # GoTrue's parseJWTClaims fails before any role is looked at.
    client = server.client({"Authorization": "Bearer not-a-jwt"})

    assert refused(client.admin.list_users) == ("bad_jwt", 403)
