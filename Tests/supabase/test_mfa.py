"""TOTP second factors as an app built on Supabase's official Python client uses them (`client.mfa`: enroll,
challenge_and_verify, list_factors, get_authenticator_assurance_level; `client.admin.mfa` for a backend), with
authenticator codes from pyotp and the enrolment QR code read by a real decoder (zxing-cpp) from the SVG the server
draws, rendered by cairosvg. What the client has no API for (recovery codes, companies) goes over raw HTTP, as the
app's own code would send it. Every test asserts what the user or the app sees.

Codes are computed, never waited for: pyotp's `at(t)` gives the code of any moment, and the server accepts one step
(30 s) either side of its own, each step once per factor. A test that verifies twice takes the code of the step after
(`t + 30`) the second time.
"""

import io
import time
import urllib.parse

import cairosvg
import httpx
import pyotp
import pytest
import zxingcpp
from conftest import PASSWORD, WAIT, claims
from PIL import Image
from supabase_auth.errors import AuthApiError

STEP = 30  # seconds of a TOTP step
SVG_PREFIX = "data:image/svg+xml;utf-8,"  # what supabase-auth puts before the server's raw SVG
PIXELS_PER_MODULE = 4  # a module of the rendered QR code, in pixels: what a phone's camera sees at least

# QR codes (ISO/IEC 18004 table 7): data codewords of versions 1-40 at each error-correction level. A version holds
# (codewords * 8 - 4 mode bits - the count's 8 bits (versions 1-9) or 16 (10-40)) // 8 bytes in byte mode.
DATA_CODEWORDS = {
    "L": [19, 34, 55, 80, 108, 136, 156, 194, 232, 274, 324, 370, 428, 461, 523, 589, 647, 721, 795, 861, 932, 1006,
          1094, 1174, 1276, 1370, 1468, 1531, 1631, 1735, 1843, 1955, 2071, 2191, 2306, 2434, 2566, 2702, 2812, 2956],
    "M": [16, 28, 44, 64, 86, 108, 124, 154, 182, 216, 254, 290, 334, 365, 415, 453, 507, 563, 627, 669, 714, 782,
          860, 914, 1000, 1062, 1128, 1193, 1267, 1373, 1455, 1541, 1631, 1725, 1812, 1914, 1992, 2102, 2216, 2334],
    "Q": [13, 22, 34, 48, 62, 76, 88, 110, 132, 154, 180, 206, 244, 261, 295, 325, 367, 397, 445, 485, 512, 568, 614,
          664, 718, 754, 808, 871, 911, 985, 1033, 1115, 1171, 1231, 1286, 1354, 1426, 1502, 1582, 1666],
    "H": [9, 16, 26, 36, 46, 60, 66, 86, 100, 122, 140, 158, 180, 197, 223, 253, 283, 313, 341, 385, 406, 442, 464,
          514, 538, 596, 628, 661, 701, 745, 793, 845, 901, 961, 986, 1054, 1096, 1142, 1222, 1276],
}


def byte_capacity(level, version):
    return (DATA_CODEWORDS[level][version - 1] * 8 - 4 - (8 if version < 10 else 16)) // 8


def smallest_version(level, length):
    """The smallest QR version that holds `length` bytes at `level`, or None when none does."""
    return next((v for v in range(1, 41) if byte_capacity(level, v) >= length), None)


# --- helpers -----------------------------------------------------------------------------------------------------


def signed_in(server, address, password=PASSWORD):
    """A new official client signed in with the password (aal1), like another device."""
    client = server.client()
    client.sign_in_with_password({"email": address, "password": password})
    return client


def refused(call, *arguments):
    """The AuthApiError a client call raises, as (code, status)."""
    with pytest.raises(AuthApiError) as error:
        call(*arguments)
    return error.value.code, error.value.status


def aal(client):
    return claims(client.get_session().access_token)["aal"]


def methods(access_token):
    return [entry["method"] for entry in claims(access_token).get("amr", [])]


def totp_of(enrolled):
    return pyotp.TOTP(enrolled.totp.secret)


