"""Passkeys in Supabase's wire format (`/auth/v1/passkeys/...`), end to end against the binary, with a software
authenticator nobody here wrote: soft-webauthn's `SoftWebauthnDevice`, whose CBOR and COSE are python-fido2's.
python-fido2's own relying party (`Fido2Server`) reads the options the server sends and checks the device's answers
too, so what passes here is WebAuthn as another implementation has it, not as this one does.

The server's public URL is http://localhost:PORT (an IP address is no WebAuthn RP id), so the RP id is `localhost`
and the one origin allowed is http://localhost:PORT; the tests still reach it on 127.0.0.1. The official client has
no passkey API, so the endpoints are called over raw HTTP as an app's own code would, and the session a passkey gives
is handed to the official client (`set_session`) as an app does.

Two small conversions stay here: the server's JSON options into the form soft-webauthn takes (python-fido2's, bytes),
and the device's answer (bytes) into the W3C JSON a browser's `toJSON()` gives. SoftWebauthnDevice never sets the
user-verified flag, which every passkey provider sets and the server requires; `Authenticator` adds it to the
device's own output (an assertion signed again with the device's key). The device as it is is refused for it.
"""

import base64
import uuid

import fido2.features
import httpx
import pytest
from conftest import WAIT, claims
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2 import cbor
from fido2.server import Fido2Server
from fido2.utils import sha256
from fido2.webauthn import (
    AttestationConveyancePreference,
    PublicKeyCredentialCreationOptions,
    PublicKeyCredentialRequestOptions,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from soft_webauthn import SoftWebauthnDevice

# python-fido2 1.x reads WebAuthn's JSON form (camelCase, base64url strings) only when this is on; it can be set once.
try:
    fido2.features.webauthn_json_mapping.enabled = True
except ValueError:
    pass

pytestmark = pytest.mark.serve("--passkeys", "on", "--public-url", "http://localhost:{port}")

UV = 0x04  # the authenticator data's user-verified flag (WebAuthn L3 §6.1)
FLAGS = 32  # its offset: after the RP id's SHA-256
APP_ID = "ABCDE12345.com.example.app"


# --- the two conversions ----------------------------------------------------------------------------------------


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def creation_request(options):
    """`navigator.credentials.create()`'s argument as soft-webauthn takes it: the server's options, bytes decoded."""
    user = {**options["user"], "id": unb64(options["user"]["id"])}
    return {"publicKey": {**options, "challenge": unb64(options["challenge"]), "user": user}}


def get_request(options):
    """`navigator.credentials.get()`'s argument as soft-webauthn takes it."""
    return {"publicKey": {**options, "challenge": unb64(options["challenge"])}}


def to_json(credential):
    """The device's answer in the W3C JSON form (RegistrationResponseJSON / AuthenticationResponseJSON)."""
    response = {key: b64(value) for key, value in credential["response"].items() if value is not None}
    raw = b64(credential["rawId"])
    return {"id": raw, "rawId": raw, "type": credential["type"], "response": response, "clientExtensionResults": {}}


# --- the authenticator ------------------------------------------------------------------------------------------


class Authenticator(SoftWebauthnDevice):
    """soft-webauthn's device, verifying its user as a passkey provider does (a PIN, a fingerprint): the UV flag is
    set in the device's own authenticator data, and its assertion signed again with its own key."""

    def create(self, options, origin):
        credential = super().create(options, origin)
        attestation = cbor.decode(credential["response"]["attestationObject"])
        attestation["authData"] = with_flag(attestation["authData"], UV)  # `none`: no signature covers it
        credential["response"]["attestationObject"] = cbor.encode(attestation)
        return credential

    def get(self, options, origin):
        assertion = super().get(options, origin)
        response = assertion["response"]
        response["authenticatorData"] = with_flag(response["authenticatorData"], UV)
        response["signature"] = self.sign(response["authenticatorData"], response["clientDataJSON"])
        return assertion

    def sign(self, authenticator_data, client_data):
        return self.private_key.sign(authenticator_data + sha256(client_data), ec.ECDSA(hashes.SHA256()))


def with_flag(authenticator_data, flag):
    data = bytearray(authenticator_data)
    data[FLAGS] |= flag
    return bytes(data)


# --- the endpoints ----------------------------------------------------------------------------------------------


class Passkeys:
    """The passkey endpoints over raw HTTP. `origin` is the page's the device answers for: the server's own."""

    def __init__(self, server, origin=None):
        self.server = server
        self.origin = origin or f"http://localhost:{server.port}"
        self.http = httpx.Client(base_url=server.base, timeout=WAIT, trust_env=False, follow_redirects=False)
        server.clients.append(self.http)  # closed with the server

    def call(self, method, path, token=None, body=None, status=200):
        """The JSON of an answer with `status` (None for an empty one)."""
        answer = self._send(method, path, token, body)
        assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else None

    def refusal(self, method, path, token=None, body=None):
        """(status, error_code, msg) of a refused call, in GoTrue's legacy error shape."""
        answer = self._send(method, path, token, body)
        assert answer.status_code >= 400, f"{method} {path} was not refused: {answer.status_code} {answer.text}"
        error = answer.json()
        assert error["code"] == answer.status_code, error
        return answer.status_code, error["error_code"], error["msg"]

    def _send(self, method, path, token, body):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.http.request(method, "/auth/v1" + path, headers=headers, json=body)

    # registration, signed in
    def registration_options(self, token):
        return self.call("POST", "/passkeys/registration/options", token)

    def registration_answer(self, device, token, origin=None):
        """(challenge_id, the device's credential JSON) for fresh creation options."""
        challenge = self.registration_options(token)
        credential = device.create(creation_request(challenge["options"]), origin or self.origin)
        return challenge["challenge_id"], to_json(credential)

    def verify_registration(self, token, challenge_id, credential):
        body = {"challenge_id": challenge_id, "credential": credential}
        return self.call("POST", "/passkeys/registration/verify", token, body)

    def refused_registration(self, token, challenge_id, credential):
        body = {"challenge_id": challenge_id, "credential": credential}
        return self.refusal("POST", "/passkeys/registration/verify", token, body)

    def register(self, device, token):
        return self.verify_registration(token, *self.registration_answer(device, token))

    # sign-in, no session
    def authentication_options(self):
        return self.call("POST", "/passkeys/authentication/options")

    def assertion(self, device, origin=None):
        """(challenge_id, the device's assertion JSON) for fresh request options."""
        challenge = self.authentication_options()
        assertion = device.get(get_request(challenge["options"]), origin or self.origin)
        return challenge["challenge_id"], to_json(assertion)

    def verify_sign_in(self, challenge_id, assertion):
        body = {"challenge_id": challenge_id, "credential": assertion}
        return self.call("POST", "/passkeys/authentication/verify", None, body)

    def refused_sign_in(self, challenge_id, assertion):
        body = {"challenge_id": challenge_id, "credential": assertion}
        return self.refusal("POST", "/passkeys/authentication/verify", None, body)

    def sign_in(self, device):
        return self.verify_sign_in(*self.assertion(device))

    # management
    def list(self, token):
        return self.call("GET", "/passkeys", token)


def account(confirmed_account):
    """A confirmed, signed-in account: (official client, email, user id, access token)."""
    client, address = confirmed_account()
    session = client.get_session()
    return client, address, session.user.id, session.access_token


# --- 1. register, list, sign in ---------------------------------------------------------------------------------


def test_register_list_and_sign_in_with_a_passkey(server, confirmed_account):
    passkeys = Passkeys(server)
    _, address, user_id, token = account(confirmed_account)

    challenge = passkeys.registration_options(token)
    options = challenge["options"]
    assert set(challenge) >= {"challenge_id", "expires_at", "options"}
    assert options["rp"]["id"] == "localhost"
    assert unb64(options["user"]["id"]) == user_id.encode()  # the user handle is the user's id
    assert options["user"]["name"] == options["user"]["displayName"] == address
    assert options["pubKeyCredParams"] == [{"type": "public-key", "alg": -7}, {"type": "public-key", "alg": -257}]
    assert options["authenticatorSelection"] == {
        "residentKey": "required", "requireResidentKey": True, "userVerification": "required"}
    assert options["attestation"] == "none" and options["excludeCredentials"] == []
    assert len(unb64(options["challenge"])) >= 16
    assert 0 < challenge["expires_at"] - server.clock() <= options["timeout"] / 1000 + 1

    device = Authenticator()
    credential = to_json(device.create(creation_request(options), passkeys.origin))
    passkey = passkeys.verify_registration(token, challenge["challenge_id"], credential)
    assert passkey["friendly_name"] == "Passkey"  # soft-webauthn's AAGUID is zeros: no provider's name
    assert passkey["backed_up"] is False and passkey.get("last_used_at") is None
    assert passkeys.list(token) == [passkey]
    assert passkeys.call("GET", "/passkeys/", token) == [passkey]

    # Signing in: a device with no session, the passkey naming its user.
    request = passkeys.authentication_options()
    assert request["options"]["rpId"] == "localhost"
    assert request["options"]["allowCredentials"] == [] and request["options"]["userVerification"] == "required"
    assertion = to_json(device.get(get_request(request["options"]), passkeys.origin))
    assert unb64(assertion["response"]["userHandle"]) == user_id.encode()
    session = passkeys.verify_sign_in(request["challenge_id"], assertion)

    assert session["token_type"] == "bearer" and session["expires_in"] > 0 and session["refresh_token"]
    assert session["user"]["id"] == user_id and session["user"]["email"] == address
    token_claims = claims(session["access_token"])
    assert token_claims["sub"] == user_id and token_claims["aal"] == "aal1"
    assert [entry["method"] for entry in token_claims["amr"]] == ["passkey"]
    assert abs(token_claims["amr"][0]["timestamp"] - server.clock()) < 60

    # The app hands the session to the official client, which uses and refreshes it.
    app = server.client()
    app.set_session(session["access_token"], session["refresh_token"])
    assert app.get_user().user.email == address
    refreshed = app.refresh_session().session
    assert refreshed.refresh_token != session["refresh_token"]
    assert [entry["method"] for entry in claims(refreshed.access_token)["amr"]] == ["passkey"]

    [used] = passkeys.list(token)
    assert used["id"] == passkey["id"] and used["last_used_at"]


def test_the_sign_counter_must_grow(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, user_id, token = account(confirmed_account)
    device = Authenticator()
    passkeys.register(device, token)

    assert passkeys.sign_in(device)["user"]["id"] == user_id
    assert device.sign_count == 1
    assert passkeys.sign_in(device)["user"]["id"] == user_id  # the device's counter went up: accepted
    assert device.sign_count == 2

    # A copy of the key whose counter lags behind (a cloned authenticator) is refused.
    device.sign_count = 1  # its next assertion says 2 again
    assert passkeys.refused_sign_in(*passkeys.assertion(device)) == (
        400, "webauthn_verification_failed", "Credential verification failed (sign_count_regressed)")
    device.sign_count = 5
    assert passkeys.sign_in(device)["user"]["id"] == user_id


def test_a_device_that_does_not_verify_its_user_is_refused(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)

    # soft-webauthn's device as it is sets user presence but not user verification, which the options require.
    answer = passkeys.registration_answer(SoftWebauthnDevice(), token)
    status, code, message = passkeys.refused_registration(token, *answer)
    assert (status, code) == (400, "webauthn_verification_failed") and "user_not_verified" in message
    assert passkeys.list(token) == []

    device = Authenticator()
    passkeys.register(device, token)
    challenge = passkeys.authentication_options()
    unverified = SoftWebauthnDevice.get(device, get_request(challenge["options"]), passkeys.origin)
    status, code, message = passkeys.refused_sign_in(challenge["challenge_id"], to_json(unverified))
    assert (status, code) == (400, "webauthn_verification_failed") and "user_not_verified" in message


# --- 2. challenges ----------------------------------------------------------------------------------------------


def test_each_challenge_is_single_use_and_bound_to_its_ceremony(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    _, _, _, other_token = account(confirmed_account)
    device = Authenticator()

    challenge_id, credential = passkeys.registration_answer(device, token)
    passkeys.verify_registration(token, challenge_id, credential)
    assert passkeys.refused_registration(token, challenge_id, credential)[:2] == (
        400, "webauthn_challenge_not_found")

    challenge_id, assertion = passkeys.assertion(device)
    passkeys.verify_sign_in(challenge_id, assertion)
    assert passkeys.refused_sign_in(challenge_id, assertion)[:2] == (400, "webauthn_challenge_not_found")

    # A registration challenge signed as a sign-in is not a sign-in challenge.
    registration = passkeys.registration_options(token)
    signed = to_json(device.get(get_request({"challenge": registration["options"]["challenge"],
                                             "rpId": "localhost"}), passkeys.origin))
    assert passkeys.refused_sign_in(registration["challenge_id"], signed)[:2] == (
        400, "webauthn_challenge_not_found")
    # ... nor a sign-in challenge a registration one,
    sign_in = passkeys.authentication_options()
    other_device = Authenticator()
    created = to_json(other_device.create(creation_request(
        {**registration["options"], "challenge": sign_in["options"]["challenge"]}), passkeys.origin))
    assert passkeys.refused_registration(token, sign_in["challenge_id"], created)[:2] == (
        400, "webauthn_challenge_not_found")
    # ... nor one user's registration challenge another's.
    challenge_id, credential = passkeys.registration_answer(other_device, token)
    assert passkeys.refused_registration(other_token, challenge_id, credential)[:2] == (
        400, "webauthn_challenge_not_found")
    assert passkeys.list(other_token) == []


def test_a_refused_answer_spends_its_challenge(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    device = Authenticator()

    challenge = passkeys.registration_options(token)
    wrong = to_json(device.create(creation_request(challenge["options"]), "https://evil.example"))
    assert passkeys.refused_registration(token, challenge["challenge_id"], wrong)[:2] == (
        400, "webauthn_verification_failed")
    right = to_json(device.create(creation_request(challenge["options"]), passkeys.origin))
    assert passkeys.refused_registration(token, challenge["challenge_id"], right)[:2] == (
        400, "webauthn_challenge_not_found")
    assert passkeys.list(token) == []


# --- 3. what the server checks ----------------------------------------------------------------------------------


def test_wrong_origin_rp_id_or_signature_is_refused_and_nothing_is_stored(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)

    def refused_registration(device, origin=None, rp_id=None):
        challenge = passkeys.registration_options(token)
        options = challenge["options"]
        if rp_id:
            options = {**options, "rp": {**options["rp"], "id": rp_id}}
        credential = to_json(device.create(creation_request(options), origin or passkeys.origin))
        return passkeys.refused_registration(token, challenge["challenge_id"], credential)

    failed = "Credential verification failed"
    # Another page (another port of the same host too) and another RP id.
    assert refused_registration(Authenticator(), origin="https://evil.example") == (
        400, "webauthn_verification_failed", f"{failed} (origin_not_allowed)")
    assert refused_registration(Authenticator(), origin="http://localhost:1") == (
        400, "webauthn_verification_failed", f"{failed} (origin_not_allowed)")
    assert refused_registration(Authenticator(), rp_id="example.com") == (
        400, "webauthn_verification_failed", f"{failed} (rp_id_mismatch)")
    assert passkeys.list(token) == []  # nothing stored

    device = Authenticator()
    passkey = passkeys.register(device, token)

    # Sign-in from another page.
    assert passkeys.refused_sign_in(*passkeys.assertion(device, origin="https://evil.example")) == (
        400, "webauthn_verification_failed", f"{failed} (origin_not_allowed)")
    # Signed for another RP id.
    challenge = passkeys.authentication_options()
    device.rp_id = "example.com"
    foreign = to_json(device.get(get_request({**challenge["options"], "rpId": "example.com"}), passkeys.origin))
    device.rp_id = "localhost"
    assert passkeys.refused_sign_in(challenge["challenge_id"], foreign) == (
        400, "webauthn_verification_failed", f"{failed} (rp_id_mismatch)")
    # Signed by the right key over other data, by another key, or not a signature at all.
    challenge_id, assertion = passkeys.assertion(device)
    response = assertion["response"]
    response["signature"] = b64(device.sign(unb64(response["authenticatorData"]), b"{}"))
    assert passkeys.refused_sign_in(challenge_id, assertion) == (
        400, "webauthn_verification_failed", f"{failed} (bad_signature)")
    challenge_id, assertion = passkeys.assertion(device)
    stranger = Authenticator()
    stranger.cred_init("localhost", b"someone")
    response = assertion["response"]
    response["signature"] = b64(stranger.sign(unb64(response["authenticatorData"]),
                                              unb64(response["clientDataJSON"])))
    assert passkeys.refused_sign_in(challenge_id, assertion) == (
        400, "webauthn_verification_failed", f"{failed} (bad_signature)")
    challenge_id, assertion = passkeys.assertion(device)
    signature = bytearray(unb64(assertion["response"]["signature"]))
    signature[-1] ^= 0x01
    assertion["response"]["signature"] = b64(bytes(signature))
    assert passkeys.refused_sign_in(challenge_id, assertion) == (
        400, "webauthn_verification_failed", f"{failed} (bad_signature)")

    # The refusals changed nothing: the passkey is there, unused, and still signs in.
    assert passkeys.list(token) == [passkey]
    assert passkeys.sign_in(device)["user"]["id"] == claims(token)["sub"]


# --- 4. unknown credentials -------------------------------------------------------------------------------------


def test_a_passkey_not_registered_here_is_unknown(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, user_id, token = account(confirmed_account)
    _, _, other_id, _ = account(confirmed_account)

    # A device that was never registered, even one claiming a real user's handle.
    stranger = Authenticator()
    stranger.cred_init("localhost", user_id.encode())
    assert passkeys.refused_sign_in(*passkeys.assertion(stranger))[:2] == (400, "webauthn_credential_not_found")

    # A registered passkey that names another user than its own.
    device = Authenticator()
    passkeys.register(device, token)
    device.user_handle = other_id.encode()
    assert passkeys.refused_sign_in(*passkeys.assertion(device))[:2] == (400, "webauthn_credential_not_found")
    device.user_handle = user_id.encode()
    assert passkeys.sign_in(device)["user"]["id"] == user_id


# --- 5. rename and delete ---------------------------------------------------------------------------------------


def test_rename_and_delete_a_passkey(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    _, _, _, other_token = account(confirmed_account)
    device, spare = Authenticator(), Authenticator()
    passkey = passkeys.register(device, token)
    kept = passkeys.register(spare, token)

    renamed = passkeys.call("PATCH", f"/passkeys/{passkey['id']}", token, {"friendly_name": "Work laptop"})
    assert renamed["id"] == passkey["id"] and renamed["friendly_name"] == "Work laptop"
    assert renamed["created_at"] == passkey["created_at"]
    assert passkeys.list(token) == [renamed, kept]
    assert passkeys.refusal("PATCH", f"/passkeys/{passkey['id']}", token, {"friendly_name": ""})[:2] == (
        400, "validation_failed")

    # Another user can neither rename nor delete it.
    assert passkeys.refusal("PATCH", f"/passkeys/{passkey['id']}", other_token, {"friendly_name": "Mine"})[:2] == (
        404, "validation_failed")
    assert passkeys.refusal("DELETE", f"/passkeys/{passkey['id']}", other_token)[:2] == (404, "validation_failed")

    assert passkeys.call("DELETE", f"/passkeys/{passkey['id']}", token, status=204) is None
    assert passkeys.list(token) == [kept]
    assert passkeys.refusal("DELETE", f"/passkeys/{passkey['id']}", token)[:2] == (404, "validation_failed")
    assert passkeys.refused_sign_in(*passkeys.assertion(device))[:2] == (400, "webauthn_credential_not_found")
    assert passkeys.sign_in(spare)["user"]["id"] == claims(token)["sub"]


# --- 6. the same authenticator twice, and the limit -------------------------------------------------------------


def test_the_same_credential_cannot_be_registered_twice(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    _, _, _, other_token = account(confirmed_account)
    device = Authenticator()
    passkey = passkeys.register(device, token)

    # The next options exclude it, so a browser's authenticator would refuse to make a second one...
    options = passkeys.registration_options(token)["options"]
    assert options["excludeCredentials"] == [{"type": "public-key", "id": b64(device.credential_id)}]

    # ... but one that ignores the list answers with the credential it has.
    device.cred_init = lambda rp_id, user_handle: None  # keep the credential, its key and its user handle
    challenge_id, credential = passkeys.registration_answer(device, token)
    assert credential["rawId"] == b64(device.credential_id)
    assert passkeys.refused_registration(token, challenge_id, credential)[:2] == (
        422, "webauthn_credential_exists")
    assert passkeys.list(token) == [passkey]
    # Nor can another account take it.
    challenge_id, credential = passkeys.registration_answer(device, other_token)
    assert passkeys.refused_registration(other_token, challenge_id, credential)[:2] == (
        422, "webauthn_credential_exists")
    assert passkeys.list(other_token) == []


def test_ten_passkeys_at_most(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    for _ in range(9):
        passkeys.register(Authenticator(), token)

    # Two ceremonies started at nine: the first to finish is the tenth, the second is one too many.
    first = passkeys.registration_answer(Authenticator(), token)
    second = passkeys.registration_answer(Authenticator(), token)
    passkeys.verify_registration(token, *first)
    assert passkeys.refused_registration(token, *second)[:2] == (422, "too_many_passkeys")
    assert passkeys.refusal("POST", "/passkeys/registration/options", token)[:2] == (422, "too_many_passkeys")
    listed = passkeys.list(token)
    assert len(listed) == 10 and len({passkey["id"] for passkey in listed}) == 10


# --- 7. the admin API -------------------------------------------------------------------------------------------


def test_admin_lists_and_deletes_a_users_passkeys(server, service, confirmed_account):
    passkeys = Passkeys(server)
    _, _, user_id, token = account(confirmed_account)
    device = Authenticator()
    passkey = passkeys.register(device, token)
    admin = service.key

    assert passkeys.call("GET", f"/admin/users/{user_id}/passkeys", admin) == [passkey]
    # A user's own token is no admin's.
    assert passkeys.refusal("GET", f"/admin/users/{user_id}/passkeys", token)[:2] == (403, "not_admin")
    delete = f"/admin/users/{user_id}/passkeys/{passkey['id']}"
    assert passkeys.refusal("DELETE", delete, token)[:2] == (403, "not_admin")
    assert passkeys.list(token) == [passkey]

    assert passkeys.call("DELETE", delete, admin, status=204) is None
    assert passkeys.call("GET", f"/admin/users/{user_id}/passkeys", admin) == []
    assert passkeys.list(token) == []
    assert passkeys.refusal("DELETE", delete, admin)[:2] == (404, "validation_failed")
    assert passkeys.refusal("GET", f"/admin/users/{uuid.uuid4()}/passkeys", admin)[:2] == (404, "user_not_found")
    assert passkeys.refused_sign_in(*passkeys.assertion(device))[:2] == (400, "webauthn_credential_not_found")


def test_a_banned_user_cannot_sign_in_with_a_passkey(server, service, confirmed_account):
    passkeys = Passkeys(server)
    _, _, user_id, token = account(confirmed_account)
    device = Authenticator()
    passkeys.register(device, token)

    service.admin.update_user_by_id(user_id, {"ban_duration": "1h"})
    assert passkeys.refused_sign_in(*passkeys.assertion(device))[1:] == ("user_banned", "User is banned")
    service.admin.update_user_by_id(user_id, {"ban_duration": "none"})
    assert passkeys.sign_in(device)["user"]["id"] == user_id


def test_a_banned_users_passkey_sign_in_is_forbidden_as_in_gotrue(server, service, confirmed_account):
    passkeys = Passkeys(server)
    _, _, user_id, token = account(confirmed_account)
    device = Authenticator()
    passkeys.register(device, token)
    service.admin.update_user_by_id(user_id, {"ban_duration": "1h"})
    assert passkeys.refused_sign_in(*passkeys.assertion(device))[:2] == (403, "user_banned")


# --- 8. Apple's app-site association ----------------------------------------------------------------------------


@pytest.mark.serve("--apple-app-ids", APP_ID)
def test_apple_app_site_association_names_the_app(server):
    answer = Passkeys(server).http.get("/.well-known/apple-app-site-association")
    assert answer.status_code == 200 and "location" not in answer.headers  # Apple fetches it without redirects
    assert answer.headers["content-type"].split(";")[0].strip() == "application/json"
    association = answer.json()
    assert association["webcredentials"]["apps"] == [APP_ID]
    assert [APP_ID] in [details["appIDs"] for details in association["applinks"]["details"]]


def test_apple_app_site_association_is_absent_without_an_app(servers):
    server = servers.start()
    assert Passkeys(server).http.get("/.well-known/apple-app-site-association").status_code == 404


# --- 9. python-fido2 as a second relying party ------------------------------------------------------------------


def test_python_fido2_reads_the_options_and_accepts_the_devices_answers(server, confirmed_account):
    passkeys = Passkeys(server)
    _, address, user_id, token = account(confirmed_account)
    device = Authenticator()
    relying_party = Fido2Server({"id": "localhost", "name": "Gatehouse"}, verify_origin=lambda o: o == passkeys.origin)

    challenge = passkeys.registration_options(token)
    creation = PublicKeyCredentialCreationOptions.from_dict(challenge["options"])
    assert creation.rp.id == "localhost" and creation.user.id == user_id.encode() and creation.user.name == address
    assert [parameter.alg for parameter in creation.pub_key_cred_params] == [-7, -257]
    assert creation.authenticator_selection.resident_key == ResidentKeyRequirement.REQUIRED
    assert creation.authenticator_selection.require_resident_key is True
    assert creation.authenticator_selection.user_verification == UserVerificationRequirement.REQUIRED
    assert creation.attestation == AttestationConveyancePreference.NONE
    assert creation.challenge == unb64(challenge["options"]["challenge"]) and creation.timeout > 0

    credential = to_json(device.create(creation_request(challenge["options"]), passkeys.origin))
    state = {"challenge": challenge["options"]["challenge"], "user_verification": UserVerificationRequirement.REQUIRED}
    authenticator_data = relying_party.register_complete(state, credential)
    assert authenticator_data.is_user_present() and authenticator_data.is_user_verified()
    assert authenticator_data.credential_data.credential_id == device.credential_id
    passkeys.verify_registration(token, challenge["challenge_id"], credential)

    challenge = passkeys.authentication_options()
    request = PublicKeyCredentialRequestOptions.from_dict(challenge["options"])
    assert request.rp_id == "localhost" and request.user_verification == UserVerificationRequirement.REQUIRED
    assert not request.allow_credentials and request.challenge == unb64(challenge["options"]["challenge"])
    assertion = to_json(device.get(get_request(challenge["options"]), passkeys.origin))
    state = {"challenge": challenge["options"]["challenge"], "user_verification": UserVerificationRequirement.REQUIRED}
    relying_party.authenticate_complete(state, [authenticator_data.credential_data], assertion)
    session = passkeys.verify_sign_in(challenge["challenge_id"], assertion)
    assert session["user"]["id"] == user_id


def test_a_sign_in_without_a_user_handle_is_refused(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    device = Authenticator()
    passkeys.register(device, token)
    challenge_id, assertion = passkeys.assertion(device)
    del assertion["response"]["userHandle"]
    assert passkeys.refused_sign_in(challenge_id, assertion)[:2] == (400, "webauthn_verification_failed")


# --- settings and access ----------------------------------------------------------------------------------------


@pytest.mark.serve("--passkeys", "on", "--passkey-rp-id", "localhost",
                   "--passkey-origins", "http://localhost:5173,https://app.localhost")
def test_the_origins_set_are_the_ones_accepted(server, confirmed_account):
    passkeys = Passkeys(server, origin="http://localhost:5173")  # the app's page, not the server's
    _, _, user_id, token = account(confirmed_account)
    device = Authenticator()
    passkeys.register(device, token)
    assert passkeys.sign_in(device)["user"]["id"] == user_id
    signed_in = passkeys.verify_sign_in(*passkeys.assertion(device, origin="https://app.localhost"))  # the other
    assert signed_in["user"]["id"] == user_id
    # The server's own origin is not listed.
    assert passkeys.refused_sign_in(*passkeys.assertion(device, origin=f"http://localhost:{server.port}")) == (
        400, "webauthn_verification_failed", "Credential verification failed (origin_not_allowed)")


def test_registration_needs_a_session(server):
    passkeys = Passkeys(server)
    assert passkeys.refusal("POST", "/passkeys/registration/options")[:2] == (401, "no_authorization")
    assert passkeys.refusal("GET", "/passkeys")[:2] == (401, "no_authorization")


@pytest.mark.serve("--passkeys", "on", "--public-url", "http://localhost:{port}", "--anonymous-users", "on")
def test_an_anonymous_user_cannot_register_a_passkey(server):
    passkeys = Passkeys(server)
    anonymous = server.client().sign_in_anonymously().session
    assert passkeys.refusal("POST", "/passkeys/registration/options", anonymous.access_token)[:2] == (
        403, "anonymous_not_allowed")


@pytest.mark.serve()
def test_passkeys_are_off_by_default(server, confirmed_account):
    passkeys = Passkeys(server)
    _, _, _, token = account(confirmed_account)
    assert passkeys.refusal("POST", "/passkeys/authentication/options")[:2] == (404, "passkey_disabled")
    assert passkeys.refusal("POST", "/passkeys/registration/options", token)[:2] == (404, "passkey_disabled")
    assert passkeys.refusal("GET", "/passkeys", token)[:2] == (404, "passkey_disabled")