def enroll_and_verify(client, name="phone", moment=None):
    """Enrolls a TOTP factor and verifies it with the code of `moment` (now): the session is aal2 afterwards.
    Returns (factor id, its pyotp.TOTP, the moment the code was taken at)."""
    enrolled = client.mfa.enroll({"factor_type": "totp", "friendly_name": name})
    moment = time.time() if moment is None else moment
    client.mfa.challenge_and_verify({"factor_id": enrolled.id, "code": totp_of(enrolled).at(moment)})
    assert aal(client) == "aal2"
    return enrolled.id, totp_of(enrolled), moment


class Raw:
    """Plain HTTP to the server for what the official client has no API for, as an app's own code sends it."""

    def __init__(self, server):
        self.http = httpx.Client(base_url=server.base, timeout=WAIT, trust_env=False)

    def call(self, method, path, token=None, body=None, **kwargs):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.http.request(method, path, headers=headers, json=body, **kwargs)

    def close(self):
        self.http.close()


@pytest.fixture
def raw(server):
    raw = Raw(server)
    yield raw
    raw.close()


def auth_error(response):
    """(status, code) of an /auth/v1 refusal: GoTrue's legacy body {code: <status>, error_code, msg} without an
    API version header, {code, message} with one."""
    body = response.json()
    code = body.get("error_code") if isinstance(body.get("code"), int) else body.get("code")
    return response.status_code, code


def company_error(response):
    return response.status_code, response.json().get("code")


def scan(svg):
    """What a QR reader reads from the SVG: rendered to PNG at PIXELS_PER_MODULE pixels a user unit (a module is one
    unit or more), decoded by zxing-cpp. Returns (text, version, error-correction level) of the one QR code found."""
    png = cairosvg.svg2png(bytestring=svg.encode(), scale=PIXELS_PER_MODULE)
    image = Image.open(io.BytesIO(png)).convert("L")
    found = zxingcpp.read_barcodes(image, formats=zxingcpp.BarcodeFormat.QRCode)
    assert len(found) == 1, f"{len(found)} QR codes read from the enrolment SVG ({image.width}x{image.height} px)"
    code = found[0]
    assert code.valid, f"the QR code does not decode: {code.error}"
    version = int(code.extra["Version"])
    # The camera's view: each module at least PIXELS_PER_MODULE pixels across.
    assert image.width / (17 + 4 * version) >= PIXELS_PER_MODULE, (image.width, version)
    return code.text, version, code.extra["ECLevel"]


def raw_svg(qr_code):
    """The server's SVG from what the client returns (supabase-auth puts the data-URI prefix before it)."""
    assert qr_code.startswith(SVG_PREFIX), f"not the client's data URI: {qr_code[:60]!r}"
    svg = qr_code[len(SVG_PREFIX) :]
    assert svg.lstrip().startswith(("<svg", "<?xml")) and svg.rstrip().endswith("</svg>"), svg[:80]
    return svg


def quoted(text):
    """Percent-encoded as the URI carries it: RFC 3986's unreserved characters stay, every other byte is %XX."""
    return urllib.parse.quote(text, safe="")


# --- 1. the client flow ----------------------------------------------------------------------------------------------


def test_enroll_verify_and_refresh_with_the_official_client(server, confirmed_account):
    _, address = confirmed_account()
    client = signed_in(server, address)

    enrolled = client.mfa.enroll({"factor_type": "totp", "friendly_name": "phone"})

    assert enrolled.type == "totp"
    assert enrolled.friendly_name == "phone"
    secret = enrolled.totp.secret
    assert len(secret) == 32 and set(secret) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), secret
    uri = enrolled.totp.uri
    assert uri.startswith("otpauth://totp/"), uri
    parsed = pyotp.parse_uri(uri)
    assert isinstance(parsed, pyotp.TOTP)
    assert parsed.secret == secret
    assert parsed.name == address
    # The default issuer is the server's public host and port.
    assert parsed.issuer == f"127.0.0.1:{server.port}"
    assert (parsed.digits, parsed.interval, parsed.digest().name) == (6, 30, "sha1")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    assert query["issuer"] == [parsed.issuer] and query["secret"] == [secret]

    # Enrolled but not verified: nothing to step up to yet.
    level = client.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal1", "aal1")
    assert [entry.method for entry in level.current_authentication_methods] == ["password"]
    listed = client.mfa.list_factors()
    assert [(f.id, f.status, f.factor_type) for f in listed.all] == [(enrolled.id, "unverified", "totp")]
    assert listed.totp == []
    before = client.get_session()

    verified = client.mfa.challenge_and_verify({"factor_id": enrolled.id, "code": parsed.now()})

    assert verified.access_token and verified.refresh_token
    assert verified.refresh_token != before.refresh_token
    assert client.get_session().access_token == verified.access_token
    assert verified.user.id == before.user.id
    level = client.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal2", "aal2")
    used = [entry.method for entry in level.current_authentication_methods]
    assert used[0] == "totp" and "password" in used, used
    token = claims(verified.access_token)
    assert token["aal"] == "aal2" and token["session_id"] == claims(before.access_token)["session_id"]

    listed = client.mfa.list_factors()
    assert [(f.id, f.status, f.friendly_name) for f in listed.totp] == [(enrolled.id, "verified", "phone")]
    assert [f.id for f in listed.all] == [enrolled.id]

    # A refresh keeps the session's level and methods.
    refreshed = client.refresh_session().session
    assert claims(refreshed.access_token)["aal"] == "aal2"
    assert methods(refreshed.access_token) == methods(verified.access_token)
    # The refresh token the session had before the verify is retired.
    assert refused(server.client().refresh_session, before.refresh_token) == ("refresh_token_not_found", 400)

    # A new sign-in starts at aal1 and knows it can step up.
    other = signed_in(server, address)
    level = other.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal1", "aal2")


# --- 2. the QR code scans ----------------------------------------------------------------------------------------


def test_the_enrolment_qr_code_scans_to_the_uri(server, confirmed_account):
    _, address = confirmed_account()
    client = signed_in(server, address)

    enrolled = client.mfa.enroll({"factor_type": "totp", "friendly_name": "phone"})

    text, version, level = scan(raw_svg(enrolled.totp.qr_code))
    assert text == enrolled.totp.uri
    assert version == smallest_version(level, len(text.encode())), (version, level, len(text))
    # What the camera read is a key an authenticator app can use: its code verifies the factor.
    app = pyotp.parse_uri(text)
    client.mfa.challenge_and_verify({"factor_id": enrolled.id, "code": app.now()})
    assert aal(client) == "aal2"


def spelled(length):
    """Characters whose percent-encoding is `length` characters long: 4-byte UTF-8 (12 each) while they fit, then
    'ü' (6), '+' (3) and 'a' (1); at most length // 12 + 4 characters."""
    text = ""
    for char, size in (("\U0001f600", 12), ("\u00fc", 6), ("+", 3), ("a", 1)):
        text += char * (length // size)
        length %= size
    return text


def email_of_length(encoded):
    """A valid address (local part <= 64 characters, labels <= 63, <= 254 in all) whose percent-encoding is exactly
    `encoded` characters long."""
    rest = encoded - len("%40") - len(".com")
    local = spelled(min(rest - 1, 60 * 12))
    rest -= len(quoted(local))
    labels = []
    while rest > 0:
        take = min(rest, 59 * 12)
        if rest - take == 1:  # the next label would be nothing but its dot
            take -= 1
        labels.append(spelled(take))
        rest -= take
        if rest > 0:
            rest -= 1  # the dot before the next label
    address = f"{local}@{'.'.join(labels)}.com"
    assert len(address) <= 254 and len(local) <= 64 and all(len(label) <= 63 for label in labels), address
    assert len(quoted(address)) == encoded, (len(quoted(address)), encoded)
    return address


def test_every_size_an_enrolment_uri_can_reach_scans(server, service, raw):
    """QR codes from the smallest URI a user can get to the largest: issuers of 1 to 64 bytes, some percent-encoded
    (a space, '&', multi-byte 'ü'), addresses up to 254 characters, until the URI fills version 40 at the level the
    server draws. Each one is read back by zxing and must be the URI."""
    seen = {}  # version -> URI length

    def account(address):
        created = service.admin.create_user({"email": address, "password": PASSWORD, "email_confirm": True}).user
        assert created.email == address.lower()
        return signed_in(server, address)

    def check(client, issuer):
        enrolled = client.mfa.enroll({"factor_type": "totp", "issuer": issuer})
        uri = enrolled.totp.uri
        parsed = pyotp.parse_uri(uri)
        assert parsed.issuer == issuer and parsed.secret == enrolled.totp.secret
        assert parsed.name == client.get_session().user.email
        text, version, level = scan(raw_svg(enrolled.totp.qr_code))
        assert text == uri, f"issuer {issuer!r}: read {text[:80]!r}..., enrolled {uri[:80]!r}..."
        # No bigger than the URI needs in byte mode at the level it was drawn at.
        assert version <= smallest_version(level, len(uri.encode())), (version, level, len(uri))
        seen[version] = len(uri)
        # Unverified: an aal1 session may remove it, which keeps the account under ten factors.
        assert client.mfa.unenroll({"factor_id": enrolled.id}).id == enrolled.id
        return uri, version, level

    short = account("a@b.c")  # the shortest address there is
    uri, _, level = check(short, "x")
    smallest = len(uri)
    issuers = ["ü", "a b", "&" * 10, "Gatehouse ü Test", "x" * 32, "ü" * 16, "ä&ö ü=ß?" * 4, "x" * 64, "&" * 64,
               "ü" * 32, "\u4e2d" * 21]
    for issuer in issuers:
        assert len(issuer.encode()) <= 64
        check(short, issuer)
    # One byte past 64 is refused, however few characters it is (33 characters here).
    too_long = "ü" * 32 + "a"
    answer = raw.call(
        "POST", "/auth/v1/factors", short.get_session().access_token, {"factor_type": "totp", "issuer": too_long}
    )
    assert auth_error(answer) == (400, "validation_failed")

    # Longer addresses, up to the most a URI can carry in version 40 at the server's level: 64 bytes of issuer
    # percent-encoded (192 characters, twice), the fixed parts, and the address filling the rest.
    issuer = "&" * 64
    fixed = len(uri) - len(quoted(short.get_session().user.email)) - 2 * len(quoted("x"))
    largest = byte_capacity(level, 40)
    for total in (600, 900, 1200, 1600, 2000, largest - 200, largest):
        address = email_of_length(total - fixed - 2 * len(quoted(issuer)))
        uri, version, _ = check(account(address), issuer)
        assert len(uri.encode()) == total
    assert seen[40] == largest, f"the longest URI a QR code holds ({largest} bytes) was not drawn: {seen}"
    assert min(seen) == smallest_version(level, smallest) and len(seen) >= 10, seen


def test_an_address_too_long_for_any_qr_code_is_refused_with_a_reason(server, service, raw):
    """A valid address whose URI no QR code holds: 254 characters of 4-byte UTF-8 (12 each once percent-encoded, past
    any level's capacity whatever the issuer). A URI one byte past level M's version 40 is drawn at level L instead.
    Enrolling must answer a refusal the app can show, not an unexpected failure."""
    address = "\U0001f600" * 64 + "@" + "\U0001f600" * 63 + "." + "\U0001f600" * 63 + "." + "\U0001f600" * 61
    issuer = None
    assert len(address) <= 254
    service.admin.create_user({"email": address, "password": PASSWORD, "email_confirm": True})
    client = signed_in(server, address)

    body = {"factor_type": "totp"} | ({"issuer": issuer} if issuer else {})
    answer = raw.call("POST", "/auth/v1/factors", client.get_session().access_token, body)

    assert answer.status_code in (400, 422), f"{answer.status_code}: {answer.text}"
    assert auth_error(answer)[1] not in (None, "unexpected_failure"), answer.text


# --- 3. bad input ------------------------------------------------------------------------------------------------


def test_wrong_replayed_and_used_codes_are_refused(server, confirmed_account):
    _, address = confirmed_account()
    client = signed_in(server, address)
    enrolled = client.mfa.enroll({"factor_type": "totp", "friendly_name": "phone"})
    app = totp_of(enrolled)
    moment = time.time()
    code, next_code = app.at(moment), app.at(moment + STEP)
    wrong = f"{(int(code) + 500000) % 1000000:06d}"
    assert wrong not in (app.at(moment - STEP), code, next_code)

    challenge = client.mfa.challenge({"factor_id": enrolled.id})
    assert challenge.expires_at > moment + 240
    verify = client.mfa.verify

    # A wrong code: refused, and the challenge stays usable.
    assert refused(verify, {"factor_id": enrolled.id, "challenge_id": challenge.id, "code": wrong}) == (
        "mfa_verification_failed",
        422,
    )
    assert aal(client) == "aal1"
    verify({"factor_id": enrolled.id, "challenge_id": challenge.id, "code": code})
    assert aal(client) == "aal2"

    # A used challenge: refused whatever the code.
    assert refused(verify, {"factor_id": enrolled.id, "challenge_id": challenge.id, "code": next_code}) == (
        "mfa_ip_address_mismatch",
        422,
    )
    # The same code again, on a fresh challenge: its step was spent.
    fresh = client.mfa.challenge({"factor_id": enrolled.id})
    assert refused(verify, {"factor_id": enrolled.id, "challenge_id": fresh.id, "code": code}) == (
        "mfa_verification_failed",
        422,
    )
    # The next step's code still works on that challenge: the refusal was the replay, not the challenge.
    verify({"factor_id": enrolled.id, "challenge_id": fresh.id, "code": next_code})
    assert aal(client) == "aal2"


def test_factor_refusals(server, confirmed_account, raw):
    owner, address = confirmed_account()
    intruder, _ = confirmed_account()
    owner = signed_in(server, address)
    unverified = owner.mfa.enroll({"factor_type": "totp", "friendly_name": "phone"})

    # The same name twice.
    assert refused(owner.mfa.enroll, {"factor_type": "totp", "friendly_name": "phone"}) == (
        "mfa_factor_name_conflict",
        422,
    )
    # Only TOTP factors.
    assert refused(owner.mfa.enroll, {"factor_type": "phone", "phone": "+15555550100"}) == ("validation_failed", 400)
    token = owner.get_session().access_token
    assert auth_error(raw.call("POST", "/auth/v1/factors", token, {"factor_type": "webauthn"})) == (
        400,
        "validation_failed",
    )
    # A body that is not JSON.
    broken = raw.http.post(
        "/auth/v1/factors",
        content=b'{"factor_type": "totp",',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert auth_error(broken) == (400, "bad_json"), broken.text
    # friendly_name past 128 characters.
    assert refused(owner.mfa.enroll, {"factor_type": "totp", "friendly_name": "n" * 129}) == (
        "validation_failed",
        400,
    )

    # Another user's factor is not found, whatever is asked of it.
    assert refused(intruder.mfa.challenge, {"factor_id": unverified.id}) == ("mfa_factor_not_found", 404)
    assert refused(intruder.mfa.unenroll, {"factor_id": unverified.id}) == ("mfa_factor_not_found", 404)
    assert refused(
        intruder.mfa.verify,
        {"factor_id": unverified.id, "challenge_id": owner.mfa.challenge({"factor_id": unverified.id}).id,
         "code": totp_of(unverified).now()},
    ) == ("mfa_factor_not_found", 404)

    # Verified, the factor guards itself against aal1 sessions.
    owner.mfa.challenge_and_verify({"factor_id": unverified.id, "code": totp_of(unverified).now()})
    weaker = signed_in(server, address)
    assert aal(weaker) == "aal1"
    assert refused(weaker.mfa.enroll, {"factor_type": "totp", "friendly_name": "tablet"}) == ("insufficient_aal", 403)
    assert refused(weaker.mfa.unenroll, {"factor_id": unverified.id}) == ("insufficient_aal", 422)
    assert [f.id for f in weaker.mfa.list_factors().totp] == [unverified.id]

    # At aal2 the same requests go through.
    tablet = owner.mfa.enroll({"factor_type": "totp", "friendly_name": "tablet"})
    assert tablet.friendly_name == "tablet"
    assert owner.mfa.unenroll({"factor_id": unverified.id}).id == unverified.id
    assert [f.id for f in owner.mfa.list_factors().all] == [tablet.id]


def test_ten_factors_at_most(server, confirmed_account):
    _, address = confirmed_account()
    client = signed_in(server, address)
    for n in range(10):
        client.mfa.enroll({"factor_type": "totp", "friendly_name": f"device {n}"})

    assert refused(client.mfa.enroll, {"factor_type": "totp", "friendly_name": "one more"}) == (
        "too_many_enrolled_mfa_factors",
        422,
    )
    assert len(client.mfa.list_factors().all) == 10


# --- 4. other sessions end -----------------------------------------------------------------------------------------


def test_verifying_ends_the_accounts_other_aal1_sessions(server, confirmed_account):
    _, address = confirmed_account()
    phone = signed_in(server, address)
    laptop = signed_in(server, address)
    stale = laptop.get_session()

    enroll_and_verify(phone)

    # The laptop's session was aal1: it is gone, its refresh token with it.
    assert refused(laptop.refresh_session) == ("refresh_token_not_found", 400)
    assert refused(server.client().get_user, stale.access_token) == ("session_not_found", 403)
    # The verifying session lives on at aal2.
    assert phone.get_user().user.email == address
    assert claims(phone.refresh_session().session.access_token)["aal"] == "aal2"
    # Signing in again on the laptop works, at aal1, with a factor to step up with.
    again = signed_in(server, address)
    level = again.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal1", "aal2")


# --- 5. recovery codes -----------------------------------------------------------------------------------------------


def test_recovery_codes_stand_in_for_the_authenticator(server, mailbox, confirmed_account, raw):
    _, address = confirmed_account()
    client = signed_in(server, address)
    factor_id, _, _ = enroll_and_verify(client)

    # Only an aal2 session may make them.
    other = signed_in(server, address)
    assert auth_error(raw.call("POST", "/auth/v1/factors/recovery-codes", other.get_session().access_token, {})) == (
        403,
        "insufficient_aal",
    )
    assert auth_error(raw.call("GET", "/auth/v1/factors/recovery-codes", client.get_session().access_token)) == (
        404,
        "mfa_factor_not_found",
    )

    made = raw.call("POST", "/auth/v1/factors/recovery-codes", client.get_session().access_token, {})
    assert made.status_code == 200, made.text
    generated = made.json()
    assert generated["type"] == "recovery_code"
    assert generated["friendly_name"] == "Recovery codes"
    assert generated["total"] == 10
    codes = generated["codes"]
    assert len(codes) == 10 and len(set(codes)) == 10
    assert all(len(code) == 16 and set(code) <= set("abcdefghijklmnopqrstuvwxyz234567") for code in codes), codes
    # A second set is refused: regenerate it instead.
    assert auth_error(raw.call("POST", "/auth/v1/factors/recovery-codes", client.get_session().access_token, {})) == (
        422,
        "mfa_verified_factor_exists",
    )
    # The user lists it among the factors (the official client parses it).
    listed = client.mfa.list_factors()
    assert {(f.factor_type, f.status) for f in listed.all} == {("totp", "verified"), ("recovery_code", "verified")}
    assert [f.id for f in listed.totp] == [factor_id]

    # Lost phone: a new sign-in, aal1, and a recovery code typed as the app shows it (grouped, upper case).
    device = signed_in(server, address)
    token = device.get_session().access_token
    assert claims(token)["aal"] == "aal1"
    typed = "-".join(codes[0][i : i + 4] for i in range(0, 16, 4)).upper()
    answer = raw.call("POST", "/auth/v1/factors/recovery-codes/verify", token, {"code": typed})
    assert answer.status_code == 200, answer.text
    session = answer.json()
    assert session["user"]["email"] == address and session["refresh_token"]
    recovered = claims(session["access_token"])
    assert recovered["aal"] == "aal2"
    assert recovered["amr"][0]["method"] == "mfa/recovery_code", recovered["amr"]
    assert recovered["session_id"] == claims(token)["session_id"]
    # The official client takes that session as its own and sees aal2.
    device.set_session(session["access_token"], session["refresh_token"])
    assert device.mfa.get_authenticator_assurance_level().current_level == "aal2"

    mail = mailbox.newest(address, subject="A recovery code was used")
    assert "9" in mail.text, mail.text

    # Spent: the same code is refused, from another aal1 session too.
    again = signed_in(server, address).get_session().access_token
    assert auth_error(raw.call("POST", "/auth/v1/factors/recovery-codes/verify", again, {"code": codes[0]})) == (
        422,
        "mfa_verification_failed",
    )
    status = raw.call("GET", "/auth/v1/factors/recovery-codes", again)
    assert status.status_code == 200, status.text
    assert {key: status.json().get(key) for key in ("id", "type", "total", "remaining")} == {
        "id": generated["id"],
        "type": "recovery_code",
        "total": 10,
        "remaining": 9,
    }
    assert "codes" not in status.json()

    # Regenerated (aal2): new codes, the old ones stop working.
    renewed = raw.call("POST", "/auth/v1/factors/recovery-codes/regenerate", session["access_token"])
    assert renewed.status_code == 200, renewed.text
    new_codes = renewed.json()["codes"]
    assert renewed.json()["id"] == generated["id"] and len(new_codes) == 10 and not set(new_codes) & set(codes)
    later = signed_in(server, address).get_session().access_token
    assert auth_error(raw.call("POST", "/auth/v1/factors/recovery-codes/verify", later, {"code": codes[1]})) == (
        422,
        "mfa_verification_failed",
    )
    assert raw.call("GET", "/auth/v1/factors/recovery-codes", later).json()["remaining"] == 10
    done = raw.call("POST", "/auth/v1/factors/recovery-codes/verify", later, {"code": f" {new_codes[0]} "})
    assert done.status_code == 200, done.text
    assert claims(done.json()["access_token"])["aal"] == "aal2"


def test_recovery_codes_generated_with_no_body_or_a_name(server, confirmed_account, raw):
    """supabase-swift's `recoveryCodes.generate()` sends no body when the app names no set; with a name it sends
    {"friendly_name": ...}, which Gatehouse ignores (the set is always "Recovery codes"): both are answered."""
    _, address = confirmed_account()
    client = signed_in(server, address)
    enroll_and_verify(client)

    bare = raw.call("POST", "/auth/v1/factors/recovery-codes", client.get_session().access_token)

    assert bare.status_code == 200, bare.text
    assert bare.json()["friendly_name"] == "Recovery codes" and len(bare.json()["codes"]) == 10

    # Named, on another account (one set an account): the name is not kept.
    _, address = confirmed_account()
    client = signed_in(server, address)
    enroll_and_verify(client)
    named = raw.call(
        "POST", "/auth/v1/factors/recovery-codes", client.get_session().access_token, {"friendly_name": "Backup"}
    )
    assert named.status_code == 200, named.text
    assert named.json()["friendly_name"] == "Recovery codes" and len(named.json()["codes"]) == 10


def test_recovery_codes_lock_after_five_wrong_ones(server, confirmed_account, raw):
    _, address = confirmed_account()
    client = signed_in(server, address)
    enroll_and_verify(client)
    made = raw.call("POST", "/auth/v1/factors/recovery-codes", client.get_session().access_token, {})
    codes = made.json()["codes"]
    token = signed_in(server, address).get_session().access_token

    wrong = "a" * 16 if "a" * 16 not in codes else "b" * 16
    for _ in range(5):
        answer = raw.call("POST", "/auth/v1/factors/recovery-codes/verify", token, {"code": wrong})
        assert auth_error(answer) == (422, "mfa_verification_failed")

    # Locked now: even a right code waits.
    locked = raw.call("POST", "/auth/v1/factors/recovery-codes/verify", token, {"code": codes[0]})
    assert auth_error(locked) == (429, "mfa_recovery_codes_locked")
    assert claims(token)["aal"] == "aal1"


# --- 6. admin ----------------------------------------------------------------------------------------------------


def test_admin_lists_and_deletes_a_users_factors(server, service, confirmed_account):
    _, address = confirmed_account()
    client = signed_in(server, address)
    user_id = client.get_session().user.id
    assert service.admin.mfa.list_factors({"user_id": user_id}) == []
    factor_id, _, _ = enroll_and_verify(client)
    spare = client.mfa.enroll({"factor_type": "totp", "friendly_name": "spare"})

    listed = service.admin.mfa.list_factors({"user_id": user_id})
    assert sorted((f.id, f.status, f.friendly_name) for f in listed) == sorted(
        [(factor_id, "verified", "phone"), (spare.id, "unverified", "spare")]
    )

    deleted = service.admin.mfa.delete_factor({"user_id": user_id, "id": factor_id})
    assert deleted.id == factor_id
    assert [f.id for f in service.admin.mfa.list_factors({"user_id": user_id})] == [spare.id]
    # Gone for the user too: a new sign-in has no verified factor to step up with.
    fresh = signed_in(server, address)
    assert fresh.mfa.list_factors().totp == []
    level = fresh.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal1", "aal1")
    # The session the factor raised falls back to aal1 at its next refresh.
    assert claims(client.refresh_session().session.access_token)["aal"] == "aal1"

    service.admin.mfa.delete_factor({"user_id": user_id, "id": spare.id})
    assert service.admin.mfa.list_factors({"user_id": user_id}) == []
    assert signed_in(server, address).mfa.list_factors().all == []
    # An unknown factor is not found.
    assert refused(service.admin.mfa.delete_factor, {"user_id": user_id, "id": spare.id}) == (
        "mfa_factor_not_found",
        404,
    )


# --- 7. a company that requires a second factor ------------------------------------------------------------------


def test_a_company_that_requires_a_second_factor(server, confirmed_account, raw):
    _, address = confirmed_account()
    owner = signed_in(server, address)
    account_token = owner.get_session().access_token

    created = raw.call("POST", "/v1/companies", account_token, {"name": "Acme"})
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    assert created.json()["requires_mfa"] is False
    credential = {"username": "owner", "password": "a company passphrase 42"}
    put = raw.call("PUT", f"/v1/companies/{cid}/credential", account_token, credential)
    assert put.status_code == 201, put.text

    def login(token):
        return raw.call("POST", f"/v1/companies/{cid}/login", token, credential)

    first = login(account_token)
    assert first.status_code == 200, first.text
    aal1_company = first.json()["access_token"]
    assert claims(aal1_company)["aal"] == "aal1"

    # Requiring a factor the owner has not verified would lock them out: refused.
    patched = raw.call("PATCH", f"/v1/companies/{cid}", aal1_company, {"requires_mfa": True})
    assert company_error(patched) == (403, "insufficient_aal")
    assert raw.call("GET", f"/v1/companies/{cid}", aal1_company).json()["requires_mfa"] is False

    _, app, moment = enroll_and_verify(owner)
    account_token = owner.get_session().access_token
    second = login(account_token)
    assert second.status_code == 200, second.text
    aal2_company = second.json()["access_token"]
    assert claims(aal2_company)["aal"] == "aal2"

    patched = raw.call("PATCH", f"/v1/companies/{cid}", aal2_company, {"requires_mfa": True})
    assert patched.status_code == 200, patched.text
    assert patched.json()["requires_mfa"] is True
    assert raw.call("GET", f"/v1/companies/{cid}", aal2_company).json()["requires_mfa"] is True
    listed = raw.call("GET", "/v1/companies", account_token).json()["companies"]
    assert [(c["id"], c["requires_mfa"]) for c in listed] == [(cid, True)]
    # The company session opened at aal1 ended with the policy.
    assert company_error(raw.call("GET", f"/v1/companies/{cid}", aal1_company)) == (403, "session_not_found")

    # A new device: signed in with the password only, the company refuses it, credential or not.
    device = signed_in(server, address)
    assert aal(device) == "aal1"
    assert company_error(login(device.get_session().access_token)) == (403, "insufficient_aal")
    assert company_error(
        raw.call("POST", f"/v1/companies/{cid}/login", device.get_session().access_token, {"username": "x"})
    ) == (403, "insufficient_aal")

    # With the authenticator's next code the device steps up, and the company lets it in at aal2.
    factors = device.mfa.list_factors().totp
    device.mfa.challenge_and_verify({"factor_id": factors[0].id, "code": app.at(moment + STEP)})
    assert aal(device) == "aal2"
    third = login(device.get_session().access_token)
    assert third.status_code == 200, third.text
    company_token = claims(third.json()["access_token"])
    assert company_token["aal"] == "aal2"
    assert company_token["sub"] == owner.get_session().user.id
    assert raw.call("GET", f"/v1/companies/{cid}", third.json()["access_token"]).json()["id"] == cid
